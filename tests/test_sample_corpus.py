"""The shipped sample corpus: deterministic, in the raw QATD-2k format, and realistic in shape."""

from __future__ import annotations

import itertools
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from simhub.data.eedi import load_eedi
from simhub.data.sample import SAMPLE_DIR, generate_sample, main, sample_annotations_dir, sample_raw_dir
from simhub.schema import ACTS, OCEAN_TRAITS

EXPECTED_FILES = {
    "raw/anchored-dialogues/train.csv",
    "raw/anchored-dialogues/test.csv",
    "raw/dq-question-metadata.csv",
    "raw/dialogue-subjects.csv",
    "annotations/train.csv",
    "annotations/val.csv",
    "annotations/test.csv",
}


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def corpus():
    return load_eedi(sample_raw_dir(), sample_annotations_dir())


@pytest.fixture(scope="module")
def dialogues(corpus):
    return [d for split in ("train", "val", "test") for d in corpus[split]]


def test_generation_is_deterministic_and_matches_the_shipped_copy(tmp_path):
    a = generate_sample(tmp_path / "a")
    b = generate_sample(tmp_path / "b", seed=221)
    assert a["dialogues"] == b["dialogues"]
    files_a, files_b = _files(tmp_path / "a"), _files(tmp_path / "b")
    assert set(files_a) == EXPECTED_FILES
    assert files_a == files_b
    shipped = _files(SAMPLE_DIR)
    assert set(shipped) == EXPECTED_FILES, "regenerate with: python -m simhub.data.sample"
    assert shipped == files_a, "the shipped sample is stale; regenerate with: python -m simhub.data.sample"
    assert sum(len(v) for v in shipped.values()) < 2_000_000


def test_other_seed_gives_other_data_and_cli_writes_where_told(tmp_path, capsys):
    summary = main(["--output", str(tmp_path / "s"), "--seed", "7"])
    assert '"seed": 7' in capsys.readouterr().out
    assert summary["seed"] == 7
    assert set(_files(tmp_path / "s")) == EXPECTED_FILES
    assert _files(tmp_path / "s") != _files(SAMPLE_DIR)
    # Any seed keeps the promised properties.
    corpus = load_eedi(tmp_path / "s" / "raw", tmp_path / "s" / "annotations")
    assert sum(corpus.dropped_unsolvable.values()) > 0
    assert sum(len(corpus[s]) for s in ("train", "val", "test")) >= 200


def test_raw_files_have_the_qatd_columns():
    raw = sample_raw_dir()
    for name in ("train.csv", "test.csv"):
        df = pd.read_csv(raw / "anchored-dialogues" / name)
        assert list(df.columns) == [
            "InterventionId", "TutorId", "QuestionId_DQ", "MessageSequence", "IsTutor", "MessageString",
            "TalkMovePrediction",
        ]
        assert set(df["IsTutor"]) == {0, 1}
        as_text = pd.read_csv(raw / "anchored-dialogues" / name, dtype=str, keep_default_na=False)
        tutor = as_text["IsTutor"] == "1"
        assert (as_text.loc[~tutor, "TalkMovePrediction"] == "").all()
        assert (as_text.loc[tutor, "TalkMovePrediction"] != "").all()
        assert "None" in set(as_text.loc[tutor, "TalkMovePrediction"])  # read by pandas as NaN, as in the real data
        assert df["MessageString"].isna().any()  # some messages are empty
        sizes = df.groupby("InterventionId").size()
        assert sizes.min() >= 4 and sizes.max() <= 40
    meta = pd.read_csv(raw / "dq-question-metadata.csv")
    assert list(meta.columns) == ["QuestionId_DQ", "InterventionId", "MetaDataId", "Text", "Sequence",
                                  "MetaDataTagId", "Label"]
    labels = set(meta["Label"])
    assert {"Question Text", "Answer A Text", "Answer B Text", "Answer C Text", "Answer D Text"} <= labels
    assert "Question Image Description" in labels
    assert meta["Text"].str.contains("\n").any()
    subjects = pd.read_csv(raw / "dialogue-subjects.csv")
    assert list(subjects.columns) == ["InterventionId", "SubjectId", "ParentSubjectId", "SubjectName",
                                      "SubjectLevel", "SubjectType"]
    assert set(subjects["SubjectLevel"]) == {1, 2, 3}
    level3 = subjects[subjects["SubjectLevel"] == 3].groupby("InterventionId").size()
    assert level3.min() >= 1 and level3.max() >= 2


