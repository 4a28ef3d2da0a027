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
    assert {c.source for c in cases} >= {"real", "question", "corpus"}
    # Near and far alternate: a turn with two other candidates has one from the rest of the split
    # (corpus), but where that draw repeats an answer already taken.
    pairs = [[c.source for c in group[1:]] for group in by_turn.values() if len(group) == 3]
    assert pairs and sum("corpus" in sources for sources in pairs) > 0.9 * len(pairs)
    assert sum(sources[0] != "corpus" for sources in pairs) > 0.9 * len(pairs)  # near first, where there is one
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


@pytest.mark.parametrize("override", ["judge_real_weight=0", "judge_real_weight=-1", "judge_candidates=-1",
                                      "judge_tutor_candidates=-2"])
def test_judge_recipe_values_are_checked(override):
    from simhub.errors import ConfigError
    from simhub.training import load_recipe

    with pytest.raises(ConfigError, match=override.split("=")[0]):
        load_recipe("tiny-judge", [override])


def test_alternate_takes_the_pools_in_turn():
    from simhub.training.data import _alternate

    assert list(_alternate(iter([1, 2, 3]), iter([10]))) == [1, 10, 2, 3]
    assert list(_alternate(iter([]), iter([10, 11]))) == [10, 11]


def test_tutor_turns_of_other_questions_are_na_candidates(sample_corpus):
    """judge_tutor_candidates: a tutor's turn in the student's place takes up no task, so it is na
    (the paper's definition); it comes from another question and never gives the real answer."""
    train = sample_corpus["train"]
    plain = judge_cases(train, candidates=1, seed=0)
    cases = judge_cases(train, candidates=1, seed=0, tutor_candidates=1)
    tutor = [c for c in cases if c.source == "tutor"]
    assert len(tutor) > 0.9 * sum(c.source == "real" for c in cases)
    tutor_texts = {t.content for d in train for t in d.turns if t.role == "tutor"}
    for case in tutor:
        assert case.verdict == "na" and case.candidate in tutor_texts
        assert not same_answer(case.candidate, case.real.content)
    assert [c for c in cases if c.source != "tutor"] != [] and len(cases) - len(tutor) == len(plain)
