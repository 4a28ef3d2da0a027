"""``simhub simulate``, ``simhub eval``, ``simhub compare`` and ``simhub report``.

    simhub simulate --simulator tiny-student-sft --data test.jsonl --output sims.jsonl
    simhub eval --simulator tiny-student-sft --data test.jsonl --output runs/sft
    simhub eval --simulator reference:real --data test.jsonl --output runs/ceiling
    simhub compare runs/sft runs/ceiling
    simhub report runs/* --output report.html
"""

from __future__ import annotations

import argparse
import json
import sys

from simhub.cli.common import (
    add_executor,
    add_profile,
    all_failed,
    causes,
    check_configured,
    check_output,
    data_file,
    job_executor,
    metric_list,
    metric_models,
    read_dialogues,
)
from simhub.config import BUILTIN_BACKENDS


def _check_simulator(name: str | None) -> None:
    """A learner simulator's name (``knowsim:LEVEL``), checked before anything is read or built (the
    profile's names are checked against the profile by :func:`~simhub.cli.common.profile_for`)."""
    from simhub.simulation.registry import learner_simulator

    learner = learner_simulator(name)
    if learner is not None:
        learner.check(name)


def _simulator(args: argparse.Namespace, name: str, data, *, metrics: list[str] | None = None,
               tutors: list[str] | None = None, loaded=None, backend: str = "profile"):
    """The provisioned profile (with ``metrics``' and ``tutors``' models) and the simulator ``name``
    (the ICL pool beside ``data``). A learner family's learner (``knowsim[:LEVEL]``) needs no model
    of the profile, so none is provisioned for it."""
    from simhub.cli.common import profile_for
    from simhub.simulation import build_simulator, with_icl_pool
    from simhub.simulation.registry import learner_simulator

    tutors = tutors or []
    own = learner_simulator(name) is None
    profile = profile_for(args, metrics=metrics, simulators=[name] if own else [], tutors=tutors, loaded=loaded)
    force = None if backend == "profile" or not own else _backend(backend)
    return profile, build_simulator(name, with_icl_pool(profile, data) if own else profile, force_backend=force)


def _backend(choice: str) -> str:
    """``auto``: vLLM's offline engine when vLLM and a CUDA GPU are there, else batched transformers."""
    if choice != "auto":
        return choice
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        return "transformers"
    from simhub.models.vllm import has_cuda

    return "vllm" if has_cuda() else "transformers"


def _options(args: argparse.Namespace, metrics: list[str] | None = None):
    from simhub.evaluation.runs import EvalOptions, check_options

    options = EvalOptions(metrics=metrics, n_resamples=getattr(args, "bootstrap", 10_000), seed=getattr(args, "seed", 0),
                          cache_dir=args.cache_dir, no_cache=args.no_cache, chunk_size=args.chunk_size,
                          test_subsample=getattr(args, "test_subsample", None))
    check_options(options)
    return options


def _simulate(args: argparse.Namespace) -> int:
    from contextlib import closing

    from simhub.config import load_profile
    from simhub.evaluation.runs import _caches, simulate, student_targets, subsample_split
    from simhub.runformat import write_simulations

    _check_simulator(args.simulator)
    args.data = data_file(args.data)
    targets = student_targets(subsample_split(read_dialogues(args.data), args.test_subsample), args.data)
    options = _options(args)
    check_output(args.output, folder=False)
    raw = load_profile(args.profile)
    with closing(job_executor(args, raw)) as executor:  # checked before any model is built
        # simulating needs no metric model: build none
        _, simulator = _simulator(args, args.simulator, args.data, metrics=[], loaded=raw, backend=args.backend)
        generations, _ = _caches(options)
        records = simulate(simulator, targets, cache=generations, chunk_size=args.chunk_size, executor=executor)
    write_simulations(args.output, records)
    errors = [r.get("error") for r in records if r["candidate"] is None]
    if records and len(errors) == len(records):
        return all_failed("turns", len(records), errors)
    print(f"{len(records)} turns simulated by {simulator.id} -> {args.output}"
          + (f" ({len(errors)} failed: {causes(errors)})" if errors else ""))
    return 0


