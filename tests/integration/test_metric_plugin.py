"""A metric is one class and one registry line: a throwaway metric added through the public registry
shows up in `simhub score`, `POST /score` (its own summary statistics included) and the report, which
ranks it in the direction its metadata declares and labels it, and its statistics, as it declares."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from simhub.cli import main
from simhub.metrics import Metric, MetricResult, Output, ScoreItem, register_metric, summarize, unregister_metric
from simhub.schema import to_builtins
from tests.examples import DIVIDING_FRACTIONS


class Verbosity(Metric):
    """Words in the simulated turn beyond the real one's (lower is better: no padding)."""

    outputs = (Output("verbosity", "words in the candidate beyond the real turn's", "never null",
                      low=0.0, high=float("inf"), higher_is_better=False, label="Verbosity",
                      summary={"longest": "longest padding"}),)
    config_key = None  # no model: configured in every profile

    def score(self, items: Sequence[ScoreItem]) -> list[MetricResult]:
        return [MetricResult(values={"verbosity": float(max(0, len(i.candidate.split()) - len(i.real.content.split())))})
                for i in items]

    def summary(self, values: Sequence[float | None]) -> dict:
        return {**summarize(values), "longest": max((v for v in values if v is not None), default=None)}


@pytest.fixture
def verbosity():
    register_metric("verbosity", Verbosity)
    yield
    unregister_metric("verbosity")


def _items(tmp_path):
    path = tmp_path / "items.jsonl"
    rows = [{"dialogue": to_builtins(DIVIDING_FRACTIONS), "turn_index": 3, "candidate": c}
            for c in ("8/5", "I think it is eight over five, maybe")]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_simhub_score_computes_a_registered_metric(verbosity, tmp_path, capsys):
    out = tmp_path / "scores.jsonl"
    assert main(["score", "--input", str(_items(tmp_path)), "--output", str(out), "--metrics", "verbosity,rouge_l"]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["scores"]["verbosity"] for r in rows] == [0.0, 7.0]
    table = capsys.readouterr().out.splitlines()
    line = next(x for x in table if x.startswith("verbosity"))
    assert line.split() == ["verbosity", "3.5000", "3.5000", "2", "0", "longest=7.0000"]  # its own statistic too
    assert "longest" not in next(x for x in table if x.startswith("rouge_l"))


def test_post_score_carries_the_metrics_own_summary(verbosity):
    pytest.importorskip("litestar")
    from litestar.testing import TestClient

    from simhub.config import Profile
    from simhub.serving.app import create_app
    from simhub.serving.settings import ServiceSettings

    profile = Profile(name="plugin")
    with TestClient(create_app(ServiceSettings.load(profile), profile)) as c:
        items = [{"dialogue": to_builtins(DIVIDING_FRACTIONS), "turn_index": 3, "candidate": cand}
                 for cand in ("8/5", "I think it is eight over five, maybe")]
        r = c.post("/score", json={"items": items, "metrics": ["verbosity"]})
    assert r.status_code == 200, r.text
    body = r.json()
    assert [i["scores"]["verbosity"] for i in body["items"]] == [0.0, 7.0]
    assert body["summary"]["verbosity"]["mean"] == 3.5 and body["summary"]["verbosity"]["extra"] == {"longest": 7.0}


def test_merged_requests_each_get_their_own_summary(verbosity):
    """Requests merged into one Scorer call (a metric that is not set-dependent) each get the metric's
    own summary over their own items, not the merged call's."""
    pytest.importorskip("litestar")
    from simhub.config import Profile
    from simhub.metrics import ScoreItem
    from simhub.scoring import Scorer
    from simhub.serving.batching import Job
    from simhub.serving.metrics import ServiceMetrics
    from simhub.serving.services import ScoringService
    from simhub.serving.settings import ServiceSettings

    profile = Profile(name="plugin")
    service = ScoringService(Scorer.from_profile(profile), ServiceSettings.load(profile, environ={}), ServiceMetrics())
    jobs = [Job(("verbosity",), [ScoreItem(DIVIDING_FRACTIONS, 3, c) for c in cands], future=None,  # type: ignore[arg-type]
                payload=("verbosity",))
            for cands in (["8/5", "eight over five, I guess"], ["I think it is eight over five, maybe"])]
    (_, first), (_, second) = service._run(jobs)
    assert first["verbosity"] == {"mean": 2.0, "std": 2.0, "count": 2, "nulls": 0, "longest": 4.0}
    assert second["verbosity"] == {"mean": 7.0, "std": 0.0, "count": 1, "nulls": 0, "longest": 7.0}


def test_the_report_ranks_a_lower_is_better_metric_lowest_first(verbosity, tmp_path):
    from simhub.evaluation.leaderboard import rank_runs
    from simhub.evaluation.report import write_report
    from simhub.evaluation.rundir import load_run

    runs = []
    for name, value in (("padded", 9.0), ("terse", 1.0)):
        folder = tmp_path / name
        folder.mkdir()
        results = {"simulator": name, "profile": "plugin", "data": {"turns": 1, "dialogues": 1},
                   "metrics": {"verbosity": {"mean": value, "std": 0.0, "n": 1, "ci95": [value, value],
                                             "nulls": 0, "longest": 2 * value}},
                   "failures": {"simulation": 0, "scoring": {"verbosity": 0}}}
        (folder / "results.json").write_text(json.dumps(results))
        (folder / "scores.jsonl").write_text(json.dumps({
            "dialogue_id": DIVIDING_FRACTIONS.id, "turn_index": 3, "position": 0, "real": "8/5", "candidate": "x",
            "scores": {"verbosity": value}, "details": {}}) + "\n")
        runs.append(load_run(folder))
    ranked = rank_runs(runs)
    assert [r.run.simulator for r in ranked] == ["terse", "padded"] and ranked[0].best == {"verbosity"}
    page = write_report([tmp_path / "padded", tmp_path / "terse"], tmp_path / "report.html").read_text()
    assert "Verbosity ↓</th>" in page and "Verbosity ↑" not in page  # its label, and lower is better
    assert "range [0, ∞]" in page and "null when: never null" in page  # the header's hover text
    assert '<span class="sub">longest padding 18.000</span>' in page  # its own statistic, as it labels it
    assert '<span class="sub">longest padding 2.000</span>' in page and "nulls 0" not in page
