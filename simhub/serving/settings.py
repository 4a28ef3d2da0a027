"""Service settings: the profile's ``serving:`` section with ``SIMHUB_*`` environment overrides.

Precedence: explicit arguments (the command line), then environment variables, then the profile's
``serving:`` section (and its ``limits:``), then the defaults of :class:`simhub.config.ServingConfig`.
Every scalar setting ``x`` of ``serving`` or ``serving.limits`` is read from ``SIMHUB_X`` and is an
attribute of the settings (``settings.max_items``). The API key is read from the environment only
(``SIMHUB_API_KEY``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from simhub.config import Limits, Profile, ServingConfig
from simhub.errors import ConfigError

ENV_PREFIX = "SIMHUB_"
_SERVING = {f.name for f in msgspec.structs.fields(ServingConfig)} - {"vllm", "limits"}
_LIMITS = {f.name for f in msgspec.structs.fields(Limits)}


@dataclass
class ServiceSettings:
    """What the app factory needs: the profile's name, the key, the simulator backend override and the
    (environment-merged) serving section, whose settings and limits read as attributes."""

    profile: str = "demo"
    #: Bearer / X-API-Key secret; None disables auth. Environment only: ``SIMHUB_API_KEY``.
    api_key: str | None = field(default=None, repr=False)
    #: Replace the backend of every local simulator (``transformers`` or ``vllm``).
    simulator_backend: str | None = None
    #: The service's log level (``simhub serve --log-level``); above ``debug``, background builds are
    #: quiet (one log line per step, no progress bars).
    log_level: str = "info"
    serving: ServingConfig = field(default_factory=ServingConfig)

    def __getattr__(self, name: str) -> Any:
        serving = self.__dict__.get("serving")
        if serving is not None:
            if name in _SERVING:
                return getattr(serving, name)
            if name in _LIMITS:
                return getattr(serving.limits, name)
        raise AttributeError(name)

    @property
    def limits(self) -> Limits:
        return self.serving.limits

    @classmethod
    def load(cls, profile: Profile | None = None, environ: Mapping[str, str] | None = None, **overrides: Any) -> ServiceSettings:
        serving = profile.serving if profile is not None else ServingConfig()
        env = os.environ if environ is None else environ
        changes: dict[str, Any] = {}
        limits: dict[str, Any] = {}
        for names, struct, target in ((_SERVING, serving, changes), (_LIMITS, serving.limits, limits)):
            for name in names:
                raw = env.get(ENV_PREFIX + name.upper())
                if raw is not None and raw != "":
                    target[name] = _convert(name, raw, getattr(struct, name))
                if overrides.get(name) is not None:
                    target[name] = overrides[name]
        unknown = set(overrides) - _SERVING - _LIMITS - {"profile", "api_key", "simulator_backend", "log_level"}
        if unknown:
            raise ConfigError(f"settings: unknown setting(s) {', '.join(sorted(unknown))}", field=sorted(unknown)[0])
        serving = msgspec.structs.replace(serving, limits=msgspec.structs.replace(serving.limits, **limits), **changes)
        try:  # the values from the environment and overrides get the profile's checks (choices, ranges)
            serving = msgspec.convert(msgspec.to_builtins(serving), ServingConfig)
        except msgspec.ValidationError as exc:
            where = str(exc).rpartition("at `$.")[2].rstrip("`").split(".")[-1] or "serving"
            raise ConfigError(f"{ENV_PREFIX}{where.upper()}: {str(exc).partition(' - at')[0]}",
                              field=f"{ENV_PREFIX}{where.upper()}") from None
        name = overrides.get("profile") or (profile.source or profile.name if profile is not None else "demo")
        return cls(profile=name, api_key=overrides.get("api_key") or env.get(ENV_PREFIX + "API_KEY") or None,
                   simulator_backend=overrides.get("simulator_backend"), log_level=overrides.get("log_level") or "info",
                   serving=serving)


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
        raise ConfigError(f"{ENV_PREFIX}{name.upper()}: expected a {type(default).__name__}",
                          field=f"{ENV_PREFIX}{name.upper()}") from None
    return raw
