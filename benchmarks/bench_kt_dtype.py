"""The knowledge metric with float32 and with bf16 masteries (``kt_dtype``), on the sample corpus.

The reference's KT model runs in bf16 and takes the True/False softmax in bf16, so every mastery is
a bf16 number: those of 0.5 or more are multiples of 1/256, and a turn that moves a mastery by less
than half a step leaves it unchanged, a real delta of exactly 0 (the paper's set has 4–17 % of
them, by KT model). ``kt_dtype: bfloat16`` (on in ``paper-8b``) reproduces that. This script
scores every real student turn of the bundled sample corpus with the demo KT model (``demo:kt``,
trained on first use) under both dtypes and reports, for each:

* the fraction of real per-turn, per-KC mastery deltas that are exactly 0 (and of simulated ones),
  and the size of the real deltas against the bf16 step;
* whether the masteries are bf16 numbers, and whether those of 0.5 or more lie on the 1/256 grid;
* the set's cutoffs (how many are exactly 0), the knowledge metric (mean similarity) and its QWK;
* how many turns' scores change between the two, and the time per turn.

The candidate of each turn is the dialogue's next real student turn (the last turn takes the first),
as in ``bench_scorer.py``: a fixed stand-in simulator whose turns are plausible but not the real ones.
The metric runs as the Scorer runs it in paper mode (:func:`knowledge_deltas`, then the set's own
cutoffs and :func:`knowledge_scores`), with the masteries kept for the grid check.

    python benchmarks/bench_kt_dtype.py                  # writes benchmarks/results/kt_dtype.json
    python benchmarks/bench_kt_dtype.py --splits test    # one split only
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).parent / "results" / "kt_dtype.json"
DTYPES = ("float32", "bfloat16")


def build_items(splits: list[str]):
    """``(dialogue, turn_index, candidate)`` for every real student turn of ``splits``, in corpus order."""
    from simhub.data.sample import load_sample_corpus

    corpus = load_sample_corpus()
    items = []
    for split in splits:
        for dialogue in corpus[split]:
            students = dialogue.student_turn_indices()
            for k, index in enumerate(students):
                items.append((dialogue, index, dialogue.turns[students[(k + 1) % len(students)]].content))
    return items


def run_dtype(dtype: str, items: list, repeats: int) -> tuple[dict, list]:
    import msgspec

    from simhub.config import load_profile
    from simhub.metrics import MetricContext
    from simhub.metrics.knowledge import (
        Knowledge,
        KnowledgeDeltas,
        knowledge_deltas,
        knowledge_scores,
        paper_cutoffs,
    )
    from simhub.models import LoadOptions
    from simhub.provision import provision_profile, restrict

    profile = provision_profile(restrict(load_profile("demo"), metrics=["knowledge"], simulators=[], tutors=[]),
                                on_step=None)
    config = msgspec.structs.replace(profile.scoring.metrics.knowledge, kt_dtype=dtype)
    scoring = profile.scoring
    context = MetricContext(load=LoadOptions(device=scoring.device or "cpu", batch_size=scoring.batch_size,
                                             share_base=scoring.share_base), mode="benchmark")
    tracer = Knowledge(config, context).load()
    knowledge_deltas(tracer, items[:4])  # warm-up: first-call allocations are not what we measure
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        deltas = knowledge_deltas(tracer, items)
        seconds.append(time.perf_counter() - start)
    scored = [d for d in deltas if isinstance(d, KnowledgeDeltas)]
    cutoffs = paper_cutoffs(deltas)
    per_item, summary = knowledge_scores(deltas, cutoffs)
    scores = [p["score"] for p in per_item]
    real = np.concatenate([d.real for d in scored])
    sim = np.concatenate([d.sim for d in scored])
    masteries = np.concatenate([np.concatenate([d.z_prev, d.z_real, d.z_sim]) for d in scored])
    as_bf16 = _bf16(masteries)
    high = masteries[masteries >= 0.5]
    report = {
        "dtype": dtype,
        "model_dtype": str(next(tracer.lm.model.parameters()).dtype).removeprefix("torch."),
        "turns": len(items),
        "scored_turns": len(scored),
        "real_deltas": int(real.size),
        "real_deltas_exactly_zero": int((real == 0).sum()),
        "real_zero_fraction": float((real == 0).mean()),
        "sim_zero_fraction": float((sim == 0).mean()),
        "median_abs_real_delta": float(np.median(np.abs(real))),
        # A bf16 step is 1/256 at masteries of 0.5 or more: a move of less than half of it rounds away.
        "real_deltas_under_half_a_bf16_step": float(np.mean(np.abs(real) < 1 / 512)),
        "masteries": int(masteries.size),
        "masteries_are_bf16_numbers": bool(np.array_equal(masteries, as_bf16)),
        "masteries_at_or_above_half": int(high.size),
        "masteries_at_or_above_half_on_1_256_grid": bool(np.array_equal(high * 256, np.round(high * 256))),
        "masteries_on_1_256_grid_fraction": float(np.mean(masteries * 256 == np.round(masteries * 256))),
        "distinct_masteries": int(np.unique(masteries).size),
        "mastery_range": [float(masteries.min()), float(masteries.max())],
        "cutoffs": [float(c) for c in cutoffs],
        "cutoffs_exactly_zero": int((np.asarray(cutoffs) == 0).sum()),
        "knowledge": float(np.mean([s for s in scores if s is not None])),
        "knowledge_std": float(np.std([s for s in scores if s is not None])),
        "qwk": summary["qwk"],
        "seconds": min(seconds),
        "seconds_all_repeats": seconds,
        "ms_per_turn": 1000 * min(seconds) / len(items),
    }
    return report, scores


def _bf16(values: np.ndarray) -> np.ndarray:
    import torch

    return torch.tensor(values).to(torch.bfloat16).double().numpy()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--splits", default="train,val,test", help="comma-separated sample corpus splits")
    parser.add_argument("--repeats", type=int, default=1, help="timed passes per dtype (the fastest is reported)")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    import torch

    splits = args.splits.split(",")
    items = build_items(splits)
    runs, scores = {}, {}
    for dtype in DTYPES:
        runs[dtype], scores[dtype] = run_dtype(dtype, items, args.repeats)
        r = runs[dtype]
        print(f"{dtype:>8}: {100 * r['real_zero_fraction']:.1f}% of {r['real_deltas']} real deltas exactly 0, "
              f"knowledge {r['knowledge']:.4f}, QWK {r['qwk']:.4f}, cutoffs {np.round(r['cutoffs'], 5).tolist()}, "
              f"{r['ms_per_turn']:.2f} ms/turn")
    a, b = scores["float32"], scores["bfloat16"]
    changed = [abs(x - y) for x, y in zip(a, b, strict=True) if x is not None and y is not None]
    report = {
        "splits": splits,
        "kt_model": "demo:kt (the tiny Llama trained by the tiny-kt recipe on the sample corpus)",
        "candidates": "each turn's candidate is the dialogue's next real student turn (the last takes the first)",
        "float32": runs["float32"],
        "bfloat16": runs["bfloat16"],
        "turns_whose_score_changes": sum(d > 0 for d in changed),
        "mean_abs_score_change": float(np.mean(changed)),
        "knowledge_difference": runs["bfloat16"]["knowledge"] - runs["float32"]["knowledge"],
        "python": platform.python_version(),
        "torch": torch.__version__,
        "machine": f"{platform.machine()}, {__import__('os').cpu_count()} cores",
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + "\n")
    print(f"{report['turns_whose_score_changes']} of {len(changed)} scored turns change score -> {args.output}")


if __name__ == "__main__":
    main()
