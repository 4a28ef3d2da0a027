"""Loader for Eedi's Question-Anchored Tutoring Dialogues 2k (QATD-2k).

Reproduces the processing rules of the paper's reference code (SPEC §2):

1. a dialogue is the rows sharing ``(QuestionId_DQ, InterventionId)``; dialogues are ordered
   by that key ascending, messages keep file order (``MessageSequence`` is not used);
2. message text: newlines to spaces, stripped; a missing message becomes ``"nan"``;
3. consecutive messages of one role merge into one turn (a ``.`` is added when the text so far
   does not end in ``.``, ``!`` or ``?``);
4. the question text is ``"{Label}: {Text}"`` of its metadata rows in file order, joined by newlines;
5. KCs are the intervention's level-3 subject names (``Default`` is implied);
6. ``train.csv`` dialogues are shuffled with ``random.Random(221)``; the first 75 % are train,
   the rest validation; ``test.csv`` is test;
7. with annotations, dialogues whose question is marked unsolvable are dropped (after the split,
   so the split does not depend on annotations).

Annotations use the released CSV format: one row per dialogue (in split order, or matched by an
``id`` column when there is one), columns ``acts``, ``correctness``, ``eedi_kcs``,
``ocean_persona``, ``freeform_persona``, ``question_annotation``, each cell a Python literal keyed
``"turn N"`` (N counts merged turns from 1). An empty or ``None`` cell is a failed annotation: null.
"""

from __future__ import annotations

import ast
import math
import os
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from simhub.schema import (
    ACTS,
    CORRECTNESS_LABELS,
    OCEAN_TRAITS,
    OPTIONS,
    Dialogue,
    Persona,
    Question,
    SchemaError,
    Turn,
)

HUB_DATASET_ID = "Eedi/Question-Anchored-Tutoring-Dialogues-2k"
SPLIT_SEED = 221
TRAIN_FRACTION = 0.75
SPLITS = ("train", "val", "test")

DIALOGUE_FILES = {"train": "anchored-dialogues/train.csv", "test": "anchored-dialogues/test.csv"}
METADATA_FILE = "dq-question-metadata.csv"
SUBJECTS_FILE = "dialogue-subjects.csv"

MESSAGE_COLUMNS = ("InterventionId", "QuestionId_DQ", "IsTutor", "MessageString")
METADATA_COLUMNS = ("QuestionId_DQ", "InterventionId", "Text", "Label")
SUBJECT_COLUMNS = ("InterventionId", "SubjectName", "SubjectLevel")
ANNOTATION_COLUMNS = ("acts", "correctness", "eedi_kcs", "ocean_persona", "freeform_persona", "question_annotation")

_TURN_KEY = re.compile(r"^turn (\d+)$")


class DataError(SchemaError):
    """A raw file is missing or malformed; the message names the file, column and row."""


@dataclass
class EediCorpus:
    """The three processed splits plus bookkeeping of what was dropped."""

    splits: dict[str, list[Dialogue]]
    dropped_unsolvable: dict[str, int] = field(default_factory=dict)

    def __getitem__(self, split: str) -> list[Dialogue]:
        return self.splits[split]


# --------------------------------------------------------------------------- text rules


def clean_text(value: Any) -> str:
    """Rule 2: newlines become spaces, then strip; a missing value becomes the text ``nan``."""
    return str(value).replace("\n", " ").strip()


def merge_messages(messages: Sequence[tuple[str, str]]) -> list[Turn]:
    """Rule 3: merge consecutive same-role ``(role, text)`` messages into alternating turns."""
    turns: list[Turn] = []
    for role, text in messages:
        if turns and turns[-1].role == role:
            so_far = turns[-1].content
            if not so_far.endswith((".", "!", "?")):
                so_far += "."
            turns[-1].content = f"{so_far} {text}"
        else:
            turns.append(Turn(role=role, content=text))  # type: ignore[arg-type]
    return turns


# --------------------------------------------------------------------------- raw files


