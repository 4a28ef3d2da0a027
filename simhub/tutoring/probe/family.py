"""The ``sim-student`` learner family: any simulated student simhub can run, probed before and after.

``simhub tutor-bench --learner student:MODEL`` puts a profile simulator (a fine-tuned student, a
prompted baseline, an endpoint; ``smol-base`` of the ``demo-smol`` profile offline) in front of each
tutor on each item and ranks the tutors by probe gain (post minus pre accuracy); the bench is
:mod:`simhub.tutoring.probe.bench`. Its results and report are the kit's
(:mod:`simhub.tutoring.report`). ``docs/guides/rank-tutors.md`` describes it.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from simhub.tutoring.designed import DESIGNED
from simhub.tutoring.family import BenchContext, BenchOutput, LearnerFamily, LearnerName

RESULTS_KIND = "simhub-probe-bench-results"

OUTPUTS = (
    BenchOutput("gain", "probe gain", ranked=True, digits=1, scale=100.0, unit="pp",
                description="post-probe accuracy minus pre-probe accuracy, per conversation"),
    BenchOutput("post", "post accuracy", digits=1, scale=100.0, unit="%",
                description="the probes answered correctly after the conversation"),
    BenchOutput("pre", "pre accuracy", digits=1, scale=100.0, unit="%",
                description="the probes answered correctly before it (the same for every tutor)"),
)


class SimStudentFamily(LearnerFamily):
    name = "sim-student"
    title = "Simulated-student bench (pre/post probes)"
    forms = ("student:MODEL",)
    results_kind = RESULTS_KIND
    outputs = OUTPUTS
    docs = "docs/guides/rank-tutors.md"
    capability = "text"
    scripted = DESIGNED
    tutors_help = "designed:silent, designed:partial, designed:stepwise, designed:dump, or any profile tutor"

    def add_arguments(self, g: argparse._ArgumentGroup) -> None:
        g.add_argument("--probe-items", default="sample", help="the items and their probes: sample (the sample "
                       "corpus's multiple-choice questions) or a JSON Lines item file (default: sample)")
        g.add_argument("--questions", type=int, metavar="N", help="use the first N items")
        g.add_argument("--probes", type=int, default=3, help="probes per item: the item itself, then items of the "
                       "same KC where the bank has them (default 3)")
        g.add_argument("--turns", type=int, default=4, help="tutor turns per conversation (default 4)")

    def run(self, args: argparse.Namespace, learner: LearnerName, ctx: BenchContext) -> int:
        from simhub.errors import UnknownNameError
        from simhub.simulation import build_simulator, load_options
        from simhub.tutoring.probe.bench import ProbeBench, load_probe_items
        from simhub.tutoring.report import format_leaderboard, write_kit_results
        from simhub.tutoring.tutors import bench_tutor_names

        if args.turns < 1:
            from simhub.errors import DataError

            raise DataError(f"--turns: {args.turns} must be at least 1", field="turns")
        ctx.check_output(args.output)
        raw = ctx.profile
        known = bench_tutor_names(self.scripted, self.capability, raw)
        for name in args.tutor:
            if name not in known:
                raise UnknownNameError("tutor", name, known, field="tutor")
        items = load_probe_items(args.probe_items, n=args.questions, probes=args.probes)
        student_name = learner.model or ""
        if student_name not in raw.simulators:
            from simhub.simulation import simulator_names

            raise UnknownNameError("simulator", student_name, simulator_names(raw), field="learner")
        profile = ctx.provision(simulators=[student_name], loaded=raw,
                                tutors=[t for t in args.tutor if t not in self.scripted])
        options = load_options(profile)
        student = build_simulator(student_name, profile, options)
        tutors = [self.build_tutor(t, profile, options=options) for t in dict.fromkeys(args.tutor)]
        bench = ProbeBench(tutors, student, items, turns=args.turns, seed=args.seed, batch=args.batch,
                           output=args.output, cache_dir=args.cache_dir, no_cache=args.no_cache,
                           info={"profile": raw.source or raw.name, "items": args.probe_items, "n": args.questions,
                                 "tutors": list(dict.fromkeys(args.tutor)), "learner_name": learner.text})
        traces = bench.run(progress=True, executor=ctx.executor)
        if (code := ctx.report_lost(bench.runner, "conversations")) is not None:
            return code
        results = self.summarize(traces, settings=bench.settings(), order=[t.id for t in tutors],
                                 n_resamples=args.bootstrap, seed=args.seed)
        path = write_kit_results(results, args.output)
        print(format_leaderboard(self, results))
        print(f"model calls: {bench.calls} (answered from the cache: {bench.cache_hits})")
        print(f"-> {path}")
        if traces and results.failed == len(traces):
            return ctx.all_failed("conversations", len(traces), results.failures)
        return 0

    def summarize(self, traces: list[Any], *, settings: dict[str, Any], order: list[str] | None, n_resamples: int,
                  seed: int) -> Any:
        from simhub.tutoring.report import EpisodeValues, summarize_outputs

        episodes = [EpisodeValues(tutor=t.tutor, cluster=t.item, failed=t.failed and f"{t.tutor} on {t.item}: {t.failed}",
                                  values={"gain": t.gain, "post": t.post_accuracy, "pre": t.pre_accuracy})
                    for t in traces]
        return summarize_outputs(self, episodes, settings=settings, tutor_order=order, n_resamples=n_resamples,
                                 seed=seed)

    def rescore(self, args: argparse.Namespace, ctx: BenchContext) -> int:
        from simhub.tutoring.report import format_leaderboard, read_kit_results, write_kit_results
        from simhub.tutoring.runner import RUN_FILE, read_run_info

        traces = self._traces(args.output)
        run_file = Path(args.output) / RUN_FILE
        info = read_run_info(run_file) if run_file.is_file() else None
        old = Path(args.output) / "results.json"
        settings = read_kit_results(old).settings if old.is_file() else {}
        results = self.summarize(traces, settings=settings, order=info.tutors if info else None,
                                 n_resamples=args.bootstrap, seed=args.seed)
        path = write_kit_results(results, args.output)
        print(format_leaderboard(self, results))
        print(f"-> {path} (no model was called)")
        return 0

    @staticmethod
    def _traces(folder: str) -> list[Any]:
        from simhub.errors import DataError
        from simhub.tutoring.probe.bench import read_probe_trace
        from simhub.tutoring.runner import TRACES

        files = sorted((Path(folder) / TRACES).glob("*.json"))
        if not files:
            raise DataError(f"{folder}: no traces (expected {Path(folder) / TRACES}/*.json)", file=str(folder))
        return [read_probe_trace(f) for f in files]

    def learner_dialogues(self, folder: str) -> list[Any]:
        """Each finished conversation (the student's opening, then tutor and student turns; no probe)."""
        from simhub.tutoring.probe.bench import load_probe_items, probe_dialogues
        from simhub.tutoring.runner import RUN_FILE, read_run_info

        run_file = Path(folder) / RUN_FILE
        spec = (read_run_info(run_file).items if run_file.is_file() else None) or "sample"
        return probe_dialogues(self._traces(folder), load_probe_items(spec))

    def outcomes(self, folder: str) -> Any:
        """Probe gain per conversation, clustered by item (a failed conversation: None)."""
        from simhub.tutoring.certify import FamilyOutcomes

        return FamilyOutcomes(self.name, "gain", [(t.tutor, t.item, t.gain) for t in self._traces(folder)])
