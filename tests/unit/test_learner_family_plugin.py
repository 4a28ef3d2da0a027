"""A third learner family added through the public registry alone: one wing (this module) and one
registry line. It shows in ``simhub tutor-bench`` (its own options, refused for the other families),
runs through the kit's runner (resume, the whole-episode cache), writes the kit's results document,
and renders in ``simhub report`` and ``stability``."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import msgspec
import pytest

from simhub.cli import main
from simhub.simulation.tutor import Tutor, TutorRequest, TutorTurn
from simhub.tutoring import FAMILIES, BenchContext, BenchOutput, Episode, EpisodeBench, LearnerFamily, LearnerName
from simhub.tutoring.report import EpisodeValues, format_leaderboard, summarize_outputs, write_kit_results
from simhub.tutoring.runner import TRACES, safe_name

# ------------------------------------------------------------------------------------------- the wing


class CounterTrace(msgspec.Struct, kw_only=True):
    """One toy episode: the counter learner's value after each tutor turn."""

    kind: str = "toy-counter-trace"
    tutor: str
    item: int
    values: list[int] = msgspec.field(default_factory=list)
    complete: bool = False


class Stepper(Tutor):
    """Says "step" every turn: the counter rises each turn."""

    id = "scripted:stepper"

    def describe(self) -> dict[str, Any]:
        return {"id": self.id, "version": 1}

    def respond(self, requests, sampling) -> list[TutorTurn]:
        return [TutorTurn(text="step") for _ in requests]


class Quiet(Tutor):
    id = "scripted:quiet"

    def describe(self) -> dict[str, Any]:
        return {"id": self.id, "version": 1}

    def respond(self, requests, sampling) -> list[TutorTurn]:
        return [TutorTurn(text="...") for _ in requests]


CALLS = {"tutor": 0}


class CounterBench(EpisodeBench[CounterTrace]):
    """The toy environment: a counter learner that rises by the item's step size when the tutor says "step"."""

    family = "toy"
    rule_modules = (__name__,)
    trace_type = CounterTrace

    def __init__(self, tutors, items: int, turns: int, output: str):
        from simhub.cache import ContentCache
        from simhub.config import cache_root

        self.tutors, self.items, self.turns = tutors, items, turns
        self.output, self.info, self.calls, self.cache_hits = Path(output), {}, {"tutor": 0}, 0
        self.cache = ContentCache(cache_root(None), "toy-bench")

    def settings(self) -> dict[str, Any]:
        return {"learner": "toy", "turns": self.turns}

    def episodes(self) -> list[Episode]:
        return [Episode(t, k, f"{safe_name(t.id)}__{k}.json", [k]) for t in self.tutors for k in range(self.items)]

    def read_trace(self, path: Path) -> CounterTrace:
        return msgspec.json.decode(path.read_bytes(), type=CounterTrace)

    def write_trace(self, path: Path, trace: CounterTrace) -> None:
        path.write_bytes(msgspec.json.encode(trace))

    def finished(self, trace: CounterTrace) -> bool:
        return trace.complete

    def run_all(self, batch: int) -> list[CounterTrace]:
        from simhub.tutoring import Runner

        return Runner(self, batch=batch).run()

    def run_batch(self, batch, save: Callable) -> list[CounterTrace]:
        traces = [CounterTrace(tutor=ep.tutor.id, item=ep.unit) for ep, _ in batch]
        from simhub.models import Sampling
        from simhub.schema import Dialogue, Question

        value = [0] * len(batch)
        for _ in range(self.turns):
            for i, (ep, _) in enumerate(batch):  # one tutor call per episode and turn
                (turn,) = ep.tutor.respond([TutorRequest(Dialogue(id="d", question=Question(text="q"), turns=[]))],
                                           Sampling())
                CALLS["tutor"] += 1
                value[i] += (ep.unit + 1) if turn.text == "step" else 0
                traces[i].values.append(value[i])
        for t in traces:
            t.complete = True
        return traces