def resolve_source(source: str | os.PathLike[str], revision: str | None = None) -> Path:
    """A local folder as is, or a Hub dataset id downloaded with ``snapshot_download``."""
    path = Path(source)
    if path.exists():
        if not path.is_dir():
            raise DataError(f"--source {source}: not a folder")
        return path
    if re.fullmatch(r"[\w.-]+/[\w.-]+", str(source)):
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

        try:
            return Path(snapshot_download(repo_id=str(source), repo_type="dataset", revision=revision))
        except (HfHubHTTPError, LocalEntryNotFoundError, OSError) as exc:
            raise DataError(
                f"--source {source}: not a local folder, and the Hub dataset could not be fetched "
                f"({type(exc).__name__}); pass the folder holding the QATD-2k files"
            ) from None
    raise DataError(f"--source {source}: no such folder")


def _read_table(root: Path, rel: str, required: Sequence[str]) -> pd.DataFrame:
    path = root / rel
    if not path.is_file():
        parquet = path.with_suffix(".parquet")
        if parquet.is_file():
            path = parquet
        else:
            raise DataError(f"{path}: missing file (expected the QATD-2k layout)")
    try:
        df = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError) as exc:
        raise DataError(f"{path}: cannot be read as a table ({exc})") from None
    # Older parquet copies name the tutor column UserId.
    if "TutorId" not in df.columns and "UserId" in df.columns:
        df = df.rename(columns={"UserId": "TutorId"})
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise DataError(f"{path}: missing column(s) {', '.join(missing)}; found {', '.join(map(str, df.columns))}")
    return df


def _as_int(df: pd.DataFrame, column: str, path: str) -> pd.Series:
    values = pd.to_numeric(df[column], errors="coerce")
    bad = values.isna() | (values != values.round())
    if bad.any():
        row = int(bad.to_numpy().nonzero()[0][0])
        raise DataError(f"{path}: column {column}, row {row + 2}: expected an integer, got {df[column].iloc[row]!r}")
    return values.astype("int64")


def _questions(root: Path) -> dict[tuple[int, int], str]:
    df = _read_table(root, METADATA_FILE, METADATA_COLUMNS)
    qids = _as_int(df, "QuestionId_DQ", METADATA_FILE)
    iids = _as_int(df, "InterventionId", METADATA_FILE)
    lines: dict[tuple[int, int], list[str]] = {}
    for q, i, label, text in zip(qids, iids, df["Label"], df["Text"], strict=True):
        lines.setdefault((int(q), int(i)), []).append(f"{label}: {clean_text(text)}")
    return {key: "\n".join(v) for key, v in lines.items()}


def _subjects(root: Path) -> dict[int, list[str]]:
    df = _read_table(root, SUBJECTS_FILE, SUBJECT_COLUMNS)
    iids = _as_int(df, "InterventionId", SUBJECTS_FILE)
    levels = pd.to_numeric(df["SubjectLevel"], errors="coerce")
    kcs: dict[int, list[str]] = {}
    for i, level, name in zip(iids, levels, df["SubjectName"], strict=True):
        if level == 3 and isinstance(name, str):
            names = kcs.setdefault(int(i), [])
            if name not in names:
                names.append(name)
    return kcs


def _dialogues(root: Path, rel: str, questions: dict, subjects: dict) -> list[Dialogue]:
    df = _read_table(root, rel, MESSAGE_COLUMNS)
    df = df.assign(
        QuestionId_DQ=_as_int(df, "QuestionId_DQ", rel),
        InterventionId=_as_int(df, "InterventionId", rel),
        IsTutor=_as_int(df, "IsTutor", rel),
    )
    bad_role = ~df["IsTutor"].isin((0, 1))
    if bad_role.any():
        row = int(bad_role.to_numpy().nonzero()[0][0])
        raise DataError(f"{rel}: column IsTutor, row {row + 2}: expected 0 or 1, got {df['IsTutor'].iloc[row]}")
    dialogues = []
    # groupby sorts keys ascending and keeps file order inside each group (rules 1 and 3).
    for (qid, iid), group in df.groupby(["QuestionId_DQ", "InterventionId"], sort=True):
        messages = [
            ("tutor" if is_tutor == 1 else "student", clean_text(text))
            for is_tutor, text in zip(group["IsTutor"], group["MessageString"], strict=True)
        ]
        key = (int(qid), int(iid))
        dialogues.append(
            Dialogue(
                id=f"{key[0]}-{key[1]}",
                question=Question(text=questions.get(key, "")),
                kcs=list(subjects.get(key[1], [])),
                turns=merge_messages(messages),
            )
        )
    return dialogues


