"""Answers of an LLM labeller to cells: lenient about form, strict about content (docs/protocol.md §8)."""

from __future__ import annotations

import json

import pytest

from simhub.annotation.parsing import (
    InvalidAnnotation,
    extract_json,
    parse_acts,
    parse_answer,
    parse_correctness,
    parse_freeform,
    parse_kcs,
    parse_ocean,
    parse_question,
    strip_reasoning,
)
from simhub.schema import Dialogue, Question, Turn

DIALOGUE = Dialogue(
    id="1-2",
    question=Question(text="Question Text: 1/2 + 1/4?"),
    kcs=["Add fractions", "Equivalent fractions"],
    turns=[
        Turn(role="tutor", content="Hi! What is 1/2 + 1/4?"),
        Turn(role="student", content="2/6"),
        Turn(role="tutor", content="Not quite. What is 1/2 in quarters?"),
        Turn(role="student", content="i dont know"),
        Turn(role="tutor", content="Well done today."),
    ],
)


def test_reasoning_block_fences_and_surrounding_prose_are_dropped():
    assert strip_reasoning("<think>a</think>b</think> {\"x\": 1} ") == '{"x": 1}'
    assert extract_json('<think>first { then }</think>\n```json\n{"x": 1}\n```') == {"x": 1}
    assert extract_json('Here you go: {"x": {"y": 2}} Hope that helps.') == {"x": {"y": 2}}
    with pytest.raises(InvalidAnnotation, match="not JSON"):
        extract_json("I cannot help with that.")
    with pytest.raises(InvalidAnnotation, match="JSON object"):
        extract_json("[1, 2]")
    with pytest.raises(InvalidAnnotation, match="no text"):
        extract_json(None)


def test_correctness_accepts_both_key_forms_and_ignores_extra_keys():
    answer = json.dumps({"turn 2": {"summary": "adds tops and bottoms", "correct": False, "confidence": 0.9},
                         "4": {"Summary": "says they do not know", "Correct": "false"}, "overall": "weak"})
    assert parse_correctness(answer, DIALOGUE) == {
        "turn 2": {"summary": "adds tops and bottoms", "correct": False},
        "turn 4": {"summary": "says they do not know", "correct": False},
    }
    nulls = parse_correctness('{"turn 2": {"summary": "s", "correct": null}, "turn 4": {"correct": "na"}}', DIALOGUE)
    assert nulls["turn 2"]["correct"] is None and nulls["turn 4"] == {"summary": None, "correct": None}


@pytest.mark.parametrize("answer, message", [
    ('{"turn 2": {"correct": true}}', "do not match the student turns"),  # a student turn missing
    ('{"turn 2": {"correct": true}, "turn 4": {"correct": true}, "turn 5": {"correct": true}}',
     "do not match"),  # a tutor turn labelled
    ('{"turn 2": {"correct": true}, "turn 4": {"summary": "x"}}', "no 'correct' entry"),
    ('{"turn 2": {"correct": true}, "turn 4": {"correct": "maybe"}}', "true, false or null"),
    ('{"turn 2": {"correct": true}, "2": {"correct": true}, "turn 4": {"correct": true}}', "labelled twice"),
])
def test_correctness_must_cover_exactly_the_student_turns(answer, message):
    with pytest.raises(InvalidAnnotation, match=message):
        parse_correctness(answer, DIALOGUE)


def test_acts_are_normalised_and_checked():
    answer = '{"turn 2": {"reasoning": "tries", "act": "math answer"}, "turn 4": {"reasoning": "r", "act": "not understanding"}}'
    assert parse_acts(answer, DIALOGUE) == {"turn 2": {"reasoning": "tries", "act": "Math Answer"},
                                            "turn 4": {"reasoning": "r", "act": "Not Understanding"}}
    assert parse_acts('{"2": "Off Topic", "4": "off-topic"}', DIALOGUE)["turn 2"]["act"] == "Off-Topic"
    with pytest.raises(InvalidAnnotation, match="is not one of"):
        parse_acts('{"2": "Guess", "4": "Acknowledge"}', DIALOGUE)
    with pytest.raises(InvalidAnnotation, match="do not match"):
        parse_acts('{"2": "Acknowledge"}', DIALOGUE)


