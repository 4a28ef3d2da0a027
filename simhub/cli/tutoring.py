"""``simhub tutor-bench``: rank tutors by what a knowledge-state learner learned from them."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from simhub.cli.common import add_profile

if TYPE_CHECKING:
    from simhub.tutoring.trace import Trace


def _preset(args: argparse.Namespace):
    from simhub.cli.learners import _overrides
    from simhub.learners.presets import resolve_preset

    return resolve_preset(args.preset, _overrides(args.set))


def _rescore(args: argparse.Namespace) -> int:
    import msgspec

    from simhub.cache import fingerprint
    from simhub.errors import DataError
    from simhub.tutoring import format_results, read_trace, rescore_trace, summarize
    from simhub.tutoring.bench import RUN_FILE, TRACES
    from simhub.tutoring.results import BenchResults
    from simhub.tutoring.trace import read_run_info

    preset = _preset(args)
    folder = Path(args.output) / TRACES
    files = sorted(folder.glob("*.json")) if folder.is_dir() else []
    if not files:
        raise DataError(f"{args.output}: no traces to rescore (expected {folder}/*.json)", file=str(args.output))
    originals = [read_trace(f) for f in files]
    if args.termination_judge or args.iq_rater:  # judge and rate every conversation now, stored in the traces
        originals = _judge_and_rate(args, originals, files)
    traces = [rescore_trace(t, preset, file=str(f)) for t, f in zip(originals, files, strict=True)]
    run_file = Path(args.output) / RUN_FILE
    order = read_run_info(run_file).tutors if run_file.is_file() else None
    results = summarize(traces, preset=args.preset, settings={"rescored": True, "preset_fields": msgspec.to_builtins(preset)},
                        n_resamples=args.bootstrap, seed=args.seed, tutor_order=order)
    suffix = f"-{fingerprint(args.set)[:8]}" if args.set else ""
    path = Path(args.output) / f"rescored-{args.preset}{suffix}.json"
    from simhub.schema import atomic_write_bytes

    atomic_write_bytes(path, msgspec.json.format(msgspec.json.encode(results), indent=2))
    assert isinstance(results, BenchResults)
    print(format_results(results))
    print(f"-> {path} (no model was called)")
    return 0


def _judge_and_rate(args: argparse.Namespace, traces: list[Trace], files: list[Path]) -> list[Trace]:
    """``--rescore`` with ``--termination-judge MODEL`` and/or ``--iq-rater MODEL``: every finished trace
    judged, then rated (cached answers reused), and rewritten."""
    from simhub.cache import ContentCache
    from simhub.cli.common import profile_for
    from simhub.config import cache_root, load_profile
    from simhub.errors import ConfigError
    from simhub.simulation import load_options
    from simhub.tutoring import write_trace
    from simhub.tutoring.components import build_iq_rater, build_termination_judge
    from simhub.tutoring.iq import rate_traces
    from simhub.tutoring.termination_judge import judge_traces

    if args.termination_judge:
        stateful = [str(f) for t, f in zip(traces, files, strict=True) if t.models.get("learner", {}).get("kind") != "stateless"]
        if stateful:
            raise ConfigError(f"--termination-judge: {stateful[0]} (and {len(stateful) - 1} more) is a conversation "
                              f"with a knowledge-state learner, which its preset's rules stop; a termination judge is "
                              f"for the stateless baselines", field="termination_judge")
    raw = load_profile(args.profile)
    names = [m for m in (args.termination_judge, args.iq_rater) if m]
    profile = profile_for(args, metrics=[], simulators=[m for m in names if m in raw.simulators],
                          tutors=[m for m in names if m in raw.tutors], loaded=raw)
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


def _agree(args: argparse.Namespace, human_csv: str, run_dir: str) -> int:
    import msgspec

    from simhub.errors import DataError
    from simhub.schema import atomic_write_bytes
    from simhub.tutoring import read_trace
    from simhub.tutoring.agree import agreement, format_agreement, read_human
    from simhub.tutoring.bench import TRACES

    folder = Path(run_dir) / TRACES
    files = sorted(folder.glob("*.json")) if folder.is_dir() else []
    if not files:
        raise DataError(f"{run_dir}: no traces (expected {folder}/*.json)", file=str(run_dir))
    result = agreement(read_human(human_csv), [read_trace(f) for f in files], threshold=args.threshold,
                       seed=args.seed)
    path = Path(run_dir) / "agreement.json"
    atomic_write_bytes(path, msgspec.json.format(msgspec.json.encode(result), indent=2))
    print(format_agreement(result))
    print(f"-> {path}")
    return 0


def _tutor_bench(args: argparse.Namespace) -> int:
    from simhub.errors import ConfigError

    if args.action:
        if args.action[0] == "stability":
            return _kt_stability(args.action[1:])
        if args.action[0] != "agree" or len(args.action) != 3:
            raise ConfigError(f"unexpected arguments {' '.join(args.action)!r}; the subcommands are "
                              f"`simhub tutor-bench agree HUMAN.csv RUN_DIR` and `simhub tutor-bench stability "
                              f"RUN_DIR RUN_DIR...`", field="action")
        return _agree(args, args.action[1], args.action[2])
    if not args.output:
        raise ConfigError("--output: the run folder is required", field="output")
    if args.learner == "kt-learner":
        return _kt_bench(args)
    for flag in ("scenarios", "days", "abilities", "repeats", "kt_model", "responses", "kt_items", "role_player",
                 "judge"):
        if getattr(args, flag) is not None:
            raise ConfigError(f"--{flag.replace('_', '-')}: only with --learner kt-learner", field=flag)
    if args.rescore:
        return _rescore(args)
    from simhub.cli.common import profile_for
    from simhub.config import load_profile
    from simhub.simulation import load_options
    from simhub.tutoring import (
        Bench,
        BenchOptions,
        build_bench_tutor,
        format_results,
        load_items,
        parse_levels,
        summarize,
    )
    from simhub.tutoring.components import (
        OFFLINE,
        build_extractor,
        build_iq_rater,
        build_learner,
        build_termination_judge,
        check_judged_learner,
        needed_models,
    )
    from simhub.tutoring.results import write_results
    from simhub.tutoring.tutors import SCRIPTED, check_tutor_names

    if not args.tutor:
        raise ConfigError("--tutor: name at least one tutor (scripted:stepwise, scripted:dump or a profile tutor)",
                          field="tutor")
    from simhub.cli.common import all_failed, check_output

    levels = parse_levels(args.levels)
    preset = _preset(args)
    if args.termination_judge:  # refused before any model is provisioned
        check_judged_learner(args.learner)
    check_output(args.output, folder=True)
    raw = load_profile(args.profile)
    check_tutor_names(args.tutor, raw)
    models = needed_models(args.learner, args.extractor, args.iq_rater, args.termination_judge)
    profile_tutors = [t for t in args.tutor if t not in SCRIPTED] + [m for m in models if m in raw.tutors]
    sims = [m for m in models if m in raw.simulators]
    profile = profile_for(args, metrics=[], simulators=sims or [], tutors=profile_tutors, loaded=raw)
    options = load_options(profile)
    learner = build_learner(args.learner, profile, options, max_tokens=args.max_tokens)
    extractor = build_extractor(args.extractor, profile, options)
    compare = args.compare_extractor
    if compare == "auto":  # the stand-in's agreement with an LLM extractor is reported whenever one runs
        compare = "offline" if args.extractor not in OFFLINE else "none"
    if compare not in (*OFFLINE, "none"):
        raise ConfigError(f"--compare-extractor: {compare!r} is not auto, none, offline or offline:lexical",
                          field="compare_extractor")
    shadow = build_extractor(compare, profile, options) if compare != "none" and compare != args.extractor else None
    rater = build_iq_rater(args.iq_rater, profile, options) if args.iq_rater else None
    judge = build_termination_judge(args.termination_judge, profile, options) if args.termination_judge else None
    tutors = [build_bench_tutor(t, profile, options) for t in dict.fromkeys(args.tutor)]
    items = load_items(args.items, args.n)
    starts, starts_info = _canonical_starts(args.initial_states, items, levels)
    bench = Bench(tutors, learner, extractor, preset,
                  BenchOptions(seed=args.seed, batch=args.batch, full_length=args.full_length, max_tokens=args.max_tokens,
                               cache_dir=args.cache_dir, no_cache=args.no_cache),
                  args.output, preset_name=args.preset,
                  info={"profile": raw.source or raw.name, "items": args.items, "n": args.n, "levels": levels,
                        "tutors": list(dict.fromkeys(args.tutor)), "learner_name": args.learner,
                        "extractor_name": args.extractor}, shadow=shadow, rater=rater, termination_judge=judge,
                  starts=starts, starts_info=starts_info)
    done = {"n": 0}
    total = len(tutors) * len(items) * len(levels)

    def progress(trace) -> None:
        done["n"] += 1
        if done["n"] % 25 == 0 or done["n"] == total:
            print(f"  {done['n']} conversations written", file=sys.stderr)

    traces = bench.run(items, levels, on_trace=progress)
    results = summarize(traces, preset=args.preset, settings=bench.settings(), n_resamples=args.bootstrap, seed=args.seed,
                        tutor_order=[t.id for t in tutors])
    path = write_results(results, args.output)
    print(format_results(results))
    print(f"model calls: {bench.calls} (answered from the cache: {bench.cache_hits})")
    print(f"-> {path}")
    if traces and results.failed == len(traces):  # nothing was measured: say why, and exit non-zero
        return all_failed("conversations", len(traces), [f["cause"] for f in results.failures])
    return 0


def _kt_cache(args: argparse.Namespace):
    from simhub.cache import ContentCache
    from simhub.config import cache_root

    return ContentCache(cache_root(args.cache_dir), "kt-bench")


def _kt_judges(args: argparse.Namespace, raw) -> list:
    """The judge panel of ``--judge`` (up to three profile models)."""
    if not args.judge:
        return []
    from simhub.cli.common import profile_for
    from simhub.errors import ConfigError, UnknownNameError
    from simhub.simulation import load_options
    from simhub.tutoring.components import chat_model, model_names
    from simhub.tutoring.kt_judges import DayJudge

    names = list(dict.fromkeys(args.judge))
    if len(names) > 3:
        raise ConfigError(f"--judge: at most three judges, got {len(names)}", field="judge")
    for n in names:
        if n not in raw.simulators and n not in raw.tutors:
            raise UnknownNameError("model", n, model_names(raw), field="judge")
    profile = profile_for(args, metrics=[], simulators=[n for n in names if n in raw.simulators],
                          tutors=[n for n in names if n not in raw.simulators], loaded=raw)
    return [DayJudge(chat_model(n, profile, load_options(profile), field="judge"), n) for n in names]


def _kt_stability(dirs: list[str]) -> int:
    """``simhub tutor-bench stability RUN_DIR RUN_DIR...``: the tutor ranking's agreement across runs
    of the same tutors with different learners (e.g. one per ``--role-player``)."""
    import itertools

    from simhub.errors import ConfigError
    from simhub.learners.kt.metrics import kendall_tau, mean_pairwise_kendall
    from simhub.tutoring.kt_results import read_kt_results

    if len(dirs) < 2:
        raise ConfigError("stability: name at least two KT-learner run folders", field="action")
    runs = {d: read_kt_results(Path(d) / "results.json") for d in dirs}
    axes = {"delta_solve": lambda t: t.delta_solve.mean,
            "helpfulness": lambda t: t.judged["helpfulness"].mean if t.judged else None}
    shared = set.intersection(*(set(r.tutors) for r in runs.values()))
    if len(shared) < 2:
        raise ConfigError(f"stability: the folders share {len(shared)} tutor(s); a ranking needs two", field="action")
    print(f"tutor ranking across {len(dirs)} runs ({len(shared)} shared tutors: {', '.join(sorted(shared))})")
    for axis, value in axes.items():
        scorings = []
        for r in runs.values():
            v = {t: value(r.tutors[t]) for t in sorted(shared)}
            if all(x is not None for x in v.values()):
                scorings.append(v)
        if len(scorings) < 2:
            continue
        pairs = [kendall_tau(a, b) for a, b in itertools.combinations(scorings, 2)]
        defined = [p for p in pairs if p is not None]
        worst = f"{min(defined):.2f}" if defined else "n/a"
        mean = mean_pairwise_kendall(scorings)
        print(f"  {axis}: mean pairwise Kendall tau {'n/a' if mean is None else f'{mean:.2f}'}, worst pair {worst}")
    return 0


def _kt_bench(args: argparse.Namespace) -> int:
    """``--learner kt-learner``: the multi-day bench of docs/kt-learner.md."""
    from simhub.cli.common import all_failed, check_output
    from simhub.config import load_profile
    from simhub.errors import ConfigError
    from simhub.learners.kt import load_scenarios
    from simhub.learners.kt.student import LearnerSettings, StandInRolePlayer, assign_seeds, persona_seeds
    from simhub.schema import write_jsonl
    from simhub.tutoring.kt_bench import (
        TRACES,
        KTBench,
        KTBenchOptions,
        check_abilities,
        heldout_calibration,
        is_kt_trace_file,
        learner_dialogues,
        learner_parts,
        plan_runs,
        read_kt_trace,
        run_id,
        sample_log,
    )
    from simhub.tutoring.kt_results import format_kt_results, summarize_kt, write_kt_results
    from simhub.tutoring.kt_tutors import build_kt_tutor

    for flag in ("iq_rater", "termination_judge"):
        if getattr(args, flag):
            raise ConfigError(f"--{flag.replace('_', '-')}: not for --learner kt-learner (its judges are not built)",
                              field=flag)
    if args.initial_states:
        raise ConfigError("--initial-states: KnowSim's starting states are for the knowledge-state learner, not "
                          "--learner kt-learner", field="initial_states")
    if args.extractor != "offline":
        raise ConfigError("--extractor: the KT learner reads graded answers, not turns; leave it out", field="extractor")
    if args.rescore:
        folder = Path(args.output) / TRACES
        files = sorted(f for f in folder.glob("*.json") if is_kt_trace_file(f)) if folder.is_dir() else []
        if not files:
            from simhub.errors import DataError

            raise DataError(f"{args.output}: no KT-learner traces to rescore (expected {folder}/*.json)",
                            file=str(args.output))
        traces = [read_kt_trace(f) for f in files]
        from simhub.tutoring.kt_bench import RUN_FILE
        from simhub.tutoring.trace import read_run_info

        run_file = Path(args.output) / RUN_FILE  # the run's tutor order and settings, as its first scoring had them
        info = read_run_info(run_file) if run_file.is_file() else None
        if args.judge:  # judge the finished days offline, votes stored in the traces
            from simhub.config import load_profile as _load
            from simhub.tutoring.kt_bench import write_kt_trace
            from simhub.tutoring.kt_judges import judge_runs

            judges = _kt_judges(args, _load(args.profile))
            before = [t.judgments.copy() for t in traces]
            cache = None if args.no_cache else _kt_cache(args)
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
    if not args.tutor:
        raise ConfigError("--tutor: name at least one tutor (scripted:weakest, scripted:silent or a profile tutor "
                          "with kind: openai)", field="tutor")
    if args.repeats is not None and args.repeats < 1:
        raise ConfigError(f"--repeats: {args.repeats} must be at least 1", field="repeats")
    scenarios = load_scenarios(args.scenarios or "core", days=args.days)
    abilities = check_abilities(args.abilities or "average")
    repeats = args.repeats or 1
    settings = LearnerSettings()
    check_output(args.output, folder=True)
    raw = load_profile(args.profile)
    tutors = [build_kt_tutor(t, raw, no_cache=args.no_cache) for t in dict.fromkeys(args.tutor)]
    if args.role_player and args.role_player not in raw.simulators and args.role_player not in raw.tutors:
        from simhub.errors import UnknownNameError
        from simhub.tutoring.components import model_names

        # named against the whole profile (the narrowed one below would know no model)
        raise UnknownNameError("model", args.role_player, model_names(raw), field="role_player")
    model, model_id, log, bank = learner_parts(args.kt_model or "sample", args.responses or "sample",
                                               args.kt_items or "sample")
    if args.role_player:
        from simhub.cli.common import profile_for
        from simhub.learners.kt.student import LLMRolePlayer
        from simhub.simulation import load_options
        from simhub.tutoring.components import chat_model

        sims = [args.role_player] if args.role_player in raw.simulators else []
        profile = profile_for(args, metrics=[], simulators=sims, tutors=[] if sims else [args.role_player], loaded=raw)
        role_player = LLMRolePlayer(chat_model(args.role_player, profile, load_options(profile), field="role_player"),
                                    name=args.role_player, settings=settings)
    else:
        role_player = StandInRolePlayer(settings)
    judges = _kt_judges(args, raw)
    pool = persona_seeds(log, model, n_warmup=settings.n_warmup)
    ids = [run_id(sc, ab, r) for sc in scenarios for ab in abilities for r in range(repeats)]
    seeds = assign_seeds(pool, ids, seed=args.seed, share=args.share_seeds)
    plans = plan_runs(scenarios, abilities, repeats, args.seed, seeds)
    bench = KTBench(tutors, plans, model=model, model_id=model_id, bank=bank, seeds=seeds, role_player=role_player,
                    settings=settings, output=args.output,
                    options=KTBenchOptions(cache_dir=args.cache_dir, no_cache=args.no_cache), judges=judges,
                    info={"profile": raw.source or raw.name, "scenarios": args.scenarios or "core", "days": args.days,
                          "abilities": abilities, "repeats": repeats, "tutors": [t.id for t in tutors]})
    total = len(plans) * len(tutors)
    done = {"n": 0}

    def progress(trace) -> None:
        done["n"] += 1
        if done["n"] % 10 == 0 or done["n"] == total:
            print(f"  {done['n']}/{total} runs finished", file=sys.stderr)

    traces = bench.run(on_run=progress)
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
        return all_failed("learner-days", len(days), [d.failed or "" for d in days])
    return 0


def _canonical_starts(path: str | None, items, levels) -> tuple[dict, dict]:
    """``--initial-states FILE``: KnowSim's canonical starts for the items and levels it has (read from a
    local clone, never copied here); the others start from the level's ratios, as without the file."""
    if not path:
        return {}, {}
    import hashlib
    from pathlib import Path

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


