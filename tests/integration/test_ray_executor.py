"""``--executor ray``: batch jobs on a real Ray instance started by the tests on loopback.

The tutor benches, ``eval`` (simulation and every metric), ``rollout``, ``eval-dialogues`` and
``annotate`` write the same files as the local executor (byte for byte: scripted tutors, the offline
learners, greedy decoding, the same batches; a model metric's floats to float32 precision), a
worker process killed mid-run costs no unit and repeats no model call, a driver killed mid-run
resumes, and the command's errors (no Ray, a cluster that does not answer) come before anything
runs. (One file, so that the suite's workers never start two Ray instances at once.)
"""

from __future__ import annotations

import json
import math
import os
import signal
import sys
from pathlib import Path

import pytest

from simhub.cli import main
from simhub.executors import RayExecutor
from simhub.simulation import Simulator
from simhub.simulation.base import SimulationResult, candidate_from_text
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


@pytest.fixture(autouse=True)
def _one_torch_thread(monkeypatch):
    """torch's sums depend on its thread count: an actor of one CPU runs one thread (Ray sets
    OMP_NUM_THREADS=1), and so does the local run here, whatever else the machine is doing and
    whatever an earlier test of this process left (a model loaded before is not loaded again, so
    its thread policy is not applied again). That keeps the rollouts' sampled texts the same."""
    import torch

    monkeypatch.setenv("SIMHUB_THREADS", "1")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _assert_same_to_float32(ours: Path, theirs: Path) -> None:
    """The same JSON (or JSON lines) but for floats, which agree to float32 precision."""
    a, b = _json_values(ours.read_bytes()), _json_values(theirs.read_bytes())
    assert [x for x in a if not isinstance(x, float)] == [x for x in b if not isinstance(x, float)], ours.name
    floats = [(x, y) for x, y in zip(a, b, strict=True) if isinstance(x, float) or isinstance(y, float)]
    differ = [(x, y) for x, y in floats if not math.isclose(x, y, rel_tol=1e-6, abs_tol=1e-9)]
    assert not differ, (ours.name, differ[:5])


def _json_values(data: bytes) -> list:
    """Every number and string of a JSON or JSON-lines file, in order (for comparing floats approximately)."""
    out: list = []

    def walk(value):
        if isinstance(value, dict):
            for k in sorted(set(value) - {"created"}):  # (when the file was written)
                out.append(k)
                walk(value[k])
        elif isinstance(value, list):
            out.append(len(value))
            for v in value:
                walk(v)
        else:
            out.append(value)

    text = data.decode()
    for line in ([text] if text.lstrip().startswith("{\n") else text.splitlines()):
        walk(json.loads(line))
    return out


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
    # every batch job checks its executor before it builds a model (the demo's would train for minutes)
    from simhub.data.sample import load_sample_corpus
    from simhub.schema import write_jsonl

    write_jsonl(tmp_path / "d.jsonl", load_sample_corpus()["test"][:2])
    for command in (["eval", "--simulator", "tiny-student-sft", "--data", str(tmp_path / "d.jsonl")],
                    ["rollout", "--simulator", "tiny-student-sft", "--tutor", "tiny-tutor", "--data",
                     str(tmp_path / "d.jsonl")]):
        assert main([*command, "--output", str(out), "--executor", "ray", "--ray-address", "127.0.0.1:1"]) == 2
        assert "--ray-address 127.0.0.1:1: no Ray cluster answers there" in capsys.readouterr().err
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


# ------------------------------------------------------------------------------- eval and rollout

TINY = "tests/profiles/tiny.yaml"


@pytest.fixture(scope="module")
def four(tmp_path_factory, sample_corpus):
    from simhub.schema import write_jsonl

    path = tmp_path_factory.mktemp("data") / "four.jsonl"
    write_jsonl(path, sample_corpus["test"][:4])
    return path


