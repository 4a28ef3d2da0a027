"""The CPU thread policy (simhub.models.cpu): torch threads from the cores other processes leave free,
idle OpenMP threads that sleep, and the user's fixed count respected."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from simhub.models import cpu


def test_policy_threads_leaves_the_cores_others_keep_busy():
    assert cpu.policy_threads(2, 0.0) == 2
    assert cpu.policy_threads(2, 0.4) == 2  # a core counts as taken from half its time busy
    assert cpu.policy_threads(2, 0.5) == 1
    assert cpu.policy_threads(2, 1.0) == 1
    assert cpu.policy_threads(2, 7.0) == 1  # never below one
    assert cpu.policy_threads(16, 4.2) == 12
    assert cpu.policy_threads(1, 0.0) == 1


def test_the_users_count_wins(monkeypatch):
    monkeypatch.delenv("SIMHUB_THREADS", raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert cpu.chosen_threads() is None
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert cpu.chosen_threads() == 3
    monkeypatch.setenv("SIMHUB_THREADS", "1")
    assert cpu.chosen_threads() == 1
    monkeypatch.setenv("SIMHUB_THREADS", "zero")  # not a count: ignored
    assert cpu.chosen_threads() == 3


def test_apply_sets_torchs_threads(monkeypatch):
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    monkeypatch.setenv("SIMHUB_THREADS", "1")
    try:
        assert cpu.apply_thread_policy("test") == 1
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_another_busy_process_is_seen():
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)
        assert cpu.others_busy_cores(0.5) > 0.5  # one spinning process: about one core (more if others run)
    finally:
        hog.kill()
        hog.wait()


def test_commands_make_idle_openmp_threads_sleep(tmp_path):
    """Every `simhub` command chooses the wait policy before torch loads; a value the user set is kept."""
    code = ("import os, sys; from simhub.cli import main; code = main(['data', 'stats', sys.argv[1]]); "
            "print(code, 'torch' in sys.modules, os.environ.get('OMP_WAIT_POLICY'))")
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    missing = str(tmp_path / "missing.jsonl")
    fresh = subprocess.run([sys.executable, "-c", code, missing], capture_output=True, text=True, env=env)
    assert fresh.stdout.split() == ["2", "False", "PASSIVE"], fresh.stderr
    kept = subprocess.run([sys.executable, "-c", code, missing], capture_output=True, text=True,
                          env={**env, "OMP_WAIT_POLICY": "ACTIVE"})
    assert kept.stdout.split() == ["2", "False", "ACTIVE"], kept.stderr
