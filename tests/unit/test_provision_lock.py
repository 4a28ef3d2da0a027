"""Killed builds leave no lasting litter, and two processes never build the same model at once."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from simhub.provision import clean_stale_partials

REPO = Path(__file__).resolve().parents[2]


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    return int(done.stdout)


def test_stale_partial_folders_are_removed_and_live_ones_kept(tmp_path):
    dead, alive = tmp_path / f".acts.{_dead_pid()}.partial", tmp_path / f".judge.{os.getpid()}.partial"
    unrelated = [tmp_path / ".acts.lock", tmp_path / "acts", tmp_path / ".notes.partial"]
    for folder in (dead, alive, unrelated[1], unrelated[2]):
        (folder / "sub").mkdir(parents=True)
    unrelated[0].write_text("")
    assert clean_stale_partials([tmp_path, tmp_path / "missing"]) == [dead]
    assert not dead.exists() and alive.is_dir() and all(p.exists() for p in unrelated)


def test_provisioning_cleans_up_after_a_killed_build(tmp_path, monkeypatch):
    from simhub.config import Profile, load_profile
    from simhub.errors import UnknownNameError
    from simhub.provision import provision_profile

    monkeypatch.setenv("SIMHUB_HOME", str(tmp_path))
    stale = tmp_path / "demo" / f".student-sft.{_dead_pid()}.partial"
    stale.mkdir(parents=True)
    provision_profile(Profile(name="nothing-to-build"), on_step=None)
    assert stale.is_dir()  # nothing to build: provisioning did not start
    path = tmp_path / "p.yaml"
    path.write_text("name: p\nsimulators:\n  s: {model: 'demo:no-such-model'}\n")
    with pytest.raises(UnknownNameError):  # a build that fails at once, after provisioning started
        provision_profile(load_profile(path), on_step=None)
    assert not stale.exists()


#: A "build" that takes a while and records who did it: the lock, not the model, is under test.
BUILDER = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    from simhub.provision import build_once

    target = Path(sys.argv[1])

    def build():
        (target.parent / "started").write_text(str(os.getpid()))
        with open(target.parent / "builds.log", "a") as log:
            log.write(f"{os.getpid()}\\n")
        time.sleep(1.5)
        target.mkdir()
        (target / "done").write_text("ok")

    build_once(target, "the fake model", build, lambda: (target / "done").is_file())
    print("reused" if (target.parent / "started").read_text() != str(os.getpid()) else "built")
""")


