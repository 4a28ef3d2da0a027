"""Annotation labels, prompts, keys, the released-layout writer, planning and the endpoint's key rules."""

from __future__ import annotations

import pytest

from simhub.annotation import (
    KEY_ENV,
    AnnotationSettings,
    annotator_endpoint,
    dialogue_key,
    load_inputs,
    parse_labels,
    plan_annotation,
    write_annotation_file,
)
from simhub.annotation.labels import columns_of
from simhub.annotation.layout import ID_COLUMN, dialogue_row
from simhub.data.annotations import RELEASED_COLUMNS, annotate, read_annotation_file, row_dialogue
from simhub.errors import ConfigError, DataError, UnknownNameError
from simhub.prompts.annotation import annotation_prompt, question_prompt
from simhub.schema import Dialogue, Question, Turn, write_jsonl

DIALOGUE = Dialogue(
    id="1655-61849",
    question=Question(text="Question Text: 1/2 + 1/4?\nAnswer A Text: 2/6\nAnswer B Text: 3/4"),
    kcs=["Add fractions"],
    turns=[
        Turn(role="tutor", content="What is 1/2 + 1/4?"),
        Turn(role="student", content="2/6"),
        Turn(role="tutor", content="Not quite. What is 1/2 in quarters?"),
        Turn(role="student", content="it's \"2/4\", isn't it"),
    ],
)


def test_label_names_aliases_and_unknown_ones():
    assert parse_labels("acts, question ,freeform,acts") == ("questions", "acts", "freeform")
    assert parse_labels(["eedi_kcs", "ocean_persona"]) == ("kcs", "ocean")
    assert parse_labels(None) == ("questions", "acts", "correctness", "kcs", "ocean", "freeform")
    with pytest.raises(UnknownNameError) as info:
        parse_labels("acts,error")
    assert info.value.field == "labels" and "known: questions, acts, correctness, kcs, ocean, freeform" in str(info.value)
    with pytest.raises(ConfigError):
        parse_labels(" , ")
    assert columns_of("questions") == ("question_prompt", "question_annotation_raw", "question_annotation")
    assert columns_of("kcs") == ("eedi_kcs_prompt", "eedi_kcs_annotation_raw", "eedi_kcs")
    assert columns_of("freeform")[2] == "freeform_persona" and columns_of("ocean")[2] == "ocean_persona"


def test_prompts_number_the_turns_and_name_what_to_label():
    acts = annotation_prompt("acts", DIALOGUE)
    assert "Turn 1 (Tutor): What is 1/2 + 1/4?\nTurn 2 (Student): 2/6" in acts
    assert "The student turns are turns 2, 4." in acts and "JSON" in acts
    for act in ("Math Answer", "Seek Information", "Not Understanding", "Acknowledge", "Off-Topic"):
        assert f"- {act}: " in acts
    kcs = annotation_prompt("kcs", DIALOGUE)
    assert "- Add fractions\n- Default" in kcs and "The tutor turns are turns 1, 3." in kcs
    correctness = annotation_prompt("correctness", DIALOGUE)
    assert "do not know" in correctness and "null" in correctness and "Correct option" not in correctness
    answered = Dialogue(id=DIALOGUE.id, question=Question(text=DIALOGUE.question.text, correct_option="B",
                                                          solution="2/4 + 1/4", solvable=True), turns=DIALOGUE.turns)
    for label in ("acts", "correctness", "kcs", "ocean", "freeform"):  # FIDELITY.md (annotation): every label
        assert "Correct option: B" in annotation_prompt(label, answered, with_answer=True)
    assert "exactly one entry per tutor turn" in annotation_prompt("kcs", DIALOGUE)
    assert "reasoning" in annotation_prompt("ocean", DIALOGUE).split("Answer with")[1].split(",")[0]
    assert "one paragraph" in annotation_prompt("freeform", DIALOGUE)
    question = question_prompt(DIALOGUE.question.text)
    assert DIALOGUE.question.text in question and '"correct_option"' in question and "option_4_explanation" in question
    with pytest.raises(ValueError):
        annotation_prompt("questions", DIALOGUE)


