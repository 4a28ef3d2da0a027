"""The documentation site: it builds with ``mkdocs build --strict`` (no broken link or anchor, every page
in the nav), every generated reference page is what the code gives, and a reader gets a working site
in headless Chromium (the home page, the search finding ROUGE-L, a generated CLI page, a metric card),
with nothing requested from outside the site."""

from __future__ import annotations

import functools
import http.server
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)], cwd=REPO,
                          capture_output=True, text=True, timeout=600, check=False,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stderr[-4000:]
    assert "WARNING" not in done.stderr, done.stderr[-4000:]
    return out


def test_the_site_builds_strictly_with_every_page(site):
    nav = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    sources = sorted(p.relative_to(REPO / "docs").as_posix() for p in (REPO / "docs").rglob("*.md"))
    assert sources and all(s in nav for s in sources), [s for s in sources if s not in nav]  # every page in the nav
    for source in sources:
        assert (site / source.replace(".md", ".html")).is_file(), source
    # The pages that include files from the repository root carry their text.
    assert "Fidelity: the paper's rules" in (site / "fidelity.html").read_text(encoding="utf-8")
    assert "ROUGE-L" in (site / "benchmarks.html").read_text(encoding="utf-8")
    # The Python reference is rendered from the docstrings.
    api = (site / "reference" / "python.html").read_text(encoding="utf-8")
    assert "simhub.scoring.Scorer" in api and "from_profile" in api


def test_every_generated_page_is_what_the_code_gives():
    """A flag, profile key, run-file field, metric or HTTP route changed without
    ``python scripts/gen_reference.py`` fails here, naming the page."""
    from simhub.cli.pages import generated_pages

    stale = [name for name, text in generated_pages().items()
             if not (REPO / name).is_file() or (REPO / name).read_text(encoding="utf-8") != text]
    assert not stale, f"out of date: {stale}; run python scripts/gen_reference.py"


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def served(site):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def page(browser, served):
    """A page that may load only the site itself; what it tried to fetch elsewhere is in ``page.outside``."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    tab = context.new_page()
    outside: list[str] = []
    errors: list[str] = []

    def route(route):
        if route.request.url.startswith(served):
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    tab.route("**/*", route)
    tab.on("pageerror", lambda exc: errors.append(str(exc)))
    tab.outside, tab.errors = outside, errors
    yield tab
    context.close()


@pytest.mark.browser
def test_the_home_page_and_its_links(page, served):
    page.goto(f"{served}/index.html")
    assert page.title().startswith("simhub")
    assert page.locator("h1").first.inner_text().rstrip("¶") == "simhub"
    page.get_by_role("link", name="The first ten minutes").first.click()
    page.wait_for_load_state()
    assert page.locator("h1").first.inner_text().rstrip("¶") == "The first ten minutes"
    assert not page.outside and not page.errors, (page.outside, page.errors)


@pytest.mark.browser
def test_the_search_finds_rouge_l(page, served):
    page.goto(f"{served}/index.html")
    page.locator("label.md-search__icon, .md-search__input").first.click()
    console: list[str] = []
    page.on("console", lambda msg: console.append(f"{msg.type}: {msg.text}"))
    box = page.locator("input.md-search__input")
    results = page.locator(".md-search-result__item")
    meta = page.locator(".md-search-result__meta")
    # The search index is built by a web worker after the page loads (slowly on a busy machine); until
    # then the result list says "Initializing search". Wait for it, then type the query as a user does
    # (the search reads key events: a programmatic fill is seen only if it lands before the index is
    # ready), again until results come.
    deadline = time.monotonic() + 180
    while "Initializing" in (meta.first.text_content() or "") and time.monotonic() < deadline:
        time.sleep(0.5)
    while True:
        box.fill("")
        box.press_sequentially("ROUGE-L", delay=20)
        try:
            results.first.wait_for(timeout=5_000)
            break
        except PlaywrightTimeout:
            if time.monotonic() > deadline:
                raise AssertionError(f"no search result; the list says {meta.first.text_content()!r}; page errors "
                                     f"{page.errors}; console {console[-10:]}") from None
    texts = " ".join(results.all_inner_texts())
    assert "ROUGE-L" in texts or "rouge_l" in texts, texts[:500]
    assert not page.errors, page.errors


@pytest.mark.browser
def test_a_generated_cli_page_and_a_metric_card(page, served):
    page.goto(f"{served}/reference/cli.html")
    headings = page.locator("article h3").all_inner_texts()
    assert any("simhub eval" in h for h in headings), headings[:10]
    assert page.locator("code", has_text="--metrics").count() > 0
    page.goto(f"{served}/reference/metrics.html")
    card = page.locator("h2", has_text="ROUGE-L (rouge_l)")
    assert card.count() == 1 and card.is_visible()
    assert "no model (text only)" in page.locator("article").inner_text()
    assert not page.outside and not page.errors, (page.outside, page.errors)
