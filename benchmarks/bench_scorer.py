"""Scorer throughput: batched scoring against a naive per-turn loop, on the sample corpus.

Four modes on the same profile and items, each loading every model once, each in its own process
so that peak memory (max RSS) is measured separately:

* ``batched``: one ``Scorer.score`` call over all items (prefix-tree packing across turns), metric
  adapters sharing one loaded base;
* ``batched-merged``: the same with each adapter merged into its own copy of the base;
* ``naive``: ``Scorer.score`` with one item at a time (packing only within a turn: the labels of
  one act prompt, the KCs of one knowledge prompt);
* ``reference``: one item at a time with packing off, every label, judge answer, KC question and
  tutor turn run as its own forward pass: the shape of the research code's per-turn loop.

    python benchmarks/bench_scorer.py                  # demo profile, writes benchmarks/results/scorer.json
    python benchmarks/bench_scorer.py --profile paper-8b --split test --items 0   # on a GPU, every turn
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).parent / "results" / "scorer.json"


#: batched: one Scorer.score call, adapters on one shared base (the library default); batched-merged:
#: the same with every adapter merged into its own base copy (the demo profile's setting: faster for
#: tiny models); naive: one turn per call; reference: one turn per call and one sequence per forward
#: pass, shaped like the research code. naive and reference use the profile's setting.
MODES = ("batched", "batched-merged", "naive", "reference")


def build_items(split: str, limit: int):
    """Every real student turn of the split, with the next student turn's text as the candidate."""
    from simhub.data.sample import load_sample_corpus
    from simhub.metrics import ScoreItem

    corpus = load_sample_corpus()
    items = []
    for dialogue in corpus[split]:
        students = dialogue.student_turn_indices()
        for k, index in enumerate(students):
            candidate = dialogue.turns[students[(k + 1) % len(students)]].content
            items.append(ScoreItem(dialogue, index, candidate))
    return items[:limit] if limit else items


def run_mode(mode: str, profile: str, split: str, limit: int, metrics: list[str] | None) -> dict:
    import msgspec

    from simhub.config import load_profile
    from simhub.models import loaded_models
    from simhub.provision import provision_profile, restrict
    from simhub.scoring import Scorer

    items = build_items(split, limit)
    built = provision_profile(restrict(load_profile(profile), simulators=[], tutors=[]), on_step=None)
    if mode.startswith("batched"):  # shared base, or each adapter merged into its own copy of the base
        built = msgspec.structs.replace(built, scoring=msgspec.structs.replace(built.scoring,
                                                                              share_base=mode == "batched"))
    scorer = Scorer.from_profile(built)
    names = metrics or scorer.metrics
    scorer.load(names)
    if mode == "reference":
        for lm in loaded_models():
            if hasattr(lm, "row_tokens"):
                lm.row_tokens, lm.batch_size = 0, 4  # one sequence per forward pass
    scorer.score(items[:2], names)  # warm-up: first-call allocations are not what we measure
    start = time.perf_counter()
    if mode.startswith("batched"):
        result = scorer.score(items, names)
        summary = result.summary
    else:
        results = [scorer.score([item], names) for item in items]
        summary = None
    seconds = time.perf_counter() - start
    return {
        "mode": mode,
        "items": len(items),
        "metrics": names,
        "seconds": seconds,
        "turns_per_second": len(items) / seconds,
        "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "summary": summary,
        "naive_results": None if mode.startswith("batched") else len(results),
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="demo")
    parser.add_argument("--split", default="test")
    parser.add_argument("--items", type=int, default=300, help="number of turns (0 = all)")
    parser.add_argument("--metrics", help="comma-separated metrics (default: all configured)")
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument("--mode", choices=MODES, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    metrics = args.metrics.split(",") if args.metrics else None
    if args.mode:
        print(json.dumps(run_mode(args.mode, args.profile, args.split, args.items, metrics)))
        return
    runs = {}
    for mode in MODES:
        cmd = [sys.executable, __file__, "--mode", mode, "--profile", args.profile, "--split", args.split,
               "--items", str(args.items)] + (["--metrics", args.metrics] if args.metrics else [])
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        runs[mode] = json.loads(out.strip().splitlines()[-1])
        print(f"{mode:>8}: {runs[mode]['turns_per_second']:.1f} turns/s, peak RSS {runs[mode]['max_rss_mb']:.0f} MB")
    import torch

    report = {
        "profile": args.profile,
        "split": args.split,
        "items": runs["batched"]["items"],
        "metrics": runs["batched"]["metrics"],
        "batched": {k: runs["batched"][k] for k in ("seconds", "turns_per_second", "max_rss_mb")},
        "naive": {k: runs["naive"][k] for k in ("seconds", "turns_per_second", "max_rss_mb")},
        "reference": {k: runs["reference"][k] for k in ("seconds", "turns_per_second", "max_rss_mb")},
        "batched_merged": {k: runs["batched-merged"][k] for k in ("seconds", "turns_per_second", "max_rss_mb")},
        "shared_vs_merged": runs["batched-merged"]["seconds"] / runs["batched"]["seconds"],
        "speedup_vs_naive": runs["naive"]["seconds"] / runs["batched"]["seconds"],
        "speedup_vs_reference": runs["reference"]["seconds"] / runs["batched"]["seconds"],
        "batched_summary": runs["batched"]["summary"],
        "python": platform.python_version(),
        "torch": torch.__version__,
        "machine": f"{platform.machine()}, {__import__('os').cpu_count()} cores",
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + "\n")
    print(f"speed-up {report['speedup_vs_naive']:.1f}x vs naive, {report['speedup_vs_reference']:.1f}x vs reference -> {args.output}")


if __name__ == "__main__":
    main()
