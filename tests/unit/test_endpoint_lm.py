"""EndpointLM: an OpenAI-compatible endpoint as a LanguageModel, against the local fake endpoint.

What it sends (the Sampling mapped to the exact body), what it returns (GenerationResults like any
other model's), failures as values in the middle of a batch, and no key in any error."""

from __future__ import annotations

import asyncio
import secrets

import pytest

pytest.importorskip("openai")

from simhub.config import EndpointSettings
from simhub.errors import ConfigError, NotSupportedError
from simhub.models import GenerationResult, LanguageModel, Sampling
from simhub.models.endpoint_lm import Answer, EndpointLM, ask, chat_request, endpoint_answers
from simhub.models.endpoints import endpoint_lm
from simhub.models.openai import OpenAIClient
from tests.doubles.openai_server import FakeOpenAIServer, default_answer, endpoint

pytestmark = pytest.mark.timeout(60)

KEY_ENV = "SIMHUB_TEST_ENDPOINT_LM_KEY"
HELLO = [{"role": "user", "content": "hello there"}]


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> str:
    value = "sk-test-" + secrets.token_hex(16)
    monkeypatch.setenv(KEY_ENV, value)
    return value


def make_lm(server: FakeOpenAIServer, model: str = "gpt-4.1", **options) -> EndpointLM:
    config = endpoint(server.base_url, model, key_names=(KEY_ENV,), max_retries=0, timeout_s=10.0)
    return EndpointLM(OpenAIClient(config), **options)


def prompts(count: int) -> list[list[dict[str, str]]]:
    return [[{"role": "user", "content": f"question {i}"}] for i in range(count)]


def test_sampling_maps_to_the_exact_request_body(fake_openai):
    lm = make_lm(fake_openai)
    sampling = Sampling(temperature=0.7, top_p=0.9, max_tokens=30, n=3, seed=7, stop=("[END]",), logprobs=2)
    assert lm.request(HELLO, sampling) == {
        "model": "gpt-4.1", "messages": HELLO, "temperature": 0.7, "top_p": 0.9, "max_completion_tokens": 30,
        "n": 3, "seed": 7, "logprobs": True, "top_logprobs": 2, "stop": ["[END]"],
    }
    # Defaults add nothing: no top_p of 1, no n of 1, no logprobs, no stop.
    assert lm.request(HELLO, Sampling()) == {"model": "gpt-4.1", "messages": HELLO, "temperature": 0.0,
                                             "max_completion_tokens": 400}
    assert "temperature" not in lm.request(HELLO, Sampling(), temperature=False)
    assert lm.request(HELLO, Sampling(logprobs=0))["logprobs"] is True
    assert "top_logprobs" not in lm.request(HELLO, Sampling(logprobs=0))


def test_reasoning_model_gets_effort_and_no_sampling_settings(fake_openai):
    lm = make_lm(fake_openai, "gpt-5-mini", reasoning_effort="low", max_tokens=15_000)
    assert lm.request(HELLO, Sampling(temperature=0.5, top_p=0.5, max_tokens=10)) == {
        "model": "gpt-5-mini", "messages": HELLO, "max_completion_tokens": 15_000, "reasoning_effort": "low"}


def test_top_k_only_where_the_endpoint_takes_it(fake_openai):
    with pytest.raises(ConfigError) as err:
        make_lm(fake_openai).request(HELLO, Sampling(top_k=5))
    assert err.value.field == "sampling.top_k"
    assert make_lm(fake_openai, top_k=True).request(HELLO, Sampling(top_k=5))["top_k"] == 5


def test_token_ids_and_log_probabilities_are_not_supported(fake_openai):
    lm = make_lm(fake_openai)
    assert isinstance(lm, LanguageModel)
    with pytest.raises(NotSupportedError):
        lm.generate([[1, 2, 3]], Sampling())
    with pytest.raises(NotSupportedError):
        lm.continuation_logprobs([([1], [2])])
    assert fake_openai.chat_requests() == []


