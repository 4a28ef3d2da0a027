"""The run-directory files as versioned structs (simhub.runformat): what the writers write, the checked
readers read back; files written before versioning (no ``schema_version``: version 0) are read; a
version this simhub does not read is refused with a message naming the file, its version and the
versions read; a malformed field is named by its path. ``compare`` and ``publish`` read through them.
The same for ``simulations.jsonl`` and a ``simhub rollout`` folder (``rollouts.jsonl``, ``rollout.json``),
whose lines stay dialogues that the dialogue reader reads."""

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
    DialogueStatistic,
    EvalResults,
    Failures,
    MetricSummary,
    RolloutFailure,
    RolloutLine,
    RolloutSummary,
    ScoreLine,
    SimulationLine,
    check_version,
    read_dialogue_results,
    read_eval_results,
    read_rollout_dialogues,
    read_rollout_summary,
    read_scores,
    read_simulations,
    write_dialogue_results,
    write_eval_results,
    write_rollout_dialogues,
    write_scores,
    write_simulations,
)
from simhub.schema import Dialogue, read_jsonl, to_json, write_jsonl

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
                                   metrics={"acts_jsd": DialogueStatistic(0.125, (0.05, 0.2), 2)},
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

    data = tmp_path / "test.jsonl"
    write_jsonl(data, sample_corpus["test"][:3])
    run = tmp_path / "run"
    profile = str(Path(__file__).resolve().parents[1] / "profiles" / "tiny.yaml")
    assert main(["eval", "--profile", profile, "--simulator", "reference:real", "--metrics", "rouge_l", "--data",
                 str(data), "--output", str(run), "--bootstrap", "100", "--no-cache"]) == 0
    assert read_eval_results(run).schema_version == 1
    assert {line.schema_version for _, line in read_scores(run / "scores.jsonl")} == {1}
    assert {line.schema_version for _, line in read_simulations(run)} == {1}
    assert msgspec.json.decode((run / "results.json").read_bytes())["metrics"]["rouge_l"]["n"] > 0
    assert load_run(run).metrics["rouge_l"].n > 0


# ------------------------------------------- simulations.jsonl, rollouts.jsonl, rollout.json (simhub rollout)


def _v0_simulations() -> list[dict]:
    """simulations.jsonl lines as simhub eval and simhub simulate wrote them before versioning."""
    return [{"dialogue_id": "d1", "turn_index": 1, "simulator": "sft", "candidate": "5/8", "finish_reason": "stop",
             "end_of_dialogue": False},
            {"dialogue_id": "d1", "turn_index": 3, "simulator": "sft", "candidate": "bye <end>",
             "finish_reason": "length", "end_of_dialogue": True},
            {"dialogue_id": "d2", "turn_index": 1, "simulator": "sft", "candidate": None,
             "error": "HTTP 503 at http://127.0.0.1:9/v1"}]


def _v0_rollouts() -> list[dict]:
    """rollouts.jsonl lines as simhub rollout wrote them before versioning (canonical dialogues)."""
    question = {"text": "What is 3/5 of 10?", "correct_option": "B", "solution": None, "option_explanations": None,
                "solvable": None}
    return [{"id": "d1~0", "question": question, "kcs": ["Fractions"],
             "turns": [{"role": "tutor", "content": "What is 3/5 of 10?"}, {"role": "student", "content": "6"},
                       {"role": "tutor", "content": "Well done. <end>"}],
             "meta": {"real_id": "d1", "sample": 0, "seed": 0, "mode": "free", "simulator": "sft",
                      "tutor": "tiny-tutor", "end": "marker"}},
            {"id": "d1~1", "question": question, "kcs": ["Fractions"],
             "turns": [{"role": "tutor", "content": "What is 3/5 of 10?"}],
             "meta": {"real_id": "d1", "sample": 1, "seed": 0, "mode": "free", "simulator": "sft",
                      "tutor": "tiny-tutor", "end": "failed", "failed": "student: HTTP 503"}}]


def _v0_rollout_summary(*, early: bool = False) -> dict:
    """rollout.json as simhub rollout wrote it before versioning; ``early``: before top_p and
    test_subsample were recorded."""
    info = {"simulator": "sft", "tutor": "tiny-tutor", "profile": "demo", "data": "data/test.jsonl", "mode": "free",
            "samples": 2, "seed": 0, "max_turns": 40, "temperature": 0.6}
    if not early:
        info |= {"top_p": 0.95, "test_subsample": None}
    return {**info, "rollouts": 2, "ends": {"marker": 1, "failed": 1}, "failed": 1,
            "failures": [{"id": "d1~1", "cause": "student: HTTP 503"}], "mean_turns": 2.0}


def _rollout_dir(root: Path, name: str = "roll", *, version: int | None = None, early: bool = False) -> Path:
    """A simhub rollout folder as simhub wrote it before versioning (or with ``version``)."""
    folder = root / name
    folder.mkdir(parents=True)
    stamp = {} if version is None else {"schema_version": version}
    (folder / "rollouts.jsonl").write_text("".join(json.dumps({**stamp, **d}) + "\n" for d in _v0_rollouts()))
    (folder / "rollout.json").write_text(json.dumps({**stamp, **_v0_rollout_summary(early=early)}, indent=2) + "\n")
    return folder


