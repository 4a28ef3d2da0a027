"""The API docs' examples, against the app that serves them.

Every request example of the OpenAPI document is posted as it is and must get the operation's
documented success status; every documented error example is provoked with an input built for it
and the answer must carry the example's type and field, and its message (numbers aside: limits and
timeouts differ between the docs and a test app). The app serves the demo profile's simulator ids on
the untrained tiny model and only the metrics that need no trained model, so "Try it out" on the demo
asks for what the demo has, and this test needs no trained adapter.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import msgspec
import pytest

pytest.importorskip("litestar")

from litestar.testing import TestClient

from simhub.config import EmbedderConfig, EndpointSettings, MetricModels, Profile, SimulatorConfig, load_profile
from simhub.serving import examples
from simhub.serving import schemas as s
from simhub.serving.app import create_app
from simhub.serving.settings import ServiceSettings
from tests.doubles.server_process import free_port
from tests.integration.test_serving import wait_ready

DEMO = load_profile("demo")
POSTS = {"/simulate": "simulate", "/score": "score", "/v1/reward": "reward", "/v1/chat/completions": "createChatCompletion"}
REQUEST_STRUCTS = {"simulate": s.SimulateRequest, "score": s.ScoreRequest, "reward": s.RewardRequest,
                   "createChatCompletion": s.ChatCompletionRequest}


def served_demo() -> Profile:
    """The demo's simulator ids on the untrained tiny Llama, and the example metrics only."""
    simulators = {sid: msgspec.structs.replace(cfg, adapter=None) for sid, cfg in DEMO.simulators.items()}
    scoring = msgspec.structs.replace(DEMO.scoring, metrics=MetricModels(cosine=EmbedderConfig()))
    return msgspec.structs.replace(DEMO, name="docs-examples", source=None, simulators=simulators, tutors={},
                                   scoring=scoring)


def settings(profile: Profile, **overrides: Any) -> ServiceSettings:
    return ServiceSettings.load(profile, environ={}, **overrides)  # the documented defaults, whatever the environment


@pytest.fixture(scope="module")
def client(tiny_kit) -> Iterator[TestClient]:
    from simhub.provision import provision_profile

    profile = provision_profile(served_demo(), on_step=None)
    with TestClient(create_app(settings(profile), profile)) as c:
        wait_ready(c)
        yield c


@pytest.fixture(scope="module")
def document(client) -> dict:
    return client.get("/schema/openapi.json").json()


def request_examples(operation: dict) -> list[tuple[str, Any]]:
    media = operation["requestBody"]["content"]["application/json"]
    return [(name, example["value"]) for name, example in (media.get("examples") or {}).items()]


def error_examples(operation: dict) -> list[tuple[int, str, dict]]:
    out = []
    for status, response in operation["responses"].items():
        if int(status) < 400:
            continue
        media = response["content"]["application/json"]
        assert media.get("examples"), f"{operation['operationId']} {status}: no example"
        out += [(int(status), example["summary"], example["value"]) for example in media["examples"].values()]
    return out


def test_every_post_documents_its_requests_and_errors(document):
    for path in POSTS:
        operation = document["paths"][path]["post"]
        assert request_examples(operation), path
        assert {status for status, _, _ in error_examples(operation)} == \
            {int(c) for c in operation["responses"] if int(c) >= 400}
    assert all("examples" not in schema for schema in document["components"]["schemas"].values())  # none generated


def test_examples_name_what_the_demo_profile_has(document):
    from simhub.scoring import Scorer
    from simhub.simulation import simulator_names

    demo_metrics = set(Scorer.from_profile(DEMO).metrics)
    for path, operation_id in POSTS.items():
        for name, value in request_examples(document["paths"][path]["post"]):
            msgspec.convert(value, REQUEST_STRUCTS[operation_id])  # the schema's own types and constraints
            if "model" in value:
                assert value["model"] in simulator_names(DEMO, http=True), (path, name)
            assert set(value.get("metrics") or ()) <= demo_metrics, (path, name)
    assert set(examples.DEMO_METRICS) <= demo_metrics


