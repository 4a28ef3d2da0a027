"""``simhub serve``: the HTTP service under uvicorn.

    simhub serve                                  # the demo profile on 127.0.0.1:8000
    SIMHUB_API_KEY=... simhub serve --profile paper-8b --host 0.0.0.0 --backend vllm

The port answers at once: ``/health`` is 200 while the models are built (demo models on a first
start) and loaded in the background, and ``/ready`` says what is built, what is building and step
k of n until every model is loaded.
"""

from __future__ import annotations

import argparse
import os
import sys

from simhub.config import BUILTIN_BACKENDS


def _serve(args: argparse.Namespace) -> int:
    from simhub.config import QUIET_ENVIRONMENT, load_profile

    if args.log_level != "debug":  # set before the libraries are imported: one log line per step, no bars
        for name, value in QUIET_ENVIRONMENT.items():
            os.environ.setdefault(name, value)
    from simhub.errors import require

    uvicorn = require("uvicorn", "serve")
    from simhub.serving.app import create_app
    from simhub.serving.settings import ServiceSettings

    profile = load_profile(args.profile)
    settings = ServiceSettings.load(profile, host=args.host, port=args.port, simulator_backend=args.backend,
                                    log_level=args.log_level)
    app = create_app(settings, profile)
    print(f"simhub: serving profile {profile.name} on http://{settings.host}:{settings.port} "
          f"(docs: /schema, readiness: /ready; models build and load in the background)", file=sys.stderr, flush=True)
    uvicorn.run(app, host=settings.host, port=settings.port, log_level=args.log_level, access_log=False,
                timeout_graceful_shutdown=10)
    return 0


def register(sub) -> None:
    p = sub.add_parser("serve", help="run the HTTP service (simulate, score, OpenAI-compatible student)")
    p.add_argument("--profile", default="demo", help="profile name or YAML path (default: demo)")
    p.add_argument("--host", default=None, help="bind address (default 127.0.0.1; SIMHUB_HOST)")
    p.add_argument("--port", type=int, default=None, help="port (default 8000; SIMHUB_PORT)")
    p.add_argument("--backend", choices=BUILTIN_BACKENDS, default=None,
                   help="backend of every local simulator (default: the profile's serving.backend)")
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"],
                   help="log level (default info: one line per build step; debug also shows the libraries' progress)")
    p.set_defaults(handler=_serve)
