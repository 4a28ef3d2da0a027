"""The ``knowsim`` learner family: KnowSim's knowledge-state learner and its stateless baselines.

Its options, its run (``simhub tutor-bench --learner knowsim ...``), its rescoring and its report
section; the bench itself is :mod:`simhub.tutoring.knowsim.bench`. ``docs/tutor-bench.md`` describes it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simhub.learners.chat import model_sections
from simhub.tutoring.family import BenchContext, LearnerFamily, LearnerName
from simhub.tutoring.knowsim.results import OUTPUTS, RESULTS_KIND
from simhub.tutoring.knowsim.tutors import SCRIPTED

if TYPE_CHECKING:
    from simhub.tutoring.knowsim.trace import Trace


class KnowSimFamily(LearnerFamily):
    name = "knowsim"
    title = "Tutor bench"
    forms = ("knowsim", "knowsim:MODEL", "zs:MODEL", "zs-cot:MODEL", "zs-cot-prof:MODEL")
    results_kind = RESULTS_KIND
    outputs = OUTPUTS
    docs = "docs/tutor-bench.md"
    capability = "text"
    scripted = SCRIPTED
    tutors_help = "scripted:stepwise, scripted:dump, or any profile tutor"

    def add_arguments(self, g: argparse._ArgumentGroup) -> None:
        g.add_argument("--extractor", default="offline", help="the per-turn signal extractor: offline (MiniLM "
                       "stand-in), offline:lexical, or a profile model (an OpenAI-compatible endpoint in JSON mode) "
                       "(default: offline)")
        g.add_argument("--compare-extractor", default="auto", help="a second extractor run on every turn only to "
                       "report its agreement (Cohen's kappa): auto (offline when --extractor is a model, else none), "
                       "none, offline, offline:lexical")
        g.add_argument("--iq-rater", metavar="MODEL", help="a profile model (models:) that rates each "
                       "finished conversation's interaction quality (IQ, 1-10) once; IQ then joins the results and "
                       "R̄. With --rescore, rates the folder's traces and stores the ratings in them")
        g.add_argument("--termination-judge", metavar="MODEL", help="stateless learners (zs, zs-cot, zs-cot-prof): "
                       "a profile model that reads each finished conversation and names the last turn a real "
                       "student would have stayed for; the metrics and IQ are then of the turns up to it, and the "
                       "state rules stop nothing (as --full-length)")
        g.add_argument("--items", default="sample", help="sample (the sample corpus's questions and their shipped IU "
                       "graphs) or an IU graph file whose graphs carry their question (default: sample)")
        g.add_argument("--levels", default="novice,intermediate,advanced", help="comma-separated: novice, "
                       "intermediate, advanced (default: all three)")
        g.add_argument("--initial-states", metavar="FILE", help="KnowSim's canonical starting states (its "
                       "repository's data/init_ks_cache.json): the items and levels it has start there, the others "
                       "from the level's ratios (docs/tutor-bench.md)")
        g.add_argument("--n", type=int, help="use the first N items")
        g.add_argument("--preset", default="paper", help="the learner's rules: paper or released (default: paper)")
        g.add_argument("--set", action="append", metavar="FIELD=VALUE", help="override a preset field (repeatable)")
        g.add_argument("--full-length", action="store_true", help="run every conversation to the turn cap; the turn "
                       "the rules would have stopped it is recorded (the virtual early stop)")
        g.add_argument("--threshold", type=float, default=0.15, help="agree: the |Cliff's delta| of a high-signal "
                       "human contrast (default 0.15)")
        g.add_argument("--max-tokens", type=int, default=400, help="new tokens per model turn at most (default 400)")

    # ------------------------------------------------------------------------------------------ run

    def run(self, args: argparse.Namespace, learner: LearnerName, ctx: BenchContext) -> int:
        from simhub.errors import ConfigError
        from simhub.simulation import load_options
        from simhub.tutoring.knowsim.bench import Bench, BenchOptions, load_items, parse_levels
        from simhub.tutoring.knowsim.components import (
            OFFLINE,
            build_extractor,
            build_iq_rater,
            build_learner,
            build_termination_judge,
            check_judged_learner,
            needed_models,
        )
        from simhub.tutoring.knowsim.results import format_results, summarize, write_results
        from simhub.tutoring.tutors import bench_tutor_names

        levels = parse_levels(args.levels)
        preset = _preset(args)
        if args.termination_judge:  # refused before any model is provisioned
            check_judged_learner(learner.text)
        ctx.check_output(args.output)
        raw = ctx.profile
        known = bench_tutor_names(self.scripted, self.capability, raw)
        for name in args.tutor:
            if name not in known:
                from simhub.errors import UnknownNameError

                raise UnknownNameError("tutor", name, known, field="tutor")
        models = needed_models(learner.text, args.extractor, args.iq_rater, args.termination_judge)
        sections = model_sections(raw, models)
        profile = ctx.provision(simulators=sections["simulators"], models=sections["models"], loaded=raw,
                                tutors=[t for t in args.tutor if t not in self.scripted] + sections["tutors"])
        options = load_options(profile)
        bench_learner = build_learner(learner.text, profile, options, max_tokens=args.max_tokens)
        extractor = build_extractor(args.extractor, profile, options)
        compare = args.compare_extractor
        if compare == "auto":  # the stand-in's agreement with an LLM extractor is reported whenever one runs
            compare = "offline" if args.extractor not in OFFLINE else "none"
        if compare not in (*OFFLINE, "none"):
            raise ConfigError(f"--compare-extractor: {compare!r} is not auto, none, offline or offline:lexical",
                              field="compare_extractor")
        shadow = build_extractor(compare, profile, options) if compare not in ("none", args.extractor) else None
        rater = build_iq_rater(args.iq_rater, profile, options) if args.iq_rater else None
        judge = build_termination_judge(args.termination_judge, profile, options) if args.termination_judge else None
        tutors = [self.build_tutor(t, profile, options=options) for t in dict.fromkeys(args.tutor)]
        items = load_items(args.items, args.n)
        starts, starts_info = canonical_starts(args.initial_states, items, levels)
        bench = Bench(tutors, bench_learner, extractor, preset,
                      BenchOptions(seed=args.seed, batch=args.batch, full_length=args.full_length,
                                   max_tokens=args.max_tokens, cache_dir=args.cache_dir, no_cache=args.no_cache),
                      args.output, preset_name=args.preset,
                      info={"profile": raw.source or raw.name, "items": args.items, "n": args.n, "levels": levels,
                            "tutors": list(dict.fromkeys(args.tutor)), "learner_name": learner.text,
                            "extractor_name": args.extractor}, shadow=shadow, rater=rater, termination_judge=judge,
                      starts=starts, starts_info=starts_info)
        traces = bench.run(items, levels, progress=True, executor=ctx.executor)
        if (code := ctx.report_lost(bench.runner, "conversations")) is not None:
            return code
        results = summarize(traces, preset=args.preset, settings=bench.settings(), n_resamples=args.bootstrap,
                            seed=args.seed, tutor_order=[t.id for t in tutors])
        path = write_results(results, args.output)
        print(format_results(results))
        print(f"model calls: {bench.calls} (answered from the cache: {bench.cache_hits})")
        print(f"-> {path}")
        if traces and results.failed == len(traces):  # nothing was measured: say why, and exit non-zero
            return ctx.all_failed("conversations", len(traces), [f["cause"] for f in results.failures])
        return 0

    # -------------------------------------------------------------------------------------- rescore

    def rescore(self, args: argparse.Namespace, ctx: BenchContext) -> int:
        import msgspec

        from simhub.cache import fingerprint
        from simhub.errors import DataError
        from simhub.schema import atomic_write_bytes
        from simhub.tutoring.knowsim.results import format_results, rescore_trace, summarize
        from simhub.tutoring.knowsim.trace import read_trace
        from simhub.tutoring.runner import RUN_FILE, TRACES, read_run_info

        preset = _preset(args)
        folder = Path(args.output) / TRACES
        files = sorted(folder.glob("*.json")) if folder.is_dir() else []
        if not files:
            raise DataError(f"{args.output}: no traces to rescore (expected {folder}/*.json)", file=str(args.output))
        originals = [read_trace(f) for f in files]
        if args.termination_judge or args.iq_rater:  # judge and rate every conversation now, stored in the traces
            originals = _judge_and_rate(args, ctx, originals, files)
        traces = [rescore_trace(t, preset, file=str(f)) for t, f in zip(originals, files, strict=True)]
        run_file = Path(args.output) / RUN_FILE
        order = read_run_info(run_file).tutors if run_file.is_file() else None
        results = summarize(traces, preset=args.preset,
                            settings={"rescored": True, "preset_fields": msgspec.to_builtins(preset)},
                            n_resamples=args.bootstrap, seed=args.seed, tutor_order=order)
        suffix = f"-{fingerprint(args.set)[:8]}" if args.set else ""
        path = Path(args.output) / f"rescored-{args.preset}{suffix}.json"
        atomic_write_bytes(path, msgspec.json.format(msgspec.json.encode(results), indent=2))
        print(format_results(results))
        print(f"-> {path} (no model was called)")
        return 0

    # --------------------------------------------------------------------------------------- report

    def owns(self, folder: str | Any) -> bool:
        from simhub.tutoring.knowsim.report import is_tutor_bench

        return is_tutor_bench(folder)

    def report_section(self, folders: Sequence[str]) -> tuple[str, str, str]:
        from simhub.tutoring.knowsim.report import bench_section, load_bench

        return bench_section([load_bench(d) for d in folders])

    def report_title(self, folders: Sequence[str]) -> str | None:
        from simhub.tutoring.knowsim.report import bench_title, load_bench

        return bench_title([load_bench(d) for d in folders])

    def outcomes(self, folder: str):
        """Knowledge gain (KG) per conversation, clustered by item (a failed conversation: None)."""
        from simhub.tutoring.certify import FamilyOutcomes
        from simhub.tutoring.knowsim.trace import read_trace
        from simhub.tutoring.runner import TRACES

        traces = [read_trace(f) for f in sorted((Path(folder) / TRACES).glob("*.json"))]
        return FamilyOutcomes(self.name, "kg", [(t.tutor, t.item, None if t.failed or t.metrics is None
                                                 else float(t.metrics.kg)) for t in traces])

    def learner_dialogues(self, folder: str) -> list[Any]:
        """Each finished conversation, the learner's messages as student turns, on its item's question as
        the sample corpus has it (an item not in the sample bank keeps its graph's question text)."""
        from simhub.learners.kt.items import sample_item_bank
        from simhub.schema import Dialogue, Question, Turn
        from simhub.tutoring.knowsim.trace import read_trace
        from simhub.tutoring.runner import TRACES

        bank = sample_item_bank().items
        out = []
        for f in sorted((Path(folder) / TRACES).glob("*.json")):
            t = read_trace(f)
            if t.failed or not t.turns:
                continue
            item = bank.get(t.item)
            turns = [Turn(role=role, content=text) for turn in t.turns
                     for role, text in (("student", turn.learner), ("tutor", turn.tutor)) if text.strip()]
            out.append(Dialogue(id=f.stem, question=Question(text=(item.source_text or item.text()) if item
                                                             else t.question), turns=turns,
                                meta={"tutor": t.tutor, "item": t.item, "level": t.level}))
        return out

    def rankings(self, folder: str) -> dict[str, dict[str, float | None]]:
        from simhub.tutoring.knowsim.results import read_results

        r = read_results(Path(folder) / "results.json")
        return {m: {t.tutor: (t.marginal[m].mean if m in t.marginal else None) for t in r.tutors}
                for m in r.ranked()}


def _preset(args: argparse.Namespace):
    from simhub.learners.presets import parse_overrides, resolve_preset

    return resolve_preset(args.preset, parse_overrides(args.set))


def _judge_and_rate(args: argparse.Namespace, ctx: BenchContext, traces: list[Trace], files: list[Path]) -> list[Trace]:
    """``--rescore`` with ``--termination-judge MODEL`` and/or ``--iq-rater MODEL``: every finished trace
    judged, then rated (cached answers reused), and rewritten."""
    from simhub.cache import ContentCache
    from simhub.config import cache_root
    from simhub.errors import ConfigError
    from simhub.simulation import load_options
    from simhub.tutoring.knowsim.components import build_iq_rater, build_termination_judge
    from simhub.tutoring.knowsim.iq import rate_traces
    from simhub.tutoring.knowsim.termination import judge_traces
    from simhub.tutoring.knowsim.trace import write_trace

    if args.termination_judge:
        stateful = [str(f) for t, f in zip(traces, files, strict=True)
                    if t.models.get("learner", {}).get("kind") != "stateless"]
        if stateful:
            raise ConfigError(f"--termination-judge: {stateful[0]} (and {len(stateful) - 1} more) is a conversation "
                              f"with a knowledge-state learner, which its preset's rules stop; a termination judge is "
                              f"for the stateless baselines", field="termination_judge")
    raw = ctx.profile
    names = [m for m in (args.termination_judge, args.iq_rater) if m]
    profile = ctx.provision(loaded=raw, **model_sections(raw, names))
    options = load_options(profile)
    cache = None if args.no_cache else ContentCache(cache_root(args.cache_dir), "tutor-bench")
    out = traces
    if args.termination_judge:
        judge = build_termination_judge(args.termination_judge, profile, options)
        out, asked, hits = judge_traces(judge, out, cache)
        print(f"termination: {asked} conversations judged by {args.termination_judge} (answered from the cache: "
              f"{hits})", file=sys.stderr)
    if args.iq_rater:
        out, asked, hits = rate_traces(build_iq_rater(args.iq_rater, profile, options), out, cache)
        print(f"IQ: {asked} conversations rated by {args.iq_rater} (answered from the cache: {hits})", file=sys.stderr)
    for before, after, f in zip(traces, out, files, strict=True):
        if after is not before:
            write_trace(f, after)
    return out


def canonical_starts(path: str | None, items, levels) -> tuple[dict, dict]:
    """``--initial-states FILE``: KnowSim's canonical starts for the items and levels it has (read from a
    local clone, never copied here); the others start from the level's ratios, as without the file."""
    if not path:
        return {}, {}
    import hashlib

    from simhub.errors import DataError
    from simhub.learners.replay import read_canonical_starts, states_from_log

    table = read_canonical_starts(path)
    starts = {}
    for item in items:
        for level in levels:
            raw = table.get(item.id, {}).get(level)
            if raw is not None:
                starts[(item.id, level)] = states_from_log(item.graph, raw, file=path, field=f"{item.id}.{level}")
    if not starts:
        raise DataError(f"--initial-states {path}: none of the {len(items)} items ({', '.join(i.id for i in items[:3])}"
                        f"{', ...' if len(items) > 3 else ''}) has a starting state there", field="initial_states")
    print(f"starting states from {path} for {len(starts)} of {len(items) * len(levels)} (item, level) pairs; the "
          "others start from the level's ratios", file=sys.stderr)
    info = {"file": Path(path).name, "sha256": hashlib.sha256(Path(path).read_bytes()).hexdigest(),
            "pairs": sorted(f"{i}/{lv}" for i, lv in starts)}
    return starts, info


def agree_folder(human_csv: str, run_dir: str, *, threshold: float, seed: int) -> tuple[Any, Path]:
    """``simhub tutor-bench agree HUMAN.csv RUN_DIR``: KnowSim's validation protocol on a run folder's
    traces against human ratings; the result is written to ``RUN_DIR/agreement.json``."""
    import msgspec

    from simhub.errors import DataError
    from simhub.schema import atomic_write_bytes
    from simhub.tutoring.knowsim.agree import agreement, read_human
    from simhub.tutoring.knowsim.trace import read_trace
    from simhub.tutoring.runner import TRACES

    folder = Path(run_dir) / TRACES
    files = sorted(folder.glob("*.json")) if folder.is_dir() else []
    if not files:
        raise DataError(f"{run_dir}: no traces (expected {folder}/*.json)", file=str(run_dir))
    result = agreement(read_human(human_csv), [read_trace(f) for f in files], threshold=threshold, seed=seed)
    path = Path(run_dir) / "agreement.json"
    atomic_write_bytes(path, msgspec.json.format(msgspec.json.encode(result), indent=2))
    return result, path