@pytest.mark.parametrize("path", list(POSTS))
def test_request_examples_get_their_documented_status(client, document, path):
    operation = document["paths"][path]["post"]
    (success,) = [int(c) for c in operation["responses"] if int(c) < 300]
    for name, value in request_examples(operation):
        r = client.post(path, json=value)
        assert r.status_code == success, (name, r.text)
        body = r.json()
        if path == "/simulate":
            assert all(len(res["candidates"]) == value["sampling"].get("n", 1) for res in body["results"])
        elif path == "/score":
            assert body["metrics"] == value["metrics"] and all(body["items"][0]["scores"][m] is not None
                                                               for m in value["metrics"])
        elif path == "/v1/reward":
            assert len(body["rewards"]) == len(value["query"]) and body["rewards"] == body["scores"]
            assert set(body["extra_logs"]) == set(value["metrics"]) and None not in body["rewards"]
        else:
            assert body["object"] == "chat.completion" and body["choices"][0]["message"]["role"] == "assistant"


def test_success_examples_are_real_answers(client, document):
    """Each operation's 200 carries a named example (not one the docs page would make up from the
    schema, with ``additionalProp1`` for every map), with the documented shape and the keys the app
    really answers; the score example is the app's own numbers for the score request example."""
    import jsonschema  # the dev extra

    for path, operation_id in POSTS.items():
        media = document["paths"][path]["post"]["responses"]["200"]["content"]["application/json"]
        (example,) = media["examples"].values()
        value = example["value"]
        assert "additionalProp" not in json.dumps(value)
        jsonschema.validate(value, response_schema(document, path, 200))
        real = client.post(path, json=_example(operation_id)).json()
        assert _keys(value) == _keys(real), path
    scored = client.post("/score", json=_example("score")).json()
    documented = examples.RESPONSES["score"][0].value
    assert scored["metrics"] == documented["metrics"]
    for m in documented["metrics"]:
        assert scored["items"][0]["scores"][m] == pytest.approx(documented["items"][0]["scores"][m], abs=1e-6), m
    # the reward example is the same turn's: the mean of the same two numbers
    rewarded = client.post("/v1/reward", json=_example("reward")).json()
    documented = examples.RESPONSES["reward"][0].value
    assert rewarded["rewards"] == pytest.approx(documented["rewards"], abs=1e-6)
    for m, values in documented["extra_logs"].items():
        assert rewarded["extra_logs"][m] == pytest.approx(values, abs=1e-6)
        assert values[0] == pytest.approx(examples.RESPONSES["score"][0].value["items"][0]["scores"][m], abs=1e-6)


def _keys(value: Any, prefix: str = "") -> set[str]:
    """Every key path of a JSON value (list items merged; values of ``scores`` and ``summary`` maps by name)."""
    if isinstance(value, dict):  # a null is left out (the document does not keep it)
        return {k for key, v in value.items() if v is not None
                for k in {f"{prefix}.{key}", *_keys(v, f"{prefix}.{key}")}}
    if isinstance(value, list):
        return {k for v in value for k in _keys(v, f"{prefix}[]")}
    return set()


# --------------------------------------------------------------------------------------------- errors

def _example(operation_id: str) -> dict:
    return dict(examples.REQUESTS[operation_id][0].value)


PATHS = {operation_id: path for path, operation_id in POSTS.items()}


def _post(client: TestClient, operation_id: str, body: dict):
    return client.post(PATHS[operation_id], json=body)


def _changed(operation_id: str, **changes: Any) -> Callable[[TestClient], Any]:
    return lambda c: _post(c, operation_id, {**_example(operation_id), **changes})


def _sampling(**changes: Any) -> Callable[[TestClient], Any]:
    body = _example("simulate")
    return lambda c: _post(c, "simulate", {**body, "sampling": {**body["sampling"], **changes}})


