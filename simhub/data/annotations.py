"""Reader of the released QATD-2k annotation files (docs/protocol.md §8).

The paper's authors annotated every dialogue once with an LLM (GPT-4.1) and released the result as
one CSV per split, ``{split}_{annotator}.csv``, written by pandas from a DataFrame of Python
objects. That layout is this module's input format:

- ``key``: the Python tuple ``(QuestionId_DQ, InterventionId)``: rows are matched to dialogues by
  it, never by position, because nothing guarantees that a file keeps the split order;
- ``question``, ``subjects`` (``[(SubjectName, SubjectLevel), ...]``) and ``turns``
  (``[{"role", "content"}, ...]``, the merged turns): the dialogue itself, so the files are a
  complete dataset even without the raw QATD-2k files;
- per label ``<label>_prompt``, ``<label>_annotation_raw`` (how the label was made; not read) and
  the parsed cell, a Python literal, except the free-text profile which is plain text.

A label whose cell is empty, is not a Python literal, or holds ``{"error": ...}`` failed for that
dialogue: it is left null and named in :attr:`Dialogue.failed_labels`, so the metrics that depend
on it skip the dialogue instead of scoring against a missing reference. Everything else that does
not fit the layout is a :class:`~simhub.errors.DataError` naming the file, row and column, because
silently guessing would change reported numbers.
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from simhub.errors import DataError
from simhub.schema import (
    ACTS,
    CORRECTNESS_LABELS,
    OCEAN_TRAITS,
    OPTIONS,
    Dialogue,
    Persona,
    Question,
    Turn,
)

#: The annotator of the released files (and the name the shipped sample's files carry).
DEFAULT_ANNOTATOR = "gpt-4.1"

#: Label names as :attr:`Dialogue.failed_labels` and the failure counts use them, in report order.
LABELS: tuple[str, ...] = ("question", "correctness", "kcs", "acts", "ocean", "freeform")

#: The column holding each label's parsed annotation.
LABEL_COLUMNS: dict[str, str] = {
    "question": "question_annotation",
    "correctness": "correctness",
    "kcs": "eedi_kcs",
    "acts": "acts",
    "ocean": "ocean_persona",
    "freeform": "freeform_persona",
}

#: The prefix of each label's ``<prefix>_prompt`` and ``<prefix>_annotation_raw`` columns.
LABEL_PREFIXES: dict[str, str] = {
    "question": "question",
    "correctness": "correctness",
    "kcs": "eedi_kcs",
    "acts": "acts",
    "ocean": "ocean_persona",
    "freeform": "freeform_persona",
}

#: The columns that describe the dialogue itself.
DIALOGUE_COLUMNS: tuple[str, ...] = ("key", "question", "subjects", "turns")

#: Every column of the released layout, in the order a writer should use.
RELEASED_COLUMNS: tuple[str, ...] = (
    *DIALOGUE_COLUMNS,
    *(
        column
        for label in LABELS
        for column in (
            f"{LABEL_PREFIXES[label]}_prompt",
            f"{LABEL_PREFIXES[label]}_annotation_raw",
            LABEL_COLUMNS[label],
        )
    ),
)

#: The columns the reader needs; the prompt and raw-answer columns only document how a label was made.
REQUIRED_COLUMNS: tuple[str, ...] = (*DIALOGUE_COLUMNS, *LABEL_COLUMNS.values())

#: The OCEAN keys as the released files spell them, and the three levels of a trait.
OCEAN_KEYS: tuple[str, ...] = tuple(trait.capitalize() for trait in OCEAN_TRAITS)
LEVELS: tuple[str, ...] = ("low", "neutral", "high")

_TURN_KEY = re.compile(r"^(?:turn\s*)?(\d+)$", re.IGNORECASE)
_NUMPY_MODULES = ("np", "numpy")
_NUMPY_CONSTANTS = {"True_": True, "False_": False, "nan": float("nan")}


# --------------------------------------------------------------------------- file names


def annotation_file_name(split: str, annotator: str = DEFAULT_ANNOTATOR) -> str:
    """``{split}_{annotator}.csv``; a slash in the annotator (``openai/gpt-4.1``) becomes ``-``
    because the name must be one path component."""
    return f"{split}_{annotator.replace('/', '-')}.csv"


def annotation_file(folder: str | os.PathLike[str], split: str, annotator: str = DEFAULT_ANNOTATOR) -> Path:
    """The annotation file of ``split`` in ``folder``: the annotator-named file, else plain ``{split}.csv``.

    The plain name is accepted so that a folder prepared before annotator names were used still
    loads; the annotator-named file wins when both exist.
    """
    folder = Path(folder)
    named = folder / annotation_file_name(split, annotator)
    if named.is_file():
        return named
    plain = folder / f"{split}.csv"
    if plain.is_file():
        return plain
    raise DataError(
        f"{named}: missing annotation file (neither {named.name} nor {plain.name} is in {folder})",
        file=str(named),
    )


# --------------------------------------------------------------------------- Python literals


class _NumpyScalars(ast.NodeTransformer):
    """Rewrites ``np.int64(3)`` to ``3`` (and ``np.True_`` to ``True``): pandas writes numpy scalars
    inside Python containers with their numpy repr, which ``ast.literal_eval`` refuses."""

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        func = node.func
        if (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id in _NUMPY_MODULES
            and len(node.args) == 1
            and not node.keywords
        ):
            return node.args[0]
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        if (
            isinstance(node.value, ast.Name)
            and node.value.id in _NUMPY_MODULES
            and node.attr in _NUMPY_CONSTANTS
        ):
            return ast.copy_location(ast.Constant(_NUMPY_CONSTANTS[node.attr]), node)
        return node


def parse_literal(text: str) -> Any:
    """Evaluate a cell written by pandas as a Python literal (numpy scalars allowed).

    Raises ValueError when the text is not a literal; never evaluates code.
    """
    try:
        tree = ast.parse(text.strip(), mode="eval")
        tree = ast.fix_missing_locations(_NumpyScalars().visit(tree))
        return ast.literal_eval(tree)
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError) as exc:
        raise ValueError(f"not a Python literal: {text[:80]!r}") from exc


def _is_empty(text: str) -> bool:
    return text.strip() in ("", "None", "nan", "NaN")


# --------------------------------------------------------------------------- rows


@dataclass(frozen=True)
class AnnotationRow:
    """One dialogue's row of a released annotation file, with its cells as the file holds them."""

    file: str
    row: int  # as a spreadsheet shows it: the header is row 1
    key: tuple[int, int]
    cells: dict[str, str]

    @property
    def dialogue_id(self) -> str:
        return f"{self.key[0]}-{self.key[1]}"

    def error(self, column: str, message: str) -> DataError:
        """A DataError located at this row and ``column``."""
        return DataError(
            f"{self.file}, row {self.row}, column {column}: {message}",
            file=self.file,
            row=self.row,
            column=column,
        )


