"""Fidelity rules of the prompts (docs/protocol.md §4, §5, §8), each named."""

from __future__ import annotations

import pytest

from simhub.prompts import (
    END_OF_DIALOGUE,
    baseline_messages,
    kt_context,
    student_messages,
    tutor_messages,
)
from simhub.schema import Dialogue, Persona, Question, Turn

DIALOGUE = Dialogue(
    id="7-9",
    question=Question(text="Question Text: 3/4 of 20?", correct_option="B", solution="20 / 4 * 3 = 15",
                      option_explanations={"A": "divided only", "B": "correct", "C": "multiplied only", "D": "added"},
                      solvable=True),
    kcs=["Fractions of amounts", "Division"],
    persona=Persona(openness="high", conscientiousness="low", extraversion="neutral", agreeableness="high", neuroticism="low"),
    profile="Rushes to answers, mixes up numerators and denominators; says 'idk' when stuck.",
    turns=[
        Turn(role="tutor", content="What is 3/4 of 20?", kcs=["Fractions of amounts"]),
        Turn(role="student", content="idk", act="Not Understanding", correctness="incorrect"),
        Turn(role="tutor", content="What is 20 divided by 4?", kcs=["Division"]),
        Turn(role="student", content="5", act="Math Answer", correctness="correct"),
    ],
)


def _text(messages) -> str:
    return "\n".join(m["content"] for m in messages)


def test_rule_trained_students_see_no_persona_and_no_profile():
    """docs/protocol.md §8: the fine-tuned students are trained and run with persona none (no Oracle leak)."""
    for messages in (student_messages(DIALOGUE, upto=3), student_messages(DIALOGUE, end_marker=True)):
        text = _text(messages)
        assert DIALOGUE.profile not in text and "numerators" not in text
        assert "Openness" not in text and "high" not in text.split("Problem")[0]


def test_rule_persona_options_put_what_they_name():
    ocean = _text(student_messages(DIALOGUE, upto=3, persona="ocean"))
    assert "Openness: high" in ocean and DIALOGUE.profile not in ocean
    profile = _text(student_messages(DIALOGUE, upto=3, persona="profile"))
    assert DIALOGUE.profile in profile and "Openness" not in profile


def test_rule_baselines_ocean_and_oracle():
    """docs/protocol.md §5: the OCEAN baseline adds the persona, the Oracle the free-text profile; zero-shot neither."""
    zero = _text(baseline_messages("zero-shot", DIALOGUE, 3))
    ocean = _text(baseline_messages("ocean", DIALOGUE, 3))
    oracle = _text(baseline_messages("oracle", DIALOGUE, 3))
    assert DIALOGUE.profile not in zero and "Openness" not in zero
    assert "Openness: high" in ocean and DIALOGUE.profile not in ocean
    assert DIALOGUE.profile in oracle and "Openness" not in oracle


def test_rule_baselines_read_a_numbered_plain_text_history():
    """docs/protocol.md §8: prompted baselines read `Turn i (Student): ...`, up to the turn they predict."""
    user = baseline_messages("zero-shot", DIALOGUE, 3)[1]["content"]
    assert "Turn 1 (Tutor): What is 3/4 of 20?\nTurn 2 (Student): idk\nTurn 3 (Tutor): What is 20 divided by 4?" in user
    assert "Turn 4" not in user


def test_rule_icl_shows_the_retrieved_dialogue_and_reasoning_the_criteria():
    example = Dialogue(id="1-1", question=Question(text="Question Text: 1/2 of 8?"),
                       turns=[Turn(role="tutor", content="Half of 8?"), Turn(role="student", content="4 easy")])
    icl = _text(baseline_messages("icl", DIALOGUE, 3, example))
    assert "Turn 2 (Student): 4 easy" in icl and icl.index("4 easy") < icl.index("What is 20 divided by 4?")
    reasoning = baseline_messages("reasoning", DIALOGUE, 3)[0]["content"]
    for act in ("Math Answer", "Seek Information", "Not Understanding", "Acknowledge", "Off-Topic"):
        assert act in reasoning
    assert "do not know" in reasoning  # incorrect includes "don't know", as in the judge's definition
    with pytest.raises(ValueError):
        baseline_messages("few-shot", DIALOGUE, 3)


def test_rule_end_marker_on_the_last_training_turn_only():
    """docs/protocol.md §4: the end-of-dialogue marker is appended to the last turn in training (no space, as the reference)."""
    messages = student_messages(DIALOGUE, end_marker=True)
    assert messages[-1]["content"] == f"5{END_OF_DIALOGUE}"
    assert sum(END_OF_DIALOGUE in m["content"] for m in messages) == 1
    assert all(END_OF_DIALOGUE not in m["content"] for m in student_messages(DIALOGUE, upto=3))


def test_rule_student_prompt_shape():
    """docs/protocol.md §4: system prompt; first user message = question with answer, solution, explanations, and the
    tutor's opening; then student turns as assistant, tutor turns as user."""
    messages = student_messages(DIALOGUE, upto=3)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    first = messages[1]["content"]
    assert "3/4 of 20?" in first and "Correct option: B" in first and "20 / 4 * 3 = 15" in first
    assert "multiplied only" in first and "What is 3/4 of 20?" in first
    mirrored = tutor_messages(DIALOGUE, upto=4)
    assert [m["role"] for m in mirrored] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert mirrored[-1]["content"] == "5"


def test_rule_kt_context_lists_all_kcs_whatever_is_asked():
    """docs/protocol.md §8: the KT context lists all of the dialogue's KCs (level-3 + Default) in training and
    at evaluation; only the per-KC questions differ."""
    context = kt_context(DIALOGUE, DIALOGUE.turns[:1])
    for kc in ("Fractions of amounts", "Division", "Default"):
        assert f"- {kc}" in context
    assert "Openness: high" in context  # the paper's KT model reads the OCEAN persona
    assert DIALOGUE.profile not in context


def test_rule_kt_training_context_equals_evaluation_context():
    from simhub.metrics.knowledge import build_kt_prompt
    from simhub.models.dummy import DummyTokenizer
    from simhub.training.data import build_kt_examples, kt_samples

    tok = DummyTokenizer()
    (history, kcs, label), *_ = kt_samples(DIALOGUE)
    assert kcs == ["Fractions of amounts"] and label == 0.0 and history == []  # labelled KC; next turn incorrect
    train = build_kt_examples(tok, [DIALOGUE], 10**9).items[0]
    evaluation = build_kt_prompt(tok, DIALOGUE, history, DIALOGUE.all_kcs)
    assert train["input_ids"][: train["context_len"]] == evaluation.input_ids[: evaluation.context_len]
    assert len(train["segments"]) == 1 and len(evaluation.segments) == 3


def test_rule_classifiers_read_the_answer_key_and_the_candidate_as_the_last_numbered_turn():
    """FIDELITY.md: the act and correctness classifiers see the question with its answer key and the
    dialogue as numbered turns ending with the student turn to label (a candidate takes its place)."""
    from simhub.prompts import act_messages, correctness_messages

    for build in (act_messages, correctness_messages):
        user = build(DIALOGUE.turns[:3], "It is 15", DIALOGUE)[1]["content"]
        assert "Correct option: B" in user and "20 / 4 * 3 = 15" in user and "divided only" in user
        assert user.endswith("Turn 3 (Tutor): What is 20 divided by 4?\nTurn 4 (Student): It is 15")
        assert "Turn 1 (Tutor): What is 3/4 of 20?" in user
