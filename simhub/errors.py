"""Exception types. Anything deriving from :class:`SimhubError` is the user's to fix: the CLI
prints its message and exits 2, the service answers 4xx. Messages never carry secrets."""

from __future__ import annotations


class SimhubError(Exception):
    """A problem with the user's input or configuration, described in the message."""


class ConfigError(SimhubError, ValueError):
    """A recipe, profile or option is invalid; the message names the key."""


class MissingExtraError(SimhubError, ImportError):
    """An optional dependency is not installed; the message names the extra to install."""


def require(module: str, extra: str):
    """Import ``module`` or raise MissingExtraError telling which ``simhub[extra]`` provides it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtraError(
            f"{module} is not installed: pip install 'simhub[{extra}]' ({exc.__class__.__name__}: {exc})"
        ) from None
