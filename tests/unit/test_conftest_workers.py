"""The suite's own set-up under pytest-xdist (``tests/conftest.py``): two workers share the
controller's SIMHUB_HOME and Hugging Face cache (what one builds, the other reuses), and their
OpenMP threads sleep while they wait."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
KEYS = ("SIMHUB_HOME", "HF_HOME", "OMP_WAIT_POLICY", "PYTEST_XDIST_WORKER")


def test_two_workers_share_one_home_and_one_cache(tmp_path):
    pytest.importorskip("xdist")
    seen = tmp_path / "seen"
    seen.mkdir()
    files = []
    for name in ("a", "b"):  # two files: --dist loadfile gives each worker one
        path = tmp_path / f"test_{name}.py"
        path.write_text("import json, os, pathlib\n\n\n"
                        f"def test_{name}():\n"
                        f"    pathlib.Path({str(seen / name)!r}).write_text(json.dumps([os.environ.get(k) for k in {KEYS!r}]))\n")
        files.append(str(path))
    # a session of its own: none of this session's folders or worker variables
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PYTEST_") and k not in (*KEYS, "SIMHUB_TEST_HOME")}
    run = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "-q", "-p", "no:cacheprovider", "-p", "tests.conftest",
                          "-c", str(ROOT / "pyproject.toml"), "--rootdir", str(tmp_path), *files],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    (home_a, hf_a, omp_a, worker_a), (home_b, hf_b, omp_b, worker_b) = (json.loads((seen / n).read_text()) for n in "ab")
    assert {worker_a, worker_b} == {"gw0", "gw1"}
    assert home_a == home_b and Path(home_a).is_dir() and home_a != os.environ["SIMHUB_HOME"]
    assert hf_a == hf_b and Path(hf_a).is_dir() and hf_a != os.environ["HF_HOME"]
    assert omp_a == omp_b == "PASSIVE"