def test_generate_returns_one_result_per_prompt_in_order(fake_openai, key):
    lm = make_lm(fake_openai)
    sampling = Sampling(n=2, max_tokens=20)
    results = lm.generate(prompts(3), sampling)
    assert [type(r) for r in results] == [GenerationResult] * 3
    for prompt, result in zip(prompts(3), results, strict=True):
        expected = default_answer({"messages": prompt})
        assert [g.text for g in result.generations] == [expected, expected]
        assert result.error is None
        # The fake counts words: 2 per answer, 4 for the two choices, shared out evenly; 2 prompt words.
        assert [g.tokens for g in result.generations] == [2, 2]
        assert result.prompt_tokens == 2
    sent = sorted(r.body["messages"][0]["content"] for r in fake_openai.chat_requests())
    assert sent == ["question 0", "question 1", "question 2"]
    assert {r.authorization for r in fake_openai.chat_requests()} == {f"Bearer {key}"}
    assert fake_openai.chat_requests()[0].body == lm.request(fake_openai.chat_requests()[0].body["messages"], sampling)


def test_a_failed_request_is_a_value_and_names_no_key(key):
    with FakeOpenAIServer() as server:
        lm = make_lm(server)
        server.fail_next(1, 401)  # the fake's 401 body quotes the key, as OpenAI's does
        results = lm.generate(prompts(1), Sampling())
        assert results[0].generations == [] and results[0].error is not None
        assert "HTTP 401" in results[0].error and key not in results[0].error
        server.fail_next(1, 503)
        results = lm.generate(prompts(3), Sampling())
    assert sum(r.error is not None for r in results) == 1
    assert sum(len(r.generations) == 1 for r in results) == 2
    assert "HTTP 503" in next(r.error for r in results if r.error)


def test_stop_strings_are_cut_even_when_the_endpoint_ignores_them(key):
    with FakeOpenAIServer(responder=lambda body: "I think 3/4 [END] and more") as server:
        [result] = make_lm(server).generate(prompts(1), Sampling(stop=("[END]",)))
        assert server.chat_requests()[0].body["stop"] == ["[END]"]
    [generation] = result.generations
    assert (generation.text, generation.stop_string, generation.finish_reason) == ("I think 3/4 ", "[END]", "stop")


def test_logprobs_come_back_per_token(fake_openai, key):
    [result] = make_lm(fake_openai).generate(prompts(1), Sampling(logprobs=1))
    tokens = result.generations[0].logprobs
    assert tokens is not None and [t.token for t in tokens] == result.generations[0].text.split(" ")
    assert all(len(t.top) == 1 for t in tokens)


def test_agenerate_runs_on_the_event_loop(fake_openai, key):
    lm = make_lm(fake_openai)
    results = asyncio.run(lm.agenerate(prompts(2), Sampling()))
    assert [r.generations[0].text for r in results] == [default_answer({"messages": p}) for p in prompts(2)]


def test_the_batch_api_when_the_model_says_so(fake_openai, key):
    lm = make_lm(fake_openai, batch=True, poll_interval_s=0.01)
    results = lm.generate(prompts(2), Sampling())
    assert [r.generations[0].text for r in results] == [default_answer({"messages": p}) for p in prompts(2)]
    assert len(fake_openai.requests_to("POST", "/v1/batches")) == 1


def test_endpoint_lm_shares_the_client_of_its_endpoint(fake_openai):
    settings = EndpointSettings(base_url=fake_openai.base_url, cache=False, batch_api=True)
    first = endpoint_lm(settings, "m", kind="simulator", reasoning_effort=None)
    second = endpoint_lm(settings, "m", kind="tutor", max_tokens=50, batch=False)
    assert first.client is second.client  # loopback: no key either way, one endpoint, one client
    assert first.batch and not second.batch
    assert second.request(HELLO, Sampling(max_tokens=9))["max_completion_tokens"] == 50
    assert first.client.config.key_names == ()
    with pytest.raises(ConfigError) as err:
        endpoint_lm(EndpointSettings(base_url="https://llm.example.com/v1"), "m", kind="simulator",
                    field="simulators.s.endpoint")
    assert err.value.field == "simulators.s.endpoint.api_key_env"


