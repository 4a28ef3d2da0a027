"""The report page in a real browser, with the network cut off.

The unit tests read the HTML as text; this one checks what a reader gets: the page renders in
headless Chromium from disk with every request other than the page itself blocked, the table has
the expected rows, every figure draws an SVG of non-zero size, and nothing is logged as an error
or requested from elsewhere. Needs Debian's ``chromium`` and the playwright package (not its
downloaded browsers).
"""

from __future__ import annotations

import html
from pathlib import Path

import pytest

from tests.e2e.browser import require_browser

pytestmark = pytest.mark.browser
require_browser()  # skips the module without Chromium and playwright
pytest.importorskip("matplotlib", reason="the report draws its figures with matplotlib (simhub[report])")

from simhub.evaluation.paper import TABLE1  # noqa: E402
from simhub.evaluation.report import TURN_FIGURES, load_run, table1_data, write_report  # noqa: E402
from tests.unit.test_report import make_runs  # noqa: E402


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> tuple[Path, list[Path]]:
    run_dirs = make_runs(tmp_path_factory.mktemp("runs"))
    return write_report(run_dirs, tmp_path_factory.mktemp("report") / "report.html"), run_dirs


def test_report_renders_offline(report, browser):
    path, run_dirs = report
    url = path.resolve().as_uri()
    blocked: list[str] = []
    failed: list[str] = []
    errors: list[str] = []

    context = browser.new_context(viewport={"width": 1280, "height": 900}, offline=True)
    page = context.new_page()

    def route(route):
        if route.request.url == url:
            route.continue_()
        else:
            blocked.append(route.request.url)
            route.abort()

    page.route("**/*", route)
    page.on("console", lambda msg: errors.append(f"console: {msg.text}") if msg.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(f"page error: {exc}"))
    page.on("requestfailed", lambda request: failed.append(f"{request.url}: {request.failure}"))
    try:
        response = page.goto(url, wait_until="load")
        assert response is None or response.ok

        expected = [row["name"] for row in table1_data([load_run(d) for d in run_dirs])["runs"]]
        run_rows = page.locator('#table1 tbody#table1-runs tr[data-kind="run"]')
        assert run_rows.count() == len(run_dirs)
        assert [run_rows.nth(i).locator("th").inner_text().splitlines()[0] for i in range(len(expected))] == expected
        assert page.locator('#table1 tr[data-kind="published"]').count() == len(TABLE1)
        assert "not reproduced here" in page.locator("#table1-published").inner_text()
        assert page.locator("#table1 caption").is_visible()

        for spec in TURN_FIGURES:
            figure = page.locator(f"figure#{spec.id}")
            assert figure.count() == 1, spec.id
            svg = figure.locator("svg")
            assert svg.count() == 1, spec.id
            svg.first.scroll_into_view_if_needed()
            box = svg.first.bounding_box()
            assert box and box["width"] > 100 and box["height"] > 50, (spec.id, box)
            assert figure.locator("figcaption").is_visible()
            # something was drawn: paths (bars, lines) and text (ticks, legends)
            assert svg.first.locator("path").count() > 5 and svg.first.locator("text").count() > 3

        assert page.title() == html.unescape(path.read_text(encoding="utf-8").split("<title>")[1].split("</title>")[0])
    finally:
        context.close()

    assert blocked == [], f"the page asked for other resources: {blocked}"
    assert failed == [], f"failed requests: {failed}"
    assert errors == [], f"console errors: {errors}"
