"""Headless Chromium for the browser tests (Debian's ``chromium`` package, driven by playwright)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("SIMHUB_CHROMIUM", "/usr/bin/chromium")

#: Flags for a container without a display, a GPU or network services.
ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]


def require_browser():
    """Skip the calling test module unless Chromium and playwright are there; playwright's sync API."""
    if not Path(CHROMIUM).is_file():
        pytest.skip(f"the browser test needs Debian's chromium at {CHROMIUM} (apt-get install chromium)",
                    allow_module_level=True)
    return pytest.importorskip("playwright.sync_api", reason="the browser test needs playwright (pip install playwright)")
