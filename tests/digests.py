"""Comparing large files in tests: by digest, never by a pytest diff of their bytes."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest


def assert_same_file(actual, expected) -> None:
    """Two files hold the same bytes, compared by SHA-256: a failure names both files and both
    digests (never a diff of megabytes of bytes, which pytest can take many minutes to render)."""
    digests = [hashlib.sha256(Path(p).read_bytes()).hexdigest() for p in (actual, expected)]
    if digests[0] != digests[1]:
        pytest.fail(f"{actual} (sha256 {digests[0]}, {Path(actual).stat().st_size} bytes) differs from "
                    f"{expected} (sha256 {digests[1]}, {Path(expected).stat().st_size} bytes)", pytrace=False)
