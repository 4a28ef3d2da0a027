"""``--executor ray``: the tutor benches' batches on a real Ray instance started by the tests on loopback.

The same results files as the local executor (byte for byte: scripted tutors, the offline learners),
a worker process killed mid-run costs no unit and repeats no model call, a driver killed mid-run
resumes, and the command's errors (no Ray, a cluster that does not answer) come before anything runs.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

from simhub.cli import main
from simhub.tutoring.knowsim.tutors import DumpTutor

pytestmark = pytest.mark.ray

FAST = ["--extractor", "offline:lexical", "--bootstrap", "200", "--no-cache"]
KS = ["tutor-bench", "--tutor", "scripted:stepwise", "--tutor", "scripted:dump", "--n", "3", *FAST]
KT = ["tutor-bench", "--learner", "kt-learner", "--tutor", "scripted:weakest", "--tutor", "scripted:silent",
      "--scenarios", "confused-productive,help-seeker", "--days", "4", "--bootstrap", "200", "--no-cache"]


@pytest.fixture(scope="module")
def ray_local():
    """One Ray instance for the module, on loopback only, no dashboard, no usage statistics."""
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    import ray

    # the test module's tutors travel by value (the workers need not import the tests)
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.init(num_cpus=2, _node_ip_address="127.0.0.1", include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def _files(folder: Path) -> dict[str, bytes]:
    out = {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*.json*"))
           if p.name != "run.json"}
    results = out.pop("results.json", None)
    if results is not None:  # its creation time aside
        out["results.json"] = b"\n".join(line for line in results.split(b"\n") if b'"created"' not in line)
    return out


@pytest.mark.parametrize("command", [KS, KT], ids=["knowsim", "kt-learner"])
def test_ray_writes_the_files_the_local_executor_writes(ray_local, tmp_path, capsys, command):
    assert main([*command, "--output", str(tmp_path / "local")]) == 0
    assert main([*command, "--output", str(tmp_path / "ray"), "--executor", "ray", "--actors", "2",
                 "--batch", "3"]) == 0
    assert "ray: " in capsys.readouterr().err  # progress over the batches, with the live actors
    assert _files(tmp_path / "ray") == _files(tmp_path / "local")
    assert ray_local.is_initialized()  # the command used the running instance and left it running


class DiesOnce(DumpTutor):
    """The knowledge dump, whose process dies (as a kill by pid would) the first time it is asked, once."""

    def __init__(self, marker: Path):
        self.marker = marker

    def respond(self, requests, sampling):
        if not self.marker.exists():
            self.marker.write_text(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)
        return super().respond(requests, sampling)


def _bench(out: Path, tutors, cache: Path):
    from simhub.learners.presets import resolve_preset
    from simhub.learners.roleplay import ScriptedLearner
    from simhub.tutoring.knowsim import Bench, BenchOptions
    from simhub.tutoring.knowsim.components import build_extractor

    return Bench(tutors, ScriptedLearner(), build_extractor("offline:lexical", None), resolve_preset("paper"),
                 BenchOptions(batch=3, cache_dir=str(cache)), out)


def test_a_killed_worker_loses_no_unit_and_repeats_no_model_call(ray_local, tmp_path):
    from simhub.executors import RayExecutor
    from simhub.tutoring.knowsim import StepwiseTutor, load_items

    items, levels = load_items("sample", 2), ["novice", "advanced"]
    local = _bench(tmp_path / "local", [StepwiseTutor(), DiesOnce(tmp_path / "never")], tmp_path / "cache-local")
    (tmp_path / "never").write_text("no")  # the local run's tutor never dies
    expected = local.run(items, levels)
    marker = tmp_path / "died"
    bench = _bench(tmp_path / "ray", [StepwiseTutor(), DiesOnce(marker)], tmp_path / "cache-ray")
    executor = RayExecutor(actors=2, max_retries=2)
    traces = bench.run(items, levels, executor=executor)
    assert marker.exists()  # a worker process did die
    assert bench.runner.lost == [] and traces == expected
    # The killed batch ran again on a restarted actor; the calls it had made were answered from the
    # per-call cache, so every model call was made exactly once.
    assert sum(bench.calls.values()) + bench.cache_hits == sum(local.calls.values())
    assert _files(tmp_path / "ray") == _files(tmp_path / "local")


def test_a_killed_driver_resumes_with_no_finished_unit_run_again(ray_local, tmp_path):
    from simhub.executors import RayExecutor
    from simhub.tutoring.knowsim import StepwiseTutor, load_items

    items, levels = load_items("sample", 3), ["novice", "intermediate"]
    out = tmp_path / "run"
    seen = []

    def killed_after_two_batches(trace):
        seen.append(trace.id)
        if len(seen) == 6:
            raise KeyboardInterrupt

    bench = _bench(out, [StepwiseTutor(), DumpTutor()], tmp_path / "cache")
    with pytest.raises(KeyboardInterrupt):
        bench.run(items, levels, on_trace=killed_after_two_batches, executor=RayExecutor(actors=2))
    written = len(list((out / "traces").glob("*.json")))
    assert written >= 6
    again = _bench(out, [StepwiseTutor(), DumpTutor()], tmp_path / "cache")
    traces = again.run(items, levels, executor=RayExecutor(actors=2))
    assert len(traces) == 12 and again.runner.report.resumed == written and again.runner.report.run == 12 - written


def test_the_executor_errors_come_before_anything_runs(tmp_path, capsys, monkeypatch):
    out = tmp_path / "bad"
    assert main([*KS, "--output", str(out), "--executor", "ray", "--ray-address", "127.0.0.1:1"]) == 2
    assert "--ray-address 127.0.0.1:1: no Ray cluster answers there" in capsys.readouterr().err
    assert main([*KS, "--output", str(out), "--executor", "dask"]) == 2
    assert "unknown executor 'dask'; known: local, ray" in capsys.readouterr().err
    assert main([*KS, "--output", str(out), "--ray-address", "127.0.0.1:6379"]) == 2
    assert "--ray-address: only with --executor ray" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "ray", None)  # Ray not installed
    assert main([*KS, "--output", str(out), "--executor", "ray"]) == 2
    assert "pip install 'simhub[ray]'" in capsys.readouterr().err
    assert not out.exists()  # nothing ran, nothing was written


def test_a_profiles_executor_section_is_the_default_and_the_flags_override_it(ray_local, tmp_path, capsys):
    profile = tmp_path / "p.yaml"
    profile.write_text("extends: demo\nname: on-ray\nexecutor: {kind: ray, actors: 2, max_retries: 1}\n")
    assert main([*KS, "--profile", str(profile), "--output", str(tmp_path / "ray")]) == 0
    assert "ray: " in capsys.readouterr().err  # the profile put it on Ray
    assert main([*KS, "--profile", str(profile), "--output", str(tmp_path / "local"), "--executor", "local"]) == 0
    assert "ray: " not in capsys.readouterr().err
    assert _files(tmp_path / "ray") == _files(tmp_path / "local")
    profile.write_text("extends: demo\nname: bad\nexecutor: {kind: dask}\n")
    assert main([*KS, "--profile", str(profile), "--output", str(tmp_path / "bad")]) == 2
    assert "executor.kind" in capsys.readouterr().err