def test_the_endpoint_tutor_is_an_lm_tutor_whose_failures_fail_one_dialogue(key, tmp_path):
    import msgspec

    from simhub.config import load_profile
    from simhub.models import LoadOptions
    from simhub.prompts import END_OF_DIALOGUE
    from simhub.simulation.tutor import LMTutor, TutorRequest, build_tutor
    from tests.examples import DIVIDING_FRACTIONS

    with FakeOpenAIServer(responder=lambda body: f"Well done! {END_OF_DIALOGUE}") as server:
        path = tmp_path / "tutor.yaml"
        path.write_text("name: t\ntutors:\n  hosted: {kind: openai, model: m, max_tokens: 77, endpoint: "
                        f"{{base_url: '{server.base_url}', cache: false, max_retries: 0, api_key_env: {KEY_ENV}}}}}\n")
        tutor = build_tutor("hosted", load_profile(path), LoadOptions())
        assert isinstance(tutor, LMTutor)
        so_far = msgspec.structs.replace(DIVIDING_FRACTIONS, turns=DIVIDING_FRACTIONS.turns[:2])
        server.fail_next(1, 503)
        turns = tutor.respond([TutorRequest(so_far), TutorRequest(so_far)], Sampling(n=3, seed=1, logprobs=2))
        bodies = [r.body for r in server.chat_requests()]
    assert sorted(t.error is None for t in turns) == [False, True]
    done = next(t for t in turns if t.error is None)
    assert (done.text, done.end_of_dialogue) == ("Well done! ", True)
    assert "HTTP 503" in next(t.error for t in turns if t.error) and key not in str(turns)
    # One turn of text per request: no n, stop or log-probabilities; the profile's token limit.
    assert {tuple(sorted(b)) for b in bodies} == {("max_completion_tokens", "messages", "model", "seed", "temperature")}
    assert bodies[0]["max_completion_tokens"] == 77


def test_the_endpoint_simulator_is_an_lm_simulator_with_the_bodies_it_always_sent(key, tmp_path):
    """One chat simulator over any model: the endpoint's runs on EndpointLM, sends no stop string,
    leaves the temperature to the server when neither the caller nor the profile sets one, and a
    failed request fails only its target (with a cause that names no key)."""
    from simhub.config import load_profile
    from simhub.prompts import END_OF_DIALOGUE
    from simhub.simulation import Target, build_simulator
    from simhub.simulation.base import LMSimulator
    from simhub.simulation.endpoint import EndpointSimulator
    from simhub.simulation.model import ModelSimulator
    from tests.examples import DIVIDING_FRACTIONS

    target = Target(DIVIDING_FRACTIONS, DIVIDING_FRACTIONS.student_turn_indices()[0])
    with FakeOpenAIServer(responder=lambda body: f"I get 3/4 {END_OF_DIALOGUE} extra") as server:
        path = tmp_path / "sim.yaml"
        path.write_text("name: s\nsimulators:\n  hosted: {kind: openai, model: m, max_tokens: 55, endpoint: "
                        f"{{base_url: '{server.base_url}', cache: false, max_retries: 0, api_key_env: {KEY_ENV}}}}}\n")
        simulator = build_simulator("hosted", load_profile(path))
        assert isinstance(simulator, EndpointSimulator) and isinstance(simulator, LMSimulator)
        assert issubclass(ModelSimulator, LMSimulator)
        assert isinstance(simulator.load(), EndpointLM) and simulator.load() is simulator.load()
        server.fail_next(1, 503)
        default = simulator.simulate([target, target])
        chosen = simulator.simulate([target], Sampling(temperature=0.5, max_tokens=9, n=2, stop=("x",)))
        bodies = [r.body for r in server.chat_requests()]
    messages = simulator.messages(target)
    # The profile sets no temperature: under the default sampling the body carries none.
    assert bodies[0] == bodies[1] == {"model": "m", "messages": messages, "max_completion_tokens": 55}
    assert bodies[-1] == {"model": "m", "messages": messages, "temperature": 0.5, "max_completion_tokens": 9, "n": 2}
    assert simulator.payload(target, None) == bodies[0] and simulator.payload(target, Sampling()) == {
        **bodies[0], "temperature": 0.0, "max_completion_tokens": 400}
    assert sorted(r.error is None for r in default) == [False, True]
    failed = next(r for r in default if r.error)
    assert failed.candidates == [] and "HTTP 503" in failed.error and key not in failed.error
    done = next(r for r in default if r.error is None)
    assert [(c.text, c.end_of_dialogue, c.finish_reason) for c in done.candidates] == [("I get 3/4 ", True, "stop")]
    assert [c.text for c in chosen[0].candidates] == ["I get 3/4 "] * 2


