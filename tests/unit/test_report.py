"""The HTML report over simhub eval run directories (simhub.evaluation.report).

The fake run directories below are what ``simhub eval`` writes, with random but plausible values:
several simulators over the same ~30 dialogues, some failed simulations and failed scorings, and
``details`` (acts, judge) that the figures read. The browser test imports the generator too.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from pathlib import Path

import pytest

from simhub.errors import DataError, MissingExtraError
from simhub.evaluation.dialogue_eval import write_results
from simhub.evaluation.figures import report_context
from simhub.evaluation.leaderboard import is_missing_label, null_counts, ranked_columns
from simhub.evaluation.paper import METRICS, TABLE1
from simhub.evaluation.report import (
    DIALOGUE_FIGURES,
    RANKING_RULE,
    TURN_FIGURES,
    DataInfo,
    Failures,
    MetricSummary,
    Run,
    load_run,
    rank_runs,
    render_report,
    table1_data,
    write_report,
)
from simhub.metrics.acts import NO_LABEL as NO_ACT_LABEL
from simhub.metrics.judge import NO_LABEL, REAL_NA
from simhub.schema import ACTS
from simhub.stats import cluster_mean_ci

pytest.importorskip("matplotlib", reason="the report draws its figures with matplotlib (simhub[report])")

# ------------------------------------------------------------------------------ fake run directories

_TEXTS = {
    "Math Answer": ["I think it's {a}/{b}", "is it {a}?", "{a} x {b} = {c}", "{a} < {b} so the answer is B",
                    "you add the tops so {c}/{b}", "C because {a} + {b} is {c}"],
    "Seek Information": ["what does denominator mean?", "how do I start this one?", "do I times or divide?",
                         "is the bottom number the same?"],
    "Not Understanding": ["I don't get it", "idk", "no clue sorry", "I'm confused about the <b> part"],
    "Acknowledge": ["ok", "yes", "thanks!", "oh right", "okay I see"],
    "Off-Topic": ["can I go to lunch now", "my pen broke", "lol"],
}
_FILLER = ["so", "basically", "what", "I", "am", "thinking", "here", "is", "that", "we", "need", "to", "look", "at", "it", "again", "carefully"]
_DATA_SHA = "9f2c" * 16

#: Simulator presets: how often the act is kept, the judge verdict matches, and how wordy it is.
PRESETS = {
    "SFT 8B (simhub)": {"act": 0.7, "verdict": 0.6, "extra_words": 1, "level": 0.74, "same_error": 0.1},
    "DPO 8B (simhub)": {"act": 0.75, "verdict": 0.62, "extra_words": 2, "level": 0.76, "same_error": 0.08},
    "Zero-Shot gpt-4.1": {"act": 0.5, "verdict": 0.55, "extra_words": 18, "level": 0.55, "same_error": 0.03},
}


def _dialogues(n: int, seed: int) -> list[dict]:
    """Real dialogues: per student turn its turn index, act, correctness label and text."""
    rng = random.Random(seed)
    dialogues = []
    for d in range(n):
        offset = rng.randint(0, 1)
        turns = []
        for position in range(rng.randint(3, 16)):
            act = rng.choices(ACTS, weights=[45, 12, 15, 22, 6])[0]
            label = (rng.choice(["correct", "correct", "incorrect"]) if act == "Math Answer"
                     else "incorrect" if act == "Not Understanding" else "na")
            a, b = rng.randint(1, 12), rng.randint(2, 12)
            text = rng.choice(_TEXTS[act]).format(a=a, b=b, c=a + b)
            turns.append({"turn_index": 2 * position + offset, "position": position, "act": act,
                          "label": label, "text": text})
        if d % 5 == 2:  # a real turn without a correctness label (a failed annotation), as the corpus has
            turns[1]["label"] = None
        dialogues.append({"id": f"{1000 + d}-{rng.randint(10_000, 99_999)}", "turns": turns})
    return dialogues


def _clip01(x: float) -> float:
    return min(1.0, max(0.0, x))


def make_run_dir(root: Path, simulator: str, dialogues: list[dict], *, seed: int, preset: dict | None = None,
                 profile: str = "paper-8b", dialogue_results: bool = False) -> Path:
    """Write a run directory as simhub eval does, with values drawn around ``preset``."""
    preset = preset or PRESETS["SFT 8B (simhub)"]
    rng = random.Random(seed)
    run = root / re.sub(r"[^A-Za-z0-9]+", "-", simulator).strip("-").lower()
    run.mkdir(parents=True)
    lines, simulations = [], []
    sim_failures = 0
    scoring_failures = {"correctness": 0, "errors": 0, "knowledge": 0, "tutor_response": 0}
    for dialogue in dialogues:
        last = len(dialogue["turns"]) - 1
        for turn in dialogue["turns"]:
            line = {"dialogue_id": dialogue["id"], "turn_index": turn["turn_index"], "position": turn["position"],
                    "real": turn["text"]}
            if rng.random() < 0.01:
                sim_failures += 1
                line |= {"candidate": None, "scores": dict.fromkeys(METRICS), "details": {},
                         "error": "simulation failed: ReadTimeout"}
                lines.append(line)
                continue
            act = turn["act"] if rng.random() < preset["act"] else rng.choice(ACTS)
            a, b = rng.randint(1, 12), rng.randint(2, 12)
            words = rng.choice(_TEXTS[act]).format(a=a, b=b, c=a + b).split()
            words += _FILLER[: max(0, round(rng.gauss(preset["extra_words"], 2)))]
            candidate = " ".join(words)
            real_label = turn["label"]
            if real_label is None:
                verdict = None  # the judge is not asked: nothing to compare with
            elif real_label == "na":
                verdict = rng.choice(["na", "na", "correct"])
            elif rng.random() < preset["verdict"]:
                verdict = real_label
            else:
                verdict = rng.choice(["correct", "incorrect", "na"])
            level = preset["level"]
            scores = {
                "acts": 1.0 if act == turn["act"] else 0.0,
                "correctness": None if real_label in ("na", None) else float(verdict == real_label),
                "errors": (float(verdict == "incorrect" and rng.random() < preset["same_error"])
                           if real_label == "incorrect" else None),
                "knowledge": None if turn["position"] == 0 else _clip01(rng.gauss(level + 0.1, 0.12)),
                "cosine": _clip01(rng.gauss(level, 0.15)),
                "rouge_l": _clip01(rng.betavariate(2, 6) + (level - 0.6) / 3),
                "tutor_response": None if turn["position"] == last else _clip01(rng.gauss(0.2, 0.05)),
            }
            null_reasons = {}
            if real_label is None:
                null_reasons |= {"correctness": NO_LABEL, "errors": NO_LABEL}
                # simhub eval counted these as failed scorings (the reason says "a failed annotation")
                scoring_failures["correctness"] += 1
                scoring_failures["errors"] += 1
            if scores["knowledge"] is not None and rng.random() < 0.02:
                scores["knowledge"] = None
                scoring_failures["knowledge"] += 1
                null_reasons["knowledge"] = "scoring failed: CUDA out of memory"
            details = {"acts": {"predicted": act, "real": turn["act"]}}
            if real_label is not None:
                details["judge"] = {"answer": f"{verdict}", "real_label": real_label, "verdict": verdict}
            if null_reasons:
                details["null_reasons"] = null_reasons
            line |= {"candidate": candidate, "scores": scores, "details": details}
            lines.append(line)
            simulations.append({"dialogue_id": dialogue["id"], "turn_index": turn["turn_index"],
                                "candidate": candidate, "simulator": simulator})
    clusters = [line["dialogue_id"] for line in lines]
    metrics = {}
    for name in METRICS:
        summary = cluster_mean_ci([line["scores"][name] for line in lines], clusters, n_resamples=200, seed=0)
        metrics[name] = {"mean": summary.mean, "std": summary.std, "n": summary.n,
                         "ci95": list(summary.ci) if summary.ci else None}
    metrics["knowledge"] |= {"qwk": round(rng.uniform(0.2, 0.5), 4), "cutoff_source": "evaluated set"}
    results = {
        "simulator": simulator, "profile": profile,
        "data": {"path": "data/eedi-test.jsonl", "sha256": _DATA_SHA, "dialogues": len(dialogues),
                 "turns": len(lines)},
        "metrics": metrics,
        "failures": {"simulation": sim_failures, "scoring": scoring_failures},
        "config": {"seed": seed, "judge": {"model": "gpt-5-mini-2025-08-07"}, "batch_size": 16},
        "simhub_version": "0.2.0", "created": "2026-12-01T10:00:00+00:00",
    }
    (run / "results.json").write_text(json.dumps(results, indent=2))
    (run / "scores.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    (run / "simulations.jsonl").write_text("".join(json.dumps(s) + "\n" for s in simulations))
    if dialogue_results:
        (run / "dialogue_results.json").write_text(json.dumps({"metrics": {
            "acts_jsd": {"value": rng.uniform(0.01, 0.2), "ci95": [0.005, 0.25], "n": len(dialogues)},
            "detect_auroc": {"value": rng.uniform(0.5, 0.9), "ci95": [0.45, 0.95], "n": len(dialogues)},
        }, "real": "data/eedi-test.jsonl", "failed_rollouts": 2, "stability_sd": {"acts_jsd": 0.0125},
            "figures": {
                "acts": {"real": {"Focus": 20, "Probing": 5, "Telling": 1},
                         "sim": {"Focus": rng.randint(5, 30), "Generic": 3}},
                "lengths": {"real": [rng.randint(1, 20) for _ in range(40)],
                            "sim": [rng.randint(1, 60) for _ in range(40)]},
                "mastery": {"real": [0.4, 0.45, 0.5, 0.55], "sim": [0.4, 0.42, 0.43]},
            }}))
    return run


def make_runs(root: Path, simulators: Sequence[str] = tuple(PRESETS), *, n_dialogues: int = 30,
              seed: int = 7) -> list[Path]:
    """Run directories of several simulators over the same ``n_dialogues`` real dialogues."""
    dialogues = _dialogues(n_dialogues, seed)
    return [make_run_dir(root, name, dialogues, seed=seed + i, preset=PRESETS.get(name),
                         dialogue_results=i < 2)
            for i, name in enumerate(simulators)]


def keep_only(run: Path, metrics: Sequence[str]) -> Path:
    """Rewrite a run directory as if it had been scored on ``metrics`` only (``--metrics rouge_l``)."""
    results = json.loads((run / "results.json").read_text())
    results["metrics"] = {m: results["metrics"][m] for m in metrics}
    (run / "results.json").write_text(json.dumps(results))
    lines = [json.loads(x) for x in (run / "scores.jsonl").read_text().splitlines()]
    for line in lines:
        line["scores"] = {m: line["scores"].get(m) for m in metrics}
        line["details"] = {}
    (run / "scores.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return run


def _run(name: str, means: dict[str, float | None], path: str | None = None) -> Run:
    """A run with only summary numbers (for the ranking rule)."""
    metrics = {m: MetricSummary(v, 0.1, 100, (v - 0.01, v + 0.01) if v is not None else None)
               for m, v in means.items()}
    return Run(path=Path(path or name), simulator=name, profile=None, data=DataInfo(None, None, None, None),
               metrics=metrics, failures=Failures(0, {}), config={}, simhub_version=None, created=None, turns=())


# ----------------------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def run_dirs(tmp_path_factory) -> list[Path]:
    return make_runs(tmp_path_factory.mktemp("runs"))


@pytest.fixture(scope="module")
def page(run_dirs, tmp_path_factory) -> str:
    out = write_report(run_dirs, tmp_path_factory.mktemp("report") / "report.html", title="Three simulators")
    return out.read_text(encoding="utf-8")


# ------------------------------------------------------------------------------------------ loading


def test_load_run_reads_what_eval_wrote(run_dirs):
    run = load_run(run_dirs[0])
    results = json.loads((run_dirs[0] / "results.json").read_text())
    assert run.simulator == results["simulator"] and run.profile == "paper-8b"
    assert run.data.sha256 == _DATA_SHA and run.data.turns == len(run.turns)
    assert run.metrics["knowledge"].extra["cutoff_source"] == "evaluated set"
    assert run.failures.scoring["knowledge"] == results["failures"]["scoring"]["knowledge"]
    assert run.dialogue_results is not None and "acts_jsd" in run.dialogue_results.metrics
    assert {t.predicted_act for t in run.turns if t.error is None} <= set(ACTS)


def test_missing_results_json_names_the_file(tmp_path):
    (tmp_path / "scores.jsonl").write_text("")
    with pytest.raises(DataError, match=r"results\.json: not found"):
        load_run(tmp_path)


def test_missing_scores_jsonl_names_the_file(run_dirs, tmp_path):
    (tmp_path / "results.json").write_text((run_dirs[0] / "results.json").read_text())
    with pytest.raises(DataError, match=r"scores\.jsonl: not found"):
        load_run(tmp_path)


def test_not_a_directory(tmp_path):
    with pytest.raises(DataError, match="not a directory"):
        load_run(tmp_path / "nope")


def test_bad_json_line_names_file_and_line(run_dirs, tmp_path):
    (tmp_path / "results.json").write_text((run_dirs[0] / "results.json").read_text())
    good = (run_dirs[0] / "scores.jsonl").read_text().splitlines()
    (tmp_path / "scores.jsonl").write_text("\n".join([*good[:2], '{"dialogue_id": "x", oops', *good[2:]]) + "\n")
    with pytest.raises(DataError) as info:
        load_run(tmp_path)
    assert info.value.row == 3 and info.value.file.endswith("scores.jsonl")
    assert "scores.jsonl:3: invalid JSON" in str(info.value)


def test_bad_field_in_scores_names_line_and_field(run_dirs, tmp_path):
    (tmp_path / "results.json").write_text((run_dirs[0] / "results.json").read_text())
    line = json.loads((run_dirs[0] / "scores.jsonl").read_text().splitlines()[0])
    line["scores"]["cosine"] = "high"
    (tmp_path / "scores.jsonl").write_text(json.dumps(line) + "\n")
    with pytest.raises(DataError, match=r"scores\.jsonl:1: scores\.cosine: expected a number") as info:
        load_run(tmp_path)
    assert info.value.field == "scores.cosine"


def test_duplicate_turn_is_reported_with_both_lines(run_dirs, tmp_path):
    (tmp_path / "results.json").write_text((run_dirs[0] / "results.json").read_text())
    first = (run_dirs[0] / "scores.jsonl").read_text().splitlines()[0]
    (tmp_path / "scores.jsonl").write_text(f"{first}\n\n{first}\n")
    with pytest.raises(DataError, match=r"scores\.jsonl:3: .*also on line 1"):
        load_run(tmp_path)


@pytest.mark.parametrize(("content", "pattern"), [
    ("{not json", r"results\.json:1: invalid JSON"),
    ("[]", r"results\.json: \$: expected a JSON object"),
    ('{"metrics": {}}', r"results\.json: simulator: missing"),
    ('{"simulator": "s", "metrics": {"acts": {"mean": "0.5"}}}', r"results\.json: metrics\.acts\.mean"),
    ('{"simulator": "s", "metrics": {"acts": {"mean": 0.5, "ci95": [0.1]}}}', r"metrics\.acts\.ci95"),
    ('{"simulator": "s", "metrics": {}, "failures": {"simulation": -1}}', r"failures\.simulation"),
])
def test_invalid_results_json(tmp_path, content, pattern):
    (tmp_path / "results.json").write_text(content)
    (tmp_path / "scores.jsonl").write_text("")
    with pytest.raises(DataError, match=pattern):
        load_run(tmp_path)


def test_position_is_derived_when_absent(run_dirs, tmp_path):
    (tmp_path / "results.json").write_text((run_dirs[0] / "results.json").read_text())
    lines = [json.loads(x) for x in (run_dirs[0] / "scores.jsonl").read_text().splitlines()]
    for line in lines:
        del line["position"]
    (tmp_path / "scores.jsonl").write_text("".join(json.dumps(x) + "\n" for x in reversed(lines)))
    original = {(t.dialogue_id, t.turn_index): t.position for t in load_run(run_dirs[0]).turns}
    derived = {(t.dialogue_id, t.turn_index): t.position for t in load_run(tmp_path).turns}
    assert derived == original


# ------------------------------------------------------------------------------------ Table 1 numbers


def test_table_values_equal_results_json(run_dirs):
    runs = [load_run(d) for d in run_dirs]
    table = table1_data(runs)
    assert table["metrics"][: len(METRICS)] == list(METRICS)
    assert len(table["runs"]) == len(runs)
    for row in table["runs"]:
        results = json.loads((Path(row["path"]) / "results.json").read_text())
        assert row["simulator"] == results["simulator"]
        # results.json counted the real turns without a label as failed scorings; the table tells them apart.
        scoring, no_label = results["failures"]["scoring"], row["no_label"]
        assert row["failures"]["simulation"] == results["failures"]["simulation"]
        assert {m: row["failures"]["scoring"][m] + no_label.get(m, 0) for m in scoring} == scoring
        assert no_label["correctness"] == no_label["errors"] > 0 and row["failures"]["scoring"]["correctness"] == 0
        assert row["metrics"]["correctness"]["no_label"] == no_label["correctness"]
        assert row["metrics"]["knowledge"]["failures"] == scoring["knowledge"] > 0
        for name, entry in results["metrics"].items():
            got = row["metrics"][name]
            assert (got["mean"], got["std"], got["n"], got["ci95"]) == (
                entry["mean"], entry["std"], entry["n"], entry["ci95"])
        assert row["metrics"]["knowledge"]["qwk"] == results["metrics"]["knowledge"]["qwk"]
    published = table["published"]
    assert "not reproduced" in published["note"]
    assert [r["method"] for r in published["rows"]] == [r.method for r in TABLE1]
    assert published["rows"][3]["metrics"]["acts"] == 0.6840  # DPO 8B, as printed in the paper
    json.dumps(table)  # plain data


def test_page_table_shows_the_numbers(run_dirs, page):
    for d in run_dirs:
        results = json.loads((d / "results.json").read_text())
        row = re.search(rf'<tr data-kind="run" data-run="{re.escape(d.name)}">(.*?)</tr>', page, re.S)
        assert row, d.name
        for entry in results["metrics"].values():
            assert f"{entry['mean']:.4f}" in row.group(1)
            assert f"n={entry['n']:,}" in row.group(1)
            lo, hi = entry["ci95"]
            assert f"{lo:.3f}–{hi:.3f}" in row.group(1)
    assert page.count('data-kind="run"') == 3
    assert page.count('data-kind="published"') == len(TABLE1)
    assert "Published (not reproduced here)" in page
    assert "<caption>" in page and "<title>Three simulators</title>" in page


# -------------------------------------------------------------------------------------- leaderboard


def test_leaderboard_orders_by_mean_rank():
    a = _run("a", {"acts": 0.9, "cosine": 0.5, "rouge_l": 0.30})   # ranks 1, 3, 2   -> 2.0
    b = _run("b", {"acts": 0.8, "cosine": 0.7, "rouge_l": 0.35})   # ranks 2, 1, 1   -> 1.33
    c = _run("c", {"acts": 0.7, "cosine": 0.6, "rouge_l": 0.10})   # ranks 3, 2, 3   -> 2.67
    ranked = rank_runs([a, c, b])
    assert [r.run.simulator for r in ranked] == ["b", "a", "c"]
    assert [r.rank for r in ranked] == [1, 2, 3]
    assert ranked[0].mean_rank == pytest.approx(4 / 3)
    assert ranked[0].best == {"cosine", "rouge_l"} and ranked[1].best == {"acts"} and not ranked[2].best


def test_leaderboard_ties_and_a_column_some_runs_lack():
    # Tied means share the average place; a column that not every run reports is not ranked.
    a = _run("a", {"acts": 0.5, "cosine": 0.9})
    b = _run("b", {"acts": 0.5, "cosine": None})
    c = _run("c", {"acts": 0.4})
    ranked = {r.run.simulator: r for r in rank_runs([a, b, c])}
    assert ranked["a"].ranks == {"acts": 1.5} and ranked["b"].ranks == {"acts": 1.5}
    assert ranked["c"].ranks == {"acts": 3.0}
    assert [r.run.simulator for r in rank_runs([c, b, a])] == ["a", "b", "c"]
    assert ranked["a"].rank == ranked["b"].rank == 1 and ranked["c"].rank == 3
    # "best" needs two runs reporting the column: only a has cosine
    assert ranked["a"].best == {"acts"} and ranked["b"].best == {"acts"} and not ranked["c"].best
    assert ranked_columns([a, b, c]).note() == "Ranked on the metric every ranked run reports: Acts."


def test_the_leaderboard_never_ranks_a_run_first_on_a_metric_it_lacks():
    """The first-ten-minutes flow (docs/getting-started/first-ten-minutes.md): the floor scored on ROUGE-L alone, the student on every
    metric and below the floor on ROUGE-L. Ranked on what they share (ROUGE-L), the floor is first;
    before, the student's six other columns (where the floor, lacking them, ranked last) put it first."""
    floor = _run("reference:previous-turn", {"rouge_l": 0.046})
    sft = _run("tiny-student-sft", {"acts": 0.4, "correctness": 0.5, "errors": 0.1, "knowledge": 0.6,
                                    "cosine": 0.3, "rouge_l": 0.018, "tutor_response": 0.2})
    ranked = rank_runs([sft, floor])
    assert [(r.run.simulator, r.rank) for r in ranked] == [("reference:previous-turn", 1), ("tiny-student-sft", 2)]
    assert ranked_columns([sft, floor]).columns == ("rouge_l",)
    table = table1_data([sft, floor])
    assert table["ranked_on"] == ["rouge_l"]
    assert table["ranking_note"] == "Ranked on the metric every ranked run reports: ROUGE-L."


