"""How many CPU threads torch should use: the cores this process may run on, less what other
processes are using right now.

torch starts one OpenMP thread per core and, by default, lets idle threads spin. When another
process keeps a core busy, every parallel region then waits for a thread the kernel has parked, and
a tiny model's many small operations slow down many times over (a demo build took 12 times as
long next to one other CPU-bound job). So simhub:

- lets idle OpenMP threads sleep (``OMP_WAIT_POLICY=PASSIVE``, unless it is set) from the start of
  every command, before torch is imported;
- sets torch's thread count from ``os.sched_getaffinity`` less the cores other processes kept busy
  over a short window (``/proc/stat`` against this process's own ``/proc/self/stat``), at least 1;
- re-checks it during training (the other job may start or stop meanwhile).

The demo's own builds are the exception: each trains on a fixed number of threads
(:func:`pinned_threads`, ``simhub.provision.DEMO_BUILD_THREADS``), so a demo model is the same
whatever the load.

``SIMHUB_THREADS=N`` fixes the count, and so does ``OMP_NUM_THREADS`` when set (the user's choice). ``benchmarks/bench_build.py`` measures the effect.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
from collections.abc import Iterator

log = logging.getLogger("simhub.threads")

THREADS_ENV = "SIMHUB_THREADS"


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return max(1, os.cpu_count() or 1)


def _busy_jiffies() -> tuple[int, int] | None:
    """(all CPUs' busy jiffies, this process's jiffies) now, or None without /proc."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
        with open("/proc/self/stat", encoding="ascii") as f:
            own = f.read().rsplit(")", 1)[1].split()
    except (OSError, ValueError, IndexError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    busy = sum(fields[:8]) - idle  # user nice system idle iowait irq softirq steal (guest is in user)
    return busy, int(own[11]) + int(own[12])  # utime + stime of every thread of this process


def others_busy_cores(window_s: float = 0.25) -> float:
    """How many cores other processes kept busy over the last ``window_s`` seconds (0 without /proc)."""
    first = _busy_jiffies()
    if first is None:
        return 0.0
    start = time.monotonic()
    time.sleep(window_s)
    second = _busy_jiffies()
    elapsed = time.monotonic() - start
    if second is None or elapsed <= 0:
        return 0.0
    ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    others = ((second[0] - first[0]) - (second[1] - first[1])) / ticks / elapsed
    return max(0.0, others)


def policy_threads(cores: int, others_busy: float) -> int:
    """Threads for ``cores`` usable cores when other processes keep ``others_busy`` of them busy:
    the cores left free (a core counts as taken from 0.5 of its time busy), at least 1.

    >>> policy_threads(2, 0.0), policy_threads(2, 0.6), policy_threads(2, 3.0), policy_threads(16, 4.2)
    (2, 1, 1, 12)
    """
    return max(1, min(cores, cores - int(others_busy + 0.5)))


_pinned: int | None = None


@contextlib.contextmanager
def pinned_threads(n: int, *, restore: bool = True) -> Iterator[None]:
    """Within the block, torch uses ``n`` threads whatever the load (the demo's builds, so that
    they give the same models whatever else runs); when the block ends, torch's thread count is set
    back to what it was (a build inside a command or a test leaves the process's count as it found
    it), unless ``restore`` is false."""
    global _pinned
    torch = sys.modules.get("torch")
    threads = torch.get_num_threads() if torch is not None else None
    before, _pinned = _pinned, n
    try:
        apply_thread_policy("pinned")
        yield
    finally:
        _pinned = before
        if restore and threads is not None and torch.get_num_threads() != threads:
            torch.set_num_threads(threads)


def chosen_threads() -> int | None:
    """The thread count fixed for this block (:func:`pinned_threads`) or by the user
    (``SIMHUB_THREADS``, else ``OMP_NUM_THREADS``), or None."""
    if _pinned is not None:
        return _pinned
    for name in (THREADS_ENV, "OMP_NUM_THREADS"):
        value = os.environ.get(name, "").strip()
        if value.isdigit() and int(value) > 0:
            return int(value)
    return None


def prefer_sleeping_threads() -> None:
    """Idle OpenMP threads sleep rather than spin, unless the user chose; only takes effect before
    torch (and its OpenMP runtime) is loaded, so commands call it first."""
    if "torch" not in sys.modules:
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


#: A measurement younger than this is reused (model loads come in bursts).
REUSE_S = 10.0
_last: tuple[float, int] | None = None


def apply_thread_policy(reason: str = "") -> int | None:
    """Set torch's intra-op threads from the free cores (or the user's fixed count); returns the
    count, or None when torch is not imported (nothing to set)."""
    global _last
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    fixed = chosen_threads()
    cores = usable_cores()
    if fixed is not None:
        threads = fixed
    elif _last is not None and time.monotonic() - _last[0] < REUSE_S:
        threads = _last[1]
    else:
        threads = policy_threads(cores, others_busy_cores() if cores > 1 else 0.0)
        _last = (time.monotonic(), threads)
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
        log.info("torch threads: %d of %d cores%s", threads, cores, f" ({reason})" if reason else "")
    return threads
