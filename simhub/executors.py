"""Where a batch job's work units run: in this process (``local``, the default) or on a Ray cluster (``ray``).

A job hands an executor a *worker state* (a picklable object holding what every unit needs: a
bench with its tutors, learner and extractor, models not loaded yet) and its units, already grouped
into batches. The executor calls ``state.<method>(batch)`` for every batch and yields
``(index, outcome)`` as batches finish; the job (the driver) alone writes results, through its own
caches and resumable files, so the files are the ones a local run writes.

* :class:`LocalExecutor` runs the batches in order, in this process.
* :class:`RayExecutor` starts ``actors`` Ray actors, each building the worker state once (so a model
  loads once per actor), and keeps each busy with one batch at a time. An actor whose worker
  process dies is restarted and its batch retried (Ray's ``max_restarts``/``max_task_retries``); a
  batch that still fails comes back as a :class:`BatchFailure` naming the cause, for the job to count
  as it counts any failed unit, and the run goes on.

:func:`executor_from` builds one from the command line (``--executor``, ``--ray-address`` or
``RAY_ADDRESS``, ``--actors``); a cluster address that does not answer is an error naming it before
any model is built, and a missing Ray is a :class:`~simhub.errors.MissingExtraError` naming
``simhub[ray]``. ``docs/guides/scale-out.md`` describes it.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any

from simhub.errors import ConfigError

__all__ = ["EXECUTORS", "BatchFailure", "Executor", "LocalExecutor", "RayExecutor", "executor_from", "runs_here"]

EXECUTORS = ("local", "ray")


@dataclasses.dataclass(frozen=True)
class BatchFailure:
    """A batch that failed on every try (its worker died each time, or it raised): why."""

    cause: str


class Executor:
    """Runs ``getattr(state, method)(batch)`` for every batch; yields ``(index, outcome)`` as they finish."""

    name = "local"

    def map(self, state: Any, method: str, batches: Sequence[Any], *, keep: bool = False) -> Iterator[tuple[int, Any]]:
        raise NotImplementedError

    def close(self) -> None:
        """Release what the executor holds (Ray actors)."""


class LocalExecutor(Executor):
    """Every batch in this process, in order."""

    def map(self, state: Any, method: str, batches: Sequence[Any], *, keep: bool = False) -> Iterator[tuple[int, Any]]:
        call = getattr(state, method)
        for i, batch in enumerate(batches):
            yield i, call(batch)


class _Worker:
    """A Ray actor's body: the worker state, built once, and the calls on it."""

    def __init__(self, state: Any):
        self.state = state

    def call(self, method: str, batch: Any) -> Any:
        return getattr(self.state, method)(batch)


