"""Run a command on emulated slower cores, to time the test suite as a slower machine would run it.

One ``SCHED_FIFO`` process per core keeps its core busy for ``1 - share`` of every ``period`` and
sleeps for the rest, so everything else gets ``share`` of each core: the command's single-threaded
and multi-threaded work slows down alike, by about ``1 / share``. The two-core AVX2-only machines
measured here took 1.85 to 1.88 times as long as AVX-512 ones over the whole suite
(CONTRIBUTING.md), hence a share of 0.54. Check the factor on the machine first with ``--calibrate``.

    python benchmarks/slow_cores.py --calibrate 0.54
    python benchmarks/slow_cores.py 0.54 -- python -m pytest -m "not gpu and not demo_smol" -n 2 -q

It needs the right to use real-time scheduling (root, or ``CAP_SYS_NICE``) and Linux. It is a rough
stand-in: at a share of 0.54 the calibration's two loops took 1.5 to 2.2 times as long, varying from
run to run, and the test suite 2.0 times (CONTRIBUTING.md); a slower core differs in its caches and memory
bandwidth too, which this does not model. Compare the command's own times with and without it.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time


def _hog(cpu: int, busy_s: float, period_s: float, start: float) -> None:
    """Busy for ``busy_s`` of every ``period_s`` from ``start``, asleep for the rest, on one core.
    Every hog starts at the same moment and keeps its schedule, so the cores pause together (hogs
    out of phase leave a 2-thread loop only the moments when both cores are free: measured 7 times
    slower rather than 2)."""
    os.sched_setaffinity(0, {cpu})
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
    time.sleep(max(0.0, start - time.perf_counter()))
    due = start
    while True:
        until = due + busy_s
        while time.perf_counter() < until:
            pass
        due += period_s
        rest = due - time.perf_counter()
        if rest > 0:
            time.sleep(rest)
        else:  # late: start the next window now
            due = time.perf_counter()


def start_hogs(share: float, period_s: float) -> list[int]:
    """One hog per core this process may run on; their pids."""
    pids, start = [], time.perf_counter() + 0.1
    for cpu in sorted(os.sched_getaffinity(0)):
        pid = os.fork()
        if pid == 0:  # the hog: it never returns
            try:
                _hog(cpu, (1 - share) * period_s, period_s, start)
            except PermissionError:
                print("slow_cores: real-time scheduling refused (run as root or with CAP_SYS_NICE)", file=sys.stderr)
            os._exit(1)
        pids.append(pid)
    time.sleep(0.3)
    for pid in pids:
        if os.waitpid(pid, os.WNOHANG)[0]:
            stop_hogs(pids)
            sys.exit(2)
    return pids


def stop_hogs(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


#: Two loops, each in a fresh process: a 2-thread matmul loop and a pure-Python one (seconds each).
CALIBRATION = """
import time, torch
torch.set_num_threads(2)
a, b = torch.randn(512, 512), torch.randn(512, 512)
for _ in range(100):
    a @ b
t = time.perf_counter()
for _ in range(4000):
    a @ b
matmul = time.perf_counter() - t
t, total = time.perf_counter(), 0
for i in range(20_000_000):
    total += i * i
print(matmul, time.perf_counter() - t)
"""


def _calibration() -> tuple[float, float]:
    out = subprocess.run([sys.executable, "-c", CALIBRATION], capture_output=True, text=True, check=True).stdout
    matmul, loop = out.split()
    return float(matmul), float(loop)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("share", type=float, help="the share of each core left to everything else (0 < share < 1)")
    parser.add_argument("--period-ms", type=float, default=10.0, help="the hogs' cycle (default 10 ms)")
    parser.add_argument("--calibrate", action="store_true", help="time two loops without and with the hogs")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command to run")
    args = parser.parse_args()
    if not 0 < args.share < 1:
        parser.error(f"share: {args.share} must be between 0 and 1")
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not args.calibrate and not command:
        parser.error("give a command after --, or --calibrate")
    if args.calibrate:
        alone = _calibration()
        pids = start_hogs(args.share, args.period_ms / 1000)
        try:
            slowed = _calibration()
        finally:
            stop_hogs(pids)
        print(f"matmul (2 threads): {alone[0]:.2f} s -> {slowed[0]:.2f} s ({slowed[0] / alone[0]:.2f}x); "
              f"Python loop: {alone[1]:.2f} s -> {slowed[1]:.2f} s ({slowed[1] / alone[1]:.2f}x)")
        return 0
    pids = start_hogs(args.share, args.period_ms / 1000)
    start = time.time()
    try:
        code = subprocess.call(command)
    finally:
        stop_hogs(pids)
    print(f"slow_cores: share {args.share}: exit {code} after {time.time() - start:.0f} s", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