def test_eval_on_ray_writes_the_files_of_a_local_eval(ray_local, tiny_profile, four, tmp_path, capsys):
    command = ["eval", "--profile", TINY, "--simulator", "tiny-student", "--data", str(four), "--bootstrap", "200",
               "--no-cache", "--chunk-size", "4"]
    assert main([*command, "--output", str(tmp_path / "local")]) == 0
    assert main([*command, "--output", str(tmp_path / "ray"), "--executor", "ray", "--actors", "2"]) == 0
    assert "ray: " in capsys.readouterr().err  # the simulation's and the metrics' chunks went to the actors
    files, local = _files(tmp_path / "ray"), _files(tmp_path / "local")
    assert set(files) == {"simulations.jsonl", "scores.jsonl", "results.json"}
    assert files["simulations.jsonl"] == local["simulations.jsonl"]
    # Scores: a model metric's float32 sums can differ in their last digits between processes whose
    # torch picks other kernels or threads (docs/guides/scale-out.md; bit-identical when the actors'
    # thread setup is the local run's, as benchmarks/bench_ray.py measures), so floats are compared
    # to float32 precision and everything else (labels, counts, texts, nulls) exactly.
    for name in ("scores.jsonl", "results.json"):
        _assert_same_to_float32(tmp_path / "ray" / name, tmp_path / "local" / name)


def test_rollout_and_eval_dialogues_on_ray_write_the_files_of_local_runs(ray_local, tiny_profile, four, tmp_path,
                                                                          capsys):
    command = ["rollout", "--profile", TINY, "--simulator", "tiny-student", "--tutor", "tiny-tutor", "--data",
               str(four), "--max-tokens", "12", "--max-turns", "6", "--samples", "2", "--batch", "2", "--no-cache"]
    assert main([*command, "--output", str(tmp_path / "local")]) == 0
    assert main([*command, "--output", str(tmp_path / "ray"), "--executor", "ray", "--actors", "2"]) == 0
    files = _files(tmp_path / "ray")
    assert set(files) == {"rollouts.jsonl", "rollout.json"}
    assert files == _files(tmp_path / "local")
    # eval-dialogues labels the turns on the actors: the same statistics
    command = ["eval-dialogues", "--profile", TINY, "--real", str(four), "--sim", str(tmp_path / "local"),
               "--no-sensitivity", "--bootstrap", "200", "--no-cache"]
    assert main([*command, "--output", str(tmp_path / "levels-local")]) == 0
    capsys.readouterr()
    assert main([*command, "--output", str(tmp_path / "levels-ray"), "--executor", "ray", "--actors", "2"]) == 0
    assert "ray: " in capsys.readouterr().err  # the act labels came from the actors
    files = _files(tmp_path / "levels-ray")
    assert set(files) == {"dialogue_results.json"}
    assert files == _files(tmp_path / "levels-local")


class Echo(Simulator):
    """A simulator with no model: each answer names its turn, and every turn it answered is logged to a
    file (so a test counts the calls made on any worker); with ``dies``, its process dies (as a kill by
    pid would) the first time it is asked, once."""

    id = kind = "echo"

    def __init__(self, log: Path, dies: Path | None = None):
        self.log, self.dies = log, dies

    def messages(self, target):
        return [{"role": "user", "content": f"{target.dialogue.id}/{target.turn_index}"}]

    def simulate(self, targets, sampling=None, *, progress=False):
        if self.dies is not None and not self.dies.exists():
            self.dies.write_text(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)
        names = [self.messages(t)[0]["content"] for t in targets]
        with self.log.open("a") as f:
            f.writelines(n + "\n" for n in names)
        return [SimulationResult([candidate_from_text(f"turn {n}", "stop")]) for n in names]


def _targets(sample_corpus):
    from simhub.evaluation.runs import student_targets

    return student_targets(sample_corpus["test"][:6])


def test_simulation_on_ray_survives_a_killed_worker_with_no_turn_lost_or_asked_twice(ray_local, sample_corpus,
                                                                                      tmp_path):
    from simhub.evaluation.runs import simulate

    targets = _targets(sample_corpus)
    expected = simulate(Echo(tmp_path / "local.log"), targets, chunk_size=5, progress=False)
    executor = RayExecutor(actors=2, max_retries=2)
    records = simulate(Echo(tmp_path / "ray.log", dies=tmp_path / "died"), targets, chunk_size=5, progress=False,
                       executor=executor)
    executor.close()
    assert (tmp_path / "died").exists()  # a worker process did die
    assert records == expected and all(r["candidate"] for r in records)
    asked = (tmp_path / "ray.log").read_text().split()
    assert sorted(asked) == sorted((tmp_path / "local.log").read_text().split())  # each turn asked exactly once


class StopsAfterTwo(RayExecutor):
    """A Ray executor whose driver is interrupted after two batches have come back."""

    def map(self, state, method, batches, *, keep=False):
        for n, item in enumerate(super().map(state, method, batches, keep=keep)):
            if n == 2:
                raise KeyboardInterrupt
            yield item