def test_simulations_jsonl_round_trips_in_the_layout_of_before(tmp_path):
    file = tmp_path / "simulations.jsonl"
    assert write_simulations(file, _v0_simulations()) == 3
    on_disk = [json.loads(x) for x in file.read_text().splitlines()]
    assert on_disk == [{"schema_version": 1, **line} for line in _v0_simulations()]
    assert [list(x) for x in on_disk] == [["schema_version", *line] for line in _v0_simulations()]
    lines = read_simulations(tmp_path)
    assert [n for n, _ in lines] == [1, 2, 3] and lines == read_simulations(file)
    ok, ended, failed = (line for _, line in lines)
    assert ok == SimulationLine(dialogue_id="d1", turn_index=1, simulator="sft", candidate="5/8",
                                finish_reason="stop", end_of_dialogue=False)
    assert ended.end_of_dialogue is True and failed.candidate is None and failed.error.startswith("HTTP 503")
    assert write_simulations(tmp_path / "again.jsonl", [line for _, line in lines]) == 3
    assert (tmp_path / "again.jsonl").read_bytes() == file.read_bytes()


def test_simulations_written_before_versioning_are_read(tmp_path):
    write_jsonl(tmp_path / "simulations.jsonl", _v0_simulations())  # the old writer, as it wrote them
    lines = read_simulations(tmp_path)
    assert {line.schema_version for _, line in lines} == {0}
    assert [msgspec.structs.replace(line, schema_version=1) for _, line in lines] == [
        msgspec.convert(x, SimulationLine) for x in _v0_simulations()]


def test_rollouts_round_trip_as_dialogues_with_the_version_in_front(tmp_path, sample_corpus):
    from simhub.evaluation.rollout import write_rollouts

    dialogues = [msgspec.convert(d, Dialogue) for d in _v0_rollouts()]
    info = {k: v for k, v in _v0_rollout_summary().items() if k not in (
        "rollouts", "ends", "failed", "failures", "mean_turns")}
    summary = write_rollouts(dialogues, tmp_path, info)
    # Each line is the dialogue as the dialogue writer writes it, with schema_version as its first key.
    lines = (tmp_path / "rollouts.jsonl").read_bytes().splitlines()
    assert lines == [b'{"schema_version":1,' + to_json(d)[1:] for d in dialogues]
    assert read_rollout_dialogues(tmp_path) == dialogues == read_jsonl(tmp_path / "rollouts.jsonl")
    assert all(type(d) is Dialogue for d in read_jsonl(tmp_path / "rollouts.jsonl"))
    on_disk = json.loads((tmp_path / "rollout.json").read_text())
    assert on_disk == summary == {"schema_version": 1, **_v0_rollout_summary()}
    assert list(on_disk) == ["schema_version", *_v0_rollout_summary()]  # the order of before, versioned first
    assert read_rollout_summary(tmp_path) == read_rollout_summary(tmp_path / "rollout.json") == RolloutSummary(
        simulator="sft", tutor="tiny-tutor", profile="demo", data="data/test.jsonl", mode="free", samples=2, seed=0,
        max_turns=40, temperature=0.6, top_p=0.95, rollouts=2, ends={"marker": 1, "failed": 1}, failed=1,
        failures=[RolloutFailure("d1~1", "student: HTTP 503")], mean_turns=2.0)
    # Other dialogue files, and rollouts of real dialogues, are as before: no version, plain dialogues.
    write_rollouts(sample_corpus["test"][:2], tmp_path / "real", info)
    assert read_jsonl(tmp_path / "real" / "rollouts.jsonl") == sample_corpus["test"][:2]


def test_a_rollouts_file_is_named_as_dialogues_where_score_items_are_wanted(tmp_path):
    from simhub.cli.common import read_score_items

    write_rollout_dialogues(tmp_path / "rollouts.jsonl", [msgspec.convert(d, Dialogue) for d in _v0_rollouts()])
    with pytest.raises(DataError, match="holds dialogues, not score items"):
        read_score_items(str(tmp_path / "rollouts.jsonl"))


def test_a_rollout_line_has_the_fields_of_a_dialogue():
    line, dialogue = msgspec.structs.fields(RolloutLine), msgspec.structs.fields(Dialogue)
    assert line[0].name == "schema_version" and line[0].required
    assert [(f.name, f.type, f.default, f.default_factory) for f in line[1:]] == [
        (f.name, f.type, f.default, f.default_factory) for f in dialogue]
    assert RolloutLine.__struct_config__.omit_defaults == Dialogue.__struct_config__.omit_defaults
    assert RolloutLine.__struct_config__.forbid_unknown_fields