def _eval(args: argparse.Namespace) -> int:
    from contextlib import closing

    import msgspec

    from simhub.config import load_profile
    from simhub.evaluation.runs import format_results, run_eval, student_targets
    from simhub.simulation import build_simulator

    # Every input is read and checked before a model is built: a demo profile's first build trains for minutes.
    _check_simulator(args.simulator)
    args.data = data_file(args.data)
    metrics = metric_list(args.metrics)
    options = _options(args, metrics)
    raw = load_profile(args.profile)
    check_configured(raw, metrics)
    student_targets(read_dialogues(args.data), args.data)
    check_output(args.output, folder=True)
    with closing(job_executor(args, raw)) as executor:  # checked before any model is built
        profile, simulator = _simulator(args, args.simulator, args.data, metrics=metric_models(metrics), loaded=raw,
                                        backend=args.backend)
        record = {"simulator": simulator.config_record() if simulator.kind == "knowledge-state"
                  else build_simulator(args.simulator, raw).config_record(), "scoring": msgspec.to_builtins(raw.scoring)}
        results = run_eval(profile, simulator, args.data, args.output, options, record=record, executor=executor)
    print(format_results(results))
    print(f"run -> {args.output}")
    return _eval_status(results, args.output)


def _eval_status(results: dict, output: str) -> int:
    """Non-zero when nothing was measured: every turn failed to simulate, or every turn a metric
    tried to score failed (an endpoint down), rather than a table of dashes with status 0."""
    from pathlib import Path

    from simhub.runformat import SCORES_FILE, read_scores, read_simulations

    turns = results["data"]["turns"]
    if turns and results["failures"]["simulation"] == turns:
        return all_failed("turns", turns, [sim.error or None for _, sim in read_simulations(output)])
    dead = [m for m, n in results["failures"]["scoring"].items() if n and not results["metrics"][m].get("n")]
    if dead:
        lines = read_scores(Path(output) / SCORES_FILE)
        reasons = [(line.details.get("null_reasons") or {}).get(dead[0]) for _, line in lines]
        return all_failed(f"turns scored for {', '.join(dead)}", results["failures"]["scoring"][dead[0]],
                          [r for r in reasons if r and "failed" in r])
    return 0


def _compare(args: argparse.Namespace) -> int:
    from simhub.evaluation.runs import compare_runs, format_comparison

    result = compare_runs(args.run_a, args.run_b, n_resamples=args.bootstrap, seed=args.seed)
    print(json.dumps(result, indent=2) if args.json else format_comparison(result))
    return 0


def _report(args: argparse.Namespace) -> int:
    from simhub.evaluation.report import load_run, table1_data, write_report
    from simhub.tutoring.family import bench_sections

    check_output(args.output, folder=False, make_folders=False)
    # each tutor-bench folder is rendered by its learner family (found by its results' kind)
    sections, others, bench_title = bench_sections(args.runs)
    runs = [load_run(d) for d in others]
    title = args.title if args.title is not None else bench_title
    path = write_report(runs, args.output, title=title, sections=sections)
    if args.json:
        print(json.dumps(table1_data(runs), indent=2))
    print(f"report of {len(args.runs)} run(s) -> {path}", file=sys.stderr if args.json else sys.stdout)
    return 0


def _common(p: argparse.ArgumentParser) -> None:
    add_profile(p)
    p.add_argument("--simulator", required=True,
                   help="a simulator of the profile, baseline:STYLE, reference:..., or knowsim[:LEVEL] (the "
                        "knowledge-state learner; LEVEL novice, intermediate or advanced)")
    p.add_argument("--data", required=True, help="dialogues (JSONL, the canonical format), e.g. test.jsonl; a folder "
                                                 "of train/val/test.jsonl gives its test split")
    p.add_argument("--backend", default="profile", choices=["profile", "auto", *BUILTIN_BACKENDS],
                   help="backend of a local simulator: the profile's (default), auto (vLLM's offline engine when a "
                        "GPU and vLLM are there), transformers or vllm")
    p.add_argument("--cache-dir", help="content-addressed cache of generations and scores (default: $SIMHUB_HOME/cache)")
    p.add_argument("--no-cache", action="store_true",
                   help="neither read nor write any cache, endpoint answers included: every request is sent")
    p.add_argument("--chunk-size", type=int, default=64,
                   help="turns simulated per batch; each finished batch is cached, so a killed run loses at most one")
    add_executor(p, "batches of turns")
    _test_subsample(p)


