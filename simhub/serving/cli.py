"""``simhub serve``: the HTTP service under uvicorn.

    simhub serve --profile demo --port 8000
    SIMHUB_API_KEY=... simhub serve --profile paper-8b --host 0.0.0.0 --backend vllm
"""

from __future__ import annotations

import argparse
import sys


def register(subparsers, command) -> None:
    serve = subparsers.add_parser("serve", help="run the HTTP service (simulate, score, OpenAI-compatible student)")
    serve.add_argument("--profile", default="demo", help="profile name or YAML path (default: demo)")
    serve.add_argument("--host", default=None, help="bind address (default 127.0.0.1; SIMHUB_HOST)")
    serve.add_argument("--port", type=int, default=None, help="port (default 8000; SIMHUB_PORT)")
    serve.add_argument("--backend", choices=["transformers", "vllm"], default=None,
                       help="backend of every local simulator (default: the profile's serving.backend)")
    serve.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    serve.set_defaults(handler="serve")
    command("serve")(_serve)


def prepare_models(profile: dict, backend: str | None = None) -> None:
    """Build the profile's local demo models (tiny kit, random LoRA adapters) if missing, with progress."""
    from simhub.backends.generation import simulator_specs
    from simhub.profiles import scorer_config, simhub_home
    from simhub.scoring import Scorer

    text = repr(profile)
    if any(scheme in text for scheme in ("tiny:", "demo:", "random-lora:")):
        print(f"simhub: preparing demo models under {simhub_home()} (built once, reused after)...", file=sys.stderr, flush=True)
    Scorer(scorer_config(profile)).prepare()
    for sid in simulator_specs(profile, backend, resolve=True):
        print(f"simhub: simulator {sid} ready on disk", file=sys.stderr, flush=True)


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from simhub.profiles import load_profile
    from simhub.serving.app import create_app
    from simhub.serving.settings import ServiceSettings

    profile = load_profile(args.profile)
    settings = ServiceSettings.load(profile, profile=args.profile, host=args.host, port=args.port, simulator_backend=args.backend)
    prepare_models(profile, settings.simulator_backend)
    app = create_app(settings, profile)
    print(f"simhub: serving profile {profile.get('name')} on http://{settings.host}:{settings.port} "
          f"(docs: /schema/swagger, readiness: /ready)", file=sys.stderr, flush=True)
    uvicorn.run(app, host=settings.host, port=settings.port, log_level=args.log_level, access_log=False,
                timeout_graceful_shutdown=10)
    return 0