def _parse_key(text: str, file: str, row: int) -> tuple[int, int]:
    def bad(why: str) -> DataError:
        return DataError(f"{file}, row {row}, column key: {why}", file=file, row=row, column="key")

    try:
        value = parse_literal(text)
    except ValueError:
        raise bad(f"expected the tuple (QuestionId_DQ, InterventionId), got {text[:80]!r}") from None
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise bad(f"expected the tuple (QuestionId_DQ, InterventionId), got {text[:80]!r}")
    key = []
    for part in value:
        if isinstance(part, bool) or not isinstance(part, (int, float)) or part != int(part):
            raise bad(f"expected two integer ids, got {text[:80]!r}")
        key.append(int(part))
    return key[0], key[1]


def read_annotation_file(path: str | os.PathLike[str]) -> list[AnnotationRow]:
    """Read one released annotation file: checks its columns and keys (unique), parses no labels.

    Extra columns (the index column ``to_csv`` writes by default, for one) are ignored.
    """
    file = str(path)
    try:
        df = pd.read_csv(path, dtype=str, keep_default_na=False)
    except FileNotFoundError:
        raise DataError(f"{file}: missing annotation file", file=file) from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise DataError(f"{file}: cannot be read as CSV ({exc})", file=file) from None
    missing = [c for c in REQUIRED_COLUMNS if c not in df.columns]
    if missing:
        raise DataError(
            f"{file}: missing column(s) {', '.join(missing)} (expected the released annotation layout)",
            file=file,
            column=missing[0],
        )
    rows: list[AnnotationRow] = []
    seen: dict[tuple[int, int], int] = {}
    for n, record in enumerate(df[list(REQUIRED_COLUMNS)].to_dict("records")):
        row = n + 2
        key = _parse_key(record["key"], file, row)
        if key in seen:
            raise DataError(
                f"{file}, row {row}, column key: duplicate key {key} (first in row {seen[key]})",
                file=file,
                row=row,
                column="key",
            )
        seen[key] = row
        rows.append(AnnotationRow(file=file, row=row, key=key, cells=record))
    return rows


