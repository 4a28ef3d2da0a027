"""The released annotation layout (docs/protocol.md §8): each rule of the issue pinned by a test that names it.

The fixture is written the way the authors wrote theirs: a pandas DataFrame of Python objects
(tuples, lists, dicts, numpy integers, free text) saved with ``to_csv``.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from simhub.data.annotations import (
    LABEL_COLUMNS,
    LABELS,
    RELEASED_COLUMNS,
    annotation_file,
    annotation_file_name,
    parse_literal,
)
from simhub.data.eedi import load_eedi
from simhub.data.stats import dataset_stats, format_stats
from simhub.errors import DataError
from simhub.schema import Dialogue, to_builtins

SPLITS = ("train", "val", "test")
MSG_COLS = ["InterventionId", "TutorId", "QuestionId_DQ", "MessageSequence", "IsTutor", "MessageString",
            "TalkMovePrediction"]
META_COLS = ["QuestionId_DQ", "InterventionId", "MetaDataId", "Text", "Sequence", "MetaDataTagId", "Label"]
SUBJ_COLS = ["InterventionId", "SubjectId", "ParentSubjectId", "SubjectName", "SubjectLevel", "SubjectType"]

PROFILE = ('A quiet student, who answers "2" or "I don\'t know", then goes silent.\n'
           "Second line: they mix up numerators, denominators, and 'whole' numbers.")


def _write_csv(path: Path, columns: list[str], rows: list[list]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(columns)
        writer.writerows(rows)


def _msg(iid: int, qid: int, seq: int, is_tutor: int, text: str) -> list:
    return [iid, 7 if is_tutor else -1, qid, seq, is_tutor, text, "Revoicing" if is_tutor else ""]


def _messages(iid: int, qid: int, student_first: bool) -> list[list]:
    """A dialogue of four or five turns; the tutor's first turn is two messages that merge."""
    roles = [0, 1, 1, 0, 1, 0] if student_first else [1, 1, 0, 1, 0]
    texts = {0: ["2", "is it B", "thanks"], 1: ["Hello", "What is 1+1?", "Why?", "Well done"]}
    used = {0: 0, 1: 0}
    rows = []
    for seq, role in enumerate(roles, start=1):
        rows.append(_msg(iid, qid, seq, role, f"{texts[role][used[role]]} ({iid})"))
        used[role] += 1
    return rows


def _make_raw(root: Path) -> Path:
    train = []
    for n in range(10):
        train += _messages(100 + n, 10 + n % 3, student_first=n % 4 == 1)
    test = _messages(900, 90, student_first=True) + _messages(901, 90, student_first=False)
    _write_csv(root / "anchored-dialogues/train.csv", MSG_COLS, train)
    _write_csv(root / "anchored-dialogues/test.csv", MSG_COLS, test)
    meta = []
    for qid, iid in [(10 + n % 3, 100 + n) for n in range(10)] + [(90, 900), (90, 901)]:
        meta += [[qid, iid, 1, f"What is 1+1? (q{qid})", 1, 5, "Question Text"],
                 [qid, iid, 2, "2", 2, 5, "Answer A Text"]]
    _write_csv(root / "dq-question-metadata.csv", META_COLS, meta)
    subjects = []
    for iid in [*range(100, 110), 900, 901]:
        subjects += [[iid, 1, 0, "Number", 1, "Subject"], [iid, 3, 2, "Adding", 3, "Subject"],
                     [iid, 2, 1, "Arithmetic", 2, "Subject"], [iid, 4, 2, "Checking", 3, "Subject"]]
    _write_csv(root / "dialogue-subjects.csv", SUBJ_COLS, subjects)
    return root


def _key(d: Dialogue) -> tuple[np.int64, np.int64]:
    q, i = d.id.split("-")
    return np.int64(q), np.int64(i)


def _numbered(d: Dialogue) -> str:
    return "\n".join(f"Turn {n} ({t.role.capitalize()}): {t.content}" for n, t in enumerate(d.turns, start=1))