def test_a_killed_eval_driver_resumes_with_no_finished_turn_asked_again(ray_local, sample_corpus, tmp_path):
    from simhub.cache import ContentCache
    from simhub.evaluation.runs import simulate

    targets, cache = _targets(sample_corpus), ContentCache(tmp_path / "cache", "generations")
    with pytest.raises(KeyboardInterrupt):
        simulate(Echo(tmp_path / "first.log"), targets, chunk_size=4, progress=False, cache=cache,
                 executor=StopsAfterTwo(actors=2))
    executor = RayExecutor(actors=2)
    records = simulate(Echo(tmp_path / "again.log"), targets, chunk_size=4, progress=False, cache=cache,
                       executor=executor)
    executor.close()
    assert len(records) == len(targets) and all(r["candidate"] for r in records)
    # the two chunks that came back before the interruption were cached by the driver: not asked again
    assert len((tmp_path / "again.log").read_text().split()) == len(targets) - 8


def test_dpo_sampling_and_scoring_on_ray(ray_local, tmp_path, tiny_kit):
    """The DPO step's candidates are sampled on the actors (every turn gets its candidates) and scored
    there: the scores file is the one a local scoring stage writes for those candidates (its floats
    to float32 precision, as for eval)."""
    import shutil

    from simhub.config import load_profile
    from simhub.provision import provision_profile, resolve_recipe, restrict
    from simhub.training.config import load_recipe
    from simhub.training.dpo import run_dpo
    from tests.integration.test_training import _tiny_sft_adapter

    sft = _tiny_sft_adapter(tiny_kit, tmp_path / "sft")
    recipe = resolve_recipe(load_recipe("tiny-student-dpo", [
        f"dpo.sft_adapter={sft}", "max_train_dialogues=8", "max_eval_dialogues=4", "dpo.subsample=0.5",
        "dpo.num_candidates=2", "dpo.max_new_tokens=6", "dpo.reward_metrics=cosine,rouge_l"]))
    profile = provision_profile(restrict(load_profile("demo"), metrics=["cosine"], simulators=[], tutors=[]))
    executor = RayExecutor(actors=2)
    try:
        assert run_dpo(recipe, tmp_path / "ray", profile, until="score", executor=executor) == {
            "generate": "done", "score": "done"}
    finally:
        executor.close()
    candidates = [json.loads(line) for line in (tmp_path / "ray" / "candidates.jsonl").read_text().splitlines()]
    assert candidates and all(r["candidates"] for r in candidates)
    (tmp_path / "local").mkdir()
    shutil.copy(tmp_path / "ray" / "candidates.jsonl", tmp_path / "local" / "candidates.jsonl")
    run_dpo(recipe, tmp_path / "local", profile, until="score")
    _assert_same_to_float32(tmp_path / "ray" / "scores.jsonl", tmp_path / "local" / "scores.jsonl")


def test_annotate_on_ray_writes_the_files_of_a_local_run_and_asks_each_prompt_once(ray_local, tmp_path, capsys):
    """The live requests go out from the actors (each with its own client of the endpoint's settings);
    the files are the local run's, every prompt is asked once, and the report counts the actors' calls."""
    from simhub.data.sample import load_sample_corpus
    from simhub.schema import write_jsonl
    from tests.doubles.openai_server import FakeOpenAIServer
    from tests.integration.test_annotate_cli import annotate_args, bodies, fake_labeller, strip

    data = tmp_path / "in"
    corpus = load_sample_corpus()
    for split in ("train", "val"):
        write_jsonl(data / f"{split}.jsonl", [strip(d) for d in corpus[split][:3]])
    with FakeOpenAIServer(responder=fake_labeller) as server:
        assert main(annotate_args(data, tmp_path / "local", server, tmp_path / "cache-local")) == 0
        local = bodies(server.chat_requests())
        capsys.readouterr()
        assert main([*annotate_args(data, tmp_path / "ray", server, tmp_path / "cache-ray"), "--executor", "ray",
                     "--actors", "2"]) == 0
        remote = bodies(server.chat_requests())[len(local):]
    assert sorted(remote) == sorted(local)  # the same requests, each sent once
    assert f"{len(local)} HTTP calls" in capsys.readouterr().out
    files = {p.name: p.read_bytes() for p in (tmp_path / "ray").iterdir()}
    assert files == {p.name: p.read_bytes() for p in (tmp_path / "local").iterdir()}
