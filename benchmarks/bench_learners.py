"""Benchmark the knowledge-state update: turns per second on synthetic 30-IU conversations.

Builds seeded random 30-IU prerequisite DAGs, starts a learner at each level in turn, and draws
per-turn signals (about a third of the IUs mentioned, well or shallowly, and some reasoning and
articulation) for 15-turn conversations until there are ``--turns`` turns (10,000 by default). The
signals are drawn before timing; the timed part is :func:`simhub.learners.update` chained over every
conversation, under each preset, plus the per-conversation metrics and virtual early stop. Writes a
JSON report.

Usage::

    python benchmarks/bench_learners.py [--turns 10000] [--output benchmarks/results/learners.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from simhub.learners import (
    LEVELS,
    PRESETS,
    IUEdge,
    IUGraph,
    IUNode,
    IUSignal,
    conversation_metrics,
    early_stop,
    initial_state,
    update,
    validate_graph,
)

DEFAULT_OUTPUT = Path(__file__).resolve().parent / "results" / "learners.json"
TURNS_PER_CONVERSATION = 15


def random_graph(rng: random.Random, n: int = 30, name: str = "g"):
    """A DAG over IU1..IUn: each IU after the first few takes 1-3 prerequisites among earlier IUs."""
    levels = [round(0.95 - 0.85 * i / (n - 1), 3) for i in range(n)]
    nodes = tuple(IUNode(id=f"IU{i + 1}", concept=f"concept {i + 1}", abstraction_level=levels[i]) for i in range(n))
    edges = []
    for i in range(3, n):
        for j in rng.sample(range(max(0, i - 8), i), k=min(i, rng.randint(1, 3))):
            edges.append(IUEdge(source=f"IU{j + 1}", target=f"IU{i + 1}", delta_l=abs(levels[i] - levels[j])))
    return validate_graph(IUGraph(nodes=nodes, edges=tuple(edges)), name=name)


def random_turn(rng: random.Random, ids: Sequence[str]) -> dict[str, IUSignal]:
    signals = {}
    for iu in ids:
        roll = rng.random()
        quality = "well_explained" if roll < 0.15 else "shallow" if roll < 0.33 else "not_mentioned"
        roll = rng.random()
        attempt = "reasoning" if roll < 0.08 else "articulation" if roll < 0.14 else "none"
        signals[iu] = IUSignal(teaching_quality=quality, user_attempt_type=attempt)
    return signals


def build(n_turns: int, seed: int, n_graphs: int = 20):
    rng = random.Random(seed)
    graphs = [random_graph(rng, name=f"g{k}") for k in range(n_graphs)]
    conversations = []
    total = 0
    while total < n_turns:
        g = graphs[len(conversations) % n_graphs]
        level = LEVELS[len(conversations) % len(LEVELS)]
        turns = [random_turn(rng, g.ids) for _ in range(min(TURNS_PER_CONVERSATION, n_turns - total))]
        conversations.append((g, initial_state(g, level), turns))
        total += len(turns)
    return conversations, total


def _run(conversations, preset, with_metrics: bool) -> int:
    ups = 0
    for g, initial, turns in conversations:
        state, records = initial, []
        for signals in turns:
            record = update(g, state, signals, preset)
            records.append(record)
            state = record.state
            ups += record.n_up
        if with_metrics:
            conversation_metrics(g, initial, records)
            early_stop(records, preset)
    return ups


def _time(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def run(n_turns: int, output: Path, seed: int = 0, repeats: int = 3) -> dict[str, Any]:
    conversations, total = build(n_turns, seed)
    presets: dict[str, Any] = {}
    for name, preset in PRESETS.items():
        update_s = _time(lambda p=preset: _run(conversations, p, False), repeats)
        full_s = _time(lambda p=preset: _run(conversations, p, True), repeats)
        presets[name] = {
            "update_seconds": update_s,
            "turns_per_second": total / update_s,
            "microseconds_per_turn": 1e6 * update_s / total,
            "with_metrics_seconds": full_s,
            "turns_per_second_with_metrics": total / full_s,
            "upward_transitions": _run(conversations, preset, False),
        }
    result: dict[str, Any] = {
        "benchmark": "simhub.learners.update chained over synthetic 15-turn conversations, 30-IU graphs",
        "seed": seed,
        "repeats_best_of": repeats,
        "turns": total,
        "conversations": len(conversations),
        "ius_per_graph": 30,
        "graphs": len({id(g) for g, _, _ in conversations}),
        "presets": presets,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(result, indent=2) + "\n")
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=10_000, help="number of synthetic turns (default 10000)")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="JSON report path")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=3, help="best-of repeats per timing")
    args = parser.parse_args(argv)
    print(json.dumps(run(args.turns, args.output, seed=args.seed, repeats=args.repeats), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