def released_row(d: Dialogue, **cells: Any) -> dict[str, Any]:
    """One row of the released layout for dialogue ``d``: every label present and valid unless overridden."""
    student = [n for n, t in enumerate(d.turns, start=1) if t.role == "student"]
    tutor = [n for n, t in enumerate(d.turns, start=1) if t.role == "tutor"]
    parsed = {
        "question_annotation": {
            "solution": "1 + 1 = 2", "solvable": True, "correct_option": np.int64(2),
            **{f"option_{n}_explanation": f"why {n}" for n in range(1, 5)},
        },
        "correctness": {f"turn {n}": {"summary": "answers", "correct": n == student[0]} for n in student},
        "eedi_kcs": {f"turn {n}": {"summary": "asks", "kcs": ["Adding"]} for n in tutor},
        "acts": {f"turn {n}": {"reasoning": "gives a number", "act": "Math Answer"} for n in student},
        "ocean_persona": {"reasoning": "short replies", "Openness": "High", "Conscientiousness": "low",
                          "Extraversion": "neutral", "Agreeableness": "high", "Neuroticism": "Low"},
        "freeform_persona": PROFILE,
    }
    parsed.update(cells)
    row: dict[str, Any] = {
        "key": _key(d),
        "question": d.question.text,
        "subjects": [("Number", np.int64(1)), ("Adding", np.int64(3)), ("Arithmetic", np.int64(2)),
                     ("Checking", np.int64(3))],
        "turns": [{"role": t.role, "content": t.content} for t in d.turns],
    }
    for label in LABELS:
        column = LABEL_COLUMNS[label]
        prefix = "question" if label == "question" else column
        row[f"{prefix}_prompt"] = d.question.text if label == "question" else _numbered(d)
        row[f"{prefix}_annotation_raw"] = str(parsed[column])
        row[column] = parsed[column]
    for name in ("key", "question", "subjects", "turns"):
        if name in cells:
            row[name] = cells[name]
    return row


def write_released(folder: Path, rows: dict[str, list[dict]], annotator: str = "gpt-4.1") -> Path:
    """Write rows as the authors did: ``DataFrame(rows).to_csv(path)``, index column included."""
    folder.mkdir(parents=True, exist_ok=True)
    for split, split_rows in rows.items():
        pd.DataFrame(split_rows, columns=list(RELEASED_COLUMNS)).to_csv(folder / annotation_file_name(split, annotator))
    return folder


@pytest.fixture
def raw(tmp_path) -> Path:
    return _make_raw(tmp_path / "raw")


@pytest.fixture
def plain(raw):
    """The raw corpus without annotations (the dialogues the annotation rows describe)."""
    return load_eedi(raw)


def _rows(plain, override=None) -> dict[str, list[dict]]:
    """A released row per dialogue, in split order; ``override(d)`` returns cells to replace."""
    return {s: [released_row(d, **(override(d) if override else {})) for d in plain[s]] for s in SPLITS}


def _by_id(corpus) -> dict[str, Dialogue]:
    return {d.id: d for s in SPLITS for d in corpus[s]}


# --------------------------------------------------------------------------- round trip


def test_round_trip_attaches_every_label(raw, plain, tmp_path):
    folder = write_released(tmp_path / "ann", _rows(plain))
    corpus = load_eedi(raw, folder)
    assert [d.id for d in corpus["train"]] == [d.id for d in plain["train"]]
    d = corpus["train"][0]
    assert d.failed_labels == []
    assert d.question.correct_option == "B" and d.question.solvable is True
    assert d.question.solution == "1 + 1 = 2"
    assert d.question.option_explanations == {"A": "why 1", "B": "why 2", "C": "why 3", "D": "why 4"}
    assert d.question.text == plain["train"][0].question.text
    assert (d.persona.openness, d.persona.conscientiousness, d.persona.neuroticism) == ("high", "low", "low")
    assert d.profile == PROFILE
    student = [t for t in d.turns if t.role == "student"]
    assert all(t.act == "Math Answer" for t in student)
    assert [t.correctness for t in student] == ["correct"] + ["incorrect"] * (len(student) - 1)
    assert all(t.kcs == ["Adding"] for t in d.turns if t.role == "tutor")
    assert all(t.kcs is None for t in student)
    assert all(t.act is None and t.correctness is None for t in d.turns if t.role == "tutor")
    assert corpus.annotation_files["test"] == str(folder / "test_gpt-4.1.csv")
    assert all(count == 0 for split in corpus.failed_labels.values() for count in split.values())