def test_the_endpoint_simulator_sends_the_profiles_temperature_by_default(tmp_path):
    from simhub.config import load_profile
    from simhub.simulation import Target, build_simulator
    from tests.examples import DIVIDING_FRACTIONS

    target = Target(DIVIDING_FRACTIONS, DIVIDING_FRACTIONS.student_turn_indices()[0])
    path = tmp_path / "sim.yaml"
    path.write_text("name: s\nsimulators:\n  warm: {kind: openai, model: m, temperature: 0.8, endpoint: "
                    "{base_url: 'http://127.0.0.1:9/v1', cache: false}}\n")
    simulator = build_simulator("warm", load_profile(path))
    assert simulator.payload(target, None)["temperature"] == 0.8
    with pytest.raises(ConfigError, match="warm is an OpenAI-compatible endpoint, which takes no top_k") as err:
        simulator.simulate([target], Sampling(temperature=1.0, top_k=5))
    assert err.value.field == "sampling.top_k"


# --------------------------------------------------------------------------- JSON mode, answers, chunks


JSON_MODE = {"type": "json_object"}


def test_json_mode_and_an_endpoint_token_limit_are_exact_body_fields(fake_openai, key):
    lm = make_lm(fake_openai)
    assert lm.request(HELLO, Sampling(max_tokens=30), response_format=JSON_MODE) == {
        "model": "gpt-4.1", "messages": HELLO, "temperature": 0.0, "max_completion_tokens": 30,
        "response_format": {"type": "json_object"}}
    assert lm.request(HELLO, Sampling(), token_limit=False, temperature=False) == {"model": "gpt-4.1",
                                                                                  "messages": HELLO}
    # The pure builder is the same body without a client.
    assert chat_request("gpt-4.1", HELLO, Sampling(max_tokens=30), response_format=JSON_MODE) == lm.request(
        HELLO, Sampling(max_tokens=30), response_format=JSON_MODE)
    answers = endpoint_answers(lm, prompts(2), Sampling(max_tokens=30), response_format=JSON_MODE)
    assert [a.text for a in answers] == [default_answer({"messages": p}) for p in prompts(2)]
    assert [r.body["response_format"] for r in fake_openai.chat_requests()] == [JSON_MODE, JSON_MODE]
    # Without one, the body carries none.
    endpoint_answers(lm, prompts(1), Sampling(max_tokens=31))
    assert "response_format" not in fake_openai.chat_requests()[-1].body


