"""Item-response logs: the CSV reader and its errors, the builder from QATD-2k dialogues, a demo fit."""

from __future__ import annotations

import pytest

from simhub.errors import DataError
from simhub.learners.kt import BKT, FitSettings, fit_bkt
from simhub.learners.kt.logs import COLUMNS, Response, read_responses, responses_from_dialogues, write_responses
from simhub.schema import Dialogue, Question, Turn


def write(tmp_path, text: str):
    path = tmp_path / "log.csv"
    path.write_text(text, encoding="utf-8")
    return path


def test_read_a_log_in_any_column_order(tmp_path):
    path = write(tmp_path, "time,kc,note,student,item,correct\n"
                           "2,add,x,s1,q2,Incorrect\n"
                           "1,add,,s1,q1,1\n"
                           "\n"
                           "0.5,sub,,s2,q9,false\n"
                           "1,add,,s1,q3,TRUE\n")
    log = read_responses(path)
    assert len(log) == 4
    assert log.responses[0] == Response(student="s1", item="q2", kc="add", correct=False, time=2.0)
    assert log.kcs == ["add", "sub"] and log.students == ["s1", "s2"]
    # By time within a student; the tie at time 1 keeps the file's order.
    assert [r.item for r in log.by_student()["s1"]] == ["q1", "q3", "q2"]
    assert log.kc_sequences() == {"add": [[1, 1, 0]], "sub": [[0]]}


def test_a_byte_order_mark_is_dropped(tmp_path):
    path = tmp_path / "excel.csv"
    path.write_bytes("student,item,kc,correct,time\r\ns1,q1,add,1,0\r\n".encode("utf-8-sig"))
    assert read_responses(path).responses == (Response("s1", "q1", "add", True, 0.0),)


def test_a_missing_column_names_the_file_and_the_column(tmp_path):
    path = write(tmp_path, "student,item,correct,time\ns1,q1,1,0\n")
    with pytest.raises(DataError, match=r"missing column 'kc'") as info:
        read_responses(path)
    assert info.value.file == str(path) and info.value.column == "kc" and info.value.field == "kc"
    with pytest.raises(DataError, match="empty file"):
        read_responses(write(tmp_path, ""))
    with pytest.raises(DataError, match="no such file"):
        read_responses(tmp_path / "absent.csv")


@pytest.mark.parametrize(("row", "column", "message"), [
    ("s1,q1,add,yes,0", "correct", "'yes' is not 1/0"),
    ("s1,q1,add,1,soon", "time", "'soon' is not a finite number"),
    ("s1,q1,add,1,nan", "time", "'nan' is not a finite number"),
    ("s1,,add,1,0", "item", "empty"),
    ("s1,q1,add", "correct", "empty"),
])
def test_a_bad_value_names_file_row_and_column(tmp_path, row, column, message):
    path = write(tmp_path, f"student,item,kc,correct,time\ns0,q0,add,0,0\n{row}\n")
    with pytest.raises(DataError, match=message) as info:
        read_responses(path)
    error = info.value
    assert (error.file, error.row, error.column) == (str(path), 3, column)
    assert f"row 3, column '{column}'" in str(error)


def test_write_then_read(tmp_path):
    rows = (Response("s1", "q1", "add", True, 0.0), Response("s1", "q2", "add", False, 1.5))
    path = write_responses(tmp_path / "out.csv", rows)
    assert path.read_text().splitlines()[0] == ",".join(COLUMNS)
    assert path.read_text().splitlines()[1] == "s1,q1,add,1,0"
    assert read_responses(path).responses == rows


def test_the_dialogue_rules():
    turns = [
        Turn(role="tutor", content="t0", kcs=["A", "B"]),
        Turn(role="student", content="s1", correctness="correct"),          # A and B, from the tutor turn
        Turn(role="tutor", content="t2", kcs=["A"]),
        Turn(role="student", content="s3", correctness="na"),               # skipped
        Turn(role="tutor", content="t4"),
        Turn(role="student", content="s5", correctness="incorrect"),        # no KCs anywhere: skipped
        Turn(role="tutor", content="t6", kcs=["A"]),
        Turn(role="student", content="s7", correctness="incorrect", kcs=["C"]),  # its own KCs win
        Turn(role="student", content="s8"),                                 # unlabelled: skipped
    ]
    d = Dialogue(id="123-456", question=Question(text="?"), turns=turns)
    log = responses_from_dialogues([d, Dialogue(id="9-1", question=Question(text="?"), turns=turns[:2],
                                                meta={"question_id": 77})])
    assert [(r.student, r.item, r.kc, r.correct, r.time) for r in log] == [
        ("123-456", "123", "A", True, 1.0), ("123-456", "123", "B", True, 1.0),
        ("123-456", "123", "C", False, 7.0),
        ("9-1", "77", "A", True, 1.0), ("9-1", "77", "B", True, 1.0),
    ]


def test_the_sample_corpus_as_a_log(sample_corpus):
    counts = {}
    for split in ("train", "val", "test"):
        log = responses_from_dialogues(sample_corpus[split])
        counts[split] = (len(log), len(log.kcs), len(log.students), len({r.item for r in log}))
    # (rows, KCs, students = dialogues with a row, items = questions)
    assert counts == {"train": (570, 49, 137, 44), "val": (254, 31, 47, 32), "test": (176, 33, 44, 29)}
    train = responses_from_dialogues(sample_corpus["train"])
    assert sum(r.correct for r in train) == 382
    # Every row comes from a correct/incorrect student turn, and its KC is one of the dialogue's.
    by_id = {d.id: d for d in sample_corpus["train"]}
    for r in train.responses:
        turn = by_id[r.student].turns[int(r.time)]
        assert turn.role == "student" and turn.correctness in ("correct", "incorrect")
        assert r.kc in by_id[r.student].all_kcs  # "Default" is the catch-all KC


def test_a_demo_fit_on_the_sample_corpus(sample_corpus, tmp_path):
    log = responses_from_dialogues(sample_corpus["train"])
    settings = FitSettings(seed=0, restarts=2, max_iter=200)
    model = fit_bkt(log, settings)
    assert list(model.kcs) == log.kcs
    for kc, p in model.params.items():
        assert p.p_guess < 0.5 and p.p_slip < 0.5, kc
        assert model.kc_fits[kc].n_observations == sum(len(s) for s in log.kc_sequences()[kc])
    assert sum(f.n_observations for f in model.kc_fits.values()) == len(log)
    assert BKT.load(model.save(tmp_path / "sample-bkt.json")).params == fit_bkt(log, settings).params