def test_correct_none_means_na_and_older_plain_string_values_are_accepted(raw, plain, tmp_path):
    target = plain["train"][0]
    student = [n for n, t in enumerate(target.turns, start=1) if t.role == "student"]

    def override(d):
        if d.id != target.id:
            return {}
        return {"correctness": {f"turn {student[0]}": {"summary": "greets", "correct": None},
                                str(student[1]): "incorrect"},  # key "N" means "turn N"
                "acts": {f"Turn {n}": "off-topic" for n in student},  # plain string, case-insensitive
                "eedi_kcs": {"turn 1": {"summary": "asks", "kcs": []}}}

    corpus = load_eedi(raw, write_released(tmp_path / "ann", _rows(plain, override)))
    d = _by_id(corpus)[target.id]
    turns = [d.turns[n - 1] for n in student]
    assert [t.correctness for t in turns[:2]] == ["na", "incorrect"]
    assert all(t.act == "Off-Topic" for t in turns)
    assert d.turns[0].kcs is None  # an empty KC list is the same as no KC label


def test_turn_numbers_count_tutor_turns(raw, plain, tmp_path):
    """"turn N" counts all merged turns from 1: student turns are even in tutor-first dialogues."""
    tutor_first = next(d for d in plain["train"] if d.turns[0].role == "tutor")
    student_first = next(d for s in SPLITS for d in plain[s] if d.turns[0].role == "student")
    acts = {tutor_first.id: {"turn 2": {"reasoning": "", "act": "Seek Information"},
                             "turn 4": {"reasoning": "", "act": "Acknowledge"}},
            student_first.id: {"turn 1": {"reasoning": "", "act": "Seek Information"},
                               "turn 3": {"reasoning": "", "act": "Acknowledge"}}}

    def override(d):
        return {"acts": acts[d.id]} if d.id in acts else {}

    corpus = _by_id(load_eedi(raw, write_released(tmp_path / "ann", _rows(plain, override))))
    assert [t.role for t in corpus[tutor_first.id].turns] == ["tutor", "student", "tutor", "student"]
    assert [t.act for t in corpus[tutor_first.id].turns] == [None, "Seek Information", None, "Acknowledge"]
    assert [t.act for t in corpus[student_first.id].turns][:3] == ["Seek Information", None, "Acknowledge"]
    assert corpus[tutor_first.id].turns[1].content == tutor_first.turns[1].content


def test_rows_are_matched_by_key_not_by_position(raw, plain, tmp_path):
    rows = _rows(plain, lambda d: {"freeform_persona": f"profile of {d.id}"})
    in_order = load_eedi(raw, write_released(tmp_path / "a", rows))
    shuffled = {s: rows[s][::-1] for s in SPLITS}
    shuffled["train"] = shuffled["train"][3:] + shuffled["train"][:3]
    reordered = load_eedi(raw, write_released(tmp_path / "b", shuffled))
    for split in SPLITS:
        assert [to_builtins(d) for d in reordered[split]] == [to_builtins(d) for d in in_order[split]]
        # The order of the raw split, not of the file, and each dialogue got its own row.
        assert [d.id for d in reordered[split]] == [d.id for d in plain[split]]
        assert all(d.profile == f"profile of {d.id}" for d in reordered[split])


def test_multiline_free_text_profile_with_quotes_and_commas_is_raw_text(raw, plain, tmp_path):
    folder = write_released(tmp_path / "ann", _rows(plain))
    text = (folder / "val_gpt-4.1.csv").read_text()
    assert '""2""' in text  # the cell really is quoted CSV with doubled quotes
    corpus = load_eedi(raw, folder)
    assert all(d.profile == PROFILE for s in SPLITS for d in corpus[s])


# --------------------------------------------------------------------------- failures and drops


