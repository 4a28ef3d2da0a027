"""The local judge's training data (recipe kind ``judge``): verdicts derived from the corpus's own
correctness labels, scored back through the metric's table."""

from __future__ import annotations

import pytest

from simhub.metrics.judge import JUDGE_OPTIONS, parse_verdict
from simhub.training.classifiers import first_token_classes
from simhub.training.data import judge_cases, judge_verdict, same_answer


@pytest.mark.parametrize("a,b,same", [
    ("idk", "IDK.", True),
    ("  it is   25 ", "it is 25", True),
    ("25°", "it's 25", True),
    ("3/8", "8/3", False),
    ("I think 12", "I think 13", False),
    ("5", "-5", False),
    ("ok", "yes", False),
])
def test_same_answer(a, b, same):
    assert same_answer(a, b) is same


@pytest.mark.parametrize("real,real_text,cand,cand_text,verdict", [
    ("correct", "5", "correct", "5", "correct"),
    ("incorrect", "13", "incorrect", "13", "incorrect, same error"),
    ("incorrect", "13", "incorrect", "-5", "incorrect, different error"),
    ("correct", "5", "incorrect", "-5", "incorrect, different error"),
    ("incorrect", "13", "correct", "5", "correct"),
    ("correct", "5", "na", "ok", "na"),
    # The same answer as the real turn takes the real turn's label, whatever its own says.
    ("incorrect", "it's 13", "correct", "13", "incorrect, same error"),
])
def test_judge_verdict(real, real_text, cand, cand_text, verdict):
    assert judge_verdict(real, real_text, cand, cand_text) == verdict
    assert verdict in JUDGE_OPTIONS


def test_verdicts_score_through_the_metric_table():
    """A candidate giving the real answer scores correctness 1 (and errors 1 when incorrect) under the
    reference's table; a different wrong answer to a real incorrect turn scores errors 0."""
    assert parse_verdict(judge_verdict("correct", "5", "correct", "5"), "correct").correctness == 1.0
    same = parse_verdict(judge_verdict("incorrect", "13", "incorrect", "13"), "incorrect")
    assert (same.correctness, same.errors) == (1.0, 1.0)
    other = parse_verdict(judge_verdict("incorrect", "13", "incorrect", "-5"), "incorrect")
    assert (other.correctness, other.errors) == (1.0, 0.0)
    assert parse_verdict(judge_verdict("correct", "5", "incorrect", "-5"), "correct").correctness == 0.0


def test_judge_cases_from_the_sample_corpus(sample_corpus):
    train = sample_corpus["train"]
    cases = judge_cases(train, candidates=2, seed=0)
    graded = [(d.id, i) for d in train for i in d.student_turn_indices()
              if d.turns[i].correctness in ("correct", "incorrect")]
    # Every graded real turn is its own first candidate, with its own label as the verdict.
    real = [c for c in cases if c.source == "real"]
    assert [(c.dialogue.id, c.index) for c in real] == graded
    assert all(c.candidate == c.real.content for c in real)
    assert all(c.verdict == ("correct" if c.real.correctness == "correct" else "incorrect, same error") for c in real)
    # At most two more per real turn, none repeating the real answer or each other.
    by_turn: dict[tuple[str, int], list] = {}
    for c in cases:
        by_turn.setdefault((c.dialogue.id, c.index), []).append(c)
    assert all(1 <= len(v) <= 3 for v in by_turn.values())
    for group in by_turn.values():
        texts = [c.candidate for c in group]
        assert not any(same_answer(a, b) for n, a in enumerate(texts) for b in texts[n + 1:])
    assert {c.source for c in cases} >= {"real", "question"}
    # The prompt is the metric's: the real turn, its label and the candidate; the verdict is the answer.
    messages = cases[1].messages()
    assert messages[-1] == {"role": "assistant", "content": cases[1].verdict}
    assert f"Its correctness: {cases[1].real.correctness}" in messages[-2]["content"]
    assert messages[-2]["content"].endswith(cases[1].candidate)


def test_judge_cases_do_not_depend_on_order_or_subset(sample_corpus):
    train = list(sample_corpus["train"])
    key = [(c.dialogue.id, c.index, c.candidate, c.verdict) for c in judge_cases(train, seed=3)]
    reverse = [(c.dialogue.id, c.index, c.candidate, c.verdict) for c in judge_cases(train[::-1], seed=3)]
    assert sorted(key) == sorted(reverse)
    assert judge_cases(train, candidates=0) == [c for c in judge_cases(train) if c.source == "real"]
    assert [c.candidate for c in judge_cases(train, seed=1)] != [c.candidate for c in judge_cases(train, seed=2)]


def test_evaluation_classes_merge_labels_sharing_a_first_word():
    assert first_token_classes(JUDGE_OPTIONS) == ("correct", "incorrect", "na")
    assert first_token_classes(("a", "b")) == ("a", "b")