class ToyFamily(LearnerFamily):
    name = "toy"
    title = "Toy counter bench"
    forms = ("toy",)
    results_kind = "toy-counter-results"
    outputs = (BenchOutput("gain", "gain", ranked=True, digits=1, description="the counter's final value"),
               BenchOutput("turns_to_two", "turns to 2", higher_is_better=False, digits=1))
    capability = "text"
    scripted: ClassVar[dict[str, Any]] = {"scripted:stepper": Stepper, "scripted:quiet": Quiet}
    tutors_help = "scripted:stepper, scripted:quiet"

    def add_arguments(self, g: argparse._ArgumentGroup) -> None:
        g.add_argument("--toy-turns", type=int, default=3, help="turns per toy episode")

    def _summary(self, traces: list[CounterTrace], args: argparse.Namespace):
        values = [EpisodeValues(tutor=t.tutor, cluster=str(t.item), values={
            "gain": float(t.values[-1]), "turns_to_two": next((k + 1.0 for k, v in enumerate(t.values) if v >= 2), None)})
            for t in traces]
        return summarize_outputs(self, values, n_resamples=200, seed=args.seed)

    def run(self, args: argparse.Namespace, learner: LearnerName, ctx: BenchContext) -> int:
        ctx.check_output(args.output)
        tutors = [self.build_tutor(t) for t in args.tutor]
        traces = CounterBench(tutors, 3, args.toy_turns, args.output).run_all(args.batch)
        results = self._summary(traces, args)
        write_kit_results(results, args.output)
        print(format_leaderboard(self, results))
        return 0

    def rescore(self, args: argparse.Namespace, ctx: BenchContext) -> int:
        files = sorted((Path(args.output) / TRACES).glob("*.json"))
        traces = [msgspec.json.decode(f.read_bytes(), type=CounterTrace) for f in files]
        write_kit_results(self._summary(traces, args), args.output)
        return 0


@pytest.fixture
def toy_family():
    FAMILIES.register("toy", ToyFamily)  # the one registry line
    try:
        yield
    finally:
        FAMILIES.unregister("toy")


# ------------------------------------------------------------------------------------------- the tests

TOY = ["tutor-bench", "--learner", "toy", "--tutor", "scripted:stepper", "--tutor", "scripted:quiet"]


def test_a_throwaway_family_runs_through_the_kit_and_renders_in_the_report(toy_family, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SIMHUB_HOME", str(tmp_path / "home"))
    out = tmp_path / "toy"
    CALLS["tutor"] = 0
    assert main([*TOY, "--output", str(out), "--toy-turns", "2"]) == 0
    table = capsys.readouterr().out
    assert "gain ↑" in table and "turns to 2 ↓" in table  # the console table reads the declarations
    assert CALLS["tutor"] == 2 * 3 * 2  # tutors × items × turns
    results = json.loads((out / "results.json").read_text())
    assert results["kind"] == "toy-counter-results" and results["family"] == "toy"
    # the stepper gains the item's step size each turn: items 0, 1, 2 -> 2, 4, 6
    assert results["tutors"]["scripted:stepper"]["gain"]["mean"] == pytest.approx(4.0)
    assert results["tutors"]["scripted:quiet"]["gain"]["mean"] == 0.0
    assert results["ranks"]["scripted:stepper"]["gain"] == 1.0 and results["mean_rank"]["scripted:quiet"] == 2.0
    assert results["tutors"]["scripted:quiet"]["turns_to_two"]["n"] == 0  # never reached: not measured
    assert len(list((out / TRACES).glob("*.json"))) == 6

    # The kit's runner: a rerun reads the finished traces, an identical run elsewhere copies them.
    CALLS["tutor"] = 0
    assert main([*TOY, "--output", str(out), "--toy-turns", "2"]) == 0
    assert main([*TOY, "--output", str(tmp_path / "copy"), "--toy-turns", "2"]) == 0
    assert CALLS["tutor"] == 0
    assert main([*TOY, "--output", str(out), "--toy-turns", "3"]) == 2  # other settings: refused
    assert "another turns" in capsys.readouterr().err

    # Its option belongs to it: another family refuses it, naming the family.
    assert main(["tutor-bench", "--tutor", "scripted:dump", "--toy-turns", "4", "--output", str(tmp_path / "x")]) == 2
    assert "--toy-turns: an option of the toy learner family (--learner toy), not of knowsim" in capsys.readouterr().err

    # simhub report finds the folder's family by its results' kind and renders the declared outputs.
    page = tmp_path / "report.html"
    assert main(["report", str(out), "--output", str(page)]) == 0
    html = page.read_text()
    assert "Toy counter bench" in html and "gain ↑" in html and "turns to 2 ↓" in html
    assert "scripted:stepper" in html and "4.0" in html

    # stability across two folders of the family, and rescoring through the family.
    assert main(["tutor-bench", "stability", str(out), str(tmp_path / "copy")]) == 0
    assert "gain: mean pairwise Kendall tau 1.00" in capsys.readouterr().out
    (out / "results.json").unlink()
    (out / "results.json").write_text(json.dumps({"kind": "toy-counter-results"}))
    assert main(["tutor-bench", "--rescore", "--output", str(out)]) == 0  # the folder says which family
    assert json.loads((out / "results.json").read_text())["tutors"]["scripted:stepper"]["gain"]["mean"] == 4.0


def test_a_family_is_gone_once_unregistered(tmp_path, capsys):
    assert main([*TOY, "--output", str(tmp_path / "toy")]) == 2
    assert "unknown learner 'toy'" in capsys.readouterr().err
