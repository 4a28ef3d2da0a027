"""Each QATD-2k processing rule of the raw files (docs/protocol.md §2) pinned by a case built for it.

The released annotation files are covered by test_annotations.py."""

from __future__ import annotations

import csv
import random
from pathlib import Path

import pytest

from simhub.cli import main
from simhub.data.eedi import HUB_DATASET_ID, clean_text, load_eedi, merge_messages, split_train_val
from simhub.errors import ConfigError, DataError
from simhub.schema import Dialogue, Question, read_jsonl

MSG_COLS = ["InterventionId", "TutorId", "QuestionId_DQ", "MessageSequence", "IsTutor", "MessageString", "TalkMovePrediction"]
META_COLS = ["QuestionId_DQ", "InterventionId", "MetaDataId", "Text", "Sequence", "MetaDataTagId", "Label"]
SUBJ_COLS = ["InterventionId", "SubjectId", "ParentSubjectId", "SubjectName", "SubjectLevel", "SubjectType"]


def _write(path: Path, columns: list[str], rows: list[list]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(columns)
        writer.writerows(rows)


def msg(iid, qid, seq, is_tutor, text):
    return [iid, 7 if is_tutor else -1, qid, seq, is_tutor, text, "Revoicing" if is_tutor else ""]


def make_raw(root: Path, train_rows, test_rows=None, meta=None, subjects=None) -> Path:
    _write(root / "anchored-dialogues/train.csv", MSG_COLS, train_rows)
    _write(root / "anchored-dialogues/test.csv", MSG_COLS, test_rows or [msg(900, 90, 1, 1, "Hi"), msg(900, 90, 2, 0, "hi")])
    _write(root / "dq-question-metadata.csv", META_COLS, meta or [[10, 100, 1, "What is 1+1?", 1, 5, "Question Text"]])
    _write(root / "dialogue-subjects.csv", SUBJ_COLS, subjects or [[100, 1, 0, "Number", 1, "Subject"]])
    return root


def test_clean_text_rule():
    assert clean_text("  two\nlines \n") == "two lines"
    assert clean_text(float("nan")) == "nan"


def test_merge_rule_adds_period_only_without_terminal_punctuation():
    turns = merge_messages(
        [("tutor", "Hello"), ("tutor", "Ready?"), ("tutor", "Go!"), ("tutor", "ok."), ("tutor", "x"), ("student", "5")]
    )
    assert [t.role for t in turns] == ["tutor", "student"]
    assert turns[0].content == "Hello. Ready? Go! ok. x"
    assert turns[1].content == "5"


def test_dialogue_order_file_order_and_text_rules(tmp_path):
    rows = [
        # Key (20, 5) appears first in the file but sorts after (10, 100).
        msg(5, 20, 1, 1, "Second dialogue"),
        msg(100, 10, 3, 1, "Third by sequence, first in file"),
        msg(100, 10, 1, 0, "line one\nline two"),
        msg(100, 10, 2, 0, ""),
        msg(5, 20, 2, 0, "reply"),
        msg(100, 10, 4, 1, "Well done"),
    ]
    meta = [
        [10, 100, 1, "What is\n1+1?", 1, 5, "Question Text"],
        [20, 5, 2, "Ignored for 10-100", 1, 5, "Question Text"],
        [10, 100, 3, "2", 2, 5, "Answer A Text"],
        [10, 100, 4, " 3 ", 3, 5, "Answer B Text"],
    ]
    subjects = [
        [100, 1, 0, "Number", 1, "Subject"],
        [100, 2, 1, "Fractions", 2, "Subject"],
        [100, 3, 2, "Adding fractions", 3, "Subject"],
        [100, 4, 2, "Simplifying fractions", 3, "Subject"],
    ]
    raw = make_raw(tmp_path, rows, meta=meta, subjects=subjects)
    corpus = load_eedi(raw)
    everything = {d.id: d for split in ("train", "val") for d in corpus[split]}
    assert set(everything) == {"10-100", "20-5"}
    d = everything["10-100"]
    # File order, not MessageSequence; empty message -> "nan"; same-role merge with "." added.
    assert [(t.role, t.content) for t in d.turns] == [
        ("tutor", "Third by sequence, first in file"),
        ("student", "line one line two. nan"),
        ("tutor", "Well done"),
    ]
    assert d.question.text == "Question Text: What is 1+1?\nAnswer A Text: 2\nAnswer B Text: 3"
    assert d.kcs == ["Adding fractions", "Simplifying fractions"]
    assert d.all_kcs == ["Adding fractions", "Simplifying fractions", "Default"]
    assert everything["20-5"].kcs == []  # no subjects at all
    assert everything["20-5"].question.text == "Question Text: Ignored for 10-100"


def test_groupby_order_is_key_ascending(tmp_path):
    rows = [msg(i, q, 1, 1, f"d{q}-{i}") for q, i in [(30, 1), (10, 9), (10, 2), (20, 5)]]
    raw = make_raw(tmp_path, rows)
    from simhub.data.eedi import _dialogues, _questions, _subjects

    ds = _dialogues(raw, "anchored-dialogues/train.csv", _questions(raw), _subjects(raw))
    assert [d.id for d in ds] == ["10-2", "10-9", "20-5", "30-1"]


def test_split_is_seeded_shuffle_75_25():
    ds = [Dialogue(id=str(i), question=Question(text="q")) for i in range(41)]
    train, val = split_train_val(ds)
    expected = list(range(41))
    random.Random(221).shuffle(expected)
    assert [d.id for d in train] == [str(i) for i in expected[:30]]
    assert [d.id for d in val] == [str(i) for i in expected[30:]]
    assert len(train) == int(0.75 * 41)


@pytest.fixture
def small_raw(tmp_path):
    rows = []
    for n in range(8):
        iid, qid = 100 + n, 10 + n % 3
        rows += [msg(iid, qid, 1, 1, "What is 1+1?"), msg(iid, qid, 2, 0, "2"), msg(iid, qid, 3, 1, "Good")]
    return make_raw(tmp_path / "raw", rows)


def test_parquet_userid_alias(tmp_path):
    import pandas as pd

    raw = make_raw(tmp_path, [msg(1, 2, 1, 1, "Hi"), msg(1, 2, 2, 0, "yo")])
    df = pd.read_csv(raw / "anchored-dialogues/train.csv").rename(columns={"TutorId": "UserId"})
    (raw / "anchored-dialogues/train.csv").unlink()
    df.to_parquet(raw / "anchored-dialogues/train.parquet")
    corpus = load_eedi(raw)
    assert [d.id for d in corpus["train"] + corpus["val"]] == ["2-1"]


# --------------------------------------------------------------------------- bad input


def test_missing_file_names_it(small_raw):
    (small_raw / "dialogue-subjects.csv").unlink()
    with pytest.raises(DataError, match=r"dialogue-subjects\.csv: missing file") as info:
        load_eedi(small_raw)
    assert info.value.file.endswith("dialogue-subjects.csv")


def test_missing_column_names_it(small_raw):
    path = small_raw / "anchored-dialogues/train.csv"
    text = path.read_text().replace("IsTutor", "Role")
    path.write_text(text)
    with pytest.raises(DataError, match=r"missing column.*IsTutor") as info:
        load_eedi(small_raw)
    assert info.value.column == "IsTutor" and info.value.file.endswith("train.csv")


def test_bad_value_names_row_and_column(small_raw):
    path = small_raw / "anchored-dialogues/train.csv"
    lines = path.read_text().splitlines()
    lines[4] = lines[4].replace(",1,What", ",yes,What")
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError, match=r"column IsTutor, row 5") as info:
        load_eedi(small_raw)
    assert (info.value.row, info.value.column) == (5, "IsTutor")
    assert info.value.file.endswith("train.csv")