def test_a_second_process_waits_for_the_first_build_and_reuses_it(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    target = tmp_path / "model"
    first = subprocess.Popen([sys.executable, "-c", BUILDER, str(target)], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not (tmp_path / "started").exists():  # the first holds the lock and is building
        assert time.monotonic() < deadline and first.poll() is None, first.communicate()
        time.sleep(0.02)
    second = subprocess.run([sys.executable, "-c", BUILDER, str(target)], env=env, capture_output=True, text=True,
                            timeout=120, check=True)
    out, err = first.communicate(timeout=60)
    assert first.returncode == 0, err
    assert out.strip() == "built" and second.stdout.strip() == "reused"
    assert "another process is building the fake model; waiting" in second.stderr
    assert (tmp_path / "builds.log").read_text().split() == [str(first.pid)]  # built once


def test_parallel_plan_gives_workers_the_builds_reached_last():
    from simhub.provision import parallel_plan

    long = ["demo:judge", "demo:acts"]
    assert parallel_plan(long, 2) == ["demo:acts"]  # this process builds the judge meanwhile
    assert parallel_plan(long, 1) == []  # room for one build: one after the other
    assert parallel_plan(long, 8) == ["demo:acts"]  # never every build: this process takes one
    assert parallel_plan(["demo:judge"], 4) == []
    assert parallel_plan(["demo:a", "demo:b", "demo:c"], 3) == ["demo:b", "demo:c"]


def test_a_long_build_runs_in_a_worker_beside_this_process(tmp_path, monkeypatch, simhub_home):
    """Two demo builds side by side: a worker takes the one this process reaches last and holds its
    lock; this process waits for it there, then reuses its model. (The 4-step demo models stand in
    for the long ones; the free-core count is fixed so the machine's load does not decide.)"""
    from simhub import provision
    from simhub.config import load_profile

    provision.build_tiny_kit()  # the session's kit (built once per test session), shared
    monkeypatch.setenv("SIMHUB_HOME", str(tmp_path))
    monkeypatch.delenv("SIMHUB_PARALLEL_BUILDS", raising=False)
    (tmp_path / "tiny").symlink_to(simhub_home / "tiny")
    monkeypatch.setattr(provision, "LONG_BUILD_STEPS", 4)
    monkeypatch.setattr("simhub.models.cpu.usable_cores", lambda: 4)  # two builds of two threads
    monkeypatch.setattr("simhub.models.cpu.others_busy_cores", lambda window_s=0.25: 0.0)
    started = []
    real = provision.start_parallel_builds

    def spy(todo):
        workers = real(todo)
        started.extend(workers)
        return workers

    monkeypatch.setattr(provision, "start_parallel_builds", spy)
    path = tmp_path / "p.yaml"
    path.write_text("name: p\nsimulators:\n  s: {model: tiny:llama, adapter: 'demo:student-sft'}\n"
                    "  t: {model: tiny:llama, adapter: 'demo:tutor'}\n")
    resolved = provision.provision_profile(load_profile(path), on_step=None)
    assert len(started) == 1 and started[0].returncode == 0
    log = (tmp_path / "demo" / ".tutor.build.log").read_text()
    assert "[simhub train] done" in log  # the worker trained the tutor, this process did not
    for name in ("student-sft", "tutor"):
        assert (tmp_path / "demo" / name / "adapter_config.json").is_file()
    assert resolved.simulators["t"].adapter == str(tmp_path / "demo" / "tutor")


def test_a_demo_model_trained_from_another_recipe_is_stale(tmp_path, monkeypatch):
    """A demo model counts as built only with the record of the shipped recipe it was trained from: one
    from an older simhub (another recipe, or no record, as the tiny-LM act classifier before the
    embedding one) is built again."""
    import json

    from simhub.provision import DEMO_RECIPE_FILE, _shipped_recipe, is_built

    monkeypatch.setenv("SIMHUB_HOME", str(tmp_path))
    folder = tmp_path / "demo" / "acts"
    folder.mkdir(parents=True)
    (folder / "adapter_config.json").write_text("{}")  # an older simhub's LoRA act classifier, no record
    assert not is_built("demo:acts")
    old = {**_shipped_recipe("acts"), "kind": "acts", "base_model": "tiny:llama", "max_steps": 1000}
    (folder / DEMO_RECIPE_FILE).write_text(json.dumps(old))
    assert not is_built("demo:acts")
    (folder / DEMO_RECIPE_FILE).write_text(json.dumps(_shipped_recipe("acts")))
    assert is_built("demo:acts")
    assert _shipped_recipe("acts")["kind"] == "acts-embedding"
    # a setting a later simhub added (the grpo section) at its default leaves the model as it was
    before_grpo = {k: v for k, v in _shipped_recipe("acts").items() if k != "grpo"}
    (folder / DEMO_RECIPE_FILE).write_text(json.dumps(before_grpo))
    assert is_built("demo:acts")
    (folder / DEMO_RECIPE_FILE).write_text(json.dumps({**before_grpo, "removed_setting": 1}))
    assert not is_built("demo:acts")  # a setting this simhub no longer has: another recipe


def test_every_demo_model_has_its_shipped_recipe():
    """``demo:NAME`` trains from ``tiny-NAME``, or for the SmolLM2 students from ``smol-NAME`` itself."""
    from simhub.config import RECIPE_DIR
    from simhub.provision import DEMO_MODELS, demo_recipe

    assert demo_recipe("judge") == "tiny-judge" and demo_recipe("smol-student-sft") == "smol-student-sft"
    assert "smol-student-dpo" in DEMO_MODELS and demo_recipe("smol-student-dpo") == "smol-student-dpo"
    assert "smol-student-grpo" in DEMO_MODELS and demo_recipe("smol-student-grpo") == "smol-student-grpo"
    for name in DEMO_MODELS:
        assert (RECIPE_DIR / f"{demo_recipe(name)}.yaml").is_file(), name