def test_kcs_keep_tutor_turns_and_known_names():
    answer = json.dumps({
        "turn 1": {"summary": "add", "kcs": ["add fractions", "Default", "Long division"]},
        "turn 2": {"summary": "a student turn", "kcs": ["Add fractions"]},  # not a tutor turn: ignored
        "turn 3": {"summary": "convert", "kcs": ["Fractions of amounts"]},  # unknown only: the catch-all
        "turn 5": {"summary": "none", "kcs": []},
        "comment": "extra",
    })
    assert parse_kcs(answer, DIALOGUE) == {
        "turn 1": {"summary": "add", "kcs": ["Add fractions", "Default"]},
        "turn 3": {"summary": "convert", "kcs": ["Default"]},
        "turn 5": {"summary": "none", "kcs": []},
    }
    assert parse_kcs('{"3": "Equivalent fractions"}', DIALOGUE) == {
        "turn 3": {"summary": None, "kcs": ["Equivalent fractions"]}}
    with pytest.raises(InvalidAnnotation, match="list of KC names"):
        parse_kcs('{"turn 1": {"kcs": 3}}', DIALOGUE)


def test_ocean_reasoning_first_and_levels_checked():
    answer = ('{"reasoning": "curious", "openness": "High", "Conscientiousness": "moderate", "Extraversion": "low", '
              '"Agreeableness": "neutral", "Neuroticism": "LOW", "extra": 1}')
    cell = parse_ocean(answer)
    assert list(cell) == ["reasoning", "Openness", "Conscientiousness", "Extraversion", "Agreeableness", "Neuroticism"]
    assert cell["Openness"] == "high" and cell["Conscientiousness"] == "neutral" and cell["Neuroticism"] == "low"
    with pytest.raises(InvalidAnnotation, match="missing trait Neuroticism"):
        parse_ocean('{"Openness": "low", "Conscientiousness": "low", "Extraversion": "low", "Agreeableness": "low"}')
    with pytest.raises(InvalidAnnotation, match="not low, neutral or high"):
        parse_ocean(answer.replace('"High"', '"very high"'))


@pytest.mark.parametrize("given, option", [(2, 2), ("3", 3), ("B", 2), ("option 4", 4), ("Answer a", 1), (1.0, 1)])
def test_question_option_forms(given, option):
    cell = parse_question(json.dumps({"solution": "s", "solvable": True, "correct_option": given,
                                      "option_1_explanation": "e1", "option_3_explanation": "e3"}))
    assert cell == {"solution": "s", "solvable": True, "correct_option": option, "option_1_explanation": "e1",
                    "option_2_explanation": None, "option_3_explanation": "e3", "option_4_explanation": None}


def test_question_without_correct_option_is_unsolvable():
    assert parse_question('{"solution": "needs the image", "solvable": true, "correct_option": null}')[
        "solvable"] is False
    assert parse_question('{"solvable": "false", "correct_option": 2}')["solvable"] is False
    assert parse_question('{"correct_option": 2}')["solvable"] is True
    for bad in ('{"correct_option": 7}', '{"correct_option": true}', '{"correct_option": 2, "solvable": "perhaps"}'):
        with pytest.raises(InvalidAnnotation):
            parse_question(bad)


def test_freeform_is_one_paragraph_of_text():
    assert parse_freeform("<think>plan</think>\nKnows halves.\n\nMakes slips.  Writes briefly.") == (
        "Knows halves. Makes slips. Writes briefly.")
    for bad in ("", "<think>only thinking</think>  ", None):
        with pytest.raises(InvalidAnnotation):
            parse_freeform(bad)


def test_parse_answer_dispatches_by_label():
    assert parse_answer("freeform", "A student.") == "A student."
    assert parse_answer("acts", '{"2": "Acknowledge", "4": "Acknowledge"}', DIALOGUE)["turn 4"]["act"] == "Acknowledge"
    with pytest.raises(ValueError, match="needs its dialogue"):
        parse_answer("kcs", "{}")
