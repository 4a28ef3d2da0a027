"""The paper's five prompted baselines as simulators (docs/protocol.md §5, §8), against a local fake endpoint."""

from __future__ import annotations

import json

import pytest

from simhub.config import load_profile
from simhub.errors import UnknownNameError
from simhub.models import Sampling
from simhub.schema import Dialogue, Question, Turn
from simhub.simulation import BUILTIN_BASELINES, REFERENCE_SIMULATORS, Target, build_simulator, simulator_names


def _dialogue(i: int, profile: str | None) -> Dialogue:
    return Dialogue(id=f"d{i}", question=Question(text=f"Question Text: {i} + {i}?"), profile=profile,
                    turns=[Turn(role="tutor", content=f"What is {i} + {i}?"), Turn(role="student", content=str(2 * i))])


@pytest.fixture
def profile(fake_openai, tmp_path, monkeypatch):
    pool = tmp_path / "pool.jsonl"
    texts = ["Loves football and gets distracted by it.", "Careful with fractions, asks many questions.",
             "Confuses perimeter and area; answers fast."]
    pool.write_text("".join(json.dumps({"id": f"p{i}", "question": {"text": "q"}, "profile": t,
                                        "turns": [{"role": "tutor", "content": f"pool dialogue {i}"}]}) + "\n"
                            for i, t in enumerate(texts)))
    monkeypatch.setenv("SIMHUB_BASELINE_BASE_URL", fake_openai.base_url)
    monkeypatch.setenv("SIMHUB_BASELINE_API_KEY", "sk-baseline-xyz")
    path = tmp_path / "p.yaml"
    path.write_text(f"name: p\nbaselines: {{icl_pool: '{pool}', endpoint: {{cache: false, max_retries: 1}}}}\n")
    return load_profile(path)


def test_every_profile_offers_the_five_baselines_and_the_references():
    names = simulator_names(load_profile("demo"))
    assert set(BUILTIN_BASELINES) <= set(names) and set(REFERENCE_SIMULATORS) <= set(names)
    assert BUILTIN_BASELINES == ("baseline:zero-shot", "baseline:ocean", "baseline:icl", "baseline:reasoning",
                                 "baseline:oracle")
    assert not set(REFERENCE_SIMULATORS) & set(simulator_names(load_profile("demo"), http=True))


def test_unknown_baseline_lists_the_known_ones():
    with pytest.raises(UnknownNameError, match=r"unknown simulator 'baseline:few-shot'.*baseline:zero-shot") as info:
        build_simulator("baseline:few-shot", load_profile("demo"))
    assert info.value.field == "simulator"


def test_baselines_use_the_papers_models_and_decoding(profile, fake_openai):
    target = Target(_dialogue(1, "Loves football."), 1)
    for name in ("baseline:zero-shot", "baseline:reasoning"):
        build_simulator(name, profile).simulate([target])
    gpt41, reasoning = (r.body for r in fake_openai.chat_requests())
    assert (gpt41["model"], gpt41["temperature"], gpt41["max_completion_tokens"]) == ("gpt-4.1", 0.0, 4000)
    assert "max_tokens" not in gpt41 and "reasoning_effort" not in gpt41
    assert (reasoning["model"], reasoning["reasoning_effort"], reasoning["max_completion_tokens"]) == (
        "gpt-5-mini", "medium", 15000)
    assert "temperature" not in reasoning  # a reasoning model takes no non-default temperature
    assert all(r.authorization == "Bearer sk-baseline-xyz" for r in fake_openai.chat_requests())
    assert "Turn 1 (Tutor): What is 1 + 1?" in gpt41["messages"][1]["content"]


def test_icl_retrieves_the_nearest_profile(profile, fake_openai):
    simulator = build_simulator("baseline:icl", profile)
    dialogue = _dialogue(2, "This student keeps mixing up area and perimeter.")
    user = simulator.messages(Target(dialogue, 1))[1]["content"]
    assert "pool dialogue 2" in user and "pool dialogue 0" not in user  # the area/perimeter student
    assert simulator.retriever.example(_dialogue(3, None)) is None  # no profile, no example


