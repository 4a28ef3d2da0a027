"""The suite's own set-up under pytest-xdist (``tests/conftest.py``): two workers share the
controller's SIMHUB_HOME and Hugging Face cache (what one builds, the other reuses), and their
OpenMP threads sleep while they wait and their thread count is fixed; the session removes the temporary folders it made at its end
(SIMHUB_TEST_KEEP_HOME=1 keeps them), and a test skipped for a missing Python package fails it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
KEYS = ("SIMHUB_HOME", "HF_HOME", "OMP_WAIT_POLICY", "PYTEST_XDIST_WORKER", "SIMHUB_THREADS")


def test_two_workers_share_one_home_and_one_cache(tmp_path):
    pytest.importorskip("xdist")
    seen = tmp_path / "seen"
    seen.mkdir()
    files = []
    for name in ("a", "b"):  # two files: --dist loadfile gives each worker one
        path = tmp_path / f"test_{name}.py"
        path.write_text("import json, os, pathlib\n\n\n"
                        f"def test_{name}():\n"
                        f"    pathlib.Path({str(seen / name)!r}).write_text(json.dumps([os.environ.get(k) for k in {KEYS!r}]\n"
                        "        + [os.path.isdir(os.environ['SIMHUB_HOME']), os.path.isdir(os.environ['HF_HOME'])]))\n")
        files.append(str(path))
    run = _session(files, tmp_path, "-n", "2")
    assert run.returncode == 0, run.stdout + run.stderr
    (home_a, hf_a, omp_a, worker_a, threads_a, *made_a), (home_b, hf_b, omp_b, worker_b, threads_b, *made_b) = (
        json.loads((seen / n).read_text()) for n in "ab")
    assert {worker_a, worker_b} == {"gw0", "gw1"}
    # torch's threads fixed for the session, the cores shared out between the two workers (not the load)
    assert threads_a == threads_b == str(max(1, len(os.sched_getaffinity(0)) // 2))
    assert made_a == made_b == [True, True]  # both folders existed while the tests ran
    assert home_a == home_b and home_a != os.environ["SIMHUB_HOME"]
    assert hf_a == hf_b and hf_a != os.environ["HF_HOME"]
    assert omp_a == omp_b == "PASSIVE"
    assert not Path(home_a).exists() and not Path(hf_a).exists()  # removed at the session's end


def _session(files, rootdir, *args, env_extra=None):
    # a session of its own: none of this session's folders or worker variables
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PYTEST_") and k not in (*KEYS, "SIMHUB_TEST_HOME", "SIMHUB_TEST_KEEP_HOME")}
    return subprocess.run([sys.executable, "-m", "pytest", *args, "-q", "-p", "no:cacheprovider", "-p", "tests.conftest",
                           "-c", str(ROOT / "pyproject.toml"), "--rootdir", str(rootdir), *files],
                          cwd=ROOT, env={**env, **(env_extra or {})}, capture_output=True, text=True, timeout=300)


def test_a_skip_for_a_missing_python_package_fails_the_session_and_a_kept_home_stays(tmp_path):
    """The dev extra brings every package a test needs: pytest.importorskip skipping a test fails the
    session, naming the test and the package; another skip (an optional system tool) does not.
    With SIMHUB_TEST_KEEP_HOME=1 the session's model home stays, and its path is printed."""
    path = tmp_path / "test_skips.py"
    path.write_text("import os, pytest\n\n\n"
                    "def test_needs_a_package():\n    pytest.importorskip('no_such_package_for_simhub')\n\n\n"
                    "def test_needs_a_tool():\n    pytest.skip('needs the frobnicator tool (apt-get install frobnicator)')\n\n\n"
                    "def test_home():\n    print('HOME', os.environ['SIMHUB_HOME'])\n")
    run = _session([str(path)], tmp_path, "-s")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "test_skips.py::test_needs_a_package: could not import 'no_such_package_for_simhub'" in run.stdout
    section = run.stdout.split("missing Python package")[1].split("Install every test dependency")[0]
    assert "test_needs_a_package" in section and "test_needs_a_tool" not in section
    path.write_text("import os\n\n\ndef test_home():\n    print('HOME', os.environ['SIMHUB_HOME'])\n")
    kept = _session([str(path)], tmp_path, "-s", env_extra={"SIMHUB_TEST_KEEP_HOME": "1"})
    assert kept.returncode == 0, kept.stdout + kept.stderr
    home = Path(kept.stdout.split("HOME ", 1)[1].split()[0])
    kept_line = kept.stdout.split("kept (SIMHUB_TEST_KEEP_HOME=1): ", 1)[1].splitlines()[0]
    try:
        assert home.is_dir() and str(home) in kept_line.split(", ")
    finally:
        import shutil

        for folder in kept_line.split(", "):
            shutil.rmtree(folder, ignore_errors=True)