def test_runs_that_share_no_metric_are_listed_unranked_with_the_reason():
    a = _run("a", {"acts": 0.5})
    b = _run("b", {"acts": 0.7, "cosine": 0.2})
    c = _run("c", {"rouge_l": 0.9})
    none = _run("none", {"acts": None})
    ranked = {r.run.simulator: r for r in rank_runs([a, b, c, none])}
    assert (ranked["b"].rank, ranked["a"].rank) == (1, 2)  # on Acts, the most widely reported metric
    assert ranked["c"].rank is None and ranked["c"].unranked == "it does not report Acts, which the ranked runs share"
    assert ranked["none"].rank is None and ranked["none"].unranked == "it reports no metric"
    assert [r.run.simulator for r in rank_runs([c, none, a, b])][:2] == ["b", "a"]
    names = {id(r): r.simulator for r in (a, b, c, none)}
    assert ranked_columns([a, b, c, none]).note(names) == (
        "Ranked on the metric every ranked run reports: Acts. Unranked: c: it does not report Acts, which the "
        "ranked runs share; none: it reports no metric.")
    lone = rank_runs([_run("x", {"acts": 0.5}), _run("y", {"cosine": 0.5})])
    assert [r.rank for r in lone] == [None, None] and all(r.unranked for r in lone)