def test_a_failing_endpoint_is_a_result_with_its_cause_not_a_crash(profile, fake_openai):
    fake_openai.fail_next(100, 500)
    simulator = build_simulator("baseline:zero-shot", profile)
    result = simulator.simulate([Target(_dialogue(1, None), 1)], Sampling(max_tokens=8))[0]
    assert result.candidates == [] and result.error == f"HTTP 500 at {fake_openai.base_url}"
    assert len(fake_openai.chat_requests()) == 2  # one try, one retry


def test_a_users_openai_simulator_with_a_baseline_style(fake_openai, tmp_path, monkeypatch):
    monkeypatch.setenv("MY_KEY", "k-1")
    path = tmp_path / "mine.yaml"
    path.write_text("extends: demo\nname: mine\nsimulators:\n"
                    f"  hosted: {{kind: openai, model: my-model, baseline: oracle, temperature: 0.0,\n"
                    f"           endpoint: {{base_url: '{fake_openai.base_url}', api_key_env: MY_KEY, cache: false}}}}\n")
    simulator = build_simulator("hosted", load_profile(path))
    out = simulator.simulate([Target(_dialogue(4, "Always answers in capitals."), 1)])
    (request,) = fake_openai.chat_requests()
    assert request.body["model"] == "my-model" and "Always answers in capitals." in request.body["messages"][1]["content"]
    assert request.authorization == "Bearer k-1"
    assert out[0].candidates and out[0].candidates[0].finish_reason in ("stop", "length")


def _split_files(folder, sample_corpus, *, train: bool):
    from simhub.schema import write_jsonl

    folder.mkdir(parents=True, exist_ok=True)
    write_jsonl(folder / "test.jsonl", sample_corpus["test"][:3])
    if train:
        write_jsonl(folder / "train.jsonl", sample_corpus["train"][5:12])
    return folder / "test.jsonl"


def test_paper_profile_icl_pool_is_the_training_split_of_the_evaluated_data(tmp_path, sample_corpus):
    """FIDELITY.md (ICL): with the shipped paper-8b profile, baseline:icl retrieves from the training
    split beside the evaluated file, not from the bundled sample corpus."""
    from simhub.simulation import with_icl_pool

    paper = load_profile("paper-8b")
    assert paper.baselines.icl_pool is None
    data = _split_files(tmp_path / "qatd", sample_corpus, train=True)
    simulator = build_simulator("baseline:icl", with_icl_pool(paper, data))
    expected = [d.id for d in sample_corpus["train"][5:12] if d.profile]
    assert expected and [d.id for d in simulator.retriever.pool] == expected
    assert simulator.retriever.embedder_name == "Qwen/Qwen3-Embedding-8B"
    # A pool the profile names stays.
    named = with_icl_pool(load_profile("paper-8b"), data)
    assert with_icl_pool(named, tmp_path / "elsewhere" / "test.jsonl").baselines.icl_pool == str(data.parent / "train.jsonl")


def test_icl_without_a_training_split_is_an_error_not_the_sample_corpus(tmp_path, sample_corpus):
    from simhub.cli import main
    from simhub.errors import ConfigError
    from simhub.simulation import with_icl_pool

    paper = load_profile("paper-8b")
    data = _split_files(tmp_path / "alone", sample_corpus, train=False)
    simulator = build_simulator("baseline:icl", with_icl_pool(paper, data))  # building (listing) still works
    with pytest.raises(ConfigError, match=r"no training dialogues.*train\.jsonl") as info:
        simulator.messages(Target(sample_corpus["test"][0], sample_corpus["test"][0].student_turn_indices()[0]))
    assert info.value.field == "baselines.icl_pool"
    with pytest.raises(ConfigError, match="no training dialogues"):
        build_simulator("baseline:icl", paper).retriever.pool  # noqa: B018  (the service: no data at all)
    dialogue = sample_corpus["test"][0]
    code = main(["prompt", "show", "--profile", "paper-8b", "--simulator", "baseline:icl", "--data", str(data),
                 "--dialogue", dialogue.id, "--turn", str(dialogue.student_turn_indices()[0])])
    assert code == 2


def test_an_endpoint_takes_no_top_k(profile):
    from simhub.errors import ConfigError

    simulator = build_simulator("baseline:zero-shot", profile)
    with pytest.raises(ConfigError, match="takes no top_k") as info:
        simulator.simulate([Target(_dialogue(1, None), 1)], Sampling(temperature=1.0, top_k=5, max_tokens=8))
    assert info.value.field == "sampling.top_k"
