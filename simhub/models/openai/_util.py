"""Small helpers of the client modules: the SDK loaded on first use, the payload-list check, progress bars."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from simhub.errors import ConfigError, require


def _payload_list(payloads: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The payloads as a list (any iterable will do); a lone body is a mistake worth naming."""
    if isinstance(payloads, Mapping | str | bytes):
        raise ConfigError("payloads: expected a list of request bodies", field="payloads")
    return list(payloads)


def _openai() -> Any:
    return require("openai", "metrics")


class _NullBar:
    n = 0

    def update(self, k: int = 1) -> None:
        self.n += k

    def close(self) -> None:
        pass


def _progress_bar(enabled: bool, desc: str, total: int, done: int) -> Any:
    if not enabled:
        return _NullBar()
    from simhub.progress import tqdm

    return tqdm(total=total, initial=done, desc=desc, unit="req")
