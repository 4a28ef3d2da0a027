"""Reading what raters filled in: the tasks' ``key.json`` (:func:`load_key`) and the ratings CSV files
(:func:`read_ratings`), every bad cell a :class:`~simhub.errors.DataError` naming its file, row and
column (docs/human-eval.md, "the ratings files")."""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simhub.errors import DataError, did_you_mean
from simhub.evaluation.human_eval.layout import COLUMNS, KEY_FILE, TASKS_KIND
from simhub.schema import ACTS, CORRECTNESS_LABELS

__all__ = ["Rating", "key_items", "load_key", "read_ratings"]

#: The rating columns (a row with all of them blank is an unrated template row).
_RATING_COLUMNS = COLUMNS[2:]
#: Answers accepted for correctness (the paper's interface asked Yes / No / N/A) and same_error.
_CORRECTNESS = {"correct": "correct", "yes": "correct", "incorrect": "incorrect", "no": "incorrect",
                "na": "na", "n/a": "na", "n.a.": "na", "none": "na"}
_YES_NO = {"yes": True, "y": True, "true": True, "1": True, "no": False, "n": False, "false": False, "0": False}
_ACT_NAMES = {a.lower(): a for a in ACTS}


@dataclass(frozen=True, slots=True)
class Rating:
    """One rater's judgement of one turn (a row of a ratings file)."""

    item: str
    rater: str
    act: str
    correctness: str
    same_error: bool | None
    linguistic: int | None
    file: str
    row: int


def load_key(folder: str | os.PathLike[str]) -> dict[str, Any]:
    """The ``key.json`` of a tasks folder, checked enough to be used."""
    folder = Path(folder)
    path = folder / KEY_FILE
    if not folder.is_dir():
        raise DataError(f"{folder}: not a folder (expected a simhub human-eval tasks folder)", file=str(folder))
    try:
        key = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(f"{path}: not found; is {folder} a simhub human-eval tasks folder?", file=str(path)) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"{path}: cannot be read ({exc})", file=str(path)) from None
    if not isinstance(key, dict) or key.get("kind") != TASKS_KIND:
        raise DataError(f"{path}: not a simhub human-eval key (kind is not {TASKS_KIND!r})", file=str(path),
                        field="kind")
    groups = key.get("groups")
    if not isinstance(groups, list):
        raise DataError(f"{path}: groups: expected a list", file=str(path), field="groups")
    for n, g in enumerate(groups):
        if not (isinstance(g, dict) and isinstance(g.get("real"), dict) and isinstance(g.get("candidates"), list)
                and isinstance(g["real"].get("item"), str)
                and all(isinstance(c, dict) and isinstance(c.get("item"), str) and isinstance(c.get("auto"), dict)
                        for c in g["candidates"])):
            raise DataError(f"{path}: groups[{n}]: malformed (expected real.item and candidates[].item/auto)",
                            file=str(path), field=f"groups[{n}]")
    return key


def key_items(key: Mapping[str, Any]) -> dict[str, tuple[Mapping[str, Any], Mapping[str, Any] | None]]:
    """Every item id -> (its group, its candidate entry or None for the real turn)."""
    out: dict[str, tuple[Mapping[str, Any], Mapping[str, Any] | None]] = {}
    for g in key["groups"]:
        out[g["real"]["item"]] = (g, None)
        for c in g["candidates"]:
            out[c["item"]] = (g, c)
    return out


