"""Writing annotation rows in the released layout (docs/protocol.md §8), so that the reader reads them back.

The reader (:mod:`simhub.data.annotations`) is the contract: the columns are its
:data:`~simhub.data.annotations.RELEASED_COLUMNS`, the cells are Python literals as pandas'
``to_csv`` writes them from Python objects, and rows are matched to dialogues by ``key``, the
tuple ``(QuestionId_DQ, InterventionId)``.

Keys. QATD-2k dialogue ids are ``"{QuestionId_DQ}-{InterventionId}"`` and give the key directly.
Other ids cannot: the layout has no room for them. By default they are refused with an error
naming the dialogue; with ``hash_ids`` a key ``(0, N)`` is derived, N being the first 48 bits of
the id's SHA-256 (stable across runs and machines; 0 is no QATD-2k question id, so derived keys
never collide with real ones), and the original id is kept in an extra ``dialogue_id`` column.
The reader ignores that column, so such dialogues read back with the id ``"0-N"``.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from simhub.data.annotations import RELEASED_COLUMNS, parse_literal
from simhub.errors import DataError
from simhub.schema import Dialogue, atomic_write_bytes

__all__ = ["ID_COLUMN", "dialogue_key", "dialogue_row", "read_cells", "write_annotation_file"]

#: The extra column holding the original id of a dialogue whose key was derived from it.
ID_COLUMN = "dialogue_id"

_EEDI_ID = re.compile(r"^(\d+)-(\d+)$")


def dialogue_key(dialogue_id: str, *, hash_ids: bool = False, where: str = "dialogue") -> tuple[int, int]:
    """The ``key`` tuple of a dialogue id (see the module doc for ids that are not QATD-2k's)."""
    match = _EEDI_ID.match(dialogue_id)
    if match:
        return int(match.group(1)), int(match.group(2))
    if hash_ids:
        return 0, int(hashlib.sha256(dialogue_id.encode()).hexdigest()[:12], 16)
    raise DataError(
        f"{where}: id {dialogue_id!r} is not of the form '<QuestionId_DQ>-<InterventionId>' (two integers), "
        "which the annotation layout needs for its key; rename the dialogues, or ask for keys derived "
        "from the ids (hash_ids)",
        field="id",
    )


def dialogue_row(dialogue: Dialogue, key: tuple[int, int], *, keep_id: bool = False) -> dict[str, Any]:
    """The dialogue's own columns: ``key``, ``question``, ``subjects`` (its level-3 KC names as
    ``(name, 3)``: the canonical format keeps no other levels) and ``turns``."""
    row: dict[str, Any] = {
        "key": key,
        "question": dialogue.question.text,
        "subjects": [(name, 3) for name in dialogue.kcs],
        "turns": [{"role": t.role, "content": t.content} for t in dialogue.turns],
    }
    if keep_id:
        row[ID_COLUMN] = dialogue.id
    return row


def read_cells(path: str | os.PathLike[str]) -> dict[tuple[int, int], dict[str, str]]:
    """The cells of an existing annotation file as text, by key (empty when there is no file).

    Used to carry over the labels a run does not make; a file that cannot be read is an error
    rather than something to overwrite, since it may hold paid-for labels.
    """
    path = Path(path)
    if not path.is_file():
        return {}
    try:
        df = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: the existing annotation file cannot be read as CSV ({exc})", file=str(path)) from None
    if "key" not in df.columns:
        raise DataError(f"{path}: the existing annotation file has no key column", file=str(path), column="key")
    cells: dict[tuple[int, int], dict[str, str]] = {}
    for record in df.to_dict("records"):
        try:
            key = tuple(int(part) for part in parse_literal(record["key"]))
        except (ValueError, TypeError):
            continue
        if len(key) == 2:
            cells[key] = record  # type: ignore[index]
    return cells


def write_annotation_file(path: str | os.PathLike[str], rows: Sequence[Mapping[str, Any]]) -> Path:
    """Write ``rows`` (column -> Python value) with pandas' ``to_csv``, atomically.

    Columns are :data:`RELEASED_COLUMNS` in order, then any extra ones the rows carry (the
    ``dialogue_id`` of derived keys); a missing cell is written empty (a failed label).
    """
    extra: list[str] = []
    for row in rows:
        extra.extend(c for c in row if c not in RELEASED_COLUMNS and c not in extra)
    columns = [*RELEASED_COLUMNS, *extra]
    frame = pd.DataFrame({column: _column(rows, column) for column in columns}, columns=columns)
    text = frame.to_csv(index=False)
    path = Path(path)
    atomic_write_bytes(path, text.encode("utf-8"))
    return path


def _column(rows: Iterable[Mapping[str, Any]], column: str) -> pd.Series:
    # An object Series built element by element, so list and tuple cells stay single values.
    values = [row.get(column) for row in rows]
    series = pd.Series([None] * len(values), dtype=object)
    for i, value in enumerate(values):
        series.iat[i] = value
    return series