def _score_item(**changes: Any) -> Callable[[TestClient], Any]:
    body = _example("score")
    return lambda c: _post(c, "score", {**body, "items": [{**body["items"][0], **changes}]})


def _oversized(operation_id: str) -> Callable[[TestClient], Any]:
    def post(c):
        filler = "x" * 2_100_000
        return c.post(PATHS[operation_id], content=b'{"model": "' + filler.encode() + b'"}',
                      headers={"content-type": "application/json"})
    return post


def _queue_full(operation_id: str) -> Callable[[TestClient], Any]:
    def post(c):
        services = c.app.state.services
        simulation, batcher = services.simulation, services.scoring.batcher
        saved = simulation.max_in_flight, batcher.max_pending
        simulation.max_in_flight = batcher.max_pending = 0
        try:
            return _post(c, operation_id, _example(operation_id))
        finally:
            simulation.max_in_flight, batcher.max_pending = saved
    return post


def _slow(operation_id: str) -> Callable[[TestClient], Any]:
    """The work outlasts a short request timeout (the real work, held up)."""
    def post(c):
        services = c.app.state.services
        scoring = operation_id in ("score", "reward")
        service = services.scoring if scoring else services.simulation
        work, saved_settings = (service.score if scoring else service.simulate), services.settings

        async def held_up(*args, **kwargs):
            await asyncio.sleep(1.0)
            return await work(*args, **kwargs)

        services.settings = ServiceSettings(**{**saved_settings.__dict__, "serving": msgspec.structs.replace(
            saved_settings.serving, request_timeout_s=0.3)})
        setattr(service, "score" if scoring else "simulate", held_up)
        try:
            return _post(c, operation_id, _example(operation_id))
        finally:
            services.settings = saved_settings
            delattr(service, "score" if scoring else "simulate")
    return post


def _mini(**overrides: Any) -> Callable[[str], Callable[[TestClient], Any]]:
    """An app of its own (no models: what is provoked happens before any model is needed)."""
    def for_operation(operation_id: str):
        def post(_):
            profile = Profile(name="mini")
            with TestClient(create_app(settings(profile, **overrides), profile)) as c:
                responses = [_post(c, operation_id, _example(operation_id)) for _ in range(2)]
            return responses[-1]
        return post
    return for_operation


def _loading(operation_id: str, *, fail: bool) -> Callable[[TestClient], Any]:
    """A start of the same profile whose simulators and cosine model are still loading (their loads
    wait), or failed to load (their loads raise)."""
    def post(client):
        from simhub.metrics.cosine import Cosine
        from simhub.simulation.model import ModelSimulator

        release = threading.Event()

        def load(self, *args, **kwargs):
            if not fail:
                release.wait(30)
            raise RuntimeError("not loaded in this test")

        profile = client.app.state.services.profile  # provisioned: nothing to build
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(Cosine, "load", load)
            patch.setattr(ModelSimulator, "load", load)
            with TestClient(create_app(settings(profile, preload=fail), profile)) as c:
                try:
                    deadline = time.time() + 60
                    while fail and not c.app.state.services.loaded and time.time() < deadline:
                        time.sleep(0.05)
                    return _post(c, operation_id, _example(operation_id))
                finally:
                    release.set()
    return post


def _dead_endpoint(_) -> Any:
    """The example's simulator id behind an OpenAI-compatible endpoint that refuses connections."""
    endpoint = EndpointSettings(base_url=f"http://127.0.0.1:{free_port()}/v1", api_key_env="none", max_retries=0,
                                timeout_s=5, cache=False)
    profile = Profile(name="remote", simulators={examples.DEMO_SIMULATOR: SimulatorConfig(
        kind="openai", model="remote-student", endpoint=endpoint)})
    with TestClient(create_app(settings(profile), profile)) as c:
        wait_ready(c)
        return _post(c, "createChatCompletion", _example("createChatCompletion"))


