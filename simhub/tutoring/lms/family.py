"""The ``kt-learner`` learner family: EduClaw-Bench's KT-grounded learner, taught over days through an LMS.

Its options, its run (``simhub tutor-bench --learner kt-learner ...``), its rescoring (and the judge
panel over finished days) and its report section; the bench itself is
:mod:`simhub.tutoring.lms.bench`. ``docs/kt-learner.md`` describes it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from simhub.learners.chat import model_names, model_sections
from simhub.tutoring.family import BenchContext, LearnerFamily, LearnerName
from simhub.tutoring.lms.results import KT_RESULTS_KIND, OUTPUTS
from simhub.tutoring.lms.tutors import SCRIPTED


class KTLearnerFamily(LearnerFamily):
    name = "kt-learner"
    title = "KT-learner bench"
    forms = ("kt-learner",)
    results_kind = KT_RESULTS_KIND
    outputs = OUTPUTS
    docs = "docs/kt-learner.md"
    capability = "tools"
    scripted = SCRIPTED
    tutors_help = ("scripted:weakest, scripted:silent, the designed tutors, or a profile tutor (kind: openai acts through "
                   "tool calls; a local model talks only)")

    def add_arguments(self, g: argparse._ArgumentGroup) -> None:
        g.add_argument("--scenarios", help="core (10 personalities x 5 schedules, the default), all (with the "
                       "adversarial learner), adversarial, ids PERSONALITY__SCHEDULE or PERSONALITY (comma-separated), "
                       "or a scenario YAML file")
        g.add_argument("--days", type=int, help="days of every scenario (default: the scenario's, 30)")
        g.add_argument("--abilities", help="comma-separated: weak, average, strong (default: average)")
        g.add_argument("--repeats", type=int, help="runs per scenario and ability, each with its own persona seed "
                       "(default 1); pass^k is over them")
        g.add_argument("--share-seeds", action="store_true", help="let runs share persona seeds when there are more "
                       "runs than students in the log")
        g.add_argument("--kt-model", help="sample (BKT fitted on the sample corpus, the default) or a saved KT model "
                       "file")
        g.add_argument("--responses", help="the item-response log of the persona seeds: sample (default) or a CSV "
                       "(student,item,kc,correct,time)")
        g.add_argument("--kt-items", help="the item bank: sample (the sample corpus's questions, default) or a JSONL "
                       "file")
        g.add_argument("--judge", action="append", metavar="MODEL", help="a profile model on the judge panel (up to "
                       "three; repeatable): rates every session day's helpfulness, Gagné, Rosenshine and hand-over")
        g.add_argument("--role-player", metavar="MODEL", help="a profile model that role-plays the learner in JSON "
                       "(default: the offline stand-in, which samples answers from the KT belief)")

    # ------------------------------------------------------------------------------------------ run

    def run(self, args: argparse.Namespace, learner: LearnerName, ctx: BenchContext) -> int:
        from simhub.errors import ConfigError
        from simhub.learners.kt import load_scenarios
        from simhub.learners.kt.student import LearnerSettings, StandInRolePlayer, assign_seeds, persona_seeds
        from simhub.schema import write_jsonl
        from simhub.tutoring.lms.bench import (
            KTBench,
            KTBenchOptions,
            check_abilities,
            heldout_calibration,
            learner_dialogues,
            learner_parts,
            plan_runs,
            run_id,
            sample_log,
        )
        from simhub.tutoring.lms.results import format_kt_results, summarize_kt, write_kt_results

        if args.repeats is not None and args.repeats < 1:
            raise ConfigError(f"--repeats: {args.repeats} must be at least 1", field="repeats")
        scenarios = load_scenarios(args.scenarios or "core", days=args.days)
        abilities = check_abilities(args.abilities or "average")
        repeats = args.repeats or 1
        settings = LearnerSettings()
        ctx.check_output(args.output)
        raw = ctx.profile
        local = [t for t in dict.fromkeys(args.tutor) if t not in self.scripted and t in raw.tutors
                 and raw.tutors[t].kind != "openai"]  # a local chat model that talks only: built first
        built = ctx.provision(tutors=local, loaded=raw) if local else raw
        options = None
        if local:
            from simhub.simulation import load_options

            options = load_options(built)
        tutors = [self.build_tutor(t, built, options=options, no_cache=args.no_cache) for t in dict.fromkeys(args.tutor)]
        if args.role_player and args.role_player not in model_names(raw):
            from simhub.errors import UnknownNameError

            # named against the whole profile (the narrowed one below would know no model)
            raise UnknownNameError("model", args.role_player, model_names(raw), field="role_player")
        model, model_id, log, bank = learner_parts(args.kt_model or "sample", args.responses or "sample",
                                                   args.kt_items or "sample")
        if args.role_player:
            from simhub.learners.chat import chat_model
            from simhub.learners.kt.student import LLMRolePlayer
            from simhub.simulation import load_options

            profile = ctx.provision(loaded=raw, **model_sections(raw, [args.role_player]))
            role_player = LLMRolePlayer(chat_model(args.role_player, profile, load_options(profile),
                                                   field="role_player"), name=args.role_player, settings=settings)
        else:
            role_player = StandInRolePlayer(settings)
        judges = self._judges(args, raw, ctx)
        pool = persona_seeds(log, model, n_warmup=settings.n_warmup)
        ids = [run_id(sc, ab, r) for sc in scenarios for ab in abilities for r in range(repeats)]
        seeds = assign_seeds(pool, ids, seed=args.seed, share=args.share_seeds)
        plans = plan_runs(scenarios, abilities, repeats, args.seed, seeds)
        bench = KTBench(tutors, plans, model=model, model_id=model_id, bank=bank, seeds=seeds, role_player=role_player,
                        settings=settings, output=args.output,
                        options=KTBenchOptions(cache_dir=args.cache_dir, no_cache=args.no_cache, batch=args.batch),
                        judges=judges,
                        info={"profile": raw.source or raw.name, "scenarios": args.scenarios or "core",
                              "days": args.days, "abilities": abilities, "repeats": repeats,
                              "tutors": [t.id for t in tutors]})
        traces = bench.run(progress=True, executor=ctx.executor)
        if (code := ctx.report_lost(bench.runner, "runs")) is not None:
            return code
        if judges:
            print(f"judges: {bench.judge_calls} session days judged (answered from the cache: {bench.judge_hits})",
                  file=sys.stderr)
        results = summarize_kt(traces, settings=bench.settings(), tutor_order=[t.id for t in tutors],
                               n_resamples=args.bootstrap, seed=args.seed)
        if args.responses in (None, "sample") and (args.kt_model in (None, "sample")):
            results.learner["kt_heldout_calibration"] = heldout_calibration(model, sample_log("test"))
        path = write_kt_results(results, args.output)
        dialogues = learner_dialogues(traces, bank)
        write_jsonl(Path(args.output) / "learner_dialogues.jsonl", dialogues)
        print(format_kt_results(results))
        print(f"learner-days run: {bench.days_run} (runs copied from the cache: {bench.cache_hits})")
        print(f"-> {path}; the learner's chats for simhub eval-dialogues: {Path(args.output) / 'learner_dialogues.jsonl'}")
        days = [d for t in traces for d in t.days]
        if days and all(d.failed for d in days):
            return ctx.all_failed("learner-days", len(days), [d.failed or "" for d in days])
        return 0

    @staticmethod
    def _judges(args: argparse.Namespace, raw: Any, ctx: BenchContext) -> list:
        """The judge panel of ``--judge`` (up to three profile models)."""
        if not args.judge:
            return []
        from simhub.errors import ConfigError, UnknownNameError
        from simhub.learners.chat import chat_model, model_names
        from simhub.simulation import load_options
        from simhub.tutoring.lms.judges import DayJudge

        names = list(dict.fromkeys(args.judge))
        if len(names) > 3:
            raise ConfigError(f"--judge: at most three judges, got {len(names)}", field="judge")
        for n in names:
            if n not in model_names(raw):
                raise UnknownNameError("model", n, model_names(raw), field="judge")
        profile = ctx.provision(loaded=raw, **model_sections(raw, names))
        return [DayJudge(chat_model(n, profile, load_options(profile), field="judge"), n) for n in names]

    # -------------------------------------------------------------------------------------- rescore

    def learner_dialogues(self, folder: str) -> list[Any]:
        """The learner's chats the run wrote (``learner_dialogues.jsonl``: one per run and day with a learner
        message, on the day's probe question as the sample corpus has it)."""
        from simhub.errors import DataError
        from simhub.schema import read_jsonl

        path = Path(folder) / "learner_dialogues.jsonl"
        if not path.is_file():
            raise DataError(f"{folder}: no learner_dialogues.jsonl (run the bench again to write it)", file=str(path))
        return list(read_jsonl(path))

    def rescore(self, args: argparse.Namespace, ctx: BenchContext) -> int:
        from simhub.errors import DataError
        from simhub.tutoring.lms.bench import is_kt_trace_file, read_kt_trace, write_kt_trace
        from simhub.tutoring.lms.results import format_kt_results, summarize_kt, write_kt_results
        from simhub.tutoring.runner import RUN_FILE, TRACES, read_run_info

        folder = Path(args.output) / TRACES
        files = sorted(f for f in folder.glob("*.json") if is_kt_trace_file(f)) if folder.is_dir() else []
        if not files:
            raise DataError(f"{args.output}: no KT-learner traces to rescore (expected {folder}/*.json)",
                            file=str(args.output))
        traces = [read_kt_trace(f) for f in files]
        run_file = Path(args.output) / RUN_FILE  # the run's tutor order and settings, as its first scoring had them
        info = read_run_info(run_file) if run_file.is_file() else None
        if args.judge:  # judge the finished days offline, votes stored in the traces
            from simhub.cache import ContentCache
            from simhub.config import cache_root
            from simhub.tutoring.lms.judges import judge_runs

            judges = self._judges(args, ctx.profile, ctx)
            before = [t.judgments.copy() for t in traces]
            cache = None if args.no_cache else ContentCache(cache_root(args.cache_dir), "kt-bench")
            asked, hits = judge_runs(judges, traces, cache)
            for t, f, old in zip(traces, files, before, strict=True):
                if t.judgments != old:
                    write_kt_trace(f, t)
            print(f"judges: {asked} session days judged (answered from the cache: {hits})", file=sys.stderr)
        results = summarize_kt(traces, settings={**(info.settings if info else {}), "rescored": True},
                               tutor_order=info.tutors if info else None, n_resamples=args.bootstrap, seed=args.seed)
        path = write_kt_results(results, args.output)
        print(format_kt_results(results))
        print(f"-> {path}" + ("" if args.judge else " (no model was called)"))
        return 0

    # --------------------------------------------------------------------------------------- report

    def owns(self, folder: Any) -> bool:
        """Its ``results.json`` says so, or, without one, its traces are KT-learner runs."""
        from simhub.tutoring.lms.report import is_kt_bench

        return is_kt_bench(folder)

    def report_section(self, folders: Sequence[str]) -> tuple[str, str, str]:
        from simhub.tutoring.lms.report import kt_bench_section, load_kt_bench

        return kt_bench_section([load_kt_bench(d) for d in folders])

    def outcomes(self, folder: str):
        """ΔSolve per run, clustered by scenario (a run with no finished day: None)."""
        from simhub.tutoring.certify import FamilyOutcomes
        from simhub.tutoring.lms.bench import is_kt_trace_file, read_kt_trace
        from simhub.tutoring.lms.results import run_measures
        from simhub.tutoring.runner import TRACES

        measures = [run_measures(read_kt_trace(f)) for f in sorted((Path(folder) / TRACES).glob("*.json"))
                    if is_kt_trace_file(f)]
        return FamilyOutcomes(self.name, "delta_solve", [(m.tutor, m.scenario, m.delta_solve) for m in measures])

    def rankings(self, folder: str) -> dict[str, dict[str, float | None]]:
        """ΔSolve, and the judged helpfulness where a panel ran."""
        from simhub.tutoring.lms.results import read_kt_results

        r = read_kt_results(Path(folder) / "results.json")
        return {"delta_solve": {n: t.delta_solve.mean for n, t in r.tutors.items()},
                "helpfulness": {n: (t.judged["helpfulness"].mean if t.judged else None) for n, t in r.tutors.items()}}
