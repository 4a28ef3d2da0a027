"""Simulation on an executor (:mod:`simhub.executors`): chunks of targets answered here or on workers.

:func:`simulated` yields each chunk's results as it finishes (the caller caches and writes them: the
driver alone writes); :func:`simulate_chunks` collects every target's result in order. On another
executor each worker holds a copy of the simulator (:class:`SimulateWork`) and loads its model once.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from simhub.executors import BatchFailure, Executor, runs_here
from simhub.models import Sampling
from simhub.simulation.base import SimulationResult, Simulator, Target

__all__ = ["SimulateWork", "simulate_chunks", "simulated"]


class SimulateWork:
    """A worker's part: a copy of the simulator (its model loaded on the worker, on first use) and the
    decoding; :meth:`run` answers one chunk of targets."""

    def __init__(self, simulator: Simulator, sampling: Sampling | None):
        self.simulator, self.sampling = simulator, sampling

    def run(self, targets: list[Target]) -> list[SimulationResult]:
        return self.simulator.simulate(targets, self.sampling)


def simulated(simulator: Simulator, targets: Sequence[Target], chunks: list[list[int]], sampling: Sampling | None,
              executor: Executor | None) -> Iterator[tuple[list[int], list[SimulationResult]]]:
    """Each chunk (indices into ``targets``) with its results, here or on ``executor``'s workers, as
    they finish; a chunk the executor lost is a failed result for each of its targets, naming the cause."""
    if runs_here(executor):
        for chunk in chunks:
            yield chunk, simulator.simulate([targets[n] for n in chunk], sampling)
        return
    work = SimulateWork(simulator, sampling)
    for i, outcome in executor.map(work, "run", [[targets[n] for n in chunk] for chunk in chunks]):  # type: ignore[union-attr]
        if isinstance(outcome, BatchFailure):
            outcome = [SimulationResult([], error=f"lost on the executor: {outcome.cause}") for _ in chunks[i]]
        yield chunks[i], outcome


def simulate_chunks(simulator: Simulator, targets: Sequence[Target], sampling: Sampling | None,
                    executor: Executor | None, *, chunk_size: int = 64, progress: bool = True) -> list[SimulationResult]:
    """Every target's result, in order: in one call here (the simulator batches as it likes), or in
    chunks of ``chunk_size`` on ``executor``'s workers.

    Seeded sampling on a batched local model depends on the batch a prompt is in, so another executor's
    chunks give another (equally seeded) draw; greedy decoding and per-request seeds (vLLM, endpoints)
    give the same answers."""
    if runs_here(executor):
        return simulator.simulate(targets, sampling, progress=progress)
    size = max(1, chunk_size)
    chunks = [list(range(k, min(k + size, len(targets)))) for k in range(0, len(targets), size)]
    out: list[SimulationResult | None] = [None] * len(targets)
    for chunk, results in simulated(simulator, targets, chunks, sampling, executor):
        for n, result in zip(chunk, results, strict=True):
            out[n] = result
    return [r for r in out if r is not None]
