"""A micro-batcher: requests that arrive within a few milliseconds share one model call.

Jobs carry a key; only jobs with the same key are merged (``None`` means "never merge").
Batches run one at a time in a dedicated worker thread, so the event loop stays free and the
models never see two batches at once. While a batch runs, new jobs queue up and form the next
(larger) batch: the busier the service, the bigger the batches.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from simhub.serving.schemas import Overloaded


@dataclass
class Job:
    key: Hashable | None
    items: Sequence[Any]
    future: asyncio.Future = field(repr=False)
    #: Anything else ``run`` needs for this job (e.g. the metric names).
    payload: Any = None


class MicroBatcher:
    """``await submit(key, items)`` returns what ``run(jobs)`` returned for that job.

    ``run`` is called in the worker thread with the jobs of one batch (all with the same key) and
    must return one result per job (or raise, which fails every job of the batch).
    """

    def __init__(self, run: Callable[[list[Job]], list[Any]], *, window_s: float = 0.005,
                 max_items: int = 256, max_pending: int = 1024, on_batch: Callable[[int, int], None] | None = None,
                 name: str = "simhub-batch"):
        self.run, self.window_s, self.max_items, self.max_pending = run, window_s, max_items, max_pending
        self.on_batch = on_batch
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        self.queue: deque[Job] = deque()
        self.pending = 0
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task | None = None

    async def submit(self, key: Hashable | None, items: Sequence[Any], payload: Any = None) -> Any:
        if self.pending + len(items) > self.max_pending:
            raise Overloaded(f"scoring queue is full ({self.pending} items waiting)")
        loop = asyncio.get_running_loop()
        job = Job(key, items, loop.create_future(), payload)
        self.queue.append(job)
        self.pending += len(items)
        if self._task is None or self._task.done():
            self._wake = asyncio.Event()
            self._task = loop.create_task(self._loop())
        self._wake.set()
        return await job.future

    def _take(self) -> list[Job]:
        """The first live job and every later live job with the same (mergeable) key, up to max_items."""
        batch: list[Job] = []
        size = 0
        keep: deque[Job] = deque()
        while self.queue:
            job = self.queue.popleft()
            if job.future.done():  # cancelled by its request's timeout
                self.pending -= len(job.items)
                continue
            fits = not batch or (job.key is not None and job.key == batch[0].key and size + len(job.items) <= self.max_items)
            if fits:
                batch.append(job)
                size += len(job.items)
                self.pending -= len(job.items)
            else:
                keep.append(job)
        self.queue = keep
        return batch

    async def _loop(self) -> None:
        loop = asyncio.get_running_loop()
        assert self._wake is not None
        while True:
            await self._wake.wait()
            if self.window_s > 0:
                await asyncio.sleep(self.window_s)
            batch = self._take()
            if not self.queue:
                self._wake.clear()
            if not batch:
                continue
            if self.on_batch:
                self.on_batch(len(batch), sum(len(j.items) for j in batch))
            try:
                results = await loop.run_in_executor(self.executor, self.run, batch)
            except BaseException as exc:
                for job in batch:
                    if not job.future.done():
                        job.future.set_exception(exc)
                if isinstance(exc, asyncio.CancelledError):
                    raise
                continue
            for job, result in zip(batch, results, strict=True):
                if not job.future.done():
                    job.future.set_result(result)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        self.executor.shutdown(wait=False, cancel_futures=True)