def _dead_endpoint_simulate(_) -> Any:
    """/simulate of the same simulator: the endpoint's failure is that dialogue's error, in a 200."""
    endpoint = EndpointSettings(base_url=f"http://127.0.0.1:{free_port()}/v1", api_key_env="none", max_retries=0,
                                timeout_s=5, cache=False)
    profile = Profile(name="remote", simulators={examples.DEMO_SIMULATOR: SimulatorConfig(
        kind="openai", model="remote-student", endpoint=endpoint)})
    with TestClient(create_app(settings(profile), profile)) as c:
        wait_ready(c)
        return _post(c, "simulate", _example("simulate"))


def _keyless_baseline(operation_id: str) -> Callable[[TestClient], Any]:
    """The demo's baseline:zero-shot (an OpenAI model) on a server with no OpenAI key set (the
    autouse fixture of tests/conftest.py unsets them)."""
    return _changed(operation_id, model="baseline:zero-shot")


COMMON = {401: _mini(api_key="docs-key"), 413: _oversized, 429: _mini(rate_limit_per_minute=1), 504: _slow}
#: What provokes each documented error: (operation, status, type) -> a request against the app.
PROVOKE: dict[tuple[str, int, str], Callable[[TestClient], Any]] = {
    ("simulate", 400, "invalid_request"): _changed("simulate", dialogues=[examples.DIALOGUE]),
    ("simulate", 400, "cap_exceeded"): _sampling(n=9),
    ("simulate", 404, "unknown_model"): _changed("simulate", model="my-student"),
    ("simulate", 422, "validation_error"): _sampling(temperature="hot"),
    ("simulate", 503, "unavailable"): _keyless_baseline("simulate"),
    ("simulate", 503, "overloaded"): _queue_full("simulate"),
    ("simulate", 503, "not_ready"): _loading("simulate", fail=False),
    ("simulate", 503, "load_failed"): _loading("simulate", fail=True),
    ("score", 400, "invalid_request"): _changed("score", metrics=["rouge"]),
    ("score", 422, "validation_error"): _score_item(turn_index="three"),
    ("score", 503, "overloaded"): _queue_full("score"),
    ("score", 503, "not_ready"): _loading("score", fail=False),
    ("score", 503, "load_failed"): _loading("score", fail=True),
    ("reward", 400, "invalid_request"): _changed("reward", labels=[{"dialogue": examples.DIALOGUE, "turn_index": 2}]),
    ("reward", 422, "validation_error"): _changed("reward", query="not a list"),
    ("reward", 503, "overloaded"): _queue_full("reward"),
    ("reward", 503, "not_ready"): _loading("reward", fail=False),
    ("reward", 503, "load_failed"): _loading("reward", fail=True),
    ("createChatCompletion", 400, "unsupported_parameter"): _changed(
        "createChatCompletion", tools=[{"type": "function", "function": {"name": "calculator"}}]),
    ("createChatCompletion", 404, "unknown_model"): _changed("createChatCompletion", model="gpt-4o"),
    ("createChatCompletion", 422, "validation_error"): _changed("createChatCompletion", temperature=3),
    ("createChatCompletion", 503, "unavailable"): _keyless_baseline("createChatCompletion"),
    ("createChatCompletion", 502, "upstream_error"): _dead_endpoint,
    ("createChatCompletion", 503, "overloaded"): _queue_full("createChatCompletion"),
    ("createChatCompletion", 503, "not_ready"): _loading("createChatCompletion", fail=False),
    ("createChatCompletion", 503, "load_failed"): _loading("createChatCompletion", fail=True),
}
for _operation in POSTS.values():
    for _status, _type in ((401, "unauthorized"), (413, "body_too_large"), (429, "rate_limited"), (504, "timeout")):
        PROVOKE[(_operation, _status, _type)] = COMMON[_status](_operation)


#: Examples showing a demo's first start, which the test app (nothing to build) cannot reproduce: the
#: message is compared up to what the build adds ("; waits for demo:student-sft (building ...)").
FIRST_START = {("simulate", 503, "not_ready"), ("createChatCompletion", 503, "not_ready")}