def test_raw_files_exercise_the_ordering_rules():
    raw = sample_raw_dir()
    train = pd.read_csv(raw / "anchored-dialogues" / "train.csv")
    test = pd.read_csv(raw / "anchored-dialogues" / "test.csv")
    assert not set(train["InterventionId"]) & set(test["InterventionId"])
    # Dialogue keys are not in sorted order in the file, and some dialogues' rows are interleaved.
    keys = list(zip(train["QuestionId_DQ"], train["InterventionId"], strict=True))
    firsts = list(dict.fromkeys(keys))
    assert firsts != sorted(firsts)
    runs = [k for i, k in enumerate(keys) if i == 0 or keys[i - 1] != k]
    assert len(runs) > len(firsts)
    # One or two dialogues list their rows out of MessageSequence order.
    out_of_order = [
        iid for iid, g in train.groupby("InterventionId") if list(g["MessageSequence"]) != sorted(g["MessageSequence"])
    ]
    assert 1 <= len(out_of_order) <= 2
    # Runs of same-role messages that the loader merges: after "?" or "!", and after no punctuation.
    both = pd.concat([train, test])
    ends = Counter()
    for _, g in both.groupby(["QuestionId_DQ", "InterventionId"], sort=False):
        texts = [str(t).replace("\n", " ").strip() for t in g["MessageString"]]
        roles = list(g["IsTutor"])
        for i in range(1, len(roles)):
            if roles[i] == roles[i - 1]:
                last = texts[i - 1][-1:]
                ends[("tutor" if roles[i] else "student", last if last in ".?!" else "none")] += 1
    for role in ("tutor", "student"):
        assert ends[(role, "none")] > 0 and ends[(role, "?")] + ends[(role, "!")] > 0, ends
    assert max(len(list(g)) for _, g in itertools.groupby(zip(both["InterventionId"], both["IsTutor"],
                                                              strict=True))) >= 3
    # Questions are shared by several interventions, in both files.
    per_question = pd.concat([train, test]).groupby("QuestionId_DQ")["InterventionId"].nunique()
    assert per_question.min() >= 3


def test_sample_loads_with_the_promised_shape(corpus, dialogues):
    assert len(dialogues) >= 200
    assert len({d.id.split("-")[0] for d in dialogues}) >= 40
    assert len(corpus["train"]) > len(corpus["val"]) > 0 and len(corpus["test"]) > 0
    assert sum(corpus.dropped_unsolvable.values()) > 0
    assert all(d.question.solvable is not False for d in dialogues)

    tutor_first = sum(d.turns[0].role == "tutor" for d in dialogues) / len(dialogues)
    assert 0.75 <= tutor_first <= 0.9

    student_turns = [t for d in dialogues for t in d.turns if t.role == "student"]
    assert set(ACTS) == {t.act for t in student_turns if t.act}
    assert {"correct", "incorrect", "na"} == {t.correctness for t in student_turns if t.correctness}
    assert any(t.content == "nan" for t in student_turns)
    short = sum(len(t.content.split()) <= 3 for t in student_turns) / len(student_turns)
    assert short > 0.5
    assert any(len(t.content.split()) >= 15 for t in student_turns)

    # Merged turns (the loader joins runs of same-role messages) and alternation.
    raw_sizes = pd.concat(
        [pd.read_csv(sample_raw_dir() / "anchored-dialogues" / f"{n}.csv") for n in ("train", "test")]
    ).groupby("InterventionId").size()
    merged = [d for d in dialogues if len(d.turns) < raw_sizes[int(d.id.split("-")[1])]]
    assert len(merged) > len(dialogues) // 2
    for d in dialogues:
        roles = [t.role for t in d.turns]
        assert all(a != b for a, b in itertools.pairwise(roles)), d.id

    assert any(not d.kcs for d in dialogues)
    assert any(len(d.kcs) >= 2 for d in dialogues)
    failed = [d for d in dialogues if d.persona is None]
    assert failed and all(d.profile is None for d in failed)
    assert all(t.act is None for d in failed for t in d.turns)
    personas = Counter(tuple(getattr(d.persona, t) for t in OCEAN_TRAITS) for d in dialogues if d.persona)
    assert len(personas) > 30
    assert {getattr(d.persona, t) for d in dialogues if d.persona for t in OCEAN_TRAITS} == {"low", "neutral", "high"}


def test_annotations_are_complete_and_consistent(dialogues):
    annotated = [d for d in dialogues if d.persona is not None]
    assert len(annotated) == len(dialogues) - 1
    for d in annotated:
        assert d.question.correct_option in ("A", "B", "C", "D")
        assert d.question.solution and set(d.question.option_explanations) == {"A", "B", "C", "D"}
        assert d.profile and 1 <= d.profile.count(". ") + 1 <= 2
        for t in d.turns:
            if t.role == "student":
                assert t.act is not None and t.correctness is not None, d.id
                if t.correctness != "na":
                    assert t.act == "Math Answer", (d.id, t)
            else:
                assert t.act is None and t.correctness is None
                if t.kcs is not None:
                    assert set(t.kcs) <= {*d.kcs, "Default"}, (d.id, t.kcs)
        assert any(t.kcs for t in d.turns if t.role == "tutor")
    # An incorrect answer naming an option names one of the question's wrong options.
    letters = 0
    for d in annotated:
        for t in d.turns:
            if t.role == "student" and t.act == "Math Answer" and t.content.strip().upper() in ("A", "B", "C", "D"):
                letters += 1
                is_right = t.content.strip().upper() == d.question.correct_option
                assert (t.correctness == "correct") == is_right, (d.id, t)
    assert letters > 20
