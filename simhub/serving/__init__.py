"""The HTTP service: ``create_app(settings)`` in :mod:`simhub.serving.app`, started by ``simhub serve``
(:mod:`simhub.cli.serve`). Needs ``pip install 'simhub[serve]'``."""