def test_the_leaderboard_and_compare_agree_on_a_shared_metric(tmp_path):
    """Two runs of the same data, one scored on ROUGE-L alone: the leaderboard's order is the sign of
    `simhub compare`'s paired difference on that metric."""
    from simhub.evaluation.runs import compare_runs

    dialogues = _dialogues(20, seed=3)
    floor = make_run_dir(tmp_path, "floor", dialogues, seed=1, preset=PRESETS["DPO 8B (simhub)"])
    sft = make_run_dir(tmp_path, "sft", dialogues, seed=2, preset=PRESETS["Zero-Shot gpt-4.1"])
    keep_only(floor, ["rouge_l"])
    ranked = rank_runs([load_run(sft), load_run(floor)])
    diff = compare_runs(floor, sft, n_resamples=200)["metrics"]["rouge_l"]["diff"]
    assert list(compare_runs(floor, sft, n_resamples=200)["metrics"]) == ["rouge_l"]
    assert (ranked[0].run.simulator == "floor") == (diff > 0)
    assert ranked[0].run.simulator == "floor" and ranked[1].rank == 2


def test_leaderboard_equal_scores_share_a_place_and_sort_by_name():
    ranked = rank_runs([_run("z", {"acts": 0.5}), _run("m", {"acts": 0.5}), _run("none", {"acts": None})])
    assert [(r.run.simulator, r.rank) for r in ranked] == [("m", 1), ("z", 1), ("none", None)]
    assert ranked[2].mean_rank is None and ranked[2].unranked == "it reports no metric"


