"""A tutor bench's whole-trace cache: an identical run into another folder copies every finished
trace with no model call and no replay; a change to the rules' code replays the turns instead."""

from __future__ import annotations

from simhub.tutoring.knowsim.bench import TRACES

FAST = ["--extractor", "offline:lexical", "--bootstrap", "300"]


def _bench(tmp_path, folder):
    from simhub.learners.presets import resolve_preset
    from simhub.learners.roleplay import ScriptedLearner
    from simhub.tutoring.knowsim import Bench, BenchOptions, DumpTutor, StepwiseTutor
    from simhub.tutoring.knowsim.components import build_extractor

    return Bench([StepwiseTutor(), DumpTutor()], ScriptedLearner(), build_extractor("offline:lexical", None),
                 resolve_preset("paper"), BenchOptions(cache_dir=str(tmp_path / "cache")), tmp_path / folder)


def _files(folder):
    return {f.name: f.read_bytes() for f in sorted((folder / TRACES).glob("*.json"))}


def test_an_identical_run_copies_whole_traces_and_changed_rules_replay(tmp_path, monkeypatch):
    from simhub.tutoring.knowsim import load_items

    items = load_items("sample", 3)
    first = _bench(tmp_path, "first")
    traces = first.run(items, ["novice", "advanced"])
    assert first.calls["tutor"] > 0 and first.cache_hits == 0
    turns = sum(len(t.turns) for t in traces)

    again = _bench(tmp_path, "again")
    assert again.run(items, ["novice", "advanced"]) == traces
    # One cache answer per conversation: no call, and no turn replayed.
    assert again.calls == {k: 0 for k in again.calls} and again.cache_hits == len(traces) == 12
    assert _files(tmp_path / "again") == _files(tmp_path / "first")

    # Other rule code: the whole traces do not apply; every turn replays from the per-call answers.
    from simhub.tutoring import runner

    monkeypatch.setattr(runner, "rules_digest", lambda modules: "other rules")
    replayed = _bench(tmp_path, "replayed")
    assert replayed.run(items, ["novice", "advanced"]) == traces
    assert replayed.calls == {k: 0 for k in replayed.calls} and replayed.cache_hits == 3 * turns


def test_the_rules_digest_covers_the_update_and_the_bench():
    from simhub.tutoring.knowsim.bench import RULE_MODULES
    from simhub.tutoring.runner import rules_digest

    assert {"simhub.learners.update", "simhub.learners.metrics", "simhub.tutoring.knowsim.bench",
            "simhub.tutoring.runner"} <= set(RULE_MODULES)
    digest = rules_digest(RULE_MODULES)
    assert len(digest) == 64 and rules_digest.__wrapped__(RULE_MODULES) == digest  # recomputed, not cached
    assert rules_digest(RULE_MODULES[:-1]) != digest  # every module counts


def test_no_cache_keeps_no_whole_trace(tmp_path):
    from simhub.cli import main

    base = ["tutor-bench", "--tutor", "scripted:dump", "--n", "1", "--levels", "novice", "--cache-dir",
            str(tmp_path / "cache"), *FAST]
    assert main([*base, "--output", str(tmp_path / "a"), "--no-cache"]) == 0
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").rglob("*.json"))
