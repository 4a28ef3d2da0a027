"""The ``simhub`` command line. Each command is a thin wrapper over a library function.

Bad input (a missing file, a malformed row, an unknown option) prints ``simhub: error: ...``
to stderr and exits with status 2; nothing half-written is left behind.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from simhub.errors import SimhubError

EXIT_USAGE = 2

_COMMANDS: dict[str, Callable[[argparse.Namespace], int | None]] = {}


def _command(name: str):
    def register(fn):
        _COMMANDS[name] = fn
        return fn

    return register


# --------------------------------------------------------------------------- data


@_command("data.convert-eedi")
def _convert_eedi(args: argparse.Namespace) -> int:
    from simhub.data.eedi import SPLITS, load_eedi
    from simhub.schema import atomic_write_bytes, to_json

    corpus = load_eedi(args.source, args.annotations, revision=args.revision)
    out = Path(args.output)
    # Encode all splits before writing any, so an error leaves no partial output.
    payloads = {s: b"".join(to_json(d) + b"\n" for d in corpus[s]) for s in SPLITS}
    for split, payload in payloads.items():
        atomic_write_bytes(out / f"{split}.jsonl", payload)
    for split in SPLITS:
        dropped = corpus.dropped_unsolvable.get(split, 0)
        note = f" ({dropped} unsolvable dropped)" if dropped else ""
        print(f"{split}: {len(corpus[split])} dialogues -> {out / (split + '.jsonl')}{note}")
    return 0


@_command("data.stats")
def _data_stats(args: argparse.Namespace) -> int:
    from simhub.data.stats import dataset_stats, format_stats
    from simhub.schema import read_jsonl

    stats = dataset_stats(read_jsonl(args.file))
    print(json.dumps(stats, indent=2) if args.json else format_stats(stats))
    return 0


@_command("data.items")
def _data_items(args: argparse.Namespace) -> int:
    from simhub.schema import atomic_write_bytes, read_jsonl, to_json
    from simhub.scoring import ScoreItem

    lines = []
    for dialogue in read_jsonl(args.file):
        previous = "I don't know."
        for index in dialogue.student_turn_indices():
            real = dialogue.turns[index].content
            candidate = real if args.candidate == "real" else previous
            lines.append(to_json(ScoreItem(dialogue=dialogue, turn_index=index, candidate=candidate)) + b"\n")
            previous = real
    atomic_write_bytes(args.output, b"".join(lines))
    print(f"{len(lines)} items ({args.candidate}) -> {args.output}")
    return 0


@_command("data.make-sample")
def _make_sample(args: argparse.Namespace) -> int:
    from simhub.data.sample import generate_sample

    summary = generate_sample(Path(args.output), seed=args.seed)
    print(json.dumps(summary, indent=2, default=str))
    return 0


@_command("tiny")
def _tiny(args: argparse.Namespace) -> int:
    from simhub.testing.tiny import build_kit

    paths = build_kit(args.output, seed=args.seed)
    for name, path in paths.items():
        print(f"{name}: {path}")
    return 0


# --------------------------------------------------------------------------- scoring


def _scorer(profile: str):
    from simhub.profiles import load_profile, scorer_config
    from simhub.scoring import Scorer

    return Scorer(scorer_config(load_profile(profile)))


@_command("score")
def _score(args: argparse.Namespace) -> int:
    from simhub.metrics.registry import check_metric_names
    from simhub.schema import atomic_write_bytes, iter_jsonl, to_json
    from simhub.scoring import ScoreItem, format_summary

    metrics = check_metric_names([m.strip() for m in args.metrics.split(",") if m.strip()], "--metrics") if args.metrics else None
    items = list(iter_jsonl(args.input, type=ScoreItem))
    scorer = _scorer(args.profile)
    result = scorer.score(items, metrics, progress=True)
    payload = b"".join(to_json(item.to_dict()) + b"\n" for item in result.items)
    atomic_write_bytes(args.output, payload)
    errors = sum(1 for item in result.items if item.error)
    print(format_summary(result.summary))
    print(f"{len(result.items)} items scored -> {args.output}" + (f" ({errors} with errors)" if errors else ""))
    return 0


@_command("kt-cutoffs")
def _kt_cutoffs(args: argparse.Namespace) -> int:
    from simhub.scoring import compute_reference_cutoffs

    path, cutoffs, count = compute_reference_cutoffs(args.profile, args.data, args.output, limit=args.limit)
    print(f"cutoffs {[round(float(c), 6) for c in cutoffs]} from {count} real deltas -> {path}")
    return 0


# --------------------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    from simhub import __version__

    parser = argparse.ArgumentParser(prog="simhub", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"simhub {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    data = sub.add_parser("data", help="convert and describe dialogue data")
    data_sub = data.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")
    conv = data_sub.add_parser("convert-eedi", help="QATD-2k raw files -> train/val/test JSONL")
    conv.add_argument("--source", required=True, help="folder with the QATD-2k files, or the Hub dataset id")
    conv.add_argument("--annotations", help="folder with train.csv/val.csv/test.csv annotations")
    conv.add_argument("--revision", help="Hub revision when --source is a dataset id")
    conv.add_argument("--output", required=True, help="folder to write train.jsonl, val.jsonl, test.jsonl")
    conv.set_defaults(handler="data.convert-eedi")
    stats = data_sub.add_parser("stats", help="print the dataset table of a JSONL file")
    stats.add_argument("file")
    stats.add_argument("--json", action="store_true", help="print JSON instead of a table")
    stats.set_defaults(handler="data.stats")
    items = data_sub.add_parser("items", help="score items for every student turn of a JSONL file (baselines)")
    items.add_argument("file")
    items.add_argument("--candidate", choices=["previous", "real"], default="previous",
                       help="previous: the student's previous turn (a naive simulator); real: the real turn (a ceiling)")
    items.add_argument("--output", required=True)
    items.set_defaults(handler="data.items")
    sample = data_sub.add_parser("make-sample", help="regenerate the seeded sample corpus")
    sample.add_argument("--output", required=True)
    sample.add_argument("--seed", type=int, default=221)
    sample.set_defaults(handler="data.make-sample")

    tiny = sub.add_parser("tiny", help="build the tiny Llama model kit (tokenizer + checkpoints)")
    tiny.add_argument("--output", default=".simhub/tiny", help="folder for the kit (default: .simhub/tiny)")
    tiny.add_argument("--seed", type=int, default=0)
    tiny.set_defaults(handler="tiny")

    score = sub.add_parser("score", help="score simulated student turns with the realism metrics")
    score.add_argument("--input", required=True, help='JSONL of {"dialogue", "turn_index", "candidate"}')
    score.add_argument("--output", required=True, help='JSONL of {"scores", "details"}, one line per input')
    score.add_argument("--metrics", help="comma-separated metric names (default: all configured)")
    score.add_argument("--profile", default="demo", help="profile name or YAML path (default: demo)")
    score.set_defaults(handler="score")

    cut = sub.add_parser("kt-cutoffs", help="compute the knowledge quantile cutoffs on a reference split")
    cut.add_argument("--data", required=True, help="reference dialogues (JSONL), e.g. the validation split")
    cut.add_argument("--profile", default="demo")
    cut.add_argument("--output", help="kt_cutoffs.json to write (default: in the KT model folder)")
    cut.add_argument("--limit", type=int, help="use at most this many dialogues")
    cut.set_defaults(handler="kt-cutoffs")

    import importlib

    for name in _EXTRA_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        module.register(sub, _command)
    return parser


#: Modules that add their own subcommands: each has ``register(subparsers, command)``, where
#: ``command(name)`` is the decorator that registers a handler. Imported lazily, so the CLI
#: starts fast and works without the optional extras.
_EXTRA_MODULES = ("simhub.training.cli", "simhub.serving.cli")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = _COMMANDS[args.handler]
    try:
        code = handler(args)
    except SimhubError as exc:
        print(f"simhub: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("simhub: interrupted", file=sys.stderr)
        return 130
    return int(code or 0)


if __name__ == "__main__":
    sys.exit(main())