def test_single_run_marks_no_best():
    (entry,) = rank_runs([_run("only", {"acts": 0.5, "cosine": 0.4})])
    assert entry.rank == 1 and not entry.best


def test_page_leaderboard_matches_rule(run_dirs, page):
    table = table1_data([load_run(d) for d in run_dirs])
    order = re.findall(r'<tr data-kind="run" data-run="([^"]+)">', page)
    assert order == [row["run"] for row in table["runs"]]
    means = [row["mean_rank"] for row in table["runs"]]
    assert means == sorted(means)
    assert "mean rank" in RANKING_RULE and "Leaderboard" in page
    # one line above the table says what the runs were ranked on
    assert page.index('id="ranking-note"') < page.index('<table id="table1"')
    assert "Ranked on the metrics every ranked run reports: Acts, " in page
    assert page.count('<span class="badge">best</span>') == len(METRICS)  # no ties in random data


# ------------------------------------------------------------------------------------ HTML safety


def test_hostile_names_and_texts_are_escaped(tmp_path):
    hostile = '<script>alert("x")</script> & $\\frac{1}{0}$ _hidden'
    dialogues = _dialogues(4, seed=3)
    dialogues[0]["turns"][0]["text"] = "<img src=x onerror=alert(1)>"
    run = make_run_dir(tmp_path / "runs", hostile, dialogues, seed=1, profile="<b>bold</b>")
    lines = (run / "scores.jsonl").read_text().splitlines()
    first = json.loads(lines[0]) | {"candidate": "</dd><script>evil()</script>"}
    (run / "scores.jsonl").write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    page = write_report([run], tmp_path / "r.html").read_text()
    assert "<script" not in page and "<img" not in page and "<b>bold" not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp;" in page
    assert "&lt;/dd&gt;&lt;script&gt;evil()&lt;/script&gt;" in page
    assert "&lt;b&gt;bold&lt;/b&gt;" in page
    # every figure still rendered (mathtext in the name did not break matplotlib)
    assert page.count("<svg ") == len(TURN_FIGURES)