def test_failed_acts_cell_and_error_correctness_cell_are_failed_labels(raw, plain, tmp_path):
    target = plain["val"][0]

    def override(d):
        if d.id != target.id:
            return {}
        return {"acts": "{'turn 2': {'reasoning': 'The student wri",  # cut off: not a literal
                "correctness": {"error": "turn keys ['turn 1'] do not match the student turns"}}

    corpus = load_eedi(raw, write_released(tmp_path / "ann", _rows(plain, override)))
    d = _by_id(corpus)[target.id]
    assert d.failed_labels == ["correctness", "acts"]
    assert all(t.act is None and t.correctness is None for t in d.turns)
    assert any(t.kcs for t in d.turns) and d.persona is not None and d.profile == PROFILE
    assert corpus.failed_labels["val"] == {"question": 0, "correctness": 1, "kcs": 0, "acts": 1, "ocean": 0,
                                           "freeform": 0}
    assert sum(corpus.failed_labels["train"].values()) == sum(corpus.failed_labels["test"].values()) == 0
    others = [x for x in corpus["val"] if x.id != target.id]
    assert others and all(x.failed_labels == [] for x in others)


def test_empty_cells_of_every_dialogue_label_are_failed_labels(raw, plain, tmp_path):
    target = plain["test"][0]

    def override(d):
        empty = {"eedi_kcs": "", "ocean_persona": None, "freeform_persona": "  "}
        return empty if d.id == target.id else {}

    corpus = load_eedi(raw, write_released(tmp_path / "ann", _rows(plain, override)))
    d = _by_id(corpus)[target.id]
    assert d.failed_labels == ["kcs", "ocean", "freeform"]
    assert d.persona is None and d.profile is None and all(t.kcs is None for t in d.turns)
    assert all(t.act is not None for t in d.turns if t.role == "student")


def test_unsolvable_and_missing_question_annotations_are_dropped_after_the_split(raw, plain, tmp_path):
    unsolvable_q = plain["train"][0].id.split("-")[0]
    missing = next(d.id for d in plain["val"] if d.id.split("-")[0] != unsolvable_q)

    def override(d):
        if d.id == missing:
            return {"question_annotation": ""}
        if d.id.split("-")[0] == unsolvable_q:  # the reference: no correct option means unsolvable
            return {"question_annotation": {"solution": "needs the diagram", "solvable": False,
                                            "correct_option": None}}
        return {}

    folder = write_released(tmp_path / "ann", _rows(plain, override))
    corpus = load_eedi(raw, folder)
    kept = _by_id(corpus)
    assert missing not in kept and all(i.split("-")[0] != unsolvable_q for i in kept)
    n_unsolvable = {s: sum(d.id.split("-")[0] == unsolvable_q for d in plain[s]) for s in SPLITS}
    assert corpus.dropped_unsolvable == n_unsolvable
    assert corpus.dropped_unannotated == {"train": 0, "val": 1, "test": 0}
    assert corpus.failed_labels["val"]["question"] == 1
    # The split was made first: the kept dialogues keep their raw split and order.
    for split in SPLITS:
        assert [d.id for d in corpus[split]] == [d.id for d in plain[split] if d.id in kept]
    # Without dropping, both stay, marked.
    everything = _by_id(load_eedi(raw, folder, drop_unsolvable=False))
    assert len(everything) == len(_by_id(plain))
    assert everything[missing].failed_labels == ["question"] and everything[missing].question.solvable is None
    assert everything[plain["train"][0].id].question.solvable is False
    assert everything[plain["train"][0].id].question.correct_option is None


def test_correct_option_none_means_unsolvable_whatever_solvable_says(raw, plain, tmp_path):
    target = plain["train"][1]
    cell = {"solution": "?", "solvable": True, "correct_option": None}
    folder = write_released(tmp_path / "ann", _rows(plain, lambda d: {"question_annotation": cell}
                                                          if d.id == target.id else {}))
    assert target.id not in _by_id(load_eedi(raw, folder))


def test_raw_dialogue_without_a_row_is_dropped_as_unannotated(raw, plain, tmp_path):
    rows = _rows(plain)
    rows["test"] = rows["test"][1:]
    corpus = load_eedi(raw, write_released(tmp_path / "ann", rows))
    assert [d.id for d in corpus["test"]] == [plain["test"][1].id]
    assert corpus.dropped_unannotated["test"] == 1