def row_turns(row: AnnotationRow) -> list[Turn]:
    """The ``turns`` cell as unlabelled turns (it is the dialogue, so a bad cell is an error)."""
    try:
        value = parse_literal(row.cells["turns"])
    except ValueError as exc:
        raise row.error("turns", str(exc)) from None
    if not isinstance(value, (list, tuple)):
        raise row.error(
            "turns", f"expected a list of {{'role', 'content'}} dicts, got {type(value).__name__}"
        )
    turns = []
    for index, item in enumerate(value):
        if not isinstance(item, dict) or "role" not in item or "content" not in item:
            raise row.error("turns", f"turn {index + 1}: expected a dict with 'role' and 'content'")
        role = str(item["role"]).strip().lower()
        if role not in ("tutor", "student"):
            raise row.error("turns", f"turn {index + 1}: role {item['role']!r} is not tutor or student")
        turns.append(Turn(role=role, content=str(item["content"])))  # type: ignore[arg-type]
    return turns


def row_kcs(row: AnnotationRow) -> list[str]:
    """Level-3 subject names of the ``subjects`` cell, in order, without repeats (docs/protocol.md §2 rule 5)."""
    text = row.cells["subjects"]
    if _is_empty(text):
        return []
    try:
        value = parse_literal(text)
    except ValueError as exc:
        raise row.error("subjects", str(exc)) from None
    if not isinstance(value, (list, tuple)):
        raise row.error("subjects", f"expected a list of (name, level) tuples, got {type(value).__name__}")
    kcs: list[str] = []
    for item in value:
        if not isinstance(item, (list, tuple)) or len(item) != 2:
            raise row.error("subjects", f"expected (name, level) tuples, got {item!r}")
        name, level = item
        try:
            level = int(level)
        except (TypeError, ValueError):
            raise row.error("subjects", f"subject level {level!r} is not a number") from None
        if level == 3 and isinstance(name, str) and name not in kcs:
            kcs.append(name)
    return kcs


def row_dialogue(row: AnnotationRow) -> Dialogue:
    """The unlabelled dialogue a row describes (used when no raw QATD-2k files are given)."""
    return Dialogue(
        id=row.dialogue_id,
        question=Question(text=row.cells["question"]),
        kcs=row_kcs(row),
        turns=row_turns(row),
    )


def check_turns(row: AnnotationRow, dialogue: Dialogue) -> None:
    """Fail unless the row's ``turns`` equal the dialogue converted from the raw files.

    The labels are keyed by turn number, so a row whose turns differ would put them on the wrong turns.
    """
    annotated = row_turns(row)
    for index in range(max(len(annotated), len(dialogue.turns))):
        if index >= len(annotated) or index >= len(dialogue.turns):
            have, want = len(annotated), len(dialogue.turns)
            raise DataError(
                f"{row.file}, row {row.row}, column turns: dialogue {dialogue.id} has {have} turns here but "
                f"{want} in the raw data (first difference at turn index {index})",
                file=row.file,
                row=row.row,
                column="turns",
            )
        a, b = annotated[index], dialogue.turns[index]
        if (a.role, a.content) != (b.role, b.content):
            raise DataError(
                f"{row.file}, row {row.row}, column turns: dialogue {dialogue.id}, turn index {index} differs from "
                f"the raw data ({a.role}: {a.content[:60]!r} here, {b.role}: {b.content[:60]!r} there)",
                file=row.file,
                row=row.row,
                column="turns",
            )