_REMOTE = [
    re.compile(r"""\b(?:src|href|action|poster|data)\s*=\s*["']?\s*(?:https?:)?//""", re.I),
    re.compile(r"@import", re.I),
    re.compile(r"""url\(\s*["']?\s*(?:https?:)?//""", re.I),
    re.compile(r"<(?:script|link|iframe|object|embed)\b", re.I),
]


def test_page_references_no_remote_resource(page):
    for pattern in _REMOTE:
        assert not pattern.search(page), pattern.pattern


def test_every_figure_is_present_with_an_svg(page):
    for spec in TURN_FIGURES:
        match = re.search(rf'<figure id="{spec.id}">(.*?)</figure>', page, re.S)
        assert match, spec.id
        assert "<svg " in match.group(1) and "<figcaption>" in match.group(1)
    assert {"fig-acts", "fig-correctness", "fig-position", "fig-length"} <= {s.id for s in TURN_FIGURES}


def test_ids_are_unique(page):
    ids = re.findall(r'\sid="([^"]+)"', page)
    assert len(ids) == len(set(ids))


def test_dialogue_level_section_when_present(page):
    assert 'id="dialogue-table"' in page and "acts_jsd" in page and "detect_auroc" in page
    section = re.search(r'<section id="dialogue-level".*?</section>', page, re.S).group(0)
    for spec in DIALOGUE_FIGURES:
        body = re.search(rf'<figure id="{spec.id}">(.*?)</figure>', section, re.S).group(1)
        assert "<svg " in body, spec.id
    assert {"fig-dialogue-acts", "fig-dialogue-length", "fig-mastery"} == {s.id for s in DIALOGUE_FIGURES}
    # Failures are counted next to every aggregate; the between-sample SD is shown where there is one.
    assert section.count("2 failed rollouts left out") == 2 * 2  # two metrics, two runs with dialogue results
    assert "between-sample SD 0.013" in section  # 0.0125, as the section rounds it
    # One real series for the runs on the same real file: the legend names it once per figure.
    acts = re.search(r'<figure id="fig-dialogue-acts">(.*?)</figure>', section, re.S).group(1)
    assert acts.count("Real (n=26)") == 1