def split_train_val(dialogues: Sequence[Dialogue], seed: int = SPLIT_SEED) -> tuple[list[Dialogue], list[Dialogue]]:
    """Rule 6: shuffle with ``random.Random(seed)``; the first ``int(0.75 n)`` are train."""
    shuffled = list(dialogues)
    random.Random(seed).shuffle(shuffled)
    cut = int(TRAIN_FRACTION * len(shuffled))
    return shuffled[:cut], shuffled[cut:]


# --------------------------------------------------------------------------- annotations


def _literal(cell: Any, where: str) -> Any:
    if cell is None or (isinstance(cell, float) and math.isnan(cell)):
        return None
    text = str(cell).strip()
    if text in ("", "None", "nan"):
        return None
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        raise DataError(f"{where}: malformed annotation cell (not a Python literal): {text[:80]!r}") from None


def _turn_map(value: Any, where: str, dialogue: Dialogue, role: str) -> dict[int, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise DataError(f"{where}: expected a dict keyed 'turn N', got {type(value).__name__}")
    out = {}
    for key, item in value.items():
        match = _TURN_KEY.match(str(key).strip().lower())
        if not match:
            raise DataError(f"{where}: key {key!r} is not of the form 'turn N'")
        index = int(match.group(1)) - 1
        if not 0 <= index < len(dialogue.turns):
            raise DataError(
                f"{where}: key {key!r} names a turn that does not exist (dialogue {dialogue.id} has {len(dialogue.turns)} turns)"
            )
        if dialogue.turns[index].role != role:
            raise DataError(f"{where}: key {key!r} is a {dialogue.turns[index].role} turn, expected a {role} turn")
        out[index] = item
    return out


def _label(value: Any, labels: Sequence[str], where: str) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    for label in labels:
        if text.lower() == label.lower():
            return label
    raise DataError(f"{where}: {text!r} is not one of {', '.join(labels)}")


def _option(value: Any, where: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 4:
        return OPTIONS[value - 1]
    text = str(value).strip().upper().removeprefix("OPTION ").strip()
    if text in OPTIONS:
        return text
    if text.isdigit() and 1 <= int(text) <= 4:
        return OPTIONS[int(text) - 1]
    raise DataError(f"{where}: correct option {value!r} is not 1-4 or A-D")


def _question_annotation(value: Any, question: Question, where: str) -> Question:
    if value is None:
        return question
    if not isinstance(value, dict):
        raise DataError(f"{where}: expected a dict, got {type(value).__name__}")
    explanations = value.get("option_explanations", value.get("explanations"))
    if isinstance(explanations, (list, tuple)):
        explanations = {OPTIONS[i]: str(e) for i, e in enumerate(explanations[:4])}
    elif isinstance(explanations, dict):
        explanations = {_option(k, where) or str(k): str(v) for k, v in explanations.items()}
    elif explanations is not None:
        raise DataError(f"{where}: option explanations must be a dict or a list")
    solvable = value.get("solvable")
    if solvable is not None and not isinstance(solvable, bool):
        raise DataError(f"{where}: solvable must be True or False, got {solvable!r}")
    solution = value.get("solution")
    return Question(
        text=question.text,
        correct_option=_option(value.get("correct_option", value.get("correct_answer")), where),  # type: ignore[arg-type]
        solution=None if solution is None else str(solution),
        option_explanations=explanations,
        solvable=solvable,
    )


def _persona(value: Any, where: str) -> Persona | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise DataError(f"{where}: expected a dict of OCEAN traits, got {type(value).__name__}")
    lowered = {str(k).strip().lower(): v for k, v in value.items()}
    traits = {}
    for trait in OCEAN_TRAITS:
        if trait not in lowered:
            raise DataError(f"{where}: missing trait {trait!r}")
        traits[trait] = _label(lowered[trait], ("low", "neutral", "high"), f"{where} ({trait})")
    return Persona(**traits)


def annotate_dialogue(dialogue: Dialogue, row: dict[str, Any], where: str) -> Dialogue:
    """Attach one annotation row to a dialogue (returns a new Dialogue)."""
    cells = {c: _literal(row.get(c), f"{where}, column {c}") for c in ANNOTATION_COLUMNS}
    turns = [Turn(role=t.role, content=t.content) for t in dialogue.turns]
    for index, act in _turn_map(cells["acts"], f"{where}, column acts", dialogue, "student").items():
        turns[index].act = _label(act, ACTS, f"{where}, column acts, turn {index + 1}")  # type: ignore[assignment]
    for index, label in _turn_map(cells["correctness"], f"{where}, column correctness", dialogue, "student").items():
        turns[index].correctness = _label(label, CORRECTNESS_LABELS, f"{where}, column correctness, turn {index + 1}")  # type: ignore[assignment]
    for index, kcs in _turn_map(cells["eedi_kcs"], f"{where}, column eedi_kcs", dialogue, "tutor").items():
        if kcs is None:
            continue
        if isinstance(kcs, str):
            kcs = [kcs]
        if not isinstance(kcs, (list, tuple)):
            raise DataError(f"{where}, column eedi_kcs, turn {index + 1}: expected a list of KC names")
        turns[index].kcs = [str(k) for k in kcs]
    profile = cells["freeform_persona"]
    if profile is not None and not isinstance(profile, str):
        profile = str(profile)
    return Dialogue(
        id=dialogue.id,
        question=_question_annotation(cells["question_annotation"], dialogue.question, f"{where}, column question_annotation"),
        kcs=dialogue.kcs,
        persona=_persona(cells["ocean_persona"], f"{where}, column ocean_persona"),
        profile=profile,
        turns=turns,
    )


def apply_annotations(dialogues: list[Dialogue], path: Path) -> list[Dialogue]:
    """Annotate ``dialogues`` from one released annotation CSV (rows in split order or with ``id``)."""
    if not path.is_file():
        raise DataError(f"{path}: missing annotation file")
    try:
        df = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise DataError(f"{path}: cannot be read as CSV ({exc})") from None
    missing = [c for c in ANNOTATION_COLUMNS if c not in df.columns]
    if missing:
        raise DataError(f"{path}: missing column(s) {', '.join(missing)}")
    rows = df.to_dict("records")
    if "id" in df.columns:
        by_id = {}
        for n, row in enumerate(rows):
            by_id[row["id"]] = (n, row)
        out = []
        for d in dialogues:
            if d.id not in by_id:
                out.append(d)  # not annotated: every annotation is null
                continue
            n, row = by_id[d.id]
            out.append(annotate_dialogue(d, row, f"{path}, row {n + 2}"))
        return out
    if len(rows) != len(dialogues):
        raise DataError(
            f"{path}: {len(rows)} annotation rows for {len(dialogues)} dialogues; rows must follow the split order "
            "(or add an 'id' column)"
        )
    return [annotate_dialogue(d, row, f"{path}, row {n + 2}") for n, (d, row) in enumerate(zip(dialogues, rows, strict=True))]


# --------------------------------------------------------------------------- entry point


def load_eedi(
    source: str | os.PathLike[str] = HUB_DATASET_ID,
    annotations: str | os.PathLike[str] | None = None,
    *,
    revision: str | None = None,
    seed: int = SPLIT_SEED,
    drop_unsolvable: bool = True,
) -> EediCorpus:
    """Load QATD-2k from a local folder or the Hub and return train/val/test dialogues.

    ``annotations`` is a folder with ``train.csv``, ``val.csv`` and ``test.csv`` in the released
    annotation format; without it the dialogues carry no labels and nothing is dropped.
    """
    root = resolve_source(source, revision)
    questions = _questions(root)
    subjects = _subjects(root)
    train_all = _dialogues(root, DIALOGUE_FILES["train"], questions, subjects)
    test = _dialogues(root, DIALOGUE_FILES["test"], questions, subjects)
    train, val = split_train_val(train_all, seed)
    splits = {"train": train, "val": val, "test": test}
    dropped = dict.fromkeys(SPLITS, 0)
    if annotations is not None:
        ann_root = Path(annotations)
        if not ann_root.is_dir():
            raise DataError(f"--annotations {annotations}: no such folder")
        for name in SPLITS:
            splits[name] = apply_annotations(splits[name], ann_root / f"{name}.csv")
            if drop_unsolvable:
                kept = [d for d in splits[name] if d.question.solvable is not False]
                dropped[name] = len(splits[name]) - len(kept)
                splits[name] = kept
    return EediCorpus(splits=splits, dropped_unsolvable=dropped)