class RayExecutor(Executor):
    """Batches on ``actors`` Ray actors (see the module docstring). ``address``: a running cluster
    (``ray://`` or ``HOST:PORT``; None with ``RAY_ADDRESS`` unset starts a local instance), ``cpus`` and
    ``gpus`` per actor, ``max_retries`` restarts of a dead actor and retries of its batch."""

    name = "ray"

    def __init__(self, *, address: str | None = None, actors: int = 2, cpus: float = 1.0, gpus: float = 0.0,
                 max_retries: int = 3, init_kwargs: dict[str, Any] | None = None, progress: bool = False):
        from simhub.errors import require

        self.ray = require("ray", "ray")
        if actors < 1:
            raise ConfigError(f"--actors: {actors} must be at least 1", field="actors")
        self.address, self.actors, self.cpus, self.gpus = address, actors, cpus, gpus
        self.max_retries, self.progress = max_retries, progress
        self.init_kwargs = dict(init_kwargs or {})
        self._started = False
        #: Whether this executor started the Ray instance (and so shuts it down when closed).
        self._owns = False
        self._handles: list[Any] = []
        #: The worker state the running actors hold (:meth:`map` with ``keep``).
        self._state: Any = None

    def _init(self) -> None:
        if self._started:
            return
        ray = self.ray
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
            if self.address:
                kwargs["address"] = self.address
            else:  # a local instance of this machine alone: on loopback, sending no usage statistics
                os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
                os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
                kwargs.update(_node_ip_address="127.0.0.1", num_cpus=max(int(self.actors * self.cpus), 1))
            ray.init(**{**kwargs, **self.init_kwargs})
            self._owns = True
        self._started = True

    def map(self, state: Any, method: str, batches: Sequence[Any], *, keep: bool = False) -> Iterator[tuple[int, Any]]:
        """``keep``: leave the actors running after the last batch, for the next ``map`` over the same
        ``state`` (the same object: a scorer's metrics, one after the other, on models loaded once per
        actor); they go when another state comes, on :meth:`close`, or when a map stops part way."""
        if not batches:
            return
        self._init()
        ray = self.ray
        if self._handles and self._state is not state:
            self._kill()
        if not self._handles:
            actor_cls = ray.remote(num_cpus=self.cpus, num_gpus=self.gpus, max_restarts=self.max_retries,
                                   max_task_retries=self.max_retries)(_Worker)
            state_ref = ray.put(state)
            self._handles = [actor_cls.remote(state_ref) for _ in range(self.actors if keep else
                                                                         min(self.actors, len(batches)))]
            self._state = state
        n = min(len(self._handles), len(batches))
        pending: dict[Any, tuple[int, int]] = {}  # object ref -> (batch index, actor index)
        todo = list(range(len(batches)))
        started, done = time.perf_counter(), 0

        def submit(actor: int) -> None:
            if todo:
                i = todo.pop(0)
                pending[self._handles[actor].call.remote(method, batches[i])] = (i, actor)

        for a in range(n):
            submit(a)
        try:
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1)
                ref = ready[0]
                i, actor = pending.pop(ref)
                try:
                    outcome: Any = ray.get(ref)
                except Exception as exc:  # the actor died on every try, or the batch raised: a failed batch
                    outcome = BatchFailure(f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}")
                done += 1
                if self.progress:
                    rate = done / max(time.perf_counter() - started, 1e-9)
                    print(f"  ray: {done}/{len(batches)} batches ({rate:.2f}/s, {n} actors)", file=sys.stderr)
                submit(actor)
                yield i, outcome
        except BaseException:  # stopped part way (the driver interrupted): nothing stays behind
            self._kill()
            raise
        if not keep:
            self._kill()

    def _kill(self) -> None:
        for h in self._handles:
            self.ray.kill(h)
        self._handles, self._state = [], None

    def close(self) -> None:
        if self._handles and self.ray.is_initialized():
            self._kill()
        if self._owns and self.ray.is_initialized():
            self.ray.shutdown()
        self._started = self._owns = False


def runs_here(executor: Executor | None) -> bool:
    """Whether ``executor`` runs its batches in this process (None counts as local)."""
    return executor is None or isinstance(executor, LocalExecutor)


def _check_address(address: str) -> None:
    """A ``HOST:PORT`` cluster address must answer (a TCP connection within 5 s) before anything is built."""
    if address in ("auto", "local"):  # Ray's own words for "the cluster on this machine"
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"--ray-address {address}: expected HOST:PORT or ray://HOST:PORT", field="ray_address")
    try:
        with socket.create_connection((host, int(port)), timeout=5):
            pass
    except OSError as exc:
        raise ConfigError(f"--ray-address {address}: no Ray cluster answers there ({exc.strerror or exc})",
                          field="ray_address") from None


def executor_from(name: str | None, *, address: str | None = None, actors: int | None = None,
                  progress: bool = False, defaults: Any = None) -> Executor:
    """The executor a command's ``--executor`` names: ``local`` or ``ray`` (``address``, else
    ``RAY_ADDRESS``, else a local instance; ``actors`` defaults to the CPUs). ``defaults``: a profile's
    ``executor:`` section (:class:`simhub.config.ExecutorConfig`), for what the flags leave unset."""
    flag_address = address
    if defaults is not None:
        name = name or defaults.kind
        address = address or defaults.address
        actors = actors or defaults.actors
    name = name or "local"
    if name not in EXECUTORS:
        from simhub.errors import UnknownNameError

        raise UnknownNameError("executor", name, EXECUTORS, field="executor")
    if name == "local":
        if flag_address:
            raise ConfigError("--ray-address: only with --executor ray", field="ray_address")
        return LocalExecutor()
    address = address or os.environ.get("RAY_ADDRESS") or None
    if address:
        _check_address(address)
    extra = {} if defaults is None else {"cpus": defaults.cpus_per_actor, "gpus": defaults.gpus_per_actor,
                                         "max_retries": defaults.max_retries}
    return RayExecutor(address=address, actors=actors or max(1, os.cpu_count() or 1), progress=progress, **extra)