def test_dialogue_keys():
    assert dialogue_key("1655-61849") == (1655, 61849)
    with pytest.raises(DataError) as info:
        dialogue_key("rollout-7", where="test, dialogue 3")
    assert info.value.field == "id" and "'rollout-7'" in str(info.value) and "test, dialogue 3" in str(info.value)
    derived = dialogue_key("rollout-7", hash_ids=True)
    assert derived[0] == 0 and derived == dialogue_key("rollout-7", hash_ids=True) != dialogue_key("rollout-8",
                                                                                                   hash_ids=True)


def test_written_rows_read_back_with_the_released_reader(tmp_path):
    row = dialogue_row(DIALOGUE, (1655, 61849))
    row |= {
        "question_prompt": "prompt, with \"quotes\"\nand lines",
        "question_annotation_raw": '{"correct_option": 2}',
        "question_annotation": {"solution": "1/2 = 2/4", "solvable": True, "correct_option": 2,
                                "option_1_explanation": "adds tops", "option_2_explanation": None,
                                "option_3_explanation": None, "option_4_explanation": None},
        "acts": {"turn 2": {"reasoning": "r", "act": "Math Answer"}, "turn 4": {"reasoning": "it's", "act": "Math Answer"}},
        "correctness": {"turn 2": {"summary": "s", "correct": False}, "turn 4": {"summary": None, "correct": True}},
        "eedi_kcs": {"turn 3": {"summary": "s", "kcs": ["Add fractions", "Default"]}},
        "ocean_persona": {"reasoning": "r", "Openness": "low", "Conscientiousness": "high", "Extraversion": "neutral",
                          "Agreeableness": "neutral", "Neuroticism": "low"},
        "freeform_persona": "Adds numerators and denominators; writes \"it's\" a lot.",
    }
    other = dialogue_row(Dialogue(id="x", question=Question(text="q"), turns=[]), (0, 5), keep_id=True)
    path = write_annotation_file(tmp_path / "test_m.csv", [row, other])
    header = path.read_text().split("\n", 1)[0].split(",")
    assert header == [*RELEASED_COLUMNS, ID_COLUMN]
    first, second = read_annotation_file(path)
    assert first.key == (1655, 61849) and second.key == (0, 5)
    got = annotate(row_dialogue(first), first)
    assert got.id == DIALOGUE.id and got.kcs == ["Add fractions"] and got.failed_labels == []
    assert [(t.role, t.content) for t in got.turns] == [(t.role, t.content) for t in DIALOGUE.turns]
    assert [t.act for t in got.turns] == [None, "Math Answer", None, "Math Answer"]
    assert [t.correctness for t in got.turns] == [None, "incorrect", None, "correct"]
    assert got.turns[2].kcs == ["Add fractions", "Default"] and got.turns[0].kcs is None
    assert got.question.correct_option == "B" and got.question.solvable is True
    assert got.question.solution == "1/2 = 2/4" and got.question.option_explanations == {"A": "adds tops"}
    assert got.persona.conscientiousness == "high" and got.profile == row["freeform_persona"]
    empty = annotate(row_dialogue(second), second)
    assert set(empty.failed_labels) == {"question", "correctness", "kcs", "acts", "ocean", "freeform"}


