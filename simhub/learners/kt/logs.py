"""Item-response logs: who answered which item, on which KC, right or wrong, when.

A :class:`ResponseLog` is a tuple of :class:`Response` rows. It is read from a CSV file
(:func:`read_responses`) or built from annotated QATD-2k dialogues (:func:`responses_from_dialogues`),
and gives the per-KC sequences that fitting needs (:meth:`ResponseLog.kc_sequences`).

**The CSV layout** (UTF-8, with or without a byte-order mark; a header row, comma-separated; columns in any order, other columns ignored):

=========== ===================================================================================
column      value
=========== ===================================================================================
``student`` the student's id (any non-empty text)
``item``    the item's id (any non-empty text)
``kc``      the knowledge component the answer is evidence about (non-empty); an answer on two KCs
            is two rows
``correct`` ``1``/``0``, ``true``/``false`` or ``correct``/``incorrect`` (any case)
``time``    a number that orders one student's answers (a turn index, seconds, a day...)
=========== ===================================================================================

A missing column is a :class:`~simhub.errors.DataError` naming the file and the column; a bad
value names the file, the row (as a spreadsheet numbers it: the header is row 1) and the column.
Within a student, answers are ordered by ``time``, then by their order in the file.
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from simhub.errors import DataError
from simhub.schema import Dialogue

__all__ = ["COLUMNS", "Response", "ResponseLog", "read_responses", "responses_from_dialogues", "write_responses"]

#: The columns of the CSV layout, in the order :func:`write_responses` writes them.
COLUMNS: tuple[str, ...] = ("student", "item", "kc", "correct", "time")

_TRUE = {"1", "true", "correct"}
_FALSE = {"0", "false", "incorrect"}


@dataclass(frozen=True, slots=True)
class Response:
    """One graded answer."""

    student: str
    item: str
    kc: str
    correct: bool
    time: float


@dataclass(frozen=True)
class ResponseLog:
    """Graded answers in file (or dialogue) order."""

    responses: tuple[Response, ...]

    def __len__(self) -> int:
        return len(self.responses)

    def __iter__(self):
        return iter(self.responses)

    @property
    def kcs(self) -> list[str]:
        """The KCs, sorted."""
        return sorted({r.kc for r in self.responses})

    @property
    def students(self) -> list[str]:
        """The students, sorted."""
        return sorted({r.student for r in self.responses})

    def by_student(self) -> dict[str, list[Response]]:
        """Each student's answers ordered by time (stable: ties keep their log order), students sorted."""
        out: dict[str, list[Response]] = {}
        for r in self.responses:
            out.setdefault(r.student, []).append(r)
        return {s: sorted(out[s], key=lambda r: r.time) for s in sorted(out)}

    def kc_sequences(self) -> dict[str, list[list[int]]]:
        """``{kc: [a student's 0/1 answers on the KC in time order, ...]}``, KCs and students sorted."""
        out: dict[str, dict[str, list[int]]] = {}
        for student, rows in self.by_student().items():
            for r in rows:
                out.setdefault(r.kc, {}).setdefault(student, []).append(int(r.correct))
        return {kc: list(out[kc].values()) for kc in sorted(out)}


def _parse_correct(value: str) -> bool | None:
    text = value.strip().lower()
    return True if text in _TRUE else False if text in _FALSE else None