# --------------------------------------------------------------------------- annotations alone


def test_annotation_files_alone_are_a_complete_dataset(raw, plain, tmp_path):
    """Without raw files, the rows give the dialogues; each file is its split, in file order."""
    rows = _rows(plain)
    rows["val"] = rows["val"][::-1]
    folder = write_released(tmp_path / "ann", rows)
    alone = load_eedi(annotations=folder)
    both = load_eedi(raw, folder)
    for split in SPLITS:
        ids = [d.id for d in alone[split]]
        assert ids == ([d.id for d in plain[split]][::-1] if split == "val" else [d.id for d in plain[split]])
        assert sorted(map(to_builtins, alone[split]), key=lambda x: x["id"]) == sorted(
            map(to_builtins, both[split]), key=lambda x: x["id"])
    d = alone["train"][0]
    # Level-3 subjects in file order (numpy levels accepted), Default implied but not listed.
    assert d.kcs == ["Adding", "Checking"] and d.all_kcs == ["Adding", "Checking", "Default"]
    assert d.question.text == plain["train"][0].question.text


def test_annotation_files_alone_with_empty_subjects(plain, tmp_path):
    rows = _rows(plain, lambda d: {"subjects": []})
    alone = load_eedi(annotations=write_released(tmp_path / "ann", rows))
    assert all(d.kcs == [] for s in SPLITS for d in alone[s])


# --------------------------------------------------------------------------- file names


def test_file_name_is_split_and_annotator_with_slashes_as_dashes(raw, plain, tmp_path):
    assert annotation_file_name("val", "openai/gpt-4.1") == "val_openai-gpt-4.1.csv"
    folder = write_released(tmp_path / "ann", _rows(plain), annotator="openai/gpt-4.1")
    corpus = load_eedi(raw, folder, annotator="openai/gpt-4.1")
    assert corpus.annotation_files["val"].endswith("val_openai-gpt-4.1.csv")
    with pytest.raises(DataError, match=r"train_gpt-4\.1\.csv: missing annotation file") as info:
        load_eedi(raw, folder)
    assert info.value.file.endswith("train_gpt-4.1.csv")


def test_plain_split_name_is_the_fallback(raw, plain, tmp_path):
    folder = write_released(tmp_path / "ann", _rows(plain))
    for split in SPLITS:
        (folder / f"{split}_gpt-4.1.csv").rename(folder / f"{split}.csv")
    assert annotation_file(folder, "train") == folder / "train.csv"
    corpus = load_eedi(raw, folder)
    assert corpus.annotation_files["test"] == str(folder / "test.csv")
    assert len(corpus["train"]) == len(plain["train"])
    # The annotator-named file wins when both exist.
    (folder / "train_gpt-4.1.csv").write_bytes((folder / "train.csv").read_bytes())
    assert annotation_file(folder, "train") == folder / "train_gpt-4.1.csv"


def test_annotations_folder_must_exist(raw, tmp_path):
    with pytest.raises(DataError, match="no such folder") as info:
        load_eedi(raw, tmp_path / "nowhere")
    assert info.value.field == "annotations"


# --------------------------------------------------------------------------- bad input


def _fails(raw, folder, *, file: str, row: int | None, column: str | None) -> DataError:
    with pytest.raises(DataError) as info:
        load_eedi(raw, folder)
    err = info.value
    assert Path(err.file).name == file and err.row == row and err.column == column, str(err)
    assert file in str(err) and (row is None or f"row {row}" in str(err)) and (column is None or column in str(err))
    return err


def test_bad_input_missing_column(raw, plain, tmp_path):
    folder = write_released(tmp_path / "ann", _rows(plain))
    path = folder / "test_gpt-4.1.csv"
    pd.read_csv(path, dtype=str, keep_default_na=False).drop(columns=["eedi_kcs"]).to_csv(path, index=False)
    _fails(raw, folder, file="test_gpt-4.1.csv", row=None, column="eedi_kcs")


def test_bad_input_duplicate_key(raw, plain, tmp_path):
    rows = _rows(plain)
    rows["train"].insert(2, rows["train"][0])
    err = _fails(raw, write_released(tmp_path / "ann", rows), file="train_gpt-4.1.csv", row=4, column="key")
    assert "duplicate key" in str(err) and "row 2" in str(err)