def test_eval_dialogues_output_keeps_a_turn_level_run(tmp_path):
    # eval-dialogues --output may name an eval run directory: its results.json stays, and the report shows both.
    run = make_run_dir(tmp_path / "runs", "student", _dialogues(4, seed=5), seed=2)
    before = (run / "results.json").read_bytes()
    results = {"metrics": {"acts_jsd": {"value": 0.25, "ci95": [0.1, 0.4], "n": 4}}, "failed_rollouts": 0,
               "figures": {"acts": {"real": {"Focus": 3}, "sim": {"Focus": 1, "Telling": 2}}}}
    written = write_results(results, run, {"kind": "dialogue-level", "real": "real.jsonl", "simulator": "student"})
    assert written == run / "dialogue_results.json"
    assert (run / "results.json").read_bytes() == before
    loaded = load_run(run)
    assert loaded.metrics and loaded.turns and loaded.dialogue_results.metrics["acts_jsd"].value == 0.25
    page = render_report([loaded])
    assert 'id="dialogue-table"' in page and '<figure id="fig-dialogue-acts"><svg' in page
    # The figures without data say so, in their caption's place, instead of drawing an empty axis.
    assert re.search(r'<figure id="fig-mastery" class="empty"><figcaption><strong>[^<]+</strong> No run in this '
                     r'report has the data for this figure.</figcaption></figure>', page)


