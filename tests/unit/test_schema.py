"""The canonical dialogue format: JSONL round trips, the JSON shape, errors that name the field."""

from __future__ import annotations

import json

import pytest

from simhub.schema import (
    Dialogue,
    Persona,
    Question,
    SchemaError,
    Turn,
    dialogue_from_dict,
    read_jsonl,
    to_builtins,
    write_jsonl,
)


def test_jsonl_round_trip(tmp_path, sample_corpus):
    dialogues = sample_corpus["val"][:20]
    path = tmp_path / "d.jsonl"
    assert write_jsonl(path, dialogues) == 20
    assert read_jsonl(path) == dialogues
    assert not list(tmp_path.glob(".*.tmp"))  # the temporary file was renamed


def test_canonical_json_shape():
    d = Dialogue(
        id="1-2",
        question=Question(text="q", correct_option="B", solvable=True),
        kcs=["Adding fractions"],
        persona=Persona(openness="high", conscientiousness="low", extraversion="neutral", agreeableness="high", neuroticism="low"),
        turns=[Turn(role="tutor", content="Hi", kcs=["Default"]), Turn(role="student", content="5", act="Math Answer", correctness="na")],
    )
    data = to_builtins(d)
    # Empty optional fields are left out (profile, failed_labels, meta); readers get their defaults.
    assert set(data) == {"id", "question", "kcs", "persona", "turns"}
    assert data["turns"][0] == {"role": "tutor", "content": "Hi", "kcs": ["Default"]}
    assert dialogue_from_dict(json.loads(json.dumps(data))) == d


@pytest.mark.parametrize(
    ("patch", "field"),
    [
        ({"turns": [{"role": "teacher", "content": "x"}]}, "$.turns[0].role"),
        ({"turns": [{"role": "student", "content": "x", "act": "Guess"}]}, "$.turns[0].act"),
        ({"question": {"text": "q", "correct_option": "E"}}, "$.question.correct_option"),
        ({"id": 5}, "$.id"),
        ({"surprise": 1}, "surprise"),
    ],
)
def test_validation_errors_name_the_field(patch, field):
    data = {"id": "a", "question": {"text": "q"}, "turns": [], **patch}
    with pytest.raises(SchemaError) as info:
        dialogue_from_dict(data, "items[3].dialogue")
    assert field in str(info.value) and "items[3].dialogue" in str(info.value)


def test_check_student_turn():
    d = Dialogue(id="a", question=Question(text="q"), turns=[Turn(role="tutor", content="x"), Turn(role="student", content="y")])
    assert d.check_student_turn(1).content == "y"
    with pytest.raises(SchemaError, match="tutor turn"):
        d.check_student_turn(0)
    with pytest.raises(SchemaError, match="out of range"):
        d.check_student_turn(2)
    with pytest.raises(SchemaError, match="expected an integer"):
        d.check_student_turn("1")  # type: ignore[arg-type]


