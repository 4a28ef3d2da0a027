"""``simhub score`` and ``simhub kt-cutoffs``."""

from __future__ import annotations

import argparse

from simhub.cli.common import (
    add_profile,
    all_failed,
    check_configured,
    check_output,
    metric_list,
    metric_models,
    profile_for,
    read_dialogues,
    read_score_items,
)


def _score(args: argparse.Namespace) -> int:
    from simhub.config import load_profile
    from simhub.schema import atomic_write_bytes, to_json
    from simhub.scoring import Scorer, format_summary

    metrics = metric_list(args.metrics)
    items = read_score_items(args.input)
    check_output(args.output, folder=False)
    raw = load_profile(args.profile)
    check_configured(raw, metrics)
    profile = profile_for(args, metrics=metric_models(metrics), simulators=[], tutors=[], loaded=raw)
    scorer = Scorer.from_profile(profile)
    scorer.load(metrics)  # now, so a missing extra stops the command instead of nulling every score
    result = scorer.score(items, metrics, progress=True)
    payload = b"".join(to_json(item.to_dict()) + b"\n" for item in result.items)
    atomic_write_bytes(args.output, payload)
    errors = sum(1 for item in result.items if item.error)
    if items and errors == len(items):
        return all_failed("items", len(items), [item.error for item in result.items])
    print(format_summary(result.summary))
    print(f"{len(result.items)} items scored -> {args.output}" + (f" ({errors} with errors)" if errors else ""))
    return 0


def _kt_cutoffs(args: argparse.Namespace) -> int:
    from simhub.scoring.cutoffs import compute_reference_cutoffs

    dialogues = read_dialogues(args.data)
    if args.limit:
        dialogues = dialogues[: args.limit]
    check_output(args.output, folder=False)
    profile = profile_for(args, metrics=["knowledge"], simulators=[], tutors=[])
    path, cutoffs, count = compute_reference_cutoffs(profile, dialogues, args.output, source=str(args.data))
    print(f"cutoffs {[round(float(c), 6) for c in cutoffs]} from {count} real deltas -> {path}")
    return 0


def register(sub) -> None:
    p = sub.add_parser("score", help="score simulated student turns with the realism metrics")
    p.add_argument("--input", required=True, help='JSONL of {"dialogue", "turn_index", "candidate"}')
    p.add_argument("--output", required=True, help='JSONL of {"scores", "details"}, one line per input')
    p.add_argument("--metrics", help="comma-separated metric names (default: all configured)")
    add_profile(p)
    p.set_defaults(handler=_score)

    p = sub.add_parser("kt-cutoffs", help="compute the knowledge quantile cutoffs on a reference split")
    p.add_argument("--data", required=True, help="reference dialogues (JSONL), e.g. the validation split")
    add_profile(p)
    p.add_argument("--output", help="kt_cutoffs.json to write (default: in the KT model folder)")
    p.add_argument("--limit", type=int, help="use at most this many dialogues")
    p.set_defaults(handler=_kt_cutoffs)
