"""The shipped sample corpus: deterministic, in the raw QATD-2k format with released-layout
annotations, and realistic in shape. The generator is scripts/make_sample.py, outside the package."""

from __future__ import annotations

import ast
import importlib.util
import itertools
import sys
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from simhub.data.annotations import LABELS, RELEASED_COLUMNS
from simhub.data.eedi import load_eedi
from simhub.data.sample import (
    SAMPLE_ANNOTATOR,
    SAMPLE_DIR,
    load_sample_corpus,
    sample_annotations_dir,
    sample_raw_dir,
)
from simhub.schema import ACTS, OCEAN_TRAITS, to_builtins

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "make_sample.py"
REGENERATE = "regenerate with: python scripts/make_sample.py --output simhub/resources/sample"
EXPECTED_FILES = {
    "raw/anchored-dialogues/train.csv",
    "raw/anchored-dialogues/test.csv",
    "raw/dq-question-metadata.csv",
    "raw/dialogue-subjects.csv",
    "annotations/train_gpt-4.1.csv",
    "annotations/val_gpt-4.1.csv",
    "annotations/test_gpt-4.1.csv",
}
SPLITS = ("train", "val", "test")


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def make_sample():
    """The generator script, imported from its path (it is not part of the package)."""
    spec = importlib.util.spec_from_file_location("simhub_make_sample", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the script runs
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)


@pytest.fixture(scope="module")
def corpus():
    return load_sample_corpus()


@pytest.fixture(scope="module")
def dialogues(corpus):
    return [d for split in SPLITS for d in corpus[split]]


def test_generation_is_deterministic_and_matches_the_shipped_copy(make_sample, tmp_path):
    a = make_sample.generate_sample(tmp_path / "a")
    b = make_sample.generate_sample(tmp_path / "b", seed=221)
    assert a == {**b, "out_dir": a["out_dir"]}
    files_a, files_b = _files(tmp_path / "a"), _files(tmp_path / "b")
    assert set(files_a) == EXPECTED_FILES
    assert files_a == files_b
    shipped = _files(SAMPLE_DIR)
    assert set(shipped) == EXPECTED_FILES, REGENERATE
    # The raw files must stay byte-identical: other parts (the tiny tokenizer, for one) are trained on them.
    for name in sorted(EXPECTED_FILES):
        assert shipped[name] == files_a[name], f"{name} is stale; {REGENERATE}"
    assert sum(len(v) for v in shipped.values()) < 2_500_000


def test_other_seed_gives_other_data_and_cli_writes_where_told(make_sample, tmp_path, capsys):
    summary = make_sample.main(["--output", str(tmp_path / "s"), "--seed", "7"])
    assert '"seed": 7' in capsys.readouterr().out
    assert summary["seed"] == 7
    assert set(_files(tmp_path / "s")) == EXPECTED_FILES
    assert _files(tmp_path / "s") != _files(SAMPLE_DIR)
    # Any seed keeps the promised properties.
    corpus = load_eedi(tmp_path / "s" / "raw", tmp_path / "s" / "annotations")
    assert sum(corpus.dropped_unsolvable.values()) > 0
    assert sum(len(corpus[s]) for s in SPLITS) >= 200
    assert sum(corpus.failed_labels["test"].values()) == 5


def test_question_bank_is_data_beside_the_script(make_sample):
    assert SCRIPT.with_name("sample_questions.json") == make_sample.QUESTIONS_FILE
    assert len(make_sample.QUESTION_BANK) >= 40
    assert sum(not q.solvable for q in make_sample.QUESTION_BANK) == 1
    assert not (Path(__file__).resolve().parents[2] / "simhub" / "data" / "sample_questions.json").exists()


def test_runtime_module_holds_no_generator():
    import simhub.data.sample as sample

    assert not hasattr(sample, "generate_sample") and not hasattr(sample, "QUESTION_BANK")
    assert len(Path(sample.__file__).read_text().splitlines()) < 80
    assert SAMPLE_ANNOTATOR == "gpt-4.1"
    assert sample_annotations_dir() == SAMPLE_DIR / "annotations" and sample_raw_dir() == SAMPLE_DIR / "raw"