def test_ask_sends_live_chunks_in_turn_and_a_failure_is_an_answer_without_text(key):
    seen: list[tuple[int, int, int]] = []
    with FakeOpenAIServer() as server:
        lm = make_lm(server)
        server.fail_next(1, 401)  # the fake's 401 body quotes the key
        answers = ask(lm, lm.requests(prompts(5), Sampling()), chunk_size=2,
                      on_chunk=lambda done, total: seen.append((done, total, len(server.chat_requests()))))
    # Each chunk is answered before the next is sent.
    assert seen == [(2, 5, 2), (4, 5, 4), (5, 5, 5)]
    failed = [a for a in answers if a.text is None]
    assert len(failed) == 1 and "HTTP 401" in failed[0].cause and key not in failed[0].cause
    assert all(a.cause is None and a.text == default_answer({"messages": p})
               for a, p in zip(answers, prompts(5), strict=True) if a.text is not None)
    assert ask(lm, []) == []


def test_an_answer_cut_at_the_token_limit_says_so(key):
    def respond(body):
        content = body["messages"][0]["content"]
        return {"id": "x", "object": "chat.completion", "model": "gpt-4.1", "choices": [{
            "index": 0, "finish_reason": "length" if content == "question 0" else "stop",
            "message": {"role": "assistant", "content": None if content == "question 1" else "{\"half"}}]}

    with FakeOpenAIServer(responder=respond) as server:
        answers = endpoint_answers(make_lm(server), prompts(2), Sampling())
    assert answers == [Answer("{\"half", None, True), Answer("", None, False)]
    assert answers[0].cut and not answers[1].cut


def test_ask_through_the_batch_api_sends_one_batch_and_stops_at_the_wait_limit(key):
    seen: list[tuple[int, int]] = []
    with FakeOpenAIServer() as server:
        lm = make_lm(server, batch=True, poll_interval_s=0.01)
        answers = ask(lm, lm.requests(prompts(3), Sampling()), chunk_size=1,
                      on_chunk=lambda done, total: seen.append((done, total)))
        assert len(server.requests_to("POST", "/v1/batches")) == 1 and server.chat_requests() == []
    assert seen == [(3, 3)] and [a.text for a in answers] == [default_answer({"messages": p}) for p in prompts(3)]
    with FakeOpenAIServer(batch_polls=1000) as server:
        lm = make_lm(server, batch=True, poll_interval_s=0.01, max_wait_s=0.05)
        answers = ask(lm, lm.requests(prompts(2), Sampling()))
    assert [(a.text, a.cause) for a in answers] == [(None, "batch in_progress")] * 2


def test_the_learners_endpoint_chat_sends_the_bodies_it_always_sent(fake_openai, key):
    from simhub.learners.chat import EndpointChat

    settings = EndpointSettings(base_url=fake_openai.base_url, cache=False, max_retries=0, api_key_env=KEY_ENV)
    chat = EndpointChat(settings, "learner-model")
    assert isinstance(chat.endpoint(), EndpointLM) and not chat.endpoint().batch
    fake_openai.fail_next(1, 401)
    outcomes = chat.chat([HELLO], json_mode=True, temperature=0.7, max_tokens=50, seeds=[3])
    assert not outcomes[0].ok and "HTTP 401" in outcomes[0].error and key not in outcomes[0].error
    outcomes = chat.chat([HELLO, HELLO], json_mode=False, temperature=0.0, max_tokens=9, seeds=[None, 4])
    assert [o.text for o in outcomes] == [default_answer({"messages": HELLO})] * 2 and all(o.ok for o in outcomes)
    bodies = [r.body for r in fake_openai.chat_requests()]
    assert bodies[0] == {"model": "learner-model", "messages": HELLO, "temperature": 0.7, "max_completion_tokens": 50,
                         "seed": 3, "response_format": {"type": "json_object"}}
    assert sorted(bodies[1:], key=lambda b: b.get("seed", -1)) == [
        {"model": "learner-model", "messages": HELLO, "temperature": 0.0, "max_completion_tokens": 9},
        {"model": "learner-model", "messages": HELLO, "temperature": 0.0, "max_completion_tokens": 9, "seed": 4}]
    assert {r.authorization for r in fake_openai.chat_requests()} == {f"Bearer {key}"}
