"""The KT-learner section of ``simhub report``: a small multi-day run of the two scripted tutors through
the command line, its page (tables, the three figures, the numbers of results.json), a folder told
apart from a regular tutor-bench one, a folder without results.json, one tutor, and escaping."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import msgspec
import pytest

from simhub.cli import main
from simhub.tutoring.knowsim.report import is_tutor_bench
from simhub.tutoring.lms.bench import read_kt_trace
from simhub.tutoring.lms.report import (
    SECTION,
    KTReportRun,
    is_kt_bench,
    kt_bench_section,
    load_kt_bench,
)
from simhub.tutoring.lms.results import read_kt_results, summarize_kt

pytest.importorskip("matplotlib", reason="the report draws its figures with matplotlib (simhub[report])")

TUTORS = ("scripted:weakest", "scripted:silent")
FIGURES = ("kt-0-mastery", "kt-0-delta", "kt-0-reliability")


@pytest.fixture(scope="module")
def kt_run(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("home")
    out = tmp_path_factory.mktemp("kt") / "run"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SIMHUB_HOME", str(home))
        assert main(["tutor-bench", "--learner", "kt-learner", "--tutor", TUTORS[0], "--tutor", TUTORS[1],
                     "--scenarios", "confused-productive", "--days", "6", "--bootstrap", "100",
                     "--output", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def plain_bench(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("plain") / "run"
    assert main(["tutor-bench", "--tutor", "scripted:stepwise", "--tutor", "scripted:dump", "--n", "2", "--levels",
                 "novice", "--output", str(out), "--no-cache", "--extractor", "offline:lexical",
                 "--bootstrap", "200"]) == 0
    return out


def _figure(page: str, fid: str) -> str:
    match = re.search(rf'<figure id="{fid}">(.*?)</figure>', page, re.S)
    assert match, fid
    return match.group(1)


def test_the_report_shows_the_kt_section_with_its_tables_and_figures(kt_run, tmp_path, capsys):
    page_file = tmp_path / "kt.html"
    assert main(["report", str(kt_run), "--output", str(page_file)]) == 0
    page = page_file.read_text(encoding="utf-8")
    results = json.loads((kt_run / "results.json").read_text())
    sid, head = SECTION
    assert f'<section id="{sid}"' in page and head in page
    assert 'id="table1"' not in page  # not read as an eval run
    for fid in FIGURES:
        body = _figure(page, fid)
        assert body.startswith("<svg") and 'role="img"' in body and body.count("<path") > 5, fid
    board = re.search(r'<table class="kt-leaderboard">.*?</table>', page, re.S).group(0)
    for name in TUTORS:
        assert f'<th scope="row">{name}</th>' in board
        t = results["tutors"][name]
        assert f"{100 * t['delta_solve']['mean']:+.2f}" in board
        low, high = (100 * x for x in t["delta_solve"]["ci95"])
        assert f"[{low:.2f}, {high:.2f}]".replace("-0.00", "0.00") in board
        assert f"{t['silent_runs']} of {t['runs']}" in board
        assert f"{t['calibration']['ece']:.3f}" in board
    # the rows follow the ranking
    assert board.index(results["ranking"][0]) < board.index(results["ranking"][1])
    comparison = results["comparisons"][0]
    assert f"{100 * comparison['diff']:+.2f}" in page and f"{comparison['p_holm']:.4f}" in page
    assert "Kendall τ" in page and "leave one scenario out" in page
    learner = results["learner"]
    assert f"{learner['probe_accuracy_by_ability']['average']['real_persona']:.3f}" in page
    assert f"{learner['kt_heldout_calibration']['ece']:.3f}" in page
    assert f"{100 * learner['valid_answer_rate']:.1f}%" in page
    caption = _figure(page, "kt-0-reliability")
    assert "(consistency), not realism" in caption
    # runs without a help request and the tutor's stay_silent action have two names, not one word twice
    head = re.search(r"<thead>.*?</thead>", board, re.S).group(0)
    assert "no help request (runs)" in head and "stay silent" in head and "silent runs" not in head
    # every gate value the table can show is explained: block, warn, monitor, else pass
    assert all(results["tutors"][n]["gate"] in ("block", "warn", "monitor", "pass") for n in TUTORS)
    assert "block, warn or monitor when one of its rules fires" in board and "else pass" in board
    # why a silent tutor's learner still climbs: the probes are practice
    assert "Mastery rises under a tutor that does nothing too" in _figure(page, "kt-0-mastery")


def test_kt_folders_and_tutor_bench_folders_are_told_apart(kt_run, plain_bench, tmp_path):
    assert is_kt_bench(kt_run) and not is_tutor_bench(kt_run)
    assert is_tutor_bench(plain_bench) and not is_kt_bench(plain_bench)
    assert not is_kt_bench(tmp_path) and not is_kt_bench(tmp_path / "missing")
    page_file = tmp_path / "both.html"
    assert main(["report", str(plain_bench), str(kt_run), "--output", str(page_file)]) == 0
    page = page_file.read_text(encoding="utf-8")
    assert '<section id="tutor-bench"' in page and '<section id="kt-learner-bench"' in page
    assert 'id="bench-0-kg"' in page and 'id="kt-0-mastery"' in page


def test_a_folder_without_results_is_summarised_from_its_traces(kt_run, tmp_path):
    bare = tmp_path / "bare"
    shutil.copytree(kt_run, bare)
    (bare / "results.json").unlink()
    assert is_kt_bench(bare) and not is_tutor_bench(bare)
    run = load_kt_bench(bare, n_resamples=100)
    assert run.from_traces and list(run.results.tutors) == list(TUTORS)
    saved = read_kt_results(kt_run / "results.json")
    for name in TUTORS:  # the same runs: the same means (the intervals depend on the resamples)
        assert run.results.tutors[name].delta_solve.mean == pytest.approx(saved.tutors[name].delta_solve.mean)
    _, _, body = kt_bench_section([bare])
    assert "no results.json" in body and 'id="kt-0-reliability"' in body


def test_one_tutor_has_no_comparison_and_no_ranking_to_check(kt_run):
    traces = [read_kt_trace(f) for f in sorted((kt_run / "traces").glob("*.json"))]
    alone = summarize_kt([t for t in traces if t.tutor == TUTORS[0]], n_resamples=100)
    _, _, body = kt_bench_section([KTReportRun("alone", alone)])
    assert "no paired comparison" in body and "no ranking to check" in body
    assert 'class="kt-leaderboard"' in body and "<svg" in _figure(body, "kt-0-delta")


def test_names_from_a_run_are_escaped(kt_run):
    results = read_kt_results(kt_run / "results.json")
    odd = '<img src=x onerror="a()">$x_1$'
    renamed = {(odd if k == TUTORS[0] else k): v for k, v in results.tutors.items()}
    comparisons = [msgspec.structs.replace(c, a=odd) for c in results.comparisons]
    results = msgspec.structs.replace(results, tutors=renamed, comparisons=comparisons,
                                      ranking=[odd if k == TUTORS[0] else k for k in results.ranking])
    _, _, body = kt_bench_section([KTReportRun('<b>"run"</b>', results)])
    assert "<img src=x" not in body and "<b>" not in body
    assert "&lt;img src=x onerror=&quot;a()&quot;&gt;" in body and "&lt;b&gt;&quot;run&quot;&lt;/b&gt;" in body
    for fid in FIGURES:
        assert "<svg" in _figure(body, fid)