def test_load_sample_corpus_is_cached_and_annotated(corpus, sample_corpus):
    assert load_sample_corpus() is corpus is sample_corpus
    assert corpus.annotation_files == {
        s: str(sample_annotations_dir() / f"{s}_gpt-4.1.csv") for s in SPLITS
    }


def test_sample_sizes_match_the_corpus_before_the_released_layout(corpus):
    """Measured on the previous layout's files before they were replaced; the dialogues are the same."""
    assert {s: len(corpus[s]) for s in SPLITS} == {"train": 140, "val": 48, "test": 47}
    assert corpus.dropped_unsolvable == {"train": 4, "val": 0, "test": 1}
    assert corpus.dropped_unannotated == {"train": 0, "val": 0, "test": 0}


def test_annotation_files_alone_give_the_same_corpus(corpus):
    alone = load_eedi(annotations=sample_annotations_dir())
    for split in SPLITS:
        assert [to_builtins(d) for d in alone[split]] == [to_builtins(d) for d in corpus[split]], split
    assert alone.failed_labels == corpus.failed_labels
    assert alone.dropped_unsolvable == corpus.dropped_unsolvable


def test_annotation_files_have_the_released_layout():
    for split in SPLITS:
        path = sample_annotations_dir() / f"{split}_gpt-4.1.csv"
        df = pd.read_csv(path, dtype=str, keep_default_na=False)
        assert tuple(df.columns) == RELEASED_COLUMNS
        keys = [ast.literal_eval(k) for k in df["key"]]
        assert all(isinstance(k, tuple) and len(k) == 2 for k in keys)
        assert all(p.startswith("Turn 1 (") for p in df["acts_prompt"].str.split("\n\n").str[-1])
        subjects = [ast.literal_eval(c) for c in df["subjects"]]
        assert all(isinstance(level, int) for cell in subjects for _, level in cell)
    # The free-text profile is plain text, not a Python literal.
    df = pd.read_csv(sample_annotations_dir() / "train_gpt-4.1.csv", dtype=str, keep_default_na=False)
    assert not df["freeform_persona"].iloc[0].startswith(("'", '"'))
    # The unsolvable question has no correct option (the reference's sign of an unsolvable question).
    unsolvable = [ast.literal_eval(c) for c in df["question_annotation"] if "'solvable': False" in c]
    assert unsolvable and all(q["correct_option"] is None for q in unsolvable)


def test_the_failed_dialogue_has_a_cut_acts_cell_and_an_error_correctness_cell(corpus):
    df = pd.read_csv(sample_annotations_dir() / "test_gpt-4.1.csv", dtype=str, keep_default_na=False)
    failed = [d for d in corpus["test"] if d.failed_labels]
    assert len(failed) == 1
    d = failed[0]
    assert d.failed_labels == ["correctness", "kcs", "acts", "ocean", "freeform"]
    row = df[df["key"] == repr(tuple(int(x) for x in d.id.split("-")))].iloc[0]
    with pytest.raises((ValueError, SyntaxError)):
        ast.literal_eval(row["acts"])
    assert set(ast.literal_eval(row["correctness"])) == {"error"}
    assert row["eedi_kcs"] == row["ocean_persona"] == row["freeform_persona"] == ""
    # The question annotation is shared by every dialogue of the question, so it did not fail.
    assert d.question.solvable is True and d.question.correct_option is not None
    assert corpus.failed_labels["test"] == {"question": 0, "correctness": 1, "kcs": 1, "acts": 1, "ocean": 1,
                                            "freeform": 1}
    assert all(sum(corpus.failed_labels[s].values()) == 0 for s in ("train", "val"))
    assert set(corpus.failed_labels["test"]) == set(LABELS)


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
    assert all(t.act is None and t.correctness is None and t.kcs is None for d in failed for t in d.turns)
    assert all("ocean" in d.failed_labels for d in failed)
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
