"""The HTTP service: ``create_app(settings)`` in :mod:`simhub.serving.app`, ``simhub serve`` in
:mod:`simhub.serving.cli`. Needs ``pip install 'simhub[serve]'``."""