def test_dialogue_only_folder_is_a_report_run(tmp_path):
    out = tmp_path / "dl"
    results = {"metrics": {"detect_auroc": {"value": 0.75, "ci95": [0.6, 0.9], "n": 5},
                           "tutor_sensitivity": {"value": 0.25, "ci95": None, "n": 5},
                           "pi_calibrated": {"value": 0.4, "ci95": None, "n": 5}},
               "details": {"tutor_sensitivity": {"real_delta": 0.5, "sim_delta": 0.25},
                           "pi_calibrated": {"pi": 0.3, "tie_rate": 0.125, "hh": 0.55, "pp": 0.2}},
               "real_dialogues": 5, "failed_rollouts": 1, "figures": {"lengths": {"real": [1, 2, 3], "sim": [10, 20]}}}
    write_results(results, out, {"kind": "dialogue-level", "real": "real.jsonl", "simulator": "s1", "profile": "demo"})
    assert json.loads((out / "dialogue_results.json").read_text())["metrics"]["detect_auroc"]["value"] == 0.75
    assert not (out / "results.json").exists()  # one file: the report reads it alone
    run = load_run(out)
    assert run.simulator == "s1" and run.profile == "demo" and not run.metrics and run.turns == ()
    assert run.failures.simulation == 1 and run.data.dialogues == 5
    page = render_report([run])
    assert "0.7500" in page and '<figure id="fig-dialogue-length"><svg' in page
    assert "Δ real 0.500, simulated 0.250" in page and "PI 0.300 · ties 0.125 · HH 0.550, PP 0.200" in page
    # A rerun replaces its dialogue-level results.
    write_results({**results, "metrics": {"detect_auroc": {"value": 0.5, "ci95": None, "n": 5}}}, out,
                  {"kind": "dialogue-level"})
    assert json.loads((out / "dialogue_results.json").read_text())["metrics"]["detect_auroc"]["value"] == 0.5


def test_provenance(run_dirs, page):
    assert page.count(_DATA_SHA) == len(run_dirs)
    assert "data/eedi-test.jsonl" in page and "evaluated set" in page and "2026-12-01T10:00:00+00:00" in page


def test_page_is_small(run_dirs, page):
    # Three runs over 30 dialogues; figures are aggregates, so this does not grow with the turns.
    assert len(page.encode()) < 400_000


def test_without_dialogue_results_or_details(tmp_path):
    run = make_run_dir(tmp_path / "runs", "bare", _dialogues(3, seed=5), seed=2)
    lines = [json.loads(x) | {"details": {}} for x in (run / "scores.jsonl").read_text().splitlines()]
    (run / "scores.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    page = render_report([load_run(run)])
    assert "dialogue-table" not in page and "Results." in page
    for figure_id in ("fig-acts", "fig-correctness"):
        body = re.search(rf'<figure id="{figure_id}" class="empty">(.*?)</figure>', page, re.S).group(1)
        assert "<svg" not in body and "No run" in body
    assert '<figure id="fig-position"><svg' in page


def test_output_directory_and_atomic_write(run_dirs, tmp_path):
    out = write_report(run_dirs[:1], tmp_path)
    assert out == tmp_path / "report.html" and out.read_text().startswith("<!DOCTYPE html>")
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]  # no temporary file left