def test_bad_input_key_in_two_files(raw, plain, tmp_path):
    rows = _rows(plain)
    rows["val"].append(rows["train"][0])
    err = _fails(raw, write_released(tmp_path / "ann", rows), file="val_gpt-4.1.csv",
                 row=len(rows["val"]) + 1, column="key")
    assert "train_gpt-4.1.csv" in str(err)


def test_bad_input_key_absent_from_the_raw_data(raw, plain, tmp_path):
    rows = _rows(plain)
    rows["test"][1]["key"] = (np.int64(90), np.int64(999))
    err = _fails(raw, write_released(tmp_path / "ann", rows), file="test_gpt-4.1.csv", row=3, column="key")
    assert "(90, 999)" in str(err) and "not a dialogue of the raw data" in str(err)


def test_bad_input_key_of_another_split(raw, plain, tmp_path):
    rows = _rows(plain)
    rows["train"][0], rows["val"][0] = rows["val"][0], rows["train"][0]
    err = _fails(raw, write_released(tmp_path / "ann", rows), file="train_gpt-4.1.csv", row=2, column="key")
    assert "val split of the raw data" in str(err)


def test_bad_input_key_that_is_not_a_tuple(raw, plain, tmp_path):
    rows = _rows(plain)
    rows["val"][0]["key"] = "10-100"
    _fails(raw, write_released(tmp_path / "ann", rows), file="val_gpt-4.1.csv", row=2, column="key")


def test_bad_input_turns_differ_from_the_raw_data(raw, plain, tmp_path):
    rows = _rows(plain)
    d = plain["train"][2]
    rows["train"][2]["turns"][3]["content"] = "something else"
    err = _fails(raw, write_released(tmp_path / "ann", rows), file="train_gpt-4.1.csv", row=4, column="turns")
    assert f"dialogue {d.id}, turn index 3" in str(err)
    rows["train"][2]["turns"] = rows["train"][2]["turns"][:2]
    err = _fails(raw, write_released(tmp_path / "ann", rows), file="train_gpt-4.1.csv", row=4, column="turns")
    assert f"dialogue {d.id} has 2 turns here" in str(err) and "turn index 2" in str(err)


def test_bad_input_turn_key_past_the_dialogue(raw, plain, tmp_path):
    target = plain["test"][0]
    rows = _rows(plain, lambda d: {"correctness": {"turn 9": {"summary": "", "correct": True}}}
                 if d.id == target.id else {})
    err = _fails(raw, write_released(tmp_path / "ann", rows), file="test_gpt-4.1.csv", row=2, column="correctness")
    assert "'turn 9' points past dialogue" in str(err) and target.id in str(err)


def test_bad_input_turn_key_of_the_wrong_role(raw, plain, tmp_path):
    target = plain["train"][0]  # tutor-first: turn 1 is the tutor's, turn 2 the student's
    assert target.turns[0].role == "tutor"
    rows = _rows(plain, lambda d: {"acts": {"turn 1": {"reasoning": "", "act": "Math Answer"}}}
                 if d.id == target.id else {})
    err = _fails(raw, write_released(tmp_path / "ann", rows), file="train_gpt-4.1.csv", row=2, column="acts")
    assert "is a tutor turn, expected a student turn" in str(err)
    rows = _rows(plain, lambda d: {"eedi_kcs": {"turn 2": {"summary": "", "kcs": ["Adding"]}}}
                 if d.id == target.id else {})
    _fails(raw, write_released(tmp_path / "ann", rows), file="train_gpt-4.1.csv", row=2, column="eedi_kcs")


def test_bad_input_act_outside_the_five(raw, plain, tmp_path):
    rows = _rows(plain, lambda d: {"acts": {f"turn {n}": {"reasoning": "", "act": "Guessing"}
                                            for n, t in enumerate(d.turns, start=1) if t.role == "student"}})
    err = _fails(raw, write_released(tmp_path / "ann", rows), file="train_gpt-4.1.csv", row=2, column="acts")
    assert "'Guessing' is not one of Math Answer" in str(err)