def _test_subsample(p: argparse.ArgumentParser) -> None:
    p.add_argument("--test-subsample", type=float, metavar="FRACTION",
                   help="use the reference's random subsample of the data: random.Random(221).sample of "
                        "int(FRACTION x dialogues), e.g. 0.2 for the paper's ablation table")


def register(sub) -> None:
    p = sub.add_parser("simulate", help="simulate every real student turn of a dataset (teacher forcing)")
    _common(p)
    p.add_argument("--output", required=True, help='JSONL of {"dialogue_id", "turn_index", "candidate", "simulator"}')
    p.set_defaults(handler=_simulate)

    p = sub.add_parser("eval", help="simulate and score a dataset: a Table-1 row with dialogue-bootstrap 95%% CIs")
    _common(p)
    p.add_argument("--output", required=True, help="run directory (simulations.jsonl, scores.jsonl, results.json)")
    p.add_argument("--metrics", help="comma-separated metric names (default: all configured)")
    p.add_argument("--bootstrap", type=int, default=10_000, help="bootstrap resamples of dialogues (default 10000)")
    p.add_argument("--seed", type=int, default=0, help="seed of the bootstrap resampling (default 0)")
    p.set_defaults(handler=_eval)

    p = sub.add_parser("compare", help="paired comparison of two runs over the same data")
    p.add_argument("run_a", metavar="RUN_A", help="a simhub eval run directory")
    p.add_argument("run_b", metavar="RUN_B", help="another run directory over the same data")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--bootstrap", type=int, default=10_000, help="paired bootstrap resamples (default 10000)")
    p.add_argument("--seed", type=int, default=0, help="seed of the bootstrap and permutation tests (default 0)")
    p.set_defaults(handler=_compare)

    p = sub.add_parser("report", help="one self-contained HTML page over run directories (the leaderboard)")
    p.add_argument("runs", nargs="+", metavar="RUN_DIR",
                   help="simhub eval or eval-dialogues run directories, one leaderboard row each; tutor-bench "
                        "folders (--learner kt-learner ones too) get a section of their own")
    p.add_argument("--output", required=True, help="HTML file to write (its folder must exist)")
    p.add_argument("--title", help="page title")
    p.add_argument("--json", action="store_true", help="also print the table as JSON")
    p.set_defaults(handler=_report)

    register_dialogue_level(sub)


# ---------------------------------------------------------------------------------- dialogue level