def register(sub) -> None:
    p = sub.add_parser("tutor-bench", help="rank tutors by what a knowledge-state learner learns from them (KG, DC, CO)",
                       description="Run a tutor bench (--output DIR), rescore one (--rescore), or check it against "
                                   "human ratings: simhub tutor-bench agree HUMAN.csv RUN_DIR.")
    p.add_argument("action", nargs="*", metavar="agree HUMAN.csv RUN_DIR | stability RUN_DIR RUN_DIR...",
                   help="agree: KnowSim's validation protocol against human ratings (docs/tutor-bench.md); "
                   "stability: the Kendall tau of the tutor ranking across KT-learner runs, e.g. one per "
                   "--role-player (docs/kt-learner.md)")
    add_profile(p)
    p.add_argument("--tutor", action="append", help="a tutor: scripted:stepwise, scripted:dump (kt-learner: scripted:weakest, scripted:silent), or one of the "
                   "profile's tutors: (repeatable)")
    p.add_argument("--learner", default="knowsim", help="knowsim (the scripted stand-in voices the knowledge-state "
                   "learner), knowsim:MODEL (a profile model role-plays it), a stateless baseline zs:MODEL, "
                   "zs-cot:MODEL, zs-cot-prof:MODEL, or kt-learner (the multi-day KT-grounded learner, with "
                   "--scenarios and --days) (default: knowsim)")
    p.add_argument("--extractor", default="offline", help="the per-turn signal extractor: offline (MiniLM stand-in), "
                   "offline:lexical, or a profile model (an OpenAI-compatible endpoint in JSON mode) (default: offline)")
    p.add_argument("--compare-extractor", default="auto", help="a second extractor run on every turn only to report "
                   "its agreement (Cohen's kappa): auto (offline when --extractor is a model, else none), none, "
                   "offline, offline:lexical")
    p.add_argument("--iq-rater", metavar="MODEL", help="a profile model (simulators: or tutors:) that rates each "
                   "finished conversation's interaction quality (IQ, 1-10) once; IQ then joins the results and R̄. "
                   "With --rescore, rates the folder's traces and stores the ratings in them")
    p.add_argument("--termination-judge", metavar="MODEL", help="stateless learners (zs, zs-cot, zs-cot-prof): a "
                   "profile model that reads each finished conversation and names the last turn a real student "
                   "would have stayed for; the metrics and IQ are then of the turns up to it, and the state rules "
                   "stop nothing (as --full-length)")
    p.add_argument("--items", default="sample", help="sample (the sample corpus's questions and their shipped IU "
                   "graphs) or an IU graph file whose graphs carry their question (default: sample)")
    p.add_argument("--levels", default="novice,intermediate,advanced", help="comma-separated: novice, intermediate, "
                   "advanced (default: all three)")
    p.add_argument("--initial-states", metavar="FILE", help="KnowSim's canonical starting states (its repository's "
                   "data/init_ks_cache.json): the items and levels it has start there, the others from the level's "
                   "ratios (docs/tutor-bench.md)")
    p.add_argument("--n", type=int, help="use the first N items")
    p.add_argument("--seed", type=int, default=0, help="seed of the learners, the sampling and the bootstrap (default 0)")
    p.add_argument("--preset", default="paper", help="the learner's rules: paper or released (default: paper)")
    p.add_argument("--set", action="append", metavar="FIELD=VALUE", help="override a preset field (repeatable)")
    p.add_argument("--full-length", action="store_true", help="run every conversation to the turn cap; the turn the "
                   "rules would have stopped it is recorded (the virtual early stop)")
    p.add_argument("--output", help="the run folder: traces/, run.json, results.json")
    p.add_argument("--threshold", type=float, default=0.15, help="agree: the |Cliff's delta| of a high-signal "
                   "human contrast (default 0.15)")
    p.add_argument("--rescore", action="store_true", help="recompute every metric from the folder's traces (under "
                   "--preset/--set) with no model call; writes rescored-PRESET.json")
    p.add_argument("--batch", type=int, default=16, help="conversations advanced together (default 16)")
    p.add_argument("--bootstrap", type=int, default=2000, help="item-bootstrap resamples and permutations (default 2000)")
    p.add_argument("--max-tokens", type=int, default=400, help="new tokens per model turn at most (default 400)")
    g = p.add_argument_group("--learner kt-learner (the multi-day KT-grounded learner, docs/kt-learner.md)")
    g.add_argument("--scenarios", help="core (10 personalities x 5 schedules, the default), all (with the "
                   "adversarial learner), adversarial, ids PERSONALITY__SCHEDULE or PERSONALITY (comma-separated), "
                   "or a scenario YAML file")
    g.add_argument("--days", type=int, help="days of every scenario (default: the scenario's, 30)")
    g.add_argument("--abilities", help="comma-separated: weak, average, strong (default: average)")
    g.add_argument("--repeats", type=int, help="runs per scenario and ability, each with its own persona seed "
                   "(default 1); pass^k is over them")
    g.add_argument("--share-seeds", action="store_true", help="let runs share persona seeds when there are more "
                   "runs than students in the log")
    g.add_argument("--kt-model", help="sample (BKT fitted on the sample corpus, the default) or a saved KT model file")
    g.add_argument("--responses", help="the item-response log of the persona seeds: sample (default) or a CSV "
                   "(student,item,kc,correct,time)")
    g.add_argument("--kt-items", help="the item bank: sample (the sample corpus's questions, default) or a JSONL file")
    g.add_argument("--judge", action="append", metavar="MODEL", help="a profile model on the judge panel (up to "
                   "three; repeatable): rates every session day's helpfulness, Gagné, Rosenshine and hand-over")
    g.add_argument("--role-player", metavar="MODEL", help="a profile model that role-plays the learner in JSON "
                   "(default: the offline stand-in, which samples answers from the KT belief)")
    p.add_argument("--cache-dir", help="content-addressed cache (default: $SIMHUB_HOME/cache)")
    p.add_argument("--no-cache", action="store_true", help="read and write no cache (every model call is made)")
    p.set_defaults(handler=_tutor_bench)
