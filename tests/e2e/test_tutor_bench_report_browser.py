"""The tutor-bench section of ``simhub report`` in a real browser, offline: a demo bench of the two
scripted tutors, its leaderboard (the stepwise tutor ranked first), its tutor × level and comparison
tables, and its three figures drawn with a non-zero size; with an eval run beside it, both sections."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from tests.e2e.browser import require_browser

pytestmark = pytest.mark.browser
require_browser()
pytest.importorskip("matplotlib", reason="the report draws its figures with matplotlib (simhub[report])")

from simhub.cli import main  # noqa: E402
from simhub.tutoring.knowsim.report import first_turn_stops, kg_trajectories, load_bench, load_per_turn  # noqa: E402
from tests.unit.test_report import make_runs  # noqa: E402

FIGURES = ("bench-0-kg", "bench-0-modes", "bench-0-load")


@pytest.fixture(scope="module")
def bench(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("bench") / "run"
    assert main(["tutor-bench", "--tutor", "scripted:stepwise", "--tutor", "scripted:dump", "--items", "sample",
                 "--n", "6", "--output", str(out), "--no-cache", "--extractor", "offline:lexical",
                 "--bootstrap", "200"]) == 0
    return out


def _open(browser, path: Path):
    url = path.resolve().as_uri()
    context = browser.new_context(viewport={"width": 1280, "height": 900}, offline=True)
    page = context.new_page()
    errors: list[str] = []
    blocked: list[str] = []
    page.route("**/*", lambda route: route.continue_() if route.request.url == url
               else (blocked.append(route.request.url), route.abort()))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(url, wait_until="load")
    return context, page, errors, blocked


def test_the_bench_section_renders_offline_with_its_tables_and_figures(bench, tmp_path, browser, capsys):
    page_file = tmp_path / "bench.html"
    assert main(["report", str(bench), "--output", str(page_file)]) == 0
    results = json.loads((bench / "results.json").read_text())
    context, page, errors, blocked = _open(browser, page_file)
    try:
        rows = page.locator("table.bench-leaderboard tbody tr")
        assert rows.count() == 2
        assert rows.nth(0).locator("th").inner_text() == "scripted:stepwise"  # ranked first (lower R̄)
        first_kg = next(t for t in results["tutors"] if t["tutor"] == "scripted:stepwise")["marginal"]["kg"]["mean"]
        assert rows.nth(0).locator("td").first.inner_text().startswith(f"{first_kg:.2f}")
        assert page.locator("table.bench-levels tbody tr").count() == 2
        assert page.locator("table.bench-levels thead th").count() == 1 + len(results["levels"])
        assert page.locator("table.bench-comparisons tbody tr").count() == 4  # one pair, pooled, four metrics
        for fid in FIGURES:
            svg = page.locator(f"figure#{fid} svg")
            assert svg.count() == 1, fid
            svg.scroll_into_view_if_needed()
            box = svg.bounding_box()
            assert box and box["width"] > 100 and box["height"] > 50, (fid, box)
            assert svg.locator("path").count() > 5 and svg.locator("text").count() > 3
        # the page says what it compares once (no heading repeated), and the run by what it is, not its folder
        h1, h2, h3 = (page.locator(tag).first.inner_text() for tag in ("h1", "h2", "h3"))
        assert h1 == "Tutor bench, knowledge-state learner: scripted:stepwise, scripted:dump" and h1 != h2
        assert h3.startswith("scripted:stepwise vs scripted:dump: KnowSim learner, paper preset, 6 items × 3 levels")
        # every advanced conversation ends after turn 1 under the paper preset: shown, with the reason
        stops = first_turn_stops(load_bench(bench))
        assert stops["advanced"] == (12, 12) and "novice" not in stops
        note = page.locator("p[data-first-turn-stops]").inner_text()
        assert "advanced: 12 of 12" in note and "80%" in note and "--preset released" in note
        # one capacity line for the two tutors (the same items and levels), none hidden under another
        legend = page.evaluate("() => [...document.querySelectorAll('#bench-0-load svg text')].map(t => t.textContent)")
        assert "capacity τ (every tutor)" in legend and not any(t.endswith(": capacity τ") for t in legend)
    finally:
        context.close()
    assert errors == [] and blocked == []


def test_an_eval_run_and_a_bench_share_one_page(bench, tmp_path, browser):
    runs = make_runs(tmp_path / "runs", ["tiny-student-sft"])
    page_file = tmp_path / "both.html"
    assert main(["report", str(runs[0]), str(bench), "--output", str(page_file)]) == 0
    context, page, errors, _ = _open(browser, page_file)
    try:
        assert "tiny-student-sft" in page.locator("#table1 tbody#table1-runs").inner_text()
        assert page.locator("table.bench-leaderboard tbody tr").count() == 2
        assert page.locator("section#tutor-bench").is_visible()
        assert page.locator('nav a[href="#tutor-bench"]').count() == 1
    finally:
        context.close()
    assert errors == []


def test_the_figures_data_follow_the_traces(bench):
    from simhub.learners.metrics import knowledge_gain

    run = load_bench(bench)
    curves = kg_trajectories(run.traces)
    for level, by_tutor in curves.items():
        for tutor, ys in by_tutor.items():
            mine = [t for t in run.traces if t.level == level and t.tutor == tutor and t.failed is None]
            final = sum(knowledge_gain(t.initial, t.turns[-1].record.state) for t in mine) / len(mine)
            assert ys[-1] == pytest.approx(final)  # ended conversations keep their final KG
            assert all(a <= b + 1e-9 for a, b in itertools.pairwise(ys))  # states are monotonic
    loads = load_per_turn(run.traces)
    for tutor, (load, cap) in loads.items():
        first = [t.turns[0].record for t in run.traces if t.tutor == tutor and t.failed is None]
        assert load[0] == pytest.approx(sum(r.effective_load for r in first) / len(first))
        assert cap[0] == pytest.approx(sum(r.threshold for r in first) / len(first))


def test_the_certification_section_renders_its_rankings_figure_and_known_groups(tmp_path_factory, browser):
    """A certification of the designed tutors under the two built-in families: the verdict, one row per
    tutor, the rank-interval figure drawn with a non-zero size (one marker series per family), and the
    known groups of each family."""
    from simhub.tutoring.designed import DESIGNED

    root = tmp_path_factory.mktemp("cert")
    tutors = [a for t in DESIGNED for a in ("--tutor", t)]
    assert main(["tutor-bench", *tutors, "--n", "3", "--extractor", "offline:lexical", "--no-cache",
                 "--bootstrap", "100", "--output", str(root / "ks")]) == 0
    assert main(["tutor-bench", "--learner", "kt-learner", *tutors, "--scenarios", "help-seeker", "--days", "8",
                 "--no-cache", "--bootstrap", "100", "--output", str(root / "kt")]) == 0
    assert main(["tutor-bench", "certify", str(root / "ks"), str(root / "kt"), "--bootstrap", "200",
                 "--output", str(root / "cert")]) == 0
    doc = json.loads((root / "cert" / "results.json").read_text())
    page_file = root / "cert.html"
    assert main(["report", str(root / "cert"), "--output", str(page_file)]) == 0
    context, page, errors, blocked = _open(browser, page_file)
    try:
        verdict = page.locator("p.verdict").inner_text()
        assert verdict.startswith("Certified" if doc["verdict"]["certified"] else "Not certified")
        assert page.locator("table.certification tr").count() == 1 + len(DESIGNED)
        svg = page.locator("figure#certification-ranks svg")
        svg.scroll_into_view_if_needed()
        box = svg.bounding_box()
        assert box and box["width"] > 200 and box["height"] > 100
        labels = page.evaluate("() => [...document.querySelectorAll('#certification-ranks svg text')]"
                               ".map(t => t.textContent)")
        assert {"knowsim", "kt-learner", *DESIGNED} <= set(labels)
        groups = page.locator("text=Known groups").locator("xpath=following-sibling::ul[1]/li")
        assert groups.count() == 2 and "designed:silent < designed:partial" in groups.nth(0).inner_text()
        realism = page.locator("table.certification-realism tr")
        assert realism.count() == 1 + len(doc["realism"]) == 3
        assert "real vs real" in realism.nth(1).inner_text()
    finally:
        context.close()
    assert errors == [] and blocked == []