def test_plan_counts_unique_questions_and_skips_what_has_nothing_to_label():
    lone_tutor = Dialogue(id="1655-2", question=DIALOGUE.question, turns=[Turn(role="tutor", content="Hello?")])
    other = Dialogue(id="7-3", question=Question(text="another"), turns=DIALOGUE.turns)
    plan = plan_annotation({"test": [DIALOGUE, lone_tutor, other]}, "gpt-4.1")
    assert plan.requests == {"questions": 2, "acts": 2, "correctness": 2, "kcs": 3, "ocean": 3, "freeform": 3}
    assert plan.total_requests == 15 and plan.max_answer_tokens == 15 * 4000
    assert plan.prompt_tokens == -(-sum(plan.prompt_chars.values()) // 4)
    small = plan_annotation({"x": [DIALOGUE]}, "gpt-4.1", AnnotationSettings(labels="acts", max_tokens=None))
    assert small.requests == {"acts": 1} and small.max_answer_tokens is None


def test_settings_payload_asks_for_json_except_for_the_profile():
    settings = AnnotationSettings()
    body = settings.payload("gpt-4.1", "acts", [{"role": "user", "content": "JSON please"}])
    assert body == {"model": "gpt-4.1", "messages": [{"role": "user", "content": "JSON please"}], "temperature": 0.0,
                    "max_completion_tokens": 4000, "response_format": {"type": "json_object"}}
    assert "response_format" not in settings.payload("gpt-4.1", "freeform", [{"role": "user", "content": "x"}])
    assert "temperature" not in settings.payload("gpt-5-mini", "acts", [{"role": "user", "content": "x"}])
    assert "response_format" not in AnnotationSettings(json_mode=False).payload("m", "acts", [{"role": "user",
                                                                                                "content": "x"}])


def test_settings_payload_leaves_out_what_is_not_set():
    messages = [{"role": "user", "content": "x"}]
    assert AnnotationSettings(temperature=None, max_tokens=None).payload("gpt-4.1", "acts", messages) == {
        "model": "gpt-4.1", "messages": messages, "response_format": {"type": "json_object"}}
    assert AnnotationSettings(temperature=0.5, max_tokens=10).payload("gpt-4.1", "freeform", messages) == {
        "model": "gpt-4.1", "messages": messages, "temperature": 0.5, "max_completion_tokens": 10}
    with pytest.raises(ConfigError):
        AnnotationSettings(temperature=3.0).payload("gpt-4.1", "acts", messages)


def test_endpoint_key_rules(monkeypatch, tmp_path):
    monkeypatch.delenv(KEY_ENV, raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    remote = annotator_endpoint("gpt-4.1", cache_dir=tmp_path)
    assert remote.base_url == "https://api.openai.com/v1" and remote.key_names == (KEY_ENV, "OPENAI_API_KEY")
    assert annotator_endpoint("m", "http://localhost:8000/v1").key_names == ()  # a local server without a key
    assert annotator_endpoint("m", "http://127.0.0.1:8000/v1").cache_dir.name == "annotation"
    # The kind's variables never go to a local server, even when set (issue: keys to the wrong server).
    monkeypatch.setenv("OPENAI_API_KEY", "sk-x")
    assert annotator_endpoint("m", "http://localhost:8000/v1").key_names == ()
    assert annotator_endpoint("m", api_key_env="none").key_names == ()
    assert annotator_endpoint("m", api_key_env="MY_KEY").key_names == ("MY_KEY",)
    assert annotator_endpoint("m", "http://localhost:8000/v1", api_key_env="MY_KEY").key_names == ("MY_KEY",)
    # ...nor to a third-party host: it must name its variable.
    with pytest.raises(ConfigError, match=r"llm\.example\.com is not api\.openai\.com") as info:
        annotator_endpoint("m", "https://llm.example.com/v1")
    assert info.value.field == "api_key_env" and "--api-key-env MY_KEY" in str(info.value)
    assert annotator_endpoint("m", "https://llm.example.com/v1", api_key_env="EXAMPLE_KEY").key_names == ("EXAMPLE_KEY",)


def test_load_inputs(tmp_path):
    write_jsonl(tmp_path / "d" / "train.jsonl", [DIALOGUE])
    write_jsonl(tmp_path / "d" / "test.jsonl", [DIALOGUE])
    assert list(load_inputs(tmp_path / "d")) == ["train", "test"]
    assert list(load_inputs(tmp_path / "d" / "test.jsonl")) == ["test"]
    (tmp_path / "empty").mkdir()
    for missing in (tmp_path / "empty", tmp_path / "nowhere"):
        with pytest.raises(DataError) as info:
            load_inputs(missing)
        assert info.value.field == "data"
