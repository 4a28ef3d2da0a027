"""The report page in a real browser, with the network cut off.

The unit tests read the HTML as text; this one checks what a reader gets: the page renders in
headless Chromium from disk with every request other than the page itself blocked, the table has
the expected rows, every figure draws an SVG of non-zero size, and nothing is logged as an error
or requested from elsewhere. Needs Debian's ``chromium`` and the playwright package (not its
downloaded browsers).
"""

from __future__ import annotations

import html
import json
from pathlib import Path

import pytest

from tests.e2e.browser import require_browser

pytestmark = pytest.mark.browser
require_browser()  # skips the module without Chromium and playwright
pytest.importorskip("matplotlib", reason="the report draws its figures with matplotlib (simhub[report])")

from simhub.evaluation.paper import TABLE1  # noqa: E402
from simhub.evaluation.report import TURN_FIGURES, load_run, table1_data, write_report  # noqa: E402
from tests.unit.test_report import make_runs  # noqa: E402

#: More runs than the page once had room for (its title and table stopped at four).
MANY = ["tiny-student-sft", "reference:previous-turn", "reference:real", "tiny-student-base", "baseline:zero-shot",
        "baseline:icl", "baseline:ocean"]
REASON = "no correctness labels: needs a judge endpoint (scoring.metrics.judge kind openai)"


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


@pytest.fixture(scope="module")
def many_runs(tmp_path_factory) -> tuple[Path, list[Path]]:
    """Seven runs, as a demo with baselines writes them: real turns without a correctness label, and
    dialogue-level statistics that are null, with the reason the writer records."""
    run_dirs = make_runs(tmp_path_factory.mktemp("many"), MANY)
    file = run_dirs[0] / "dialogue_results.json"
    results = json.loads(file.read_text())
    results["metrics"]["correctness_rate_diff"] = {"value": None, "ci95": None, "n": 30}
    results["null_reasons"] = {"correctness_rate_diff": REASON}
    file.write_text(json.dumps(results))
    return write_report(run_dirs, tmp_path_factory.mktemp("many-report") / "report.html"), run_dirs


def test_report_at_1920_px_shows_every_run_and_tells_gaps_from_failures(many_runs, browser):
    path, run_dirs = many_runs
    context = browser.new_context(viewport={"width": 1920, "height": 1080}, offline=True)
    page = context.new_page()
    try:
        page.goto(path.resolve().as_uri(), wait_until="load")
        names = [row["name"] for row in table1_data([load_run(d) for d in run_dirs])["runs"]]
        heading = page.locator("h1").inner_text()
        assert all(name in heading for name in names) and "…" not in heading
        rows = page.locator('#table1 tbody#table1-runs tr[data-kind="run"]')
        assert rows.count() == len(MANY)
        wrap = page.locator("#table1-section .table-wrap")
        assert wrap.evaluate("w => w.scrollWidth <= w.clientWidth")  # nothing cut off or hidden behind a scroll
        right = wrap.bounding_box()["x"] + wrap.bounding_box()["width"]
        for i in range(rows.count()):
            rows.nth(i).scroll_into_view_if_needed()
            box = rows.nth(i).bounding_box()
            assert rows.nth(i).is_visible() and box["x"] + box["width"] <= right + 1, (names[i], box)

        def colour(selector: str) -> set[str]:
            return set(page.locator(selector).evaluate_all("nodes => nodes.map(n => getComputedStyle(n).color)"))

        no_label = page.locator("#table1 .nolabel")
        assert no_label.count() >= len(MANY) and all(t.endswith(" no label") for t in no_label.all_inner_texts())
        assert colour("#table1 .nolabel") == {"rgb(91, 91, 91)"}  # grey, the page's muted colour
        assert colour("#table1 .warn") == {"rgb(162, 59, 0)"}  # failures stay red
        reason = page.locator("#dialogue-table .reason", has_text=REASON)
        assert reason.count() == 1 and reason.is_visible()
    finally:
        context.close()


@pytest.fixture(scope="module")
def floor_report(tmp_path_factory) -> tuple[Path, list[Path]]:
    """The first report of docs/getting-started/first-ten-minutes.md: the floor scored on ROUGE-L alone, beside a run scored on every metric."""
    from tests.unit.test_report import _dialogues, keep_only, make_run_dir

    root = tmp_path_factory.mktemp("floor")
    dialogues = _dialogues(20, seed=5)
    floor = keep_only(make_run_dir(root, "reference:previous-turn", dialogues, seed=1), ["rouge_l"])
    full = make_run_dir(root, "tiny-student-sft", dialogues, seed=2)
    alone = write_report([floor], tmp_path_factory.mktemp("floor-report") / "report.html")
    both = write_report([floor, full], tmp_path_factory.mktemp("both-report") / "report.html")
    return alone, both


def _figure_scales(page) -> dict[str, float]:
    """Each figure's drawn width over its own width in points: one number means one font size."""
    return page.evaluate("""() => Object.fromEntries([...document.querySelectorAll('figure svg')].map(svg =>
        [svg.closest('figure').id, svg.getBoundingClientRect().width / svg.viewBox.baseVal.width]))""")


def test_figures_share_one_scale_and_a_figure_without_data_says_so_in_its_caption(report, floor_report, browser):
    """Every figure is drawn at one scale (a one-panel figure is not stretched to the page's width, so
    its text is the size of every other figure's); a figure no run has the data for is its title and
    that sentence, where its caption goes, with no empty box; no legend lists a run with no labels."""
    context = browser.new_context(viewport={"width": 1280, "height": 900}, offline=True)
    page = context.new_page()
    try:
        scales = []
        for path in (report[0], *floor_report):
            page.goto(path.resolve().as_uri(), wait_until="load")
            scales += list(_figure_scales(page).values())
            for empty in page.locator("figure.empty").all():
                assert empty.locator("svg").count() == 0
                text = empty.locator("figcaption").inner_text()
                assert text.endswith("No run in this report has the data for this figure.") and text.count(".") == 2
            legends = page.evaluate("() => [...document.querySelectorAll('figure svg text')].map(t => t.textContent)")
            assert not any("(n=0)" in t for t in legends)
        assert len(scales) > len(TURN_FIGURES) and max(scales) - min(scales) < 0.01, scales
        page.goto(floor_report[0].resolve().as_uri(), wait_until="load")
        drawn = _figure_scales(page)
        assert "fig-position" in drawn and page.locator("figure.empty").count() == len(TURN_FIGURES) - len(drawn)
    finally:
        context.close()