def _rollout(args: argparse.Namespace) -> int:
    from contextlib import closing

    from simhub.config import load_profile
    from simhub.errors import ConfigError, UnknownNameError
    from simhub.evaluation.rollout import RolloutOptions, rollout, write_rollouts
    from simhub.evaluation.runs import subsample_split
    from simhub.simulation import load_options
    from simhub.simulation.tutor import build_tutor, tutor_names

    for name in ("max_turns", "samples", "max_tokens", "limit", "batch"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise ConfigError(f"{name}: must be at least 1, got {value}", field=name)
    if not 0.0 < args.top_p <= 1.0:
        raise ConfigError(f"top_p: must be in (0, 1], got {args.top_p}", field="top_p")
    _check_simulator(args.simulator)
    raw = load_profile(args.profile)
    if args.tutor not in tutor_names(raw):
        raise UnknownNameError("tutor", args.tutor, tutor_names(raw), field="tutor")
    args.data = data_file(args.data)
    dialogues = read_dialogues(args.data)
    if args.limit:
        dialogues = dialogues[: args.limit]
    dialogues = subsample_split(dialogues, args.test_subsample)  # after --limit, as the reference truncates first
    check_output(args.output, folder=True)
    with closing(job_executor(args, raw)) as executor:  # checked before any model is built
        profile, simulator = _simulator(args, args.simulator, args.data, metrics=[], tutors=[args.tutor], loaded=raw,
                                        backend=args.backend)
        force = None if args.backend == "profile" else _backend(args.backend)
        tutor = build_tutor(args.tutor, profile, load_options(profile, backend=force), mode=args.mode)
        temperature = args.temperature if args.temperature is not None else 0.6
        options = RolloutOptions(mode=args.mode, max_turns=args.max_turns, temperature=temperature, top_p=args.top_p,
                                 samples=args.samples, seed=args.seed, cache_dir=args.cache_dir, no_cache=args.no_cache,
                                 max_tokens=args.max_tokens, batch=args.batch)
        rollouts = rollout(simulator, tutor, dialogues, options, executor=executor)
    info = {"simulator": args.simulator, "tutor": args.tutor, "profile": raw.source or raw.name, "data": str(args.data),
            "mode": args.mode, "samples": args.samples, "seed": args.seed, "max_turns": args.max_turns,
            "temperature": temperature, "top_p": args.top_p, "test_subsample": args.test_subsample}
    summary = write_rollouts(rollouts, args.output, info)
    if summary["rollouts"] and summary["failed"] == summary["rollouts"]:
        return all_failed("rollouts", summary["rollouts"], [d.meta.get("failed") for d in rollouts])
    print(f"{summary['rollouts']} rollouts ({args.samples} per dialogue, {args.mode}) -> {args.output}; ends: "
          f"{summary['ends']}; mean {summary['mean_turns']:.1f} turns" + (f"; {summary['failed']} failed" if summary["failed"] else ""))
    return 0


def _eval_dialogues(args: argparse.Namespace) -> int:
    from contextlib import closing

    from simhub.cli.common import profile_for
    from simhub.config import load_profile
    from simhub.errors import ConfigError
    from simhub.evaluation.dialogue_eval import (
        DialogueEvalOptions,
        check_inputs,
        eval_dialogues,
        load_sim,
        write_results,
    )
    from simhub.simulation import load_options
    from simhub.simulation.tutor import build_tutor

    real = read_dialogues(args.real, "real")
    sim, info = load_sim(args.sim)
    check_inputs(real, sim)
    if args.bootstrap < 100:
        raise ConfigError("bootstrap: use at least 100 resamples", field="bootstrap")
    check_output(args.output, folder=True)
    simulator_name = args.simulator or info.get("simulator")
    tutor_name = args.tutor or info.get("tutor")
    want_sensitivity = simulator_name is not None and not args.no_sensitivity
    if want_sensitivity:
        _check_simulator(simulator_name)
    raw = load_profile(args.profile)
    with closing(job_executor(args, raw)) as executor:  # checked before any model is built
        simulator = tutor = None
        if want_sensitivity:
            tutors = [tutor_name] if tutor_name in raw.tutors else []
            profile, simulator = _simulator(args, simulator_name, args.real, tutors=tutors, loaded=raw)
            if tutor_name in profile.tutors:
                tutor = build_tutor(tutor_name, profile, load_options(profile), mode="free")
        else:
            profile = profile_for(args, simulators=[], tutors=[], loaded=raw)
        options = DialogueEvalOptions(n_resamples=args.bootstrap, seed=args.seed, cache_dir=args.cache_dir,
                                      no_cache=args.no_cache, max_tokens=args.max_tokens,
                                      sensitivity_prefixes=args.sensitivity_prefixes)
        results = eval_dialogues(profile, real, sim, options, simulator=simulator, tutor=tutor, executor=executor)
    path = write_results(results, args.output, {"kind": "dialogue-level", "real": str(args.real), "sim": str(args.sim),
                                                "profile": raw.source or raw.name, "simulator": simulator_name,
                                                "tutor": tutor_name})
    print(f"{'statistic':<24}{'value':>9}  95% CI")
    for name, m in results["metrics"].items():
        value = "-" if m["value"] is None else f"{m['value']:.4f}"
        ci = m["ci95"]
        print(f"{name:<24}{value:>9}  " + (f"[{ci[0]:.4f}, {ci[1]:.4f}]" if ci else "-"))
    if results["failed_rollouts"]:
        print(f"{results['failed_rollouts']} failed rollouts left out (see {path})")
    print(f"-> {path}")
    return 0


def register_dialogue_level(sub) -> None:
    p = sub.add_parser("rollout", help="whole simulated dialogues: a simulated student and a tutor from each real opening")
    add_profile(p)
    p.add_argument("--simulator", required=True,
                   help="the simulated student: a profile simulator, baseline:STYLE or knowsim[:LEVEL] (the "
                        "knowledge-state learner; LEVEL novice, intermediate or advanced)")
    p.add_argument("--tutor", required=True, help="a tutor of the profile's tutors: section")
    p.add_argument("--data", required=True, help="real dialogues (JSONL): their questions and openings")
    p.add_argument("--output", required=True, help="folder for rollouts.jsonl and rollout.json")
    p.add_argument("--mode", choices=["free", "mirror"], default="free",
                   help="free: sample until either side ends (the reference's setting); mirror: the tutor reproduces "
                        "the real tutor, stopping after the real number of student turns")
    p.add_argument("--max-turns", type=int, default=40, help="turns per dialogue at most (default 40)")
    p.add_argument("--temperature", type=float, help="sampling temperature of both sides (default 0.6)")
    p.add_argument("--top-p", type=float, default=0.95,
                   help="nucleus sampling top-p of both sides (default 0.95, the reference's; no top-k either way)")
    p.add_argument("--samples", type=int, default=1, help="rollouts per real dialogue (default 1)")
    p.add_argument("--max-tokens", type=int, default=400, help="new tokens per turn at most (default 400)")
    p.add_argument("--seed", type=int, default=0, help="sampling seed of both sides (default 0)")
    p.add_argument("--limit", type=int, help="use the first N dialogues")
    _test_subsample(p)
    p.add_argument("--backend", default="profile", choices=["profile", "auto", *BUILTIN_BACKENDS],
                   help="backend of local models: the profile's (default), auto, transformers or vllm")
    p.add_argument("--cache-dir", help="content-addressed cache (default: $SIMHUB_HOME/cache)")
    p.add_argument("--no-cache", action="store_true",
                   help="neither read nor write any cache, endpoint answers included")
    p.add_argument("--batch", type=int, help="dialogues advanced in lockstep together (default: all of them; "
                   "with --executor ray an even share per actor)")
    add_executor(p, "batches of dialogues")
    p.set_defaults(handler=_rollout)

    p = sub.add_parser("eval-dialogues", help="dialogue-level realism of simulated dialogues against the real ones")
    add_profile(p)
    p.add_argument("--real", required=True, help="the real dialogues (JSONL)")
    p.add_argument("--sim", required=True, help="simulated dialogues: a JSONL file or a simhub rollout folder")
    p.add_argument("--output", required=True,
                   help="folder for dialogue_results.json; a simhub eval run directory is fine (the report then "
                        "shows both levels for that simulator)")
    p.add_argument("--simulator", help="for tutor_sensitivity: a profile simulator, baseline:STYLE or "
                                       "knowsim[:LEVEL] (default: the rollout's)")
    p.add_argument("--tutor", help="the tutor of the turn between two simulated turns (default: the rollout's)")
    p.add_argument("--no-sensitivity", action="store_true", help="skip tutor_sensitivity (it runs the simulator)")
    p.add_argument("--sensitivity-prefixes", type=int, default=60, help="real prefixes tutor_sensitivity intervenes on")
    p.add_argument("--max-tokens", type=int, default=200, help="new tokens per simulated turn in tutor_sensitivity")
    p.add_argument("--bootstrap", type=int, default=1000, help="dialogue-bootstrap resamples (default 1000)")
    p.add_argument("--seed", type=int, default=0, help="seed of the bootstrap and of the sampled prefixes (default 0)")
    p.add_argument("--cache-dir", help="content-addressed cache of labels (default: $SIMHUB_HOME/cache)")
    p.add_argument("--no-cache", action="store_true",
                   help="neither read nor write any cache, endpoint answers included")
    add_executor(p, "labelling batches")
    p.set_defaults(handler=_eval_dialogues)
