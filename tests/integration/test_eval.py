"""`simhub simulate` / `eval` / `compare` / `report`: run directories, caching and resume, failures, bad input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from simhub.cli import main
from simhub.schema import write_jsonl

TINY = "tests/profiles/tiny.yaml"
SEVEN = ["acts", "correctness", "errors", "knowledge", "cosine", "rouge_l", "tutor_response"]


@pytest.fixture(scope="module")
def data(tmp_path_factory, sample_corpus):
    path = tmp_path_factory.mktemp("data") / "test4.jsonl"
    write_jsonl(path, sample_corpus["test"][:4])
    return path


@pytest.fixture
def cache(tmp_path):
    return str(tmp_path / "cache")


def _eval(args, *, expect=0):
    assert main(["eval", "--profile", TINY, "--bootstrap", "500", *args]) == expect


def _lines(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_eval_our_model_writes_a_run_directory(data, tmp_path, cache, tiny_profile, capsys):
    out = tmp_path / "run"
    _eval(["--simulator", "tiny-student", "--data", str(data), "--output", str(out), "--cache-dir", cache])
    results = json.loads((out / "results.json").read_text())
    sims, scores = _lines(out / "simulations.jsonl"), _lines(out / "scores.jsonl")
    turns = sum(len(d.student_turn_indices()) for d in __import__("simhub.schema").schema.read_jsonl(data))
    assert len(sims) == len(scores) == results["data"]["turns"] == turns
    assert set(sims[0]) >= {"dialogue_id", "turn_index", "candidate", "simulator"} and sims[0]["simulator"] == "tiny-student"
    assert results["simulator"] == "tiny-student" and results["data"]["dialogues"] == 4
    assert len(results["data"]["sha256"]) == 64 and results["simhub_version"] and results["created"]
    assert list(results["metrics"]) == SEVEN
    for name, m in results["metrics"].items():
        assert set(m) >= {"mean", "std", "n", "ci95"}
        if m["n"]:
            lo, hi = m["ci95"]
            assert lo <= m["mean"] + 1e-9 and m["mean"] <= hi + 1e-9, name
    assert results["metrics"]["knowledge"]["cutoff_source"] == "paper"  # benchmark runs: the set's own cutoffs
    assert results["config"]["simulator"]["base_model"] == "tiny:llama"  # as written, not a local folder
    assert results["failures"] == {"simulation": 0, "scoring": dict.fromkeys(SEVEN, 0)}
    line = scores[1]
    assert set(line) >= {"dialogue_id", "turn_index", "position", "real", "candidate", "scores", "details"}
    assert [s["position"] for s in scores if s["dialogue_id"] == scores[0]["dialogue_id"]][:3] == [0, 1, 2]
    assert "95% CI" in capsys.readouterr().out


class LoadSpy:
    """Counts every model load of this process and calls through (a spy, not a double): the
    project's loaders (``load_lm`` and ``load_embedder``, wherever a module holds them) and below
    them transformers' ``from_pretrained`` of models and tokenizers, the transformers backend and
    the sentence-transformers embedder."""

    def __init__(self, monkeypatch):
        import sys

        import transformers

        import simhub.models.embeddings as embeddings
        import simhub.models.loader as loader
        import simhub.models.transformers as backend

        self.calls: dict[str, int] = {}
        for owner, name in ((transformers.AutoModelForCausalLM, "from_pretrained"),
                            (transformers.AutoModelForSequenceClassification, "from_pretrained"),
                            (transformers.AutoTokenizer, "from_pretrained")):
            monkeypatch.setattr(owner, name, staticmethod(self._counting(f"{owner.__name__}.{name}", getattr(owner, name))))
        monkeypatch.setattr(backend, "load_transformers", self._counting("load_transformers", backend.load_transformers))
        monkeypatch.setattr(embeddings.Embedder, "__init__", self._counting("Embedder", embeddings.Embedder.__init__))
        for key, real in (("load_lm", loader.load_lm), ("load_embedder", embeddings.load_embedder)):
            spy = self._counting(key, real)
            for module in [m for n, m in sys.modules.items() if n.startswith("simhub.") and m is not None]:
                if getattr(module, key, None) is real:
                    monkeypatch.setattr(module, key, spy)

    def _counting(self, key, real):
        def spy(*args, **kwargs):
            self.calls[key] = self.calls.get(key, 0) + 1
            return real(*args, **kwargs)
        return spy


def test_a_rerun_loads_no_model_and_the_first_miss_does(tmp_path, cache, tiny_profile, sample_corpus, monkeypatch):
    """A rerun that the caches answer loads nothing, as a fresh process would (the process's loaded
    models are dropped first), and gives identical results; when the scores are gone, the metric
    models load at their first miss while the cached simulations still call no simulator. The data
    holds two dialogues with the same turns, whose prompts share their cached generations: each
    keeps its own id on the rerun."""
    import msgspec

    from simhub.metrics.acts import Acts
    from simhub.models import unload_models
    from simhub.simulation.model import ModelSimulator

    data = tmp_path / "test.jsonl"
    dialogues = sample_corpus["test"][:4]
    write_jsonl(data, [*dialogues, msgspec.structs.replace(dialogues[0], id=f"{dialogues[0].id}-again")])
    args = ["--simulator", "tiny-student", "--data", str(data), "--cache-dir", cache]
    first, second, third = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    # Each eval as a fresh process: a model an earlier test in this worker loaded would be shared with
    # its batch size (the first caller's), and scores computed in other batches differ in the last bits.
    unload_models()
    _eval([*args, "--output", str(first)])
    unload_models()
    calls = {"simulate": 0, "acts": 0}
    real_simulate, real_score = ModelSimulator.simulate, Acts.score

    def simulate(self, *a, **k):
        calls["simulate"] += 1
        return real_simulate(self, *a, **k)

    def score(self, *a, **k):
        calls["acts"] += 1
        return real_score(self, *a, **k)

    import simhub.stats as stats

    def resampling(*a, **k):
        calls["bootstrap"] = calls.get("bootstrap", 0) + 1
        return real_summarize(*a, **k)

    real_summarize = stats.summarize_metrics
    monkeypatch.setattr(ModelSimulator, "simulate", simulate)
    monkeypatch.setattr(Acts, "score", score)
    monkeypatch.setattr(stats, "summarize_metrics", resampling)
    loads = LoadSpy(monkeypatch)
    _eval([*args, "--output", str(second)])
    assert calls == {"simulate": 0, "acts": 0}  # nor any resampling: the intervals are cached too
    assert loads.calls == {}, "a rerun from the cache loaded a model"

    def same(a, b):
        ra, rb = (json.loads((p / "results.json").read_text()) for p in (a, b))
        assert ra["metrics"] == rb["metrics"] and ra["failures"] == rb["failures"]
        assert (a / "scores.jsonl").read_text() == (b / "scores.jsonl").read_text()
        assert (a / "simulations.jsonl").read_text() == (b / "simulations.jsonl").read_text()

    same(first, second)
    shutil.rmtree(Path(cache) / "scores")
    unload_models()
    _eval([*args, "--output", str(third)])
    assert calls["simulate"] == 0 and calls["acts"] >= 1  # the generations are still cached; acts is not
    assert calls["bootstrap"] == 1
    assert loads.calls.get("load_transformers", 0) >= 1 and loads.calls.get("AutoModelForCausalLM.from_pretrained", 0) >= 1
    assert loads.calls.get("Embedder", 0) == 1  # cosine's model, at its first miss
    same(first, third)


def test_reference_simulators_floor_and_ceiling(data, tmp_path, tiny_profile):
    real, previous = tmp_path / "real", tmp_path / "prev"
    _eval(["--simulator", "reference:real", "--data", str(data), "--output", str(real), "--metrics", "cosine,rouge_l,knowledge"])
    _eval(["--simulator", "reference:previous-turn", "--data", str(data), "--output", str(previous),
           "--metrics", "cosine,rouge_l,knowledge"])
    r, p = (json.loads((x / "results.json").read_text())["metrics"] for x in (real, previous))
    assert r["knowledge"]["mean"] == 1.0 and r["cosine"]["mean"] == pytest.approx(1.0, abs=1e-5)
    assert r["rouge_l"]["mean"] > 0.95  # 1 but for real turns longer than the 500-character candidate cut
    assert p["rouge_l"]["mean"] < r["rouge_l"]["mean"] and p["cosine"]["mean"] < r["cosine"]["mean"]
    first = _lines(previous / "simulations.jsonl")[0]
    assert first["candidate"] == ""  # no previous student turn: an empty candidate, scored

    assert main(["compare", str(previous), str(real), "--json", "--bootstrap", "500"]) == 0


def test_compare_and_report(data, tmp_path, tiny_profile, capsys):
    a, b = tmp_path / "a", tmp_path / "b"
    _eval(["--simulator", "reference:real", "--data", str(data), "--output", str(a), "--metrics", "rouge_l,cosine,acts"])
    _eval(["--simulator", "reference:previous-turn", "--data", str(data), "--output", str(b), "--metrics", "rouge_l,cosine,acts"])
    capsys.readouterr()
    assert main(["compare", str(a), str(b), "--json", "--bootstrap", "500"]) == 0
    result = json.loads(capsys.readouterr().out)
    rouge = result["metrics"]["rouge_l"]
    assert set(rouge) == {"a", "b", "diff", "ci95", "p", "p_holm", "test", "n"}
    assert rouge["diff"] == pytest.approx(rouge["a"] - rouge["b"]) and rouge["diff"] > 0 and rouge["test"] == "permutation"
    assert result["metrics"]["acts"]["test"] == "mcnemar-exact"
    assert rouge["p_holm"] >= rouge["p"]
    page = tmp_path / "report.html"
    assert main(["report", str(a), str(b), "--output", str(page)]) == 0
    html = page.read_text()
    assert "reference:real" in html and "reference:previous-turn" in html and "<svg" in html
    capsys.readouterr()
    assert main(["report", str(a), str(b), "--output", str(page), "--json"]) == 0
    table = json.loads(capsys.readouterr().out)  # stdout is the JSON alone
    row = next(r for r in table["runs"] if r["simulator"] == "reference:real")
    written = json.loads((a / "results.json").read_text())["metrics"]["rouge_l"]
    assert row["metrics"]["rouge_l"]["mean"] == written["mean"] and row["metrics"]["rouge_l"]["ci95"] == written["ci95"]


def test_an_openai_compatible_simulator_resumes_after_a_kill_and_reruns_for_free(
        data, tmp_path, cache, fake_openai, monkeypatch, tiny_profile):
    import simhub.simulation.endpoint as endpoint

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    profile = tmp_path / "p.yaml"
    profile.write_text(f"extends: {TINY}\nname: p\nsimulators:\n  hosted: {{kind: openai, model: m, "
                       f"endpoint: {{base_url: '{fake_openai.base_url}', cache: false}}}}\n")
    args = ["eval", "--profile", str(profile), "--simulator", "hosted", "--data", str(data), "--metrics", "rouge_l",
            "--bootstrap", "500", "--cache-dir", cache, "--chunk-size", "8"]
    turns = sum(1 for _ in _count_turns(data))
    real = endpoint.EndpointSimulator.simulate
    seen = {"chunks": 0}

    def dies_after_one_chunk(self, targets, sampling=None, **kw):
        if seen["chunks"] == 1:
            raise KeyboardInterrupt  # the process is killed mid-run
        seen["chunks"] += 1
        return real(self, targets, sampling, **kw)

    monkeypatch.setattr(endpoint.EndpointSimulator, "simulate", dies_after_one_chunk)
    assert main([*args, "--output", str(tmp_path / "killed")]) == 130
    sent = len(fake_openai.chat_requests())
    assert sent == 8 and not (tmp_path / "killed" / "results.json").exists()
    monkeypatch.setattr(endpoint.EndpointSimulator, "simulate", real)
    assert main([*args, "--output", str(tmp_path / "resumed")]) == 0
    assert len(fake_openai.chat_requests()) == turns  # every turn sent exactly once over both runs
    bodies = [json.dumps(r.body, sort_keys=True) for r in fake_openai.chat_requests()]
    assert len(set(bodies)) == len(bodies)
    assert main([*args, "--output", str(tmp_path / "again")]) == 0
    assert len(fake_openai.chat_requests()) == turns  # an identical rerun sends nothing


def test_endpoint_failures_are_null_with_their_cause_and_counted(data, tmp_path, fake_openai, monkeypatch, tiny_profile,
                                                                 capsys):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    profile = tmp_path / "p.yaml"
    profile.write_text(f"extends: {TINY}\nname: p\nsimulators:\n  flaky: {{kind: openai, model: m, endpoint: "
                       f"{{base_url: '{fake_openai.base_url}', cache: false, max_retries: 1, concurrency: 1}}}}\n")
    fake_openai.fail_next(4, 500)  # the first two turns fail twice each (try + retry)
    out = tmp_path / "run"
    assert main(["eval", "--profile", str(profile), "--simulator", "flaky", "--data", str(data), "--metrics", "rouge_l",
                 "--bootstrap", "500", "--no-cache", "--output", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["failures"]["simulation"] == 2
    failed = [x for x in _lines(out / "scores.jsonl") if x.get("error")]
    assert len(failed) == 2 and failed[0]["error"] == f"simulation failed: HTTP 500 at {fake_openai.base_url}"
    assert failed[0]["scores"] == {"rouge_l": None}
    assert results["metrics"]["rouge_l"]["n"] == results["data"]["turns"] - 2
    assert f"2 of {results['data']['turns']} turns could not be simulated" in capsys.readouterr().out


def test_a_prompted_baseline_through_the_fake(data, tmp_path, fake_openai, monkeypatch, tiny_profile):
    monkeypatch.setenv("SIMHUB_BASELINE_BASE_URL", fake_openai.base_url)
    monkeypatch.setenv("SIMHUB_BASELINE_API_KEY", "sk-b")
    out = tmp_path / "run"
    _eval(["--simulator", "baseline:ocean", "--data", str(data), "--output", str(out), "--metrics", "rouge_l,cosine",
           "--no-cache"])
    body = fake_openai.chat_requests()[0].body
    assert body["model"] == "gpt-4.1" and body["temperature"] == 0.0 and "Turn 1 (" in body["messages"][1]["content"]
    assert json.loads((out / "results.json").read_text())["metrics"]["rouge_l"]["n"] > 0


def test_an_icl_baseline_rerun_needs_no_embedder(tmp_path, fake_openai, monkeypatch, sample_corpus):
    """baseline:icl's prompt holds the training dialogue nearest by profile embedding: the first run
    embeds and caches its choice with the answers, so a rerun sends nothing and loads no model."""
    from simhub.models import unload_models

    monkeypatch.setenv("SIMHUB_BASELINE_BASE_URL", fake_openai.base_url)
    monkeypatch.setenv("SIMHUB_BASELINE_API_KEY", "sk-b")
    write_jsonl(tmp_path / "train.jsonl", sample_corpus["train"][:12])
    write_jsonl(tmp_path / "test.jsonl", sample_corpus["test"][:2])
    args = ["--simulator", "baseline:icl", "--data", str(tmp_path / "test.jsonl"), "--metrics", "rouge_l",
            "--cache-dir", str(tmp_path / "cache")]
    _eval([*args, "--output", str(tmp_path / "a")])
    sent = len(fake_openai.chat_requests())
    assert sent and "Example" in json.dumps(fake_openai.chat_requests()[0].body)
    unload_models()
    loads = LoadSpy(monkeypatch)
    _eval([*args, "--output", str(tmp_path / "b")])
    assert len(fake_openai.chat_requests()) == sent and loads.calls == {}
    assert (tmp_path / "a" / "scores.jsonl").read_text() == (tmp_path / "b" / "scores.jsonl").read_text()


def test_simulate_command(data, tmp_path, tiny_profile, capsys):
    out = tmp_path / "sims.jsonl"
    assert main(["simulate", "--profile", TINY, "--simulator", "reference:previous-turn", "--data", str(data),
                 "--output", str(out)]) == 0
    rows = _lines(out)
    assert rows and set(rows[0]) >= {"dialogue_id", "turn_index", "candidate", "simulator"}
    assert "turns simulated" in capsys.readouterr().out


def test_bad_input(data, tmp_path, tiny_profile, capsys, sample_corpus):
    assert main(["eval", "--profile", TINY, "--simulator", "tiny-studnet", "--data", str(data), "--output", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert "unknown simulator 'tiny-studnet' (did you mean 'tiny-student'?)" in err and "reference:real" in err
    tutor_only = tmp_path / "tutor.jsonl"
    tutor_only.write_text(json.dumps({"id": "1-1", "question": {"text": "q"}, "turns": [{"role": "tutor", "content": "hi"}]}) + "\n")
    assert main(["eval", "--profile", TINY, "--simulator", "reference:real", "--data", str(tutor_only),
                 "--output", str(tmp_path / "y")]) == 2
    assert "no student turns" in capsys.readouterr().err
    other = tmp_path / "other.jsonl"
    write_jsonl(other, sample_corpus["test"][4:6])
    a, b = tmp_path / "a", tmp_path / "b"
    _eval(["--simulator", "reference:real", "--data", str(data), "--output", str(a), "--metrics", "rouge_l"])
    _eval(["--simulator", "reference:real", "--data", str(other), "--output", str(b), "--metrics", "rouge_l"])
    capsys.readouterr()
    assert main(["compare", str(a), str(b)]) == 2
    assert "different data" in capsys.readouterr().err
    assert main(["compare", str(a), str(tmp_path / "nope")]) == 2
    assert "not a directory" in capsys.readouterr().err
    # compare reads runs with the report's checked reader: a broken line is named, not a KeyError.
    c = tmp_path / "c"
    _eval(["--simulator", "reference:real", "--data", str(data), "--output", str(c), "--metrics", "rouge_l"])
    lines = (c / "scores.jsonl").read_text().splitlines()
    lines[1] = '{"dialogue_id": "x"}'
    (c / "scores.jsonl").write_text("\n".join(lines) + "\n")
    capsys.readouterr()
    assert main(["compare", str(a), str(c)]) == 2
    assert "scores.jsonl:2" in capsys.readouterr().err


def _count_turns(path):
    from simhub.schema import read_jsonl

    for d in read_jsonl(path):
        yield from d.student_turn_indices()


def _files(*roots):
    return sorted(str(p) for root in roots if root.exists() for p in root.rglob("*") if p.is_file())


def test_no_cache_sends_every_request_and_writes_no_cache(data, tmp_path, fake_openai, monkeypatch, simhub_home,
                                                         tiny_kit):
    # The simulator and the judge both live behind the fake endpoint, each client with its own response cache.
    for name in ("OPENAI_API_KEY", "SIMHUB_JUDGE_API_KEY"):
        monkeypatch.setenv(name, "sk-test")
    answers = tmp_path / "endpoint-answers"
    endpoint = f"{{base_url: '{fake_openai.base_url}', cache_dir: '{answers}'}}"
    profile = tmp_path / "p.yaml"
    profile.write_text(f"extends: {TINY}\nname: p\nsimulators:\n  hosted: {{kind: openai, model: m, endpoint: {endpoint}}}\n"
                       f"scoring:\n  metrics:\n    judge: {{kind: openai, model: j, endpoint: {endpoint}}}\n")
    cache = tmp_path / "cache"
    args = ["eval", "--profile", str(profile), "--simulator", "hosted", "--data", str(data), "--bootstrap", "100",
            "--metrics", "rouge_l,correctness", "--cache-dir", str(cache)]
    # A home of its own, so that its default cache folder is written by this test alone (the suite's
    # other tests write the shared home's, at the same time under pytest-xdist); the same tiny kit.
    home = tmp_path / "home"
    home.mkdir()
    (home / "tiny").symlink_to(simhub_home / "tiny")
    monkeypatch.setenv("SIMHUB_HOME", str(home))
    caches = (answers, cache, home / "cache")
    before = _files(*caches)

    def sent_by(extra, out):
        count = len(fake_openai.chat_requests())
        assert main([*args, *extra, "--output", str(tmp_path / out)]) == 0
        return len(fake_openai.chat_requests()) - count

    everything = sent_by(["--no-cache"], "a")
    turns = sum(1 for _ in _count_turns(data))
    assert everything > turns  # each turn simulated, and the labelled ones judged
    assert _files(*caches) == before, "--no-cache wrote a cache file"
    assert sent_by([], "b") == everything  # nothing the --no-cache run did is read back
    assert _files(answers) and _files(cache)
    assert sent_by([], "c") == 0  # the caches answer a rerun...
    written = _files(*caches)
    assert sent_by(["--no-cache"], "d") == everything  # ...and --no-cache sends every request all the same
    assert _files(*caches) == written


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_run_in_which_every_turn_failed_exits_non_zero_and_names_the_endpoint(data, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    down = f"http://127.0.0.1:{_closed_port()}/v1"
    profile = tmp_path / "p.yaml"
    profile.write_text(f"extends: {TINY}\nname: p\nsimulators:\n  down: {{kind: openai, model: m, endpoint: "
                       f"{{base_url: '{down}', max_retries: 0}}}}\n")
    turns = sum(1 for _ in _count_turns(data))
    base = ["--profile", str(profile), "--simulator", "down", "--data", str(data), "--no-cache"]
    assert main(["eval", *base, "--metrics", "rouge_l", "--bootstrap", "100", "--output", str(tmp_path / "run")]) == 1
    err = capsys.readouterr().err
    assert f"every one of the {turns} turns failed: connection refused at {down} ({turns})" in err
    failed = _lines(tmp_path / "run" / "scores.jsonl")[0]
    assert failed["error"] == f"simulation failed: connection refused at {down}"
    assert main(["simulate", *base, "--output", str(tmp_path / "sims.jsonl")]) == 1
    assert f"connection refused at {down}" in capsys.readouterr().err


def test_a_judge_that_is_down_fails_the_run_and_a_partial_failure_is_counted(data, tmp_path, fake_openai, monkeypatch,
                                                                             capsys):
    for name in ("OPENAI_API_KEY", "SIMHUB_JUDGE_API_KEY"):
        monkeypatch.setenv(name, "sk-test")
    down = f"http://127.0.0.1:{_closed_port()}/v1"
    profile = tmp_path / "p.yaml"
    profile.write_text(f"extends: {TINY}\nname: p\nsimulators:\n  hosted: {{kind: openai, model: m, endpoint: "
                       f"{{base_url: '{fake_openai.base_url}', max_retries: 0, concurrency: 1}}}}\nscoring:\n  metrics:\n"
                       f"    judge: {{kind: openai, model: j, endpoint: {{base_url: '{down}', max_retries: 0}}}}\n")
    base = ["eval", "--profile", str(profile), "--simulator", "hosted", "--data", str(data), "--no-cache",
            "--bootstrap", "100"]
    assert main([*base, "--metrics", "rouge_l,correctness", "--output", str(tmp_path / "judged")]) == 1
    captured = capsys.readouterr()
    assert "turns scored for correctness failed: judge request failed: connection refused at " + down in captured.err
    assert "failed to score: correctness" in captured.out
    fake_openai.fail_next(1, 500)  # one simulated turn fails, the others are scored
    assert main([*base, "--metrics", "rouge_l", "--output", str(tmp_path / "partial")]) == 0
    turns = sum(1 for _ in _count_turns(data))
    assert f"1 of {turns} turns could not be simulated" in capsys.readouterr().out


def test_test_subsample_is_the_references_random_221_draw():
    """FIDELITY.md (test subsample): the ablation table's split is ``random.Random(221).sample`` of
    int(0.2 · n) dialogues of the test split in file order, kept in the order drawn."""
    from simhub.errors import ConfigError
    from simhub.evaluation.runs import subsample_split
    from simhub.schema import Dialogue, Question

    split = [Dialogue(id=f"d{i}", question=Question(text="q"), turns=[]) for i in range(382)]
    drawn = subsample_split(split, 0.2)
    assert len(drawn) == 76 and len({d.id for d in drawn}) == 76  # int(76.4)
    assert [d.id for d in drawn[:5]] == ["d125", "d217", "d47", "d251", "d143"]
    assert subsample_split(split, None) == split and len(subsample_split(split, 1.0)) == 382
    for bad in (0.0, -0.2, 1.5):
        with pytest.raises(ConfigError) as info:
            subsample_split(split, bad)
        assert info.value.field == "test_subsample"


def test_eval_and_simulate_take_the_test_subsample(data, tmp_path, sample_corpus, tiny_profile):
    import random

    path = tmp_path / "test10.jsonl"
    write_jsonl(path, sample_corpus["test"][:10])
    expected = [d.id for d in random.Random(221).sample(sample_corpus["test"][:10], 5)]
    out = tmp_path / "run"
    _eval(["--simulator", "reference:real", "--data", str(path), "--metrics", "rouge_l", "--output", str(out),
           "--test-subsample", "0.5"])
    results = json.loads((out / "results.json").read_text())
    assert results["data"]["dialogues"] == 5 and results["data"]["test_subsample"] == 0.5
    seen = list(dict.fromkeys(line["dialogue_id"] for line in _lines(out / "scores.jsonl")))
    assert seen == expected
    sims = tmp_path / "sims.jsonl"
    assert main(["simulate", "--profile", TINY, "--simulator", "reference:real", "--data", str(path), "--output",
                 str(sims), "--test-subsample", "0.5"]) == 0
    assert list(dict.fromkeys(r["dialogue_id"] for r in _lines(sims))) == expected
    _eval(["--simulator", "reference:real", "--data", str(path), "--output", str(tmp_path / "x"),
           "--test-subsample", "2"], expect=2)
