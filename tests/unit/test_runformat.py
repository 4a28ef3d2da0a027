"""The run-directory files as versioned structs (simhub.runformat): what the writers write, the checked
readers read back; files written before versioning (no ``schema_version``: version 0) are read; a
version this simhub does not read is refused with a message naming the file, its version and the
versions read; a malformed field is named by its path. ``compare`` and ``publish`` read through them."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from simhub.errors import DataError
from simhub.evaluation.rundir import load_run
from simhub.evaluation.runs import compare_runs
from simhub.runformat import (
    RUN_FORMAT_VERSION,
    DataInfo,
    DialogueLevelResults,
    DialogueMetric,
    EvalResults,
    Failures,
    MetricSummary,
    ScoreLine,
    check_version,
    read_dialogue_results,
    read_eval_results,
    read_scores,
    write_dialogue_results,
    write_eval_results,
    write_scores,
)

SHA = "ab12" * 16

# ------------------------------------------------------------------- files as simhub wrote them before


def _v0_results(simulator: str = "sft", mean: float = 0.5) -> dict:
    """results.json as simhub eval wrote it before versioning (the same layout, no schema_version)."""
    return {
        "simulator": simulator, "profile": "demo",
        "data": {"path": "data/test.jsonl", "sha256": SHA, "dialogues": 2, "turns": 4, "test_subsample": 0.5},
        "metrics": {
            "rouge_l": {"mean": mean, "std": 0.125, "n": 4, "ci95": [mean - 0.1, mean + 0.1], "nulls": 0},
            "knowledge": {"mean": None, "std": None, "n": 0, "ci95": None, "nulls": 4, "qwk": 0.25,
                          "cutoff_source": "evaluated set"},
        },
        "failures": {"simulation": 1, "scoring": {"rouge_l": 0, "knowledge": 0}},
        "config": {"simulator": {"kind": "reference"}, "sampling": "the simulator's default",
                   "bootstrap": {"resamples": 100, "seed": 0, "unit": "dialogue"}},
        "simhub_version": "0.2.0", "created": "2026-01-01T00:00:00+00:00",
    }


def _v0_scores(offset: float = 0.0) -> list[dict]:
    lines = []
    for d in ("d1", "d2"):
        for position, turn in enumerate((1, 3)):
            lines.append({"dialogue_id": d, "turn_index": turn, "position": position, "real": "8/5",
                          "candidate": "5/8", "scores": {"rouge_l": 0.25 + offset + position / 4, "knowledge": None},
                          "details": {"null_reasons": {"knowledge": "first student turn"}}})
    lines[-1] = {**lines[-1], "candidate": None, "scores": {"rouge_l": None, "knowledge": None}, "details": {},
                 "error": "simulation failed: HTTP 503"}
    return lines


def _v0_dialogue_results() -> dict:
    return {"kind": "dialogue-level", "real": "data/test.jsonl", "sim": "runs/roll", "profile": "demo",
            "simulator": "sft", "tutor": "tiny-tutor",
            "metrics": {"acts_jsd": {"value": 0.125, "ci95": [0.05, 0.2], "n": 2},
                        "correctness_rate_diff": {"value": None, "ci95": None, "n": 2}},
            "null_reasons": {"correctness_rate_diff": "no correctness labels"}, "details": {},
            "stability_sd": {}, "failed_rollouts": 0, "failures": [], "real_dialogues": 2, "sim_dialogues": 2,
            "samples": 1, "bootstrap": {"resamples": 100, "seed": 0, "unit": "real dialogue"},
            "figures": {"acts": {"real": {"Math Answer": 2}, "sim": {"Math Answer": 1}}}}


def _run_dir(root: Path, name: str = "run", *, version: int | None = None, **kwargs) -> Path:
    """A run directory as simhub eval and eval-dialogues wrote it before versioning (or with ``version``)."""
    run = root / name
    run.mkdir(parents=True)
    stamp = {} if version is None else {"schema_version": version}
    (run / "results.json").write_text(json.dumps({**stamp, **_v0_results(**kwargs)}, indent=2))
    (run / "scores.jsonl").write_text("".join(json.dumps({**stamp, **line}) + "\n" for line in _v0_scores()))
    (run / "dialogue_results.json").write_text(json.dumps({**stamp, **_v0_dialogue_results()}, indent=2))
    return run


# ---------------------------------------------------------------------------------------- round trip


def test_results_json_round_trips(tmp_path):
    results = EvalResults(
        simulator="sft", profile="demo",
        data=DataInfo(path="data/test.jsonl", sha256=SHA, dialogues=2, turns=4, test_subsample=0.2),
        metrics={"rouge_l": MetricSummary(0.5, 0.125, 4, (0.4, 0.6), {"nulls": 0}),
                 "knowledge": MetricSummary(None, None, 0, None, {"qwk": 0.25, "cutoff_source": "evaluated set"})},
        failures=Failures(1, {"rouge_l": 0}), config={"bootstrap": {"resamples": 100}},
        simhub_version="0.2.0", created="2026-01-01T00:00:00+00:00")
    written = write_eval_results(tmp_path / "results.json", results)
    assert read_eval_results(tmp_path / "results.json") == results == read_eval_results(tmp_path)
    on_disk = json.loads((tmp_path / "results.json").read_text())
    assert on_disk == written and next(iter(on_disk)) == "schema_version" and on_disk["schema_version"] == 1
    # The metric's extras sit beside its four numbers, as before versioning.
    assert on_disk["metrics"]["knowledge"] == {"mean": None, "std": None, "n": 0, "ci95": None, "qwk": 0.25,
                                               "cutoff_source": "evaluated set"}
    assert {k: v for k, v in on_disk.items() if k != "schema_version"}.keys() == _v0_results().keys()


def test_scores_jsonl_round_trips(tmp_path):
    lines = [ScoreLine(dialogue_id="d1", turn_index=1, position=0, real="8/5", candidate="5/8",
                       scores={"rouge_l": 0.5, "acts": None}, details={"acts": {"predicted": "Math Answer"}}),
             ScoreLine(dialogue_id="d1", turn_index=3, position=1, real="ok", candidate=None,
                       scores={"rouge_l": None, "acts": None}, error="simulation failed: HTTP 503")]
    assert write_scores(tmp_path / "scores.jsonl", lines) == 2
    assert read_scores(tmp_path / "scores.jsonl") == [(1, lines[0]), (2, lines[1])]
    first, second = (json.loads(x) for x in (tmp_path / "scores.jsonl").read_text().splitlines())
    assert first["schema_version"] == second["schema_version"] == RUN_FORMAT_VERSION
    assert "error" not in first and second["error"] == "simulation failed: HTTP 503" and second["candidate"] is None


def test_dialogue_results_round_trip(tmp_path):
    results = DialogueLevelResults(kind="dialogue-level", real="real.jsonl", simulator="sft",
                                   metrics={"acts_jsd": DialogueMetric(0.125, (0.05, 0.2), 2)},
                                   null_reasons={}, failed_rollouts=1, figures={"acts": {"real": {"Focus": 3}}})
    write_dialogue_results(tmp_path / "dialogue_results.json", results)
    assert read_dialogue_results(tmp_path) == results
    assert json.loads((tmp_path / "dialogue_results.json").read_text())["schema_version"] == 1


def test_eval_dialogues_writer_writes_the_struct(tmp_path):
    from simhub.evaluation.dialogue_eval import write_results

    fields = _v0_dialogue_results()
    info = {k: fields.pop(k) for k in ("kind", "real", "sim", "profile", "simulator", "tutor")}
    path = write_results(fields, tmp_path, info)
    written = json.loads(path.read_text())
    assert written == {"schema_version": 1, **_v0_dialogue_results()}
    assert list(written) == ["schema_version", *_v0_dialogue_results()]  # the order of before, versioned first


# ----------------------------------------------------------------------- version 0: before versioning


def test_a_run_written_before_versioning_is_read(tmp_path):
    run = load_run(_run_dir(tmp_path))
    assert read_eval_results(tmp_path / "run").schema_version == 0
    assert run.simulator == "sft" and run.data.sha256 == SHA and run.data.test_subsample == 0.5
    assert run.metrics["rouge_l"].ci95 == (0.4, 0.6) and run.metrics["knowledge"].extra["qwk"] == 0.25
    assert run.failures.simulation == 1 and run.config["bootstrap"]["resamples"] == 100
    assert [(t.dialogue_id, t.turn_index, t.position) for t in run.turns] == [
        ("d1", 1, 0), ("d1", 3, 1), ("d2", 1, 0), ("d2", 3, 1)]
    assert run.turns[-1].error == "simulation failed: HTTP 503" and run.turns[0].error is None
    assert run.dialogue_results.metrics["acts_jsd"].ci95 == (0.05, 0.2)
    assert run.dialogue_results.raw["null_reasons"] == {"correctness_rate_diff": "no correctness labels"}


def test_version_0_and_version_1_read_alike(tmp_path):
    old, new = load_run(_run_dir(tmp_path, "old")), load_run(_run_dir(tmp_path, "new", version=1))
    assert (old.metrics, old.data, old.failures, old.turns) == (new.metrics, new.data, new.failures, new.turns)
    assert old.dialogue_results.metrics == new.dialogue_results.metrics


def test_nan_written_by_pythons_json_still_reads_as_null(tmp_path):
    run = _run_dir(tmp_path)
    results = _v0_results()
    results["metrics"]["rouge_l"]["std"] = float("nan")
    (run / "results.json").write_text(json.dumps(results))
    assert "NaN" in (run / "results.json").read_text()
    assert load_run(run).metrics["rouge_l"].std is None


# ------------------------------------------------------------------------------- another version: refused


@pytest.mark.parametrize("name", ["results.json", "scores.jsonl", "dialogue_results.json"])
def test_a_newer_version_is_refused_naming_file_and_versions(tmp_path, name):
    run = _run_dir(tmp_path)
    file = run / name
    if name == "scores.jsonl":
        lines = file.read_text().splitlines()
        lines[1] = json.dumps({"schema_version": 99, **json.loads(lines[1])})
        file.write_text("\n".join(lines) + "\n")
    else:
        file.write_text(json.dumps({"schema_version": 99, **json.loads(file.read_text())}))
    with pytest.raises(DataError) as info:
        load_run(run)
    message = str(info.value)
    where = f"{file}:2" if name == "scores.jsonl" else str(file)
    assert message.startswith(f"{where}: schema_version 99 is newer than this simhub reads (0 and 1;")
    assert "upgrade simhub" in message and info.value.field == "schema_version" and info.value.file == str(file)


@pytest.mark.parametrize("version", ["1", -1, True, 1.5])
def test_an_unknown_version_is_refused(tmp_path, version):
    (tmp_path / "results.json").write_text(json.dumps({"schema_version": version, **_v0_results()}))
    with pytest.raises(DataError) as info:
        read_eval_results(tmp_path)
    assert str(info.value).startswith(
        f"{tmp_path / 'results.json'}: schema_version {version!r} is not one this simhub reads (0 and 1;")


def test_a_trace_names_its_version_the_same_way():
    with pytest.raises(DataError, match=r"^t\.json: trace schema_version 2 is newer than this simhub reads \(1\)"):
        check_version(2, (1,), "t.json", what="trace ")
    with pytest.raises(DataError, match=r"^t\.json: trace has no schema_version \(this simhub reads 1\)"):
        check_version(None, (1,), "t.json", what="trace ")
    assert check_version(None, (0, 1), "r.json") == 0 and check_version(1, (0, 1), "r.json") == 1


# ---------------------------------------------------------------------------------- malformed fields


@pytest.mark.parametrize(("change", "field", "message"), [
    (lambda r: r["metrics"]["rouge_l"].update(ci95=[0.1, "high"]), "metrics.rouge_l.ci95[1]", "expected a number"),
    (lambda r: r["metrics"]["knowledge"].update(n=-3), "metrics.knowledge.n", "expected an integer >= 0"),
    (lambda r: r["failures"]["scoring"].update(knowledge="2"), "failures.scoring.knowledge", "expected an integer"),
    (lambda r: r["data"].update(rows=4), "data.rows", "unknown field"),
    (lambda r: r.pop("simulator"), "simulator", "missing"),
    (lambda r: r.update(simulator=""), "simulator", "expected a string of length >= 1"),
])
def test_a_malformed_results_field_is_named_by_its_path(tmp_path, change, field, message):
    results = _v0_results()
    change(results)
    (tmp_path / "results.json").write_text(json.dumps(results))
    with pytest.raises(DataError) as info:
        read_eval_results(tmp_path)
    assert str(info.value).startswith(f"{tmp_path / 'results.json'}: {field}: {message}")
    assert str(info.value).endswith("(read as schema_version 0)") and info.value.field == field


def test_a_malformed_scores_line_names_line_and_path(tmp_path):
    run = _run_dir(tmp_path, version=1)
    lines = _v0_scores()
    lines[2]["details"] = ["not", "an", "object"]
    (run / "scores.jsonl").write_text("".join(json.dumps({"schema_version": 1, **x}) + "\n" for x in lines))
    with pytest.raises(DataError, match=r"scores\.jsonl:3: details: expected a JSON object, got an array "
                                        r"\(schema_version 1\)") as info:
        load_run(run)
    assert info.value.row == 3 and info.value.field == "details"


def test_a_malformed_dialogue_metric_names_its_path(tmp_path):
    run = _run_dir(tmp_path)
    results = _v0_dialogue_results()
    results["metrics"]["correctness_rate_diff"]["value"] = "n/a"
    (run / "dialogue_results.json").write_text(json.dumps(results))
    with pytest.raises(DataError, match=r"dialogue_results\.json: metrics\.correctness_rate_diff\.value: "
                                        r"expected a number or null, got a string"):
        load_run(run)


# ------------------------------------------------------------------------ compare and publish read them


def test_compare_reads_old_and_new_runs_and_refuses_a_newer_one(tmp_path):
    a, b = _run_dir(tmp_path, "a"), _run_dir(tmp_path, "b", version=1, simulator="dpo")
    result = compare_runs(a, b, n_resamples=100)
    assert result["b"]["simulator"] == "dpo" and result["data"] == {
        "path": "data/test.jsonl", "sha256": SHA, "dialogues": 2, "turns": 4}
    assert result["metrics"]["rouge_l"]["n"] == 3
    c = _run_dir(tmp_path, "c", version=99)
    with pytest.raises(DataError, match="schema_version 99"):
        compare_runs(a, c, n_resamples=100)


def test_publish_reads_runs_through_the_checked_reader(tmp_path):
    from simhub.hub.publish import _runs_table, read_runs, run_model_index

    old, new = _run_dir(tmp_path, "old"), _run_dir(tmp_path, "new", version=1)
    runs = read_runs([str(old), str(new / "results.json")])
    assert runs[0].metrics == runs[1].metrics
    index = run_model_index(runs[0])
    assert index["dataset"] == {"name": "test.jsonl", "type": "Eedi/Question-Anchored-Tutoring-Dialogues-2k",
                                "revision": SHA}
    assert index["metrics"] == [{"type": "rouge_l", "value": 0.5, "name": "rouge_l (simhub realism)",
                                 "args": {"ci95": [0.4, 0.6], "n": 4}}]
    assert "| test.jsonl | rouge_l | 0.5000 | [0.4000, 0.6000] | 4 |" in _runs_table(runs)
    newer = _run_dir(tmp_path, "newer", version=2)
    with pytest.raises(DataError, match=r"results\.json: schema_version 2 is newer"):
        read_runs([str(newer)])
    (newer / "results.json").write_text(json.dumps({**_v0_results(), "metrics": {"rouge_l": {"mean": "high"}}}))
    with pytest.raises(DataError, match=r"metrics\.rouge_l\.mean: expected a number or null"):
        read_runs([str(newer)])


def test_eval_writes_version_1(tmp_path, sample_corpus):
    from simhub.cli import main
    from simhub.schema import write_jsonl

    data = tmp_path / "test.jsonl"
    write_jsonl(data, sample_corpus["test"][:3])
    run = tmp_path / "run"
    profile = str(Path(__file__).resolve().parents[1] / "profiles" / "tiny.yaml")
    assert main(["eval", "--profile", profile, "--simulator", "reference:real", "--metrics", "rouge_l", "--data",
                 str(data), "--output", str(run), "--bootstrap", "100", "--no-cache"]) == 0
    assert read_eval_results(run).schema_version == 1
    assert {line.schema_version for _, line in read_scores(run / "scores.jsonl")} == {1}
    assert msgspec.json.decode((run / "results.json").read_bytes())["metrics"]["rouge_l"]["n"] > 0
    assert load_run(run).metrics["rouge_l"].n > 0
