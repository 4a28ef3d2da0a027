"""Service settings: a dataclass read from the environment (``SIMHUB_*``) and the profile's ``serving:``.

Precedence: explicit constructor arguments, then environment variables, then the profile's
``serving:`` section, then the defaults below. The API key is read from the environment only.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from typing import Any

from simhub.errors import ConfigError

ENV_PREFIX = "SIMHUB_"


@dataclass
class ServiceSettings:
    """Everything the app factory needs.

    Profile ``serving:`` keys (all optional): every field below except ``profile`` and ``api_key``,
    plus ``backend`` (default simulator backend) and ``vllm`` (engine options).
    """

    #: Profile name or path (``demo``, ``paper-8b``, or a YAML path).
    profile: str = "demo"
    host: str = "127.0.0.1"
    port: int = 8000
    #: Bearer / X-API-Key secret; None disables auth. Environment only: ``SIMHUB_API_KEY``.
    api_key: str | None = field(default=None, repr=False)
    #: Replace the backend of every local simulator (``transformers`` or ``vllm``).
    simulator_backend: str | None = None
    #: Load the models in the background at startup (``/ready`` turns true when done).
    preload: bool = True
    max_body_bytes: int = 2_000_000
    max_items: int = 64
    max_dialogues: int = 32
    max_turns: int = 200
    max_chars: int = 200_000
    max_n: int = 8
    #: Cap on sampling.max_tokens (the paper generates at most 400).
    max_tokens: int = 1024
    #: Requests per minute per client address; 0 disables rate limiting.
    rate_limit_per_minute: int = 0
    #: Items waiting for the scorer (and simulate requests in flight) before answering 503.
    queue_size: int = 1024
    request_timeout_s: float = 120.0
    #: Micro-batching window for /score: requests arriving within it share one Scorer.score call.
    batch_window_ms: float = 5.0
    max_batch_items: int = 256
    retry_after_s: int = 1
    log_json: bool = True

    @classmethod
    def load(cls, profile_data: dict[str, Any] | None = None, **overrides: Any) -> ServiceSettings:
        values: dict[str, Any] = {}
        serving = dict((profile_data or {}).get("serving") or {})
        serving.pop("backend", None)
        serving.pop("vllm", None)
        names = {f.name: f for f in fields(cls)}
        if "api_key" in serving:  # secrets never come from files
            raise ConfigError("serving.api_key: not allowed in a profile; set the SIMHUB_API_KEY environment variable")
        if "profile" in serving:
            raise ConfigError("serving.profile: not allowed in a profile (a profile cannot name another); "
                              "use --profile or SIMHUB_PROFILE")
        unknown = set(serving) - set(names)
        if unknown:
            raise ConfigError(f"serving: unknown key(s) {', '.join(sorted(unknown))}; allowed: "
                              f"{', '.join(sorted({*names, 'backend', 'vllm'} - {'profile', 'api_key'}))}")
        values.update(serving)
        for name, f in names.items():
            env = os.environ.get(ENV_PREFIX + name.upper())
            if env is not None and env != "":
                values[name] = _convert(name, env, f.default)
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)


def _convert(name: str, raw: str, default: Any) -> Any:
    try:
        if isinstance(default, bool):
            if raw.lower() not in ("1", "0", "true", "false", "yes", "no"):
                raise ValueError(raw)
            return raw.lower() in ("1", "true", "yes")
        if isinstance(default, int):
            return int(raw)
        if isinstance(default, float):
            return float(raw)
    except ValueError:
        raise ConfigError(f"{ENV_PREFIX}{name.upper()}: expected a {type(default).__name__}") from None
    return raw