def test_missing_matplotlib_names_the_extra(run_dirs, tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(MissingExtraError, match=r"pip install 'simhub\[report\]'"):
        write_report(run_dirs, tmp_path / "r.html")
    assert not (tmp_path / "r.html").exists()


def test_runs_on_different_data_and_a_plugin_metric(tmp_path):
    # Two data files: one "real" series each. A metric outside the paper's seven gets a column
    # and a by-position panel, after the paper's.
    first = make_run_dir(tmp_path / "a", "sim", _dialogues(5, seed=1), seed=1)
    second = make_run_dir(tmp_path / "b", "sim", _dialogues(6, seed=2), seed=2, profile="demo")
    results = json.loads((second / "results.json").read_text())
    results["data"] |= {"path": "data/other.jsonl", "sha256": "ab" * 32}
    results["metrics"]["helpfulness"] = {"mean": 0.5, "std": 0.1, "n": 10, "ci95": [0.4, 0.6]}
    (second / "results.json").write_text(json.dumps(results))
    lines = [json.loads(x) for x in (second / "scores.jsonl").read_text().splitlines()]
    for line in lines:
        line["scores"]["helpfulness"] = 0.5
    (second / "scores.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    runs = [load_run(first), load_run(second)]
    table = table1_data(runs)
    assert table["metrics"] == [*METRICS, "helpfulness"]
    assert {row["name"] for row in table["runs"]} == {"sim · paper-8b", "sim · demo"}
    page = render_report(runs)
    assert "Real · eedi-test.jsonl" in page and "Real · other.jsonl" in page
    assert ">helpfulness ↑</th>" in page and "helpfulness</text>" in page


# ------------------------------------------------------------------------------ null values, figures


def test_missing_labels_are_told_apart_from_failures():
    # The metrics' own wording of a missing label, and reasons that are not one.
    assert is_missing_label(NO_LABEL) and is_missing_label(NO_ACT_LABEL)
    for reason in (REAL_NA, "judge request failed: ReadTimeout", "failed: RuntimeError: CUDA out of memory"):
        assert not is_missing_label(reason), reason


def test_no_label_is_grey_and_failures_stay_red(run_dirs, page):
    run = load_run(run_dirs[0])
    counts = null_counts(run)
    assert counts["correctness"].no_label > 0 and counts["correctness"].failed == 0 and counts["knowledge"].failed > 0
    row = re.search(rf'<tr data-kind="run" data-run="{re.escape(run.name)}">(.*?)</tr>', page, re.S).group(1)
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
    correctness, knowledge = cells[2 + METRICS.index("correctness")], cells[2 + METRICS.index("knowledge")]
    assert '<span class="sub nolabel"' in correctness and f"{counts['correctness'].no_label} no label" in correctness
    assert "not scored" not in correctness and "warn" not in correctness
    assert 'class="sub warn"' in knowledge and f"{counts['knowledge'].failed} not scored" in knowledge
    assert ".nolabel, .reason { color: var(--muted); }" in page


def test_runs_whose_turns_record_no_reasons_keep_the_results_json_count(tmp_path):
    run_dir = make_run_dir(tmp_path / "runs", "old", _dialogues(6, seed=3), seed=4)
    lines = [json.loads(x) for x in (run_dir / "scores.jsonl").read_text().splitlines()]
    for line in lines:
        line.get("details", {}).pop("null_reasons", None)
    (run_dir / "scores.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    run = load_run(run_dir)
    assert {m: c.failed for m, c in null_counts(run).items()} == {m: n for m, n in run.failures.scoring.items() if n}


def test_dialogue_null_values_give_their_reason(tmp_path):
    runs = []
    for name, extra in (("new", {"null_reasons": {"correctness_rate_diff": "no correctness labels: needs a judge "
                                                  "endpoint"}}),
                        ("old", {"details": {"tutor_sensitivity": {"error": "sim helpful: no outcome"}}}),
                        ("bare", {})):
        results = {"metrics": {"correctness_rate_diff": {"value": None, "ci95": None, "n": 4},
                               "tutor_sensitivity": {"value": None, "ci95": None, "n": 4}}, **extra}
        write_results(results, tmp_path / name, {"kind": "dialogue-level", "real": "real.jsonl", "simulator": name})
        runs.append(load_run(tmp_path / name))
    table = re.search(r'<table id="dialogue-table">.*?</table>', render_report(runs), re.S).group(0)
    reasons = re.findall(r'<span class="sub reason">(.*?)</span>', table)
    assert reasons.count("no value; this file records no reason") == 4  # of six cells
    assert "no correctness labels: needs a judge endpoint" in reasons and "sim helpful: no outcome" in reasons


def test_title_names_every_run(tmp_path):
    names = ["sim-a", "sim-b", "sim-c", "sim-d", "sim-e", "sim-f"]
    dialogues = _dialogues(4, seed=3)
    runs = [load_run(make_run_dir(tmp_path, n, dialogues, seed=i)) for i, n in enumerate(names)]
    page = render_report(runs)
    title = re.search(r"<h1>(.*?)</h1>", page).group(1)
    assert all(n in title for n in names) and "…" not in title


def _drawn(spec_id: str, runs):
    """The figure ``spec_id`` drawn for ``runs`` on an Agg canvas, with its renderer."""
    import matplotlib as mpl
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from simhub.evaluation.figures import _RC

    (spec,) = [s for s in (*TURN_FIGURES, *DIALOGUE_FIGURES) if s.id == spec_id]
    with mpl.rc_context(_RC):
        fig = spec.draw(report_context(rank_runs(runs)))
        canvas = FigureCanvasAgg(fig)
        canvas.draw()
    return fig, canvas.get_renderer()


def test_act_legends_are_outside_the_bars(run_dirs, tmp_path):
    # The dialogue-level act mix of the demo: one category holds every turn, so its bars reach 100%.
    for figure_id in ("fig-acts", "fig-dialogue-acts"):
        fig, renderer = _drawn(figure_id, [load_run(d) for d in run_dirs])
        (ax,) = fig.axes
        (legend,) = fig.legends
        box = legend.get_window_extent(renderer)
        assert not ax.get_legend() and box.y0 >= ax.get_window_extent(renderer).y1 - 1, figure_id
        assert not any(box.overlaps(bar.get_window_extent(renderer)) for bar in ax.patches), figure_id


def test_coinciding_lines_stay_visible(tmp_path):
    # Two runs with the same candidates: every mean coincides.
    dialogues = _dialogues(6, seed=3)
    runs = [load_run(make_run_dir(tmp_path / name, "same", dialogues, seed=1, profile=name)) for name in ("p1", "p2")]
    fig, _ = _drawn("fig-position", runs)
    tutor = next(ax for ax in fig.axes if ax.get_title() == "Tutor resp.")
    first, second = tutor.get_lines()
    assert list(first.get_ydata()) == list(second.get_ydata())  # the same values...
    assert all(a != b for a, b in zip(first.get_xdata(), second.get_xdata(), strict=True))  # ...side by side
    assert first.get_marker() != second.get_marker()


def test_the_length_reference_is_visible_under_a_run_that_matches_it(run_dirs):
    fig, _ = _drawn("fig-length", [load_run(d) for d in run_dirs])
    cond = next(ax for ax in fig.axes if ax.get_title() == "Simulated length by real length")
    (reference,) = [line for line in cond.get_lines() if line.get_label() == "same length as real"]
    runs = [line for line in cond.get_lines() if line is not reference]
    assert reference.get_linewidth() > 2 * max(line.get_linewidth() for line in runs)  # wider: it shows around them
    assert reference.get_zorder() < min(line.get_zorder() for line in runs) and reference.get_marker() == "s"