def test_source_or_annotations_is_required():
    with pytest.raises(ConfigError) as info:
        load_eedi()
    assert info.value.field == "source"


def test_source_that_is_a_file_or_absent_is_a_data_error(small_raw, tmp_path):
    with pytest.raises(DataError, match="not a folder") as info:
        load_eedi(small_raw / "dialogue-subjects.csv")
    assert info.value.field == "source"
    with pytest.raises(DataError, match="no such folder"):
        load_eedi(tmp_path / "nowhere")


def test_raw_files_alone_carry_no_labels_and_drop_nothing(small_raw):
    corpus = load_eedi(small_raw)
    dialogues = [d for split in ("train", "val", "test") for d in corpus[split]]
    assert len(dialogues) == 9
    assert all(d.failed_labels == [] and d.persona is None and d.question.solvable is None for d in dialogues)
    assert all(t.act is None and t.correctness is None and t.kcs is None for d in dialogues for t in d.turns)
    assert sum(corpus.dropped_unsolvable.values()) == sum(corpus.dropped_unannotated.values()) == 0
    assert all(count == 0 for split in corpus.failed_labels.values() for count in split.values())
    assert corpus.annotation_files == {}


def test_hub_dataset_id_is_the_published_one():
    assert HUB_DATASET_ID == "Eedi/Question-Anchored-Tutoring-Dialogues-2k"


def test_cli_convert_exit_2_and_no_partial_output(small_raw, tmp_path, capsys):
    out = tmp_path / "out"
    (small_raw / "dq-question-metadata.csv").unlink()
    assert main(["data", "convert-eedi", "--source", str(small_raw), "--output", str(out)]) == 2
    assert "dq-question-metadata.csv: missing file" in capsys.readouterr().err
    assert not out.exists() or not any(out.iterdir())


def test_cli_convert_and_stats(small_raw, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["data", "convert-eedi", "--source", str(small_raw), "--output", str(out)]) == 0
    train = read_jsonl(out / "train.jsonl")
    assert len(train) == 6 and len(read_jsonl(out / "val.jsonl")) == 2 and len(read_jsonl(out / "test.jsonl")) == 1
    assert sorted(p.name for p in out.iterdir()) == ["test.jsonl", "train.jsonl", "val.jsonl"]
    capsys.readouterr()
    assert main(["data", "stats", str(out / "train.jsonl")]) == 0
    table = capsys.readouterr().out
    assert "dialogues" in table and "tutor_first_share" in table and "100.0%" in table


def test_cli_stats_bad_jsonl_exit_2(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "question": {"text": "q"}, "turns": []}\n{"id": 3, "question": {"text": "q"}}\n')
    assert main(["data", "stats", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "bad.jsonl:2" in err and "$.id" in err


def test_load_from_hub_dataset_id(local_hub, hub_api):
    """The Hub path (snapshot_download of the dataset repo) gives exactly the local folder's result."""
    from simhub.data.sample import sample_raw_dir

    hub_api.create_repo("org/qatd-sample", repo_type="dataset")
    hub_api.upload_folder(folder_path=str(sample_raw_dir()), repo_id="org/qatd-sample", repo_type="dataset")
    assert load_eedi("org/qatd-sample").splits == load_eedi(sample_raw_dir()).splits
    with pytest.raises(DataError, match="could not be fetched"):
        load_eedi("org/no-such-dataset")


def test_unknown_hub_id_offline_is_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    import huggingface_hub.constants as c

    monkeypatch.setattr(c, "HF_HUB_OFFLINE", True)
    with pytest.raises(DataError, match="could not be fetched"):
        load_eedi("nobody/no-such-dataset")
