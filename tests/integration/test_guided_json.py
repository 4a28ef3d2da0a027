"""Schema-guided JSON (``Sampling.json_schema``): the tiny model's guided replies parse and match
their schema where its free text never parses, the KT role-player over it answers every item with
one of its letters, a schema the decoder cannot follow is a ConfigError naming ``json_schema``, and
the other backends pass the schema on (an endpoint's ``response_format``) or refuse it (the dummy).
vLLM's structured outputs are tested in test_vllm.py, on the engine its other in-process test starts."""

from __future__ import annotations

import json

import pytest

from simhub.config import ModelRef
from simhub.errors import ConfigError, NotSupportedError
from simhub.models import Sampling, load_lm

SCHEMA = {"type": "object",
          "properties": {"answer": {"type": "string", "enum": ["A", "B", "C", "D"]},
                         "sure": {"type": "boolean"},
                         "steps": {"type": "integer", "minimum": 0, "maximum": 9},
                         "note": {"type": "string", "maxLength": 12}},
          "required": ["answer", "sure", "steps", "note"], "additionalProperties": False}
ASK = [{"role": "user", "content": "Which option is right, A, B, C or D? Reply with one JSON object."}]


def matches(value, schema) -> bool:
    """The part of JSON Schema these tests use: objects (required, no extra properties), enums,
    strings with a maximum length, booleans and bounded integers."""
    if "enum" in schema and value not in schema["enum"]:
        return False
    kind = schema.get("type")
    if kind == "object":
        props = schema.get("properties", {})
        return (isinstance(value, dict) and all(k in value for k in schema.get("required", []))
                and (schema.get("additionalProperties", True) or set(value) <= set(props))
                and all(matches(v, props[k]) for k, v in value.items() if k in props))
    if kind == "string":
        return isinstance(value, str) and len(value) <= schema.get("maxLength", len(value))
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)
                and schema.get("minimum", value) <= value <= schema.get("maximum", value))
    return True


def compact(text: str) -> bool:
    """No whitespace around the separators (the schema's keys in its order)."""
    return text.startswith('{"answer":"') and '","sure":' in text and ',"steps":' in text and ',"note":"' in text