# --------------------------------------------------------------------------- labels


class _Failed(Exception):
    """The cell of a label holds no usable annotation (empty, not a literal, or an error record)."""


def cell_label(text: str) -> Any:
    """The parsed label of an annotation cell, or None when the cell holds none: empty, ``None``/
    ``nan``, unparsable, or an error record (a failed annotation)."""
    if _is_empty(text):
        return None
    try:
        value = parse_literal(text)
    except ValueError:
        return None
    if isinstance(value, dict) and any(str(k).strip().lower() == "error" for k in value):
        return None
    return value


def holds_label(text: str, label: str) -> bool:
    """Whether a cell of ``label`` holds a label as the reader sees it: free text for the profile
    (``freeform``), a parsable non-error literal for the others."""
    return not _is_empty(text) if label == "freeform" else cell_label(text) is not None


def _cell(row: AnnotationRow, label: str) -> Any:
    column = LABEL_COLUMNS[label]
    value = cell_label(row.cells[column])
    if value is None:
        raise _Failed
    if not isinstance(value, dict):
        raise row.error(column, f"expected a dict, got {type(value).__name__}")
    return value


def get_key(value: Mapping[str, Any], name: str, default: Any = None) -> Any:
    """``value[name]`` with the key matched case-insensitively and without surrounding spaces (the
    annotator's capitalisation varies); ``default`` when there is no such key."""
    wanted = name.lower()
    for key, item in value.items():
        if str(key).strip().lower() == wanted:
            return item
    return default


def _choose(value: Any, labels: Sequence[str], row: AnnotationRow, column: str, where: str) -> str:
    text = str(value).strip()
    for label in labels:
        if text.lower() == label.lower():
            return label
    raise row.error(column, f"{where}: {text!r} is not one of {', '.join(labels)}")


def _turn_values(
    value: dict, row: AnnotationRow, column: str, dialogue: Dialogue, role: str
) -> dict[int, Any]:
    """Map ``"turn N"`` (or ``"N"``) keys to turn indices; N counts all merged turns from 1."""
    out: dict[int, Any] = {}
    for key, item in value.items():
        match = _TURN_KEY.match(str(key).strip())
        if not match:
            raise row.error(column, f"key {key!r} is not of the form 'turn N'")
        index = int(match.group(1)) - 1
        if not 0 <= index < len(dialogue.turns):
            raise row.error(
                column,
                f"key {key!r} points past dialogue {dialogue.id}, which has {len(dialogue.turns)} turns",
            )
        if dialogue.turns[index].role != role:
            raise row.error(
                column,
                f"key {key!r} of dialogue {dialogue.id} is a {dialogue.turns[index].role} turn, "
                f"expected a {role} turn",
            )
        out[index] = item
    return out


def _act(item: Any, row: AnnotationRow, index: int) -> str | None:
    if isinstance(item, dict):
        item = get_key(item, "act")
    return None if item is None else _choose(item, ACTS, row, "acts", f"turn {index + 1}")


def _correctness(item: Any, row: AnnotationRow, index: int) -> str | None:
    if isinstance(item, dict):
        if not any(str(k).strip().lower() == "correct" for k in item):
            raise row.error("correctness", f"turn {index + 1}: no 'correct' entry")
        verdict = get_key(item, "correct")
        if verdict is None:
            return "na"
        if isinstance(verdict, bool):
            return "correct" if verdict else "incorrect"
        item = {"true": "correct", "false": "incorrect", "none": "na", "null": "na"}.get(
            str(verdict).strip().lower(), verdict
        )
    return (
        None if item is None else _choose(item, CORRECTNESS_LABELS, row, "correctness", f"turn {index + 1}")
    )


