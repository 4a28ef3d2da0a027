"""GPU: score every student turn of the Eedi test split with the 8B metric models (paper profile).

Ready to run on one GPU with the converted data and the published checkpoints in the Hub cache:

    simhub data convert-eedi --source Eedi/Question-Anchored-Tutoring-Dialogues-2k \
        --annotations annotations/ --output data/eedi
    python benchmarks/gpu_score_eedi.py --data data/eedi/test.jsonl --predictions sims.jsonl \
        --profile paper-8b --output benchmarks/results/gpu_score_eedi.json

``--predictions`` is a JSONL of ``{"dialogue_id", "turn_index", "candidate"}``; without it each real
turn is scored against itself (a ceiling check: acts/correctness/cosine/rouge_l should be near 1).
Reports turns/s per metric stage and the summary table (compare with SPEC §6, Table 1).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, type=Path)
    parser.add_argument("--predictions", type=Path)
    parser.add_argument("--profile", default="paper-8b")
    parser.add_argument("--output", type=Path, default=Path("benchmarks/results/gpu_score_eedi.json"))
    args = parser.parse_args(argv)

    import torch

    from simhub.profiles import load_profile, scorer_config
    from simhub.schema import read_jsonl
    from simhub.scoring import ScoreItem, Scorer, format_summary

    dialogues = {d.id: d for d in read_jsonl(args.data)}
    if args.predictions:
        rows = [json.loads(line) for line in args.predictions.read_text().splitlines() if line.strip()]
        items = [ScoreItem(dialogues[r["dialogue_id"]], r["turn_index"], r["candidate"]) for r in rows]
    else:
        items = [ScoreItem(d, i, d.turns[i].content) for d in dialogues.values() for i in d.student_turn_indices()]
    scorer = Scorer(scorer_config(load_profile(args.profile)))
    start = time.perf_counter()
    scorer.load()
    load_s = time.perf_counter() - start
    timings = {}
    for metric in scorer.metrics:
        if metric == "errors":
            continue
        t0 = time.perf_counter()
        scorer.score(items[:1], [metric])
        t1 = time.perf_counter()
        timings[metric] = t1 - t0
    t0 = time.perf_counter()
    result = scorer.score(items, progress=True)
    total = time.perf_counter() - t0
    print(format_summary(result.summary))
    report = {
        "profile": args.profile, "items": len(items), "load_seconds": load_s, "score_seconds": total,
        "turns_per_second": len(items) / total, "warmup_seconds": timings, "summary": result.summary,
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