def read_ratings(paths: Sequence[str | os.PathLike[str]], key: Mapping[str, Any]) -> tuple[list[Rating], int]:
    """The ratings of one or more CSV files (docs/human-eval.md), checked against the tasks' key.

    Returns the ratings and the number of unrated rows (template rows with every rating column
    blank). Any bad cell is a :class:`~simhub.errors.DataError` naming the file, the row (as a
    spreadsheet numbers it, the header being row 1) and the column.
    """
    items = key_items(key)
    ratings: list[Rating] = []
    seen: dict[tuple[str, str], Rating] = {}
    unrated = 0
    for path in paths:
        path = Path(path)
        try:
            fh = path.open(newline="", encoding="utf-8-sig")
        except OSError as exc:
            raise DataError(f"{path}: cannot be read ({exc.strerror or exc})", file=str(path)) from None
        with fh:
            reader = csv.DictReader(fh)
            header = [(h or "").strip() for h in (reader.fieldnames or [])]
            reader.fieldnames = header
            missing = [c for c in COLUMNS if c not in header]
            if missing:
                raise DataError(f"{path}:1: missing column {missing[0]!r} (a ratings file has the columns "
                                f"{', '.join(COLUMNS)})", file=str(path), row=1, column=missing[0])
            for row_no, row in enumerate(reader, start=2):
                cells = {c: (row.get(c) or "").strip() for c in COLUMNS}
                if not any(cells.values()):
                    continue
                rating = _parse_row(path, row_no, cells, items)
                if rating is None:
                    unrated += 1
                    continue
                other = seen.get((rating.item, rating.rater))
                if other is not None:
                    raise DataError(f"{path}:{row_no}: item: rater {rating.rater!r} rated {rating.item!r} already "
                                    f"({other.file}, row {other.row})", file=str(path), row=row_no, column="item")
                seen[(rating.item, rating.rater)] = rating
                ratings.append(rating)
    for rating in ratings:
        group, candidate = items[rating.item]
        if candidate is None:
            continue
        real = seen.get((group["real"]["item"], rating.rater))
        where = {"file": rating.file, "row": rating.row}
        if real is None:
            raise DataError(f"{rating.file}:{rating.row}: item: rater {rating.rater!r} rated candidate {rating.item!r} "
                            f"but not its real turn {group['real']['item']!r}, which every candidate is compared with",
                            column="item", **where)
        if rating.correctness == "incorrect" and real.correctness == "incorrect" and rating.same_error is None:
            raise DataError(f"{rating.file}:{rating.row}: same_error: both this candidate and the real turn are rated "
                            "incorrect, so same_error needs yes or no", column="same_error", **where)
    if not ratings:
        raise DataError(f"{', '.join(str(p) for p in paths)}: no ratings (every row is blank)",
                        file=str(paths[0]) if paths else None)
    return ratings, unrated


def _parse_row(path: Path, row_no: int, cells: Mapping[str, str],
               items: Mapping[str, tuple[Mapping[str, Any], Mapping[str, Any] | None]]) -> Rating | None:
    def bad(column: str, message: str) -> DataError:
        return DataError(f"{path}:{row_no}: {column}: {message}", file=str(path), row=row_no, column=column)

    item = cells["item"]
    if not item:
        raise bad("item", "empty; name the item the row rates")
    if item not in items:
        raise bad("item", f"{item!r} is not an item of these tasks{did_you_mean(item, list(items))}")
    rater = cells["rater"]
    if not rater:
        raise bad("rater", "empty; name who rated the item")
    if not any(cells[c] for c in _RATING_COLUMNS):
        return None
    _, candidate = items[item]
    act = _ACT_NAMES.get(" ".join(cells["act"].lower().replace("_", " ").split()))
    if act is None:
        if not cells["act"]:
            raise bad("act", "empty; every rated turn needs its act")
        raise bad("act", f"{cells['act']!r} is not one of {', '.join(ACTS)}")
    correctness = _CORRECTNESS.get(cells["correctness"].lower())
    if correctness is None:
        if not cells["correctness"]:
            raise bad("correctness", "empty; every rated turn needs correct, incorrect or na")
        raise bad("correctness", f"{cells['correctness']!r} is not one of {', '.join(CORRECTNESS_LABELS)}")
    same_error: bool | None = None
    linguistic: int | None = None
    if candidate is None:
        for column in ("same_error", "linguistic"):
            if cells[column]:
                raise bad(column, f"{item!r} is the real turn; {column} is rated for candidates only (leave it blank)")
    else:
        if cells["same_error"]:
            same_error = _YES_NO.get(cells["same_error"].lower())
            if same_error is None:
                raise bad("same_error", f"{cells['same_error']!r} is not yes or no")
            if correctness != "incorrect":
                raise bad("same_error", f"the candidate is rated {correctness}; same_error applies only to a candidate "
                                        "rated incorrect (leave it blank)")
        text = cells["linguistic"]
        if not text:
            raise bad("linguistic", "empty; every candidate needs a similarity rating from 1 to 5")
        try:
            value = float(text)
        except ValueError:
            raise bad("linguistic", f"{text!r} is not a number from 1 to 5") from None
        if not value.is_integer() or not 1 <= value <= 5:
            raise bad("linguistic", f"{text} is out of range: a whole number from 1 to 5")
        linguistic = int(value)
    return Rating(item=item, rater=cells["rater"], act=act, correctness=correctness, same_error=same_error,
                  linguistic=linguistic, file=str(path), row=row_no)