def read_responses(path: str | os.PathLike[str]) -> ResponseLog:
    """The log in the CSV file at ``path`` (the layout in this module's docstring)."""
    path = Path(path)
    file = str(path)
    try:
        handle = path.open(newline="", encoding="utf-8-sig")  # a spreadsheet's byte-order mark is dropped
    except FileNotFoundError:
        raise DataError(f"{path}: no such file", file=file) from None
    with handle:
        reader = csv.reader(handle)
        try:
            header = next(reader, None)
        except (csv.Error, UnicodeDecodeError) as exc:
            raise DataError(f"{path}: not a readable CSV file ({exc})", file=file, row=1) from None
        if header is None:
            raise DataError(f"{path}: empty file (expected a header: {', '.join(COLUMNS)})", file=file, row=1)
        names = [h.strip() for h in header]
        for column in COLUMNS:
            if column not in names:
                raise DataError(f"{path}: missing column {column!r} (the header has {', '.join(names) or 'nothing'})",
                                file=file, column=column)
        at = {c: names.index(c) for c in COLUMNS}
        rows: list[Response] = []
        row = 1
        try:
            for row, cells in enumerate(reader, start=2):
                if not any(c.strip() for c in cells):
                    continue
                rows.append(_row(cells, at, file, row))
        except (csv.Error, UnicodeDecodeError) as exc:
            raise DataError(f"{path}: row {row + 1}: not readable as CSV ({exc})", file=file, row=row + 1) from None
    return ResponseLog(tuple(rows))


def _row(cells: Sequence[str], at: Mapping[str, int], file: str, row: int) -> Response:
    def cell(column: str) -> str:
        i = at[column]
        value = cells[i].strip() if i < len(cells) else ""
        if not value:
            raise DataError(f"{file}: row {row}, column {column!r}: empty", file=file, row=row, column=column)
        return value

    student, item, kc = cell("student"), cell("item"), cell("kc")
    raw = cell("correct")
    correct = _parse_correct(raw)
    if correct is None:
        raise DataError(f"{file}: row {row}, column 'correct': {raw!r} is not 1/0, true/false or correct/incorrect",
                        file=file, row=row, column="correct")
    raw = cell("time")
    try:
        time = float(raw)
    except ValueError:
        time = math.nan
    if not math.isfinite(time):
        raise DataError(f"{file}: row {row}, column 'time': {raw!r} is not a finite number", file=file, row=row,
                        column="time")
    return Response(student=student, item=item, kc=kc, correct=correct, time=time)


def write_responses(path: str | os.PathLike[str], log: ResponseLog | Iterable[Response]) -> Path:
    """Write ``log`` in the CSV layout (``correct`` as 1/0; a whole-number time without ``.0``)."""
    path = Path(path)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(COLUMNS)
        for r in log:
            time = int(r.time) if float(r.time).is_integer() else r.time
            writer.writerow([r.student, r.item, r.kc, int(r.correct), time])
    return path


def item_of(dialogue: Dialogue) -> str:
    question = dialogue.meta.get("question_id") if dialogue.meta else None
    if question is not None:
        return str(question)
    return dialogue.id.split("-", 1)[0] or dialogue.id


def responses_from_dialogues(dialogues: Iterable[Dialogue]) -> ResponseLog:
    """A log from annotated QATD-2k dialogues: one row per KC of each student turn labelled
    ``correct`` or ``incorrect`` (``na`` and unlabelled turns are skipped).

    * ``student``: the dialogue's id (each dialogue is one student's sequence);
    * ``item``: the dialogue's question id: ``meta["question_id"]`` when set, else the part of the
      dialogue id before the first ``-`` (QATD-2k ids are ``QUESTION-INTERVENTION``);
    * ``kc``: the student turn's own ``kcs`` when it has any, else the KCs of the tutor turn just
      before it (QATD-2k labels KCs on tutor turns, and the student's answer is the evidence about
      what that turn taught: the pairing simhub's LLMKT training uses). A turn with neither gives
      no row. The catch-all KC ``Default`` is kept like any other;
    * ``time``: the turn's index in the dialogue.
    """
    rows: list[Response] = []
    for dialogue in dialogues:
        item = item_of(dialogue)
        turns = dialogue.turns
        for index, turn in enumerate(turns):
            if turn.role != "student" or turn.correctness not in ("correct", "incorrect"):
                continue
            kcs = turn.kcs
            if not kcs and index > 0 and turns[index - 1].role == "tutor":
                kcs = turns[index - 1].kcs
            for kc in dict.fromkeys(kcs or ()):
                rows.append(Response(student=dialogue.id, item=item, kc=kc,
                                     correct=turn.correctness == "correct", time=float(index)))
    return ResponseLog(tuple(rows))
