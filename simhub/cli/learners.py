"""``simhub learners ...``: knowledge-state learners (replaying knowsim runs, building and checking IU graphs)."""

from __future__ import annotations

import argparse
import json
import sys

from simhub.errors import ConfigError


def _replay(args: argparse.Namespace) -> int:
    import msgspec

    from simhub.learners.presets import parse_overrides, resolve_preset
    from simhub.learners.replay import RunFailure, format_result, replay_file

    preset = resolve_preset(args.preset, parse_overrides(args.set))
    result = replay_file(args.run, args.graphs, preset)
    results = result if isinstance(result, list) else [result]
    failures = [r for r in results if isinstance(r, RunFailure)]
    if args.json:
        print(json.dumps(msgspec.to_builtins(result), indent=2, ensure_ascii=False))
    else:
        print("\n\n".join(format_result(r) for r in results if not isinstance(r, RunFailure)))
    for r in results:
        for warning in [] if isinstance(r, RunFailure) else r.warnings:
            print(f"simhub learners replay: warning: {warning}", file=sys.stderr)
    for f in failures:  # the others are printed; each failed run is named with its index and reason
        print(f"simhub learners replay: run [{f.index}] not replayed: {f.error}", file=sys.stderr)
    if failures:
        print(f"simhub learners replay: {len(results) - len(failures)} of {len(results)} runs replayed, "
              f"{len(failures)} failed", file=sys.stderr)
        return 1
    return 0


def _check(args: argparse.Namespace) -> int:
    from simhub.learners.graph import read_graphs, validate_graph
    from simhub.learners.presets import resolve_preset

    graphs = read_graphs(args.file)
    cycles = resolve_preset(args.preset).cycles
    for name, graph in graphs.items():
        checked = validate_graph(graph, name=name, file=args.file, cycles=cycles)
        depth = max(checked.depth.values())
        print(f"{name}: {checked.size} IUs, {len(graph.edges)} edges, depth {depth}, "
              f"{len(checked.warnings)} warning{'s' if len(checked.warnings) != 1 else ''}")
        for w in checked.warnings:
            print(f"  {w.code}: {w.message}")
    return 0


def _graphs(args: argparse.Namespace) -> int:
    import sys

    from simhub.cli.common import check_output, profile_for
    from simhub.config import load_profile
    from simhub.errors import DataError
    from simhub.learners.chat import chat_model, model_sections
    from simhub.learners.graph import write_graphs
    from simhub.learners.graphgen import build_graphs, existing_graphs, read_items
    from simhub.simulation import load_options

    check_output(args.output, folder=False)
    items = read_items(args.items)
    if args.n is not None:
        if args.n < 1:
            raise DataError(f"--n: {args.n} must be at least 1", field="n")
        items = items[:args.n]
    if args.retries < 0:
        raise DataError(f"--retries: {args.retries} must be at least 0", field="retries")
    raw = load_profile(args.profile)
    chat_model(args.model, raw, field="model")  # an unknown name is refused before anything is built
    profile = profile_for(args, metrics=[], loaded=raw, **model_sections(raw, [args.model]))  # a local model built once
    chat = chat_model(args.model, profile, load_options(profile), field="model")
    existing = existing_graphs(args.output)
    done = [0]

    def progress(item, cause) -> None:
        done[0] += 1
        what = f"failed: {cause}" if cause else "ok"
        print(f"[{done[0]}/{len(items)}] {item.id}: {what}", file=sys.stderr, flush=True)

    run = build_graphs(items, chat, retries=args.retries, existing=existing, on_item=progress)
    write_graphs(args.output, run.graphs)
    made = len(items) - run.skipped - len(run.failures)
    warned = sum(1 for c in run.checked.values() if c.warnings)
    print(f"{made} graph(s) built, {run.skipped} already in {args.output}, {len(run.failures)} failed "
          f"({run.attempts} request(s)); {warned} with warnings (simhub learners check {args.output})")
    for item, cause in run.failures.items():
        print(f"  failed {item}: {cause}")
    return 1 if run.failures and not made and not run.skipped else 0