def test_bad_input_persona_trait_missing_or_out_of_scale(raw, plain, tmp_path):
    rows = _rows(plain, lambda d: {"ocean_persona": {"Openness": "high"}})
    _fails(raw, write_released(tmp_path / "a", rows), file="train_gpt-4.1.csv", row=2, column="ocean_persona")
    persona = {t: "very high" for t in ("Openness", "Conscientiousness", "Extraversion", "Agreeableness",
                                         "Neuroticism")}
    rows = _rows(plain, lambda d: {"ocean_persona": persona})
    _fails(raw, write_released(tmp_path / "b", rows), file="train_gpt-4.1.csv", row=2, column="ocean_persona")


def test_bad_input_annotation_only_turns_cell_unreadable(plain, tmp_path):
    rows = _rows(plain)
    rows["val"][1]["turns"] = "[{'role': 'tutor', 'content': 'cut"
    with pytest.raises(DataError) as info:
        load_eedi(annotations=write_released(tmp_path / "ann", rows))
    assert (Path(info.value.file).name, info.value.row, info.value.column) == ("val_gpt-4.1.csv", 3, "turns")


def test_unparseable_cell_is_not_an_error(raw, plain, tmp_path):
    rows = _rows(plain, lambda d: {"eedi_kcs": "{'turn 1': [", "question_annotation": "not python at all"})
    corpus = load_eedi(raw, write_released(tmp_path / "ann", rows), drop_unsolvable=False)
    assert corpus.failed_labels["train"]["kcs"] == len(plain["train"])
    assert corpus.failed_labels["test"]["question"] == len(plain["test"])


# --------------------------------------------------------------------------- literals


def test_literals_accept_numpy_scalars_and_never_run_code():
    assert parse_literal("(np.int64(12), np.int64(34))") == (12, 34)
    assert parse_literal("[('Adding', numpy.int32(3))]") == [("Adding", 3)]
    assert parse_literal("{'solvable': np.True_, 'x': np.float64(1.5)}") == {"solvable": True, "x": 1.5}
    for text in ("__import__('os').getcwd()", "np.int64(1) + len('a')", "{'a': "):
        with pytest.raises(ValueError):
            parse_literal(text)


# --------------------------------------------------------------------------- statistics


def test_stats_report_label_coverage_and_failures(raw, plain, tmp_path):
    target = plain["val"][0]

    def override(d):
        return {"acts": "{cut", "correctness": {"error": "x"}} if d.id == target.id else {}

    corpus = load_eedi(raw, write_released(tmp_path / "ann", _rows(plain, override)))
    stats = dataset_stats(corpus["val"])
    n_student = sum(t.role == "student" for d in corpus["val"] for t in d.turns)
    n_failed = sum(t.role == "student" for t in target.turns)
    assert stats["label_coverage"]["acts"] == pytest.approx((n_student - n_failed) / n_student)
    assert stats["label_coverage"]["correctness"] == stats["label_coverage"]["acts"]
    assert stats["label_coverage"]["ocean"] == stats["label_coverage"]["question"] == 1.0
    assert stats["failed_labels"] == {"question": 0, "correctness": 1, "kcs": 0, "acts": 1, "ocean": 0,
                                      "freeform": 0}
    table = format_stats(stats)
    assert "label_coverage: ocean" in table and "100.0%" in table
    line = next(x for x in table.splitlines() if x.startswith("failed_labels: acts"))
    assert line.split()[-1] == "1"
    assert dataset_stats([])["label_coverage"]["acts"] == 0.0


@pytest.mark.parametrize("text,label,holds", [
    ("{'acts': 'Focus'}", "acts", True),
    ("", "acts", False),
    ("None", "acts", False),
    ("nan", "acts", False),
    ("{'error': 'rate limited'}", "acts", False),
    ("{ 'Error' : 'x'}", "acts", False),
    ("not a literal {", "acts", False),
    ("A careful student who double-checks.", "freeform", True),
    ("nan", "freeform", False),
])
def test_holds_label_is_the_readers_rule(text, label, holds):
    """`simhub annotate` keeps an earlier label only where the reader would read one."""
    from simhub.data.annotations import holds_label

    assert holds_label(text, label) is holds
