"""Benchmark simhub's ROUGE-L against rouge_score on the same pairs, in the same process.

Builds a seeded batch of tutoring-style (reference, candidate) pairs: mostly short student
utterances, with references reused across many candidates as in real evaluation sets, plus a
small share of long multi-sentence explanations. Times

* ``rouge_score``: ``RougeScorer(["rougeL"]).score(target=ref, prediction=cand)["rougeL"].fmeasure``
  per pair (the library has no batch API), and
* ``simhub``: ``simhub.metrics.rouge_l.rouge_l_batch(refs, cands)``,

checks the values are identical (``==``), and writes a JSON report.

Usage::

    python benchmarks/bench_rouge_l.py [--pairs 20000] [--output benchmarks/results/rouge_l.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from simhub.metrics.rouge_l import rouge_l, rouge_l_batch, tokenize

DEFAULT_OUTPUT = Path(__file__).resolve().parent / "results" / "rouge_l.json"

_OPENERS = ["", "", "", "Um, ", "Uh ", "Okay so ", "Wait, ", "Hmm... ", "I think ", "Maybe ", "So "]
_BODIES = [
    "the answer is {a}/{b}",
    "would I divide {a}/{b} by {c}/{d}?",
    "{a}/{b} divided by {c}/{d}",
    "I multiply by the reciprocal, so {a}/{b} times {d}/{c}",
    "is it {n}?",
    "I got {n} but I'm not sure",
    "you flip the second fraction and multiply",
    "I don't know how to start this one",
    "the common denominator is {n}",
    "x = {n}",
    "so {a} + {b} = {n}",
    "because {a} goes into {n} {b} times",
    "I forgot to carry the {a}",
    "can you explain that again?",
    "oh, I see now!",
    "that makes sense",
    "the slope is {a}/{b}",
    "I subtracted {a} from both sides",
    "is it {a}.{b} or {b}.{a}?",
    "the area is {n} square units",
    "I added the numerators: {a} + {c} = {n}",
    "no wait, it's {c}/{d}",
]
_CLOSERS = ["", "", "", ".", "?", "!", " right?", " I guess.", " lol", " 🙂"]
_FILLER_TEXT = (
    "first I looked at the problem and tried to figure out what it was asking then I wrote down "
    "the numbers we were given and I thought about whether we need to add or multiply and I "
    "decided that because it says each we should multiply but then I was not sure so I checked "
    "with a smaller example which gave the same kind of answer and that is why I think this works"
)
_FILLER = _FILLER_TEXT.split()


def _utterance(rng: random.Random) -> str:
    body = rng.choice(_BODIES).format(
        a=rng.randint(1, 9),
        b=rng.randint(1, 9),
        c=rng.randint(1, 9),
        d=rng.randint(1, 9),
        n=rng.randint(0, 120),
    )
    text = rng.choice(_OPENERS) + body + rng.choice(_CLOSERS)
    if rng.random() < 0.3:
        text += " " + rng.choice(_OPENERS) + rng.choice(_BODIES).format(a=2, b=3, c=4, d=5, n=12)
    if rng.random() < 0.15:
        text = text.upper() if rng.random() < 0.3 else text.capitalize()
    return text


def _long_explanation(rng: random.Random) -> str:
    # Multi-sentence explanations of 100-300 words, the case where the O(m*n) DP hurts most.
    n_words = rng.randint(100, 300)
    words: list[str] = []
    while len(words) < n_words:
        if rng.random() < 0.1:
            words.extend(_utterance(rng).split())
        else:
            start = rng.randrange(len(_FILLER))
            words.extend(_FILLER[start : start + rng.randint(3, 15)])
    return " ".join(words[:n_words]) + "."


def _perturb(rng: random.Random, text: str) -> str:
    # A simulated student's reply that paraphrases the gold turn: drop, repeat and swap words.
    words = text.split()
    out: list[str] = []
    for word in words:
        roll = rng.random()
        if roll < 0.15:
            continue
        out.append(word)
        if roll > 0.93:
            out.append(rng.choice(words))
    if len(out) > 2 and rng.random() < 0.3:
        i = rng.randrange(len(out) - 1)
        out[i], out[i + 1] = out[i + 1], out[i]
    return " ".join(out)


def build_pairs(n_pairs: int, seed: int = 0) -> tuple[list[str], list[str]]:
    """Seeded tutoring-style pairs; ~1% long explanations, references reused across candidates."""
    rng = random.Random(seed)
    n_refs = max(1, n_pairs // 8)
    pool = [_long_explanation(rng) if rng.random() < 0.01 else _utterance(rng) for _ in range(n_refs)]
    pool += ["", "?", "..."]  # real transcripts contain empty and punctuation-only turns
    references: list[str] = []
    candidates: list[str] = []
    for _ in range(n_pairs):
        ref = rng.choice(pool)
        roll = rng.random()
        if roll < 0.05:
            cand = ref
        elif roll < 0.6:
            cand = _perturb(rng, ref)
        elif roll < 0.99 or len(tokenize(ref)) > 60:
            cand = _utterance(rng)
        else:
            cand = _long_explanation(rng)
        references.append(ref)
        candidates.append(cand)
    return references, candidates


def _best_time(fn: Callable[[], list[float]], repeats: int) -> tuple[float, list[float]]:
    best = float("inf")
    values: list[float] = []
    for _ in range(repeats):
        start = time.perf_counter()
        values = fn()
        best = min(best, time.perf_counter() - start)
    return best, values


def _compare(references: Sequence[str], candidates: Sequence[str], repeats: int) -> dict[str, float | int]:
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False)

    def run_reference() -> list[float]:
        return [
            scorer.score(target=r, prediction=c)["rougeL"].fmeasure
            for r, c in zip(references, candidates, strict=True)
        ]

    def run_simhub() -> list[float]:
        return rouge_l_batch(references, candidates)

    def run_simhub_unbatched() -> list[float]:
        return [rouge_l(r, c) for r, c in zip(references, candidates, strict=True)]

    ref_s, ref_values = _best_time(run_reference, repeats)
    ours_s, ours_values = _best_time(run_simhub, repeats)
    unbatched_s, unbatched_values = _best_time(run_simhub_unbatched, repeats)
    mismatches = sum(a != b for a, b in zip(ref_values, ours_values, strict=True))
    mismatches_unbatched = sum(a != b for a, b in zip(ref_values, unbatched_values, strict=True))
    return {
        "pairs": len(references),
        "rouge_score_seconds": ref_s,
        "simhub_seconds": ours_s,
        "speedup": ref_s / ours_s,
        "simhub_unbatched_seconds": unbatched_s,
        "speedup_unbatched": ref_s / unbatched_s,
        "mismatches": mismatches,
        "mismatches_unbatched": mismatches_unbatched,
    }


def run(n_pairs: int, output: Path, seed: int = 0, repeats: int = 3) -> dict[str, Any]:
    references, candidates = build_pairs(n_pairs, seed)
    overall = _compare(references, candidates, repeats)

    # The long pairs dominate rouge_score's quadratic cost; report the short-only subset too so
    # the speed-up is not just an artefact of a few long texts.
    short_idx = [
        i
        for i, (r, c) in enumerate(zip(references, candidates, strict=True))
        if len(tokenize(r)) <= 60 and len(tokenize(c)) <= 60
    ]
    short = _compare([references[i] for i in short_idx], [candidates[i] for i in short_idx], repeats)

    lengths = [len(tokenize(t)) for t in (*references, *candidates)]
    result: dict[str, Any] = {
        "benchmark": "rougeL fmeasure: rouge_score.RougeScorer vs simhub.metrics.rouge_l.rouge_l_batch",
        "seed": seed,
        "repeats_best_of": repeats,
        **overall,
        "unique_references": len(set(references)),
        "unique_candidates": len(set(candidates)),
        "tokens_per_text_mean": float(np.mean(lengths)),
        "tokens_per_text_max": int(np.max(lengths)),
        "long_pairs": n_pairs - len(short_idx),
        "short_pairs_only": short,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "rouge_score": _rouge_score_version(),
        "platform": platform.platform(),
    }
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(result, indent=2) + "\n")
    return result


def _rouge_score_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("rouge-score")
    except PackageNotFoundError:
        return "unknown"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=20_000, help="number of pairs (default 20000)")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="JSON report path")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=3, help="best-of repeats per timing")
    args = parser.parse_args(argv)

    result = run(args.pairs, args.output, seed=args.seed, repeats=args.repeats)
    print(json.dumps(result, indent=2))
    checked = (result, result["short_pairs_only"])
    if any(r["mismatches"] or r["mismatches_unbatched"] for r in checked):
        print("ERROR: simhub values differ from rouge_score", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