def _kcs(item: Any, row: AnnotationRow, index: int) -> list[str] | None:
    if isinstance(item, dict):
        item = get_key(item, "kcs")
    if item is None:
        return None
    if isinstance(item, str):
        item = [item]
    if not isinstance(item, (list, tuple)):
        raise row.error(
            "eedi_kcs", f"turn {index + 1}: expected a list of KC names, got {type(item).__name__}"
        )
    # An empty list says the turn exercises no KC, the same as leaving the turn out.
    return [str(k) for k in item] or None


def _option(value: Any, row: AnnotationRow) -> str | None:
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 4:
        return OPTIONS[value - 1]
    text = str(value).strip().upper().removeprefix("OPTION").strip()
    if text in OPTIONS:
        return text
    if text.isdigit() and 1 <= int(text) <= 4:
        return OPTIONS[int(text) - 1]
    raise row.error("question_annotation", f"correct_option {value!r} is not 1-4")


def _bool(value: Any, row: AnnotationRow, name: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise row.error("question_annotation", f"{name} must be True or False, got {value!r}")


def _question(value: dict, question: Question, row: AnnotationRow) -> Question:
    correct = _option(get_key(value, "correct_option"), row)
    solvable = get_key(value, "solvable")
    # A question without a correct option cannot be used as a reference, whatever "solvable" says.
    solvable = correct is not None and (solvable is None or _bool(solvable, row, "solvable"))
    explanations = {}
    for number, letter in enumerate(OPTIONS, start=1):
        text = get_key(value, f"option_{number}_explanation")
        if text is not None:
            explanations[letter] = str(text)
    older = get_key(value, "option_explanations")  # the older simhub layout: {1: "...", ...}
    if not explanations and isinstance(older, dict):
        explanations = {_option(k, row) or str(k): str(v) for k, v in older.items()}
    solution = get_key(value, "solution")
    return Question(
        text=question.text,
        correct_option=correct,  # type: ignore[arg-type]
        solution=None if solution is None else str(solution),
        option_explanations=explanations or None,
        solvable=solvable,
    )


def _persona(value: dict, row: AnnotationRow) -> Persona:
    traits = {}
    for trait in OCEAN_TRAITS:
        level = get_key(value, trait)
        if level is None:
            raise row.error("ocean_persona", f"missing trait {trait.capitalize()!r}")
        traits[trait] = _choose(level, LEVELS, row, "ocean_persona", trait.capitalize())
    return Persona(**traits)


def annotate(dialogue: Dialogue, row: AnnotationRow) -> Dialogue:
    """Return ``dialogue`` (unlabelled, turns as in the row) with the row's labels attached.

    Failed labels stay null and are listed in ``failed_labels``; malformed content raises DataError.
    """
    turns = [Turn(role=t.role, content=t.content) for t in dialogue.turns]
    question = Question(text=dialogue.question.text)
    persona: Persona | None = None
    profile: str | None = None
    failed: list[str] = []
    for label in LABELS:
        try:
            if label == "freeform":
                text = row.cells[LABEL_COLUMNS[label]]
                if _is_empty(text):
                    raise _Failed
                profile = text  # free text, not a literal
                continue
            value = _cell(row, label)
        except _Failed:
            failed.append(label)
            continue
        if label == "question":
            question = _question(value, dialogue.question, row)
        elif label == "ocean":
            persona = _persona(value, row)
        elif label == "acts":
            for index, item in _turn_values(value, row, "acts", dialogue, "student").items():
                turns[index].act = _act(item, row, index)  # type: ignore[assignment]
        elif label == "correctness":
            for index, item in _turn_values(value, row, "correctness", dialogue, "student").items():
                turns[index].correctness = _correctness(item, row, index)  # type: ignore[assignment]
        elif label == "kcs":
            for index, item in _turn_values(value, row, "eedi_kcs", dialogue, "tutor").items():
                turns[index].kcs = _kcs(item, row, index)
    return Dialogue(
        id=dialogue.id,
        question=question,
        kcs=list(dialogue.kcs),
        persona=persona,
        profile=profile,
        turns=turns,
        failed_labels=failed,
        meta=dict(dialogue.meta),
    )