def parses(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return None


@pytest.fixture(scope="module")
def tiny_lm(tiny_kit):
    pytest.importorskip("xgrammar")
    return load_lm(ModelRef(model=str(tiny_kit["llama"])))


def test_guided_replies_parse_and_match_the_schema_where_free_text_does_not(tiny_lm):
    guided = tiny_lm.generate([ASK, ASK], Sampling(temperature=1.0, max_tokens=80, n=3, seed=7, json_schema=SCHEMA))
    free = tiny_lm.generate([ASK, ASK], Sampling(temperature=1.0, max_tokens=80, n=3, seed=7))
    texts = [g.text for r in guided for g in r.generations]
    assert len(texts) == 6 and len(set(texts)) > 1  # sampled, not one reply repeated
    for r in guided:
        for g in r.generations:
            value = parses(g.text)
            assert value is not None and matches(value, SCHEMA), g.text
            assert g.finish_reason == "stop"  # ended at the JSON's end, not at the token limit
            assert compact(g.text)
    assert all(parses(g.text) is None for r in free for g in r.generations)


def test_guided_generation_holds_for_every_seed_and_greedy(tiny_lm):
    for seed in range(5):
        [result] = tiny_lm.generate([ASK], Sampling(temperature=0.7, max_tokens=80, seed=seed, json_schema=SCHEMA))
        assert matches(parses(result.generations[0].text), SCHEMA)
    [greedy] = tiny_lm.generate([ASK], Sampling(max_tokens=80, json_schema=SCHEMA, logprobs=2))
    gen = greedy.generations[0]
    assert matches(parses(gen.text), SCHEMA)
    assert gen.logprobs is not None and len(gen.logprobs) == gen.tokens  # the recorder still runs beside the guide


@pytest.mark.parametrize("schema", [{"type": "frobnicate"}, {"type": "string", "pattern": "(("},
                                    {"$ref": "#/definitions/missing"}, "not a schema", {"type": {1, 2}}])
def test_a_schema_the_decoder_cannot_follow_is_a_config_error_naming_json_schema(tiny_lm, schema):
    with pytest.raises(ConfigError, match="json_schema") as err:
        tiny_lm.generate([ASK], Sampling(max_tokens=8, json_schema=schema))
    assert err.value.field == "json_schema"
    assert "/project/" not in str(err.value)  # xgrammar's C++ source location is left out


def _items():
    from simhub.learners.kt.items import KTItem

    return [KTItem(id="q1", kc="Fractions", question="What is 1/2 + 1/4?",
                   options={"A": "3/4", "B": "2/6", "C": "1/8", "D": "2/4"}, answer="A"),
            KTItem(id="q-2", kc="Ratio", question="Share 10 in the ratio 2:3. What is the smaller part?",
                   options={"A": "2", "B": "4", "C": "6"}, answer="B"),
            KTItem(id="Q3", kc="Angles", question="Is a 100 degree angle obtuse?",
                   options={"A": "Yes", "B": "No"}, answer="A")]


def test_the_kt_role_player_over_a_local_model_answers_every_item_with_one_of_its_letters(tiny_kit, tiny_lm):
    from simhub.learners.chat import LocalChat
    from simhub.learners.kt.student import DayContext, LearnerSettings, LLMRolePlayer

    items = _items()
    ctx = DayContext(day=1, ability="average", personality="Curious and a little impatient.", adversarial=False,
                     weakest=("Fractions",), strongest=("Angles",))
    chat = LocalChat(ModelRef(model=str(tiny_kit["llama"])))
    guided = LLMRolePlayer(chat, name="tiny", settings=LearnerSettings(max_tokens=120))
    answers = [a for seed in range(4) for a in zip(items, guided.answer(ctx, items, [0.5] * 3, seed), strict=True)]
    assert all(a.flag is None and a.letter in it.options for it, a in answers)  # valid_answer_rate 1.0
    said = guided.say(ctx, [("tutor", "What do you think the first step is?")], seed=3)
    assert said.flag is None and said.text and len(said.text) <= 400

    free = LLMRolePlayer(chat, name="tiny", settings=LearnerSettings(max_tokens=60, guided=False))
    assert all(a.flag == "invalid_json" for seed in range(2) for a in free.answer(ctx, items, [0.5] * 3, seed))


def test_answers_schema_lists_every_item_with_its_letters():
    from simhub.learners.kt.student import MESSAGE_SCHEMA, answers_schema

    items = _items()
    schema = answers_schema([*items, items[0]])
    inner = schema["properties"]["answers"]
    assert schema["required"] == ["answers"] and inner["required"] == ["q1", "q-2", "Q3"]
    assert inner["properties"]["q-2"] == {"type": "string", "enum": ["A", "B", "C"]}
    assert not schema["additionalProperties"] and not inner["additionalProperties"]
    assert matches({"answers": {"q1": "D", "q-2": "C", "Q3": "B"}}, schema)
    assert not matches({"answers": {"q1": "D", "q-2": "D", "Q3": "B"}}, schema)
    assert MESSAGE_SCHEMA["properties"]["message"]["maxLength"] == 400


def test_sampling_with_a_schema_stays_hashable_and_keyed_by_it():
    import dataclasses

    a, b = Sampling(json_schema=SCHEMA), Sampling(json_schema={"type": "object"})
    assert hash(a) == hash(b) == hash(Sampling()) and a != b and a == Sampling(json_schema=dict(SCHEMA))
    assert dataclasses.asdict(a)["json_schema"] == SCHEMA and dataclasses.asdict(Sampling())["json_schema"] is None


def test_an_endpoint_gets_the_schema_as_its_response_format_and_json_mode_wins():
    from simhub.models.endpoint_lm import chat_request, json_schema_format

    body = chat_request("m", ASK, Sampling(json_schema=SCHEMA))
    assert body["response_format"] == {"type": "json_schema",
                                       "json_schema": {"name": "answer", "schema": SCHEMA, "strict": True}}
    assert body["response_format"] == json_schema_format(SCHEMA)
    assert chat_request("m", ASK, Sampling(json_schema=SCHEMA),
                        response_format={"type": "json_object"})["response_format"] == {"type": "json_object"}
    assert "response_format" not in chat_request("m", ASK, Sampling())
    with pytest.raises(ConfigError, match="json_schema"):
        chat_request("m", ASK, Sampling(json_schema=["not", "an", "object"]))


def test_the_dummy_model_refuses_a_schema():
    with pytest.raises(NotSupportedError, match="json_schema"):
        load_lm("dummy:0").generate([ASK], Sampling(max_tokens=4, json_schema=SCHEMA))
    assert load_lm("dummy:0").generate([ASK], Sampling(max_tokens=4))[0].generations


def test_the_knowledge_state_learner_and_extractor_on_a_local_model_write_their_json(tiny_kit, tiny_lm):
    """The knowsim role-player and the signal extractor hold a local model to their JSON too."""
    from simhub.learners.chat import LocalChat
    from simhub.learners.extract import ExtractRequest, LLMExtractor, extraction_schema
    from simhub.learners.graph import shipped_graphs, validate_graph
    from simhub.learners.roleplay import LEARNER_TURN_SCHEMA, LearnerRequest, RolePlayLearner
    from simhub.learners.state import initial_state

    name, raw = next(iter(shipped_graphs().items()))
    graph = validate_graph(raw, name=name)
    state = initial_state(graph, "novice")
    chat = LocalChat(ModelRef(model=str(tiny_kit["llama"])))
    learner = RolePlayLearner(chat, name="tiny", max_tokens=800)  # the strings may run to their maxLength
    turns = learner.speak([LearnerRequest(graph, state, raw.question, (), 1, None, seed) for seed in range(3)])
    assert all(t.flagged is None and t.message for t in turns)          # an untrained model, yet valid JSON
    assert LEARNER_TURN_SCHEMA["required"] == ["thought", "message", "attempt_verify"]
    schema = extraction_schema(graph)
    assert schema["properties"]["ius"]["minItems"] == len(graph.ids) == schema["properties"]["ius"]["maxItems"]
    extractor = LLMExtractor(chat, name="tiny", max_tokens=150 * len(graph.ids))
    [got] = extractor.extract([ExtractRequest(graph, state, (), "How do I start?", "Find a common denominator.",
                                              raw.question)])
    # the decoding holds every entry to a known IU and the two label sets; a repeated IU is still flagged
    assert got.error is None and (got.flagged is None or "twice" in got.flagged or "no label" in got.flagged)