@pytest.mark.parametrize("early", [False, True])
def test_a_rollout_folder_written_before_versioning_is_read(tmp_path, early):
    from simhub.evaluation.dialogue_eval import load_sim

    folder = _rollout_dir(tmp_path, early=early)
    dialogues, info = load_sim(folder)
    assert dialogues == [msgspec.convert(d, Dialogue) for d in _v0_rollouts()] == read_jsonl(folder / "rollouts.jsonl")
    assert dialogues[1].meta["failed"] == "student: HTTP 503"
    assert info["schema_version"] == 0 and info["simulator"] == "sft" and info["tutor"] == "tiny-tutor"
    assert info["top_p"] == (None if early else 0.95) and info["failures"] == [{"id": "d1~1", "cause": "student: HTTP 503"}]
    assert read_rollout_summary(folder).schema_version == 0
    new_dialogues, new_info = load_sim(_rollout_dir(tmp_path, "new", version=1, early=early))
    assert new_dialogues == dialogues and {**new_info, "schema_version": 0} == info
    assert load_sim(folder / "rollouts.jsonl") == (dialogues, {})  # a file: dialogues, no summary


@pytest.mark.parametrize("name", ["simulations.jsonl", "rollouts.jsonl", "rollout.json"])
def test_a_newer_rollout_or_simulation_file_is_refused_naming_file_and_versions(tmp_path, name):
    from simhub.evaluation.dialogue_eval import load_sim

    folder = _rollout_dir(tmp_path)
    write_jsonl(folder / "simulations.jsonl", _v0_simulations())
    file = folder / name
    if name.endswith(".jsonl"):
        lines = file.read_text().splitlines()
        lines[1] = json.dumps({"schema_version": 99, **json.loads(lines[1])})
        file.write_text("\n".join(lines) + "\n")
    else:
        file.write_text(json.dumps({"schema_version": 99, **json.loads(file.read_text())}))
    where = f"{file}:2" if name.endswith(".jsonl") else str(file)
    readers = {"simulations.jsonl": [read_simulations], "rollout.json": [read_rollout_summary, load_sim],
               "rollouts.jsonl": [read_rollout_dialogues, load_sim, lambda _: read_jsonl(file)]}[name]
    for read in readers:
        with pytest.raises(DataError) as info:
            read(folder)
        message = str(info.value)
        assert message.startswith(f"{where}: schema_version 99 is newer than this simhub reads (0 and 1;")
        assert "upgrade simhub" in message and info.value.field == "schema_version" and info.value.file == str(file)


@pytest.mark.parametrize(("name", "change", "field", "message"), [
    ("simulations.jsonl", lambda x: x.update(turn_index="3"), "turn_index", "expected an integer"),
    ("simulations.jsonl", lambda x: x.pop("simulator"), "simulator", "missing"),
    ("simulations.jsonl", lambda x: x.update(logprobs=[]), "logprobs", "unknown field"),
    ("rollouts.jsonl", lambda x: x["turns"][1].update(role="teacher"), "turns[1].role", "invalid enum value"),
    ("rollouts.jsonl", lambda x: x.pop("question"), "question", "missing"),
])
def test_a_malformed_line_names_file_line_and_field(tmp_path, name, change, field, message):
    lines = _v0_simulations() if name == "simulations.jsonl" else _v0_rollouts()
    lines = [{"schema_version": 1, **x} for x in lines]
    change(lines[0] if name == "rollouts.jsonl" else lines[1])
    row = 1 if name == "rollouts.jsonl" else 2
    file = tmp_path / name
    file.write_text("".join(json.dumps(x) + "\n" for x in lines))
    read = read_simulations if name == "simulations.jsonl" else read_rollout_dialogues
    with pytest.raises(DataError) as info:
        read(tmp_path)
    assert str(info.value).startswith(f"{file}:{row}: {field}: {message}")
    assert str(info.value).endswith("(schema_version 1)")
    assert (info.value.file, info.value.row, info.value.field) == (str(file), row, field)


@pytest.mark.parametrize(("change", "field", "message"), [
    (lambda r: r["failures"][0].pop("cause"), "failures[0].cause", "missing"),
    (lambda r: r["ends"].update(marker="1"), "ends.marker", "expected an integer"),
    (lambda r: r.update(rollouts=-1), "rollouts", "expected an integer >= 0"),
    (lambda r: r.update(kind="rollout"), "kind", "unknown field"),
])
def test_a_malformed_rollout_summary_field_is_named_by_its_path(tmp_path, change, field, message):
    summary = _v0_rollout_summary()
    change(summary)
    (tmp_path / "rollout.json").write_text(json.dumps(summary, indent=2))
    with pytest.raises(DataError) as info:
        read_rollout_summary(tmp_path)
    assert str(info.value).startswith(f"{tmp_path / 'rollout.json'}: {field}: {message}")
    assert str(info.value).endswith("(read as schema_version 0)") and info.value.field == field


def test_a_missing_rollout_file_is_named(tmp_path):
    with pytest.raises(DataError, match=r"rollouts\.jsonl: not found; is this a simhub rollout folder\?"):
        read_rollout_dialogues(tmp_path)
    with pytest.raises(DataError, match=r"rollout\.json: not found; is this a simhub rollout folder\?"):
        read_rollout_summary(tmp_path)