def _numbers_aside(message: str) -> str:
    return re.sub(r"\d+(?:\.\d+)?", "N", message)


def response_schema(document: dict, path: str, status: int) -> dict:
    """The JSON Schema the document gives the body of ``status`` on ``path``, its references resolvable."""
    schema = document["paths"][path]["post"]["responses"][str(status)]["content"]["application/json"]["schema"]
    return {**schema, "components": document["components"]}


def test_every_documented_error_has_a_provocation(document):
    documented = {(op_id, status, value["error"]["type"])
                  for path, op_id in POSTS.items()
                  for status, _, value in error_examples(document["paths"][path]["post"])}
    assert documented == set(PROVOKE)


@pytest.mark.parametrize("key", sorted(PROVOKE), ids=lambda k: f"{k[0]}-{k[1]}-{k[2]}")
def test_error_examples_are_what_the_app_answers(client, document, key):
    operation_id, status, type_ = key
    (example,) = [(summary, value) for st, summary, value in error_examples(document["paths"][PATHS[operation_id]]["post"])
                  if st == status and value["error"]["type"] == type_]
    summary, value = example
    msgspec.convert(value, s.ErrorResponse)
    import jsonschema  # the dev extra
    documented = response_schema(document, PATHS[operation_id], status)
    jsonschema.validate(value, documented)
    r = PROVOKE[key](client)
    assert r.status_code == status, (summary, r.text)
    jsonschema.validate(r.json(), documented)  # the body the app really answers has the documented shape
    got, want = r.json()["error"], value["error"]
    assert (got["type"], got["field"]) == (want["type"], want.get("field")), summary  # the docs leave out a null field
    if key in FIRST_START:
        got["message"], want["message"] = (re.split(r"; | \(", m)[0] for m in (got["message"], want["message"]))
    assert _numbers_aside(got["message"]) == _numbers_aside(want["message"]), summary
    assert client.get("/health").status_code == 200


def test_server_side_statuses_are_documented_where_the_app_answers_them(client, document):
    """502 (a simulator endpoint's failure) where a failure is the whole answer: the chat completion.
    /simulate answers the failure as the dialogue's own error in a 200, and /score, whose judge
    failures are nulls with their cause, has neither. No route documents a 500: a simulator the server
    cannot call (its key is not set) is a 503 ``unavailable``."""
    declared = {path: {int(c) for c in document["paths"][path]["post"]["responses"]} for path in POSTS}
    assert not any(500 in codes for codes in declared.values())
    assert 502 in declared["/v1/chat/completions"] and 502 not in declared["/simulate"]
    assert not {500, 502} & declared["/score"]
    r = _dead_endpoint_simulate(client)
    assert r.status_code == 200, r.text
    (result,) = r.json()["results"]
    assert result["candidates"] == [] and "connection" in result["error"].lower()


def test_ready_example_is_a_ready_response(document, tmp_path, monkeypatch):
    media = document["paths"]["/ready"]["get"]["responses"]["503"]["content"]["application/json"]
    (example,) = media["examples"].values()
    ready = msgspec.convert(example["value"], s.ReadyResponse)
    assert ready.status == "loading" and not ready.ready
    # The demo's own components and builds, as its /ready lists them before anything is built (on an
    # empty SIMHUB_HOME: the session's may hold the demo models already, and then nothing waits).
    monkeypatch.setenv("SIMHUB_HOME", str(tmp_path))
    with TestClient(create_app(settings(DEMO, preload=False), DEMO)) as c:
        demo = c.get("/ready").json()
    components = {(x["kind"], x["id"]): x for x in demo["components"]}
    assert {(x.kind, x.id) for x in ready.components} <= set(components)
    assert all(set(x.waits_for) <= set(components[(x.kind, x.id)]["waits_for"]) for x in ready.components)
    assert any(ready.building in x["waits_for"] for x in components.values())
