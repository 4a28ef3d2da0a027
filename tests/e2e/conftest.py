"""Fixtures of the end-to-end tests."""

from __future__ import annotations

import pytest

from tests.e2e.browser import ARGS, CHROMIUM, require_browser


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium (Debian's package through playwright), one per test module."""
    sync_api = require_browser()
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            yield chromium
        finally:
            chromium.close()