def _kt_fit(args: argparse.Namespace) -> int:
    """Fit a KT model on an item-response log and save it (``--kt-model`` of the KT-learner bench)."""
    import sys
    import time
    from pathlib import Path

    from simhub.learners.kt.logs import read_responses
    from simhub.tutoring.lms.bench import heldout_calibration, sample_log

    log = sample_log("train") if args.responses == "sample" else read_responses(args.responses)
    out = Path(args.output)
    if not out.parent.is_dir():
        raise ConfigError(f"--output: the folder {out.parent} does not exist", field="output")
    start = time.perf_counter()
    if args.backend == "bkt":
        from simhub.learners.kt.bkt_fit import FitSettings, fit_bkt

        model = fit_bkt(log, FitSettings(method=args.method, seed=args.seed), pooled=args.pooled)
    elif args.backend == "akt":
        from simhub.learners.kt.akt import AKTSettings, fit_akt

        if args.epochs < 1:
            raise ConfigError(f"--epochs: {args.epochs} must be at least 1", field="epochs")
        print(f"training AKT on {len(log)} answers of {len(log.students)} students ({args.epochs} epochs)",
              file=sys.stderr)
        model = fit_akt(log, AKTSettings(epochs=args.epochs, seed=args.seed))
    elif args.backend == "llmkt":  # nothing to fit: the knowledge metric's tracer, named in the file
        from simhub.learners.kt.items import sample_item_bank
        from simhub.learners.kt.llmkt import LLMKTModel
        from simhub.metrics.knowledge import KnowledgeTracer
        from simhub.models import LoadOptions, load_lm
        from simhub.provision import resolve_model

        folder = resolve_model(args.model)
        bank = sample_item_bank()
        from simhub.config import ModelRef

        tracer = KnowledgeTracer(load_lm(ModelRef(model=folder), LoadOptions(device="cpu")))
        model = LLMKTModel(tracer, log.kcs, bank.items, model=folder)
    else:
        from simhub.errors import UnknownNameError

        raise UnknownNameError("KT backend", args.backend, ["bkt", "akt", "llmkt"], field="backend")
    model.save(out)
    print(f"{args.backend}: {len(model.kcs)} KCs fitted on {len(log)} answers in {time.perf_counter() - start:.1f} s "
          f"-> {out}")
    heldout = args.heldout or ("sample" if args.responses == "sample" else None)
    if heldout:
        held = sample_log("test") if heldout == "sample" else read_responses(heldout)
        cal = heldout_calibration(model, held)
        if cal is not None:
            print(f"held-out calibration on {cal['n']} answers: ECE {cal['ece']:.3f}, Brier {cal['brier']:.3f}")
    return 0


def register(sub) -> None:
    learners = sub.add_parser("learners", help="knowledge-state learners: replay knowsim runs, build and check IU graphs")
    lsub = learners.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND", parser_class=type(learners))

    p = lsub.add_parser("replay", help="recompute a knowsim run log's states, loads and metrics under a preset")
    p.add_argument("run", help="a knowsim run log (JSON: one run, or a list of runs)")
    p.add_argument("--graphs", required=True, help="the IU graphs: a knowsim IU cache or a simhub graph file")
    p.add_argument("--preset", default="released", help="paper or released (default: released, the code that "
                   "wrote knowsim's logs)")
    p.add_argument("--set", action="append", metavar="FIELD=VALUE",
                   help="override a preset field, e.g. softening=1.0 or mention_weights.unaware=2 (repeatable)")
    p.add_argument("--json", action="store_true", help="print JSON (a list when the log holds a list)")
    p.set_defaults(handler=_replay)

    p = lsub.add_parser("graphs", help="build IU graphs for items through a chat model of the profile (JSON mode)",
                        description="Ask a model of the profile (an OpenAI-compatible endpoint or a local model) for "
                                    "each item's IU graph, check it, retry an unusable answer with another seed, and "
                                    "write the graphs in simhub's format. A failed item is named, never fatal; graphs "
                                    "already in --output are kept (docs/learners.md).")
    p.add_argument("--items", required=True, help="sample (the sample corpus's questions), a dialogue file (a "
                   "QATD-2k split), or a JSONL of items with id, problem and solution (knowsim's paper_subset)")
    p.add_argument("--model", required=True, help="a models: entry of the profile (a simulators: or tutors: entry still works, with a note)")
    p.add_argument("--output", required=True, help="the graph file to write (JSON); an existing one is extended")
    p.add_argument("--profile", default="demo", help="profile name or YAML path (default: demo)")
    p.add_argument("--n", type=int, help="only the first N items")
    p.add_argument("--retries", type=int, default=2, help="more attempts for an unusable answer (default 2)")
    p.set_defaults(handler=_graphs)

    p = lsub.add_parser("kt-fit", help="fit a KT model (BKT or AKT) on an item-response log, for the KT learner",
                        description="Fit a knowledge-tracing model on graded answers and save it; "
                                    "simhub tutor-bench --learner kt-learner --kt-model FILE uses it "
                                    "(docs/kt-learner.md).")
    p.add_argument("--backend", default="bkt", help="bkt (EM or grid, per KC or pooled), akt (pykt-toolkit's "
                   "AKT, trained here) or llmkt (the knowledge metric's LLM tracer, --model; nothing is fitted) "
                   "(default: bkt)")
    p.add_argument("--model", default="demo:kt", help="llmkt: the tracer's model (default: demo:kt, built on first use)")
    p.add_argument("--responses", default="sample", help="sample (the sample corpus's train split) or a CSV "
                   "student,item,kc,correct,time (default: sample)")
    p.add_argument("--heldout", help="a CSV of held-out answers to report the model's calibration on (default with "
                   "sample: the test split)")
    p.add_argument("--output", required=True, help="the model file to write (JSON; AKT adds a .safetensors beside it)")
    p.add_argument("--method", default="em", choices=["em", "grid"], help="bkt: em or grid (default em)")
    p.add_argument("--pooled", action="store_true", help="bkt: one parameter set for all KCs (for sparse logs)")
    p.add_argument("--epochs", type=int, default=40, help="akt: training epochs (default 40)")
    p.add_argument("--seed", type=int, default=0, help="seed of the fit (default 0)")
    p.set_defaults(handler=_kt_fit)

    p = lsub.add_parser("check", help="validate an IU graph file: errors exit 2, warnings are listed")
    p.add_argument("file", help="a simhub graph file (JSON or YAML), a knowsim IU cache, or one graph")
    p.add_argument("--preset", default="paper", help="paper (default: a cycle is an error, exit 2) or released (a "
                   "cycle is a warning: the released code orders the graph anyway)")
    p.set_defaults(handler=_check)
