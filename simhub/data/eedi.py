"""Loader for Eedi's Question-Anchored Tutoring Dialogues 2k (QATD-2k) and its released annotations.

Reproduces the processing rules of the paper's reference code (docs/protocol.md §2):

1. a dialogue is the rows sharing ``(QuestionId_DQ, InterventionId)``; dialogues are ordered
   by that key ascending, messages keep file order (``MessageSequence`` is not used);
2. message text: newlines to spaces, stripped; a missing message becomes ``"nan"``;
3. consecutive messages of one role merge into one turn (a ``.`` is added when the text so far
   does not end in ``.``, ``!`` or ``?``);
4. the question text is ``"{Label}: {Text}"`` of its metadata rows in file order, joined by newlines;
5. KCs are the intervention's level-3 subject names (``Default`` is implied);
6. ``train.csv`` dialogues are shuffled with ``random.Random(221)``; the first 75 % are train,
   the rest validation; ``test.csv`` is test;
7. with annotations, a dialogue is kept only if its question annotation exists and says solvable;
   the split is made first, so it does not depend on the annotations (docs/protocol.md §8: the published
   1,147 / 382 fit only split-then-drop).

The annotations are the authors' released files (``{split}_gpt-4.1.csv``, read by
:mod:`simhub.data.annotations`). They hold the dialogues as well, so either input alone is a
dataset: raw files alone give unlabelled dialogues, annotation files alone give the labelled
dialogues with the split the files define, and both together check that the two agree.
"""

from __future__ import annotations

import os
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from simhub.data.annotations import (
    DEFAULT_ANNOTATOR,
    LABELS,
    AnnotationRow,
    annotate,
    annotation_file,
    check_turns,
    read_annotation_file,
    row_dialogue,
)
from simhub.errors import ConfigError, DataError
from simhub.schema import Dialogue, Question, Turn

__all__ = [
    "DIALOGUE_FILES",
    "HUB_DATASET_ID",
    "SPLITS",
    "SPLIT_SEED",
    "DataError",
    "EediCorpus",
    "clean_text",
    "load_eedi",
    "merge_messages",
    "resolve_source",
    "split_train_val",
]

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


@dataclass
class EediCorpus:
    """The three processed splits plus the bookkeeping of what the annotations did to them.

    ``dropped_unsolvable``: dialogues dropped because their question was annotated unsolvable;
    ``dropped_unannotated``: dialogues dropped because their question annotation is missing (a
    failed cell, or no row at all); ``failed_labels[split][label]``: dialogues of the split's
    annotation file whose ``label`` (one of :data:`simhub.data.annotations.LABELS`) failed,
    counted before any drop, as the paper reports them. All zero without annotations.
    """

    splits: dict[str, list[Dialogue]]
    dropped_unsolvable: dict[str, int] = field(default_factory=dict)
    dropped_unannotated: dict[str, int] = field(default_factory=dict)
    failed_labels: dict[str, dict[str, int]] = field(default_factory=dict)
    annotation_files: dict[str, str] = field(default_factory=dict)  # split -> the file read

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
            raise DataError(f"source {source}: not a folder", file=str(source), field="source")
        return path
    if re.fullmatch(r"[\w.-]+/[\w.-]+", str(source)):
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

        try:
            return Path(snapshot_download(repo_id=str(source), repo_type="dataset", revision=revision))
        except (HfHubHTTPError, LocalEntryNotFoundError, OSError) as exc:
            raise DataError(
                f"source {source}: not a local folder, and the Hub dataset could not be fetched "
                f"({type(exc).__name__}); pass the folder holding the QATD-2k files",
                field="source",
            ) from None
    raise DataError(f"source {source}: no such folder", file=str(source), field="source")


def _read_table(root: Path, rel: str, required: Sequence[str]) -> pd.DataFrame:
    path = root / rel
    if not path.is_file():
        parquet = path.with_suffix(".parquet")
        if parquet.is_file():
            path = parquet
        else:
            raise DataError(f"{path}: missing file (expected the QATD-2k layout)", file=str(path))
    try:
        df = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError) as exc:
        raise DataError(f"{path}: cannot be read as a table ({exc})", file=str(path)) from None
    # Older parquet copies name the tutor column UserId.
    if "TutorId" not in df.columns and "UserId" in df.columns:
        df = df.rename(columns={"UserId": "TutorId"})
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise DataError(f"{path}: missing column(s) {', '.join(missing)}; found {', '.join(map(str, df.columns))}",
                        file=str(path), column=missing[0])
    df.attrs["path"] = str(path)
    return df


def _as_int(df: pd.DataFrame, column: str, path: str) -> pd.Series:
    values = pd.to_numeric(df[column], errors="coerce")
    bad = values.isna() | (values != values.round())
    if bad.any():
        row = int(bad.to_numpy().nonzero()[0][0])
        raise DataError(f"{path}: column {column}, row {row + 2}: expected an integer, got {df[column].iloc[row]!r}",
                        file=df.attrs.get("path", path), row=row + 2, column=column)
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
        raise DataError(f"{rel}: column IsTutor, row {row + 2}: expected 0 or 1, got {df['IsTutor'].iloc[row]}",
                        file=df.attrs.get("path", rel), row=row + 2, column="IsTutor")
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


# --------------------------------------------------------------------------- entry point


def _raw_splits(source: str | os.PathLike[str], revision: str | None, seed: int) -> dict[str, list[Dialogue]]:
    root = resolve_source(source, revision)
    questions = _questions(root)
    subjects = _subjects(root)
    train_all = _dialogues(root, DIALOGUE_FILES["train"], questions, subjects)
    test = _dialogues(root, DIALOGUE_FILES["test"], questions, subjects)
    train, val = split_train_val(train_all, seed)
    return {"train": train, "val": val, "test": test}


def _read_annotations(
    annotations: str | os.PathLike[str], annotator: str
) -> tuple[dict[str, str], dict[str, list[AnnotationRow]]]:
    """All three annotation files, read and checked (columns, unique keys, within and across files)."""
    folder = Path(annotations)
    if not folder.is_dir():
        raise DataError(f"annotations {annotations}: no such folder", file=str(annotations), field="annotations")
    files = {split: str(annotation_file(folder, split, annotator)) for split in SPLITS}
    rows = {split: read_annotation_file(files[split]) for split in SPLITS}
    first: dict[tuple[int, int], AnnotationRow] = {}
    for split in SPLITS:
        for row in rows[split]:
            if row.key in first:
                other = first[row.key]
                raise row.error("key", f"key {row.key} is also in {other.file}, row {other.row}: a dialogue "
                                       "belongs to one split")
            first[row.key] = row
    return files, rows


def _match_raw(
    splits: dict[str, list[Dialogue]], rows: dict[str, list[AnnotationRow]]
) -> dict[str, dict[str, AnnotationRow]]:
    """Match annotation rows to raw dialogues by key; the split of the raw data must be the file's."""
    where = {d.id: (split, d) for split in SPLITS for d in splits[split]}
    matched: dict[str, dict[str, AnnotationRow]] = {split: {} for split in SPLITS}
    for split in SPLITS:
        for row in rows[split]:
            if row.dialogue_id not in where:
                raise row.error("key", f"key {row.key} is not a dialogue of the raw data")
            raw_split, dialogue = where[row.dialogue_id]
            if raw_split != split:
                raise row.error(
                    "key", f"key {row.key} is in the {raw_split} split of the raw data, not in {split} (was the "
                           "split made with another seed?)"
                )
            check_turns(row, dialogue)
            matched[split][dialogue.id] = row
    return matched


def load_eedi(
    source: str | os.PathLike[str] | None = None,
    annotations: str | os.PathLike[str] | None = None,
    *,
    annotator: str = DEFAULT_ANNOTATOR,
    revision: str | None = None,
    seed: int = SPLIT_SEED,
    drop_unsolvable: bool = True,
) -> EediCorpus:
    """Load QATD-2k as train/val/test dialogues, from the raw files, the released annotations, or both.

    ``source`` is a folder with the raw QATD-2k files or a Hub dataset id (:data:`HUB_DATASET_ID`);
    ``annotations`` is a folder with ``{split}_{annotator}.csv`` (or ``{split}.csv``) in the released
    layout. With both, every annotation row must name a dialogue of the same split of the raw data
    and carry exactly its turns. With annotations alone the files are the dataset and each file is
    its split. With ``drop_unsolvable`` (and annotations), only dialogues whose question annotation
    exists and says solvable are kept. Everything is checked before anything is returned.
    """
    if source is None and annotations is None:
        raise ConfigError("source: give the raw QATD-2k files, the annotation files, or both", field="source")
    files: dict[str, str] = {}
    rows: dict[str, list[AnnotationRow]] | None = None
    if annotations is not None:
        files, rows = _read_annotations(annotations, annotator)
    matched: dict[str, dict[str, AnnotationRow]] | None = None
    if source is not None:
        splits = _raw_splits(source, revision, seed)
        if rows is not None:
            matched = _match_raw(splits, rows)
    else:
        assert rows is not None  # one of the two is given
        splits = {split: [row_dialogue(row) for row in rows[split]] for split in SPLITS}
        matched = {split: {row.dialogue_id: row for row in rows[split]} for split in SPLITS}
    corpus = EediCorpus(
        splits=splits,
        dropped_unsolvable=dict.fromkeys(SPLITS, 0),
        dropped_unannotated=dict.fromkeys(SPLITS, 0),
        failed_labels={split: dict.fromkeys(LABELS, 0) for split in SPLITS},
        annotation_files=files,
    )
    if matched is None:
        return corpus
    for split in SPLITS:
        kept = []
        for dialogue in splits[split]:
            row = matched[split].get(dialogue.id)
            if row is None:  # no row: nothing is known about it, not even its question
                if drop_unsolvable:
                    corpus.dropped_unannotated[split] += 1
                else:
                    kept.append(dialogue)
                continue
            dialogue = annotate(dialogue, row)
            for label in dialogue.failed_labels:
                corpus.failed_labels[split][label] += 1
            if drop_unsolvable and "question" in dialogue.failed_labels:
                corpus.dropped_unannotated[split] += 1
            elif drop_unsolvable and not dialogue.question.solvable:
                corpus.dropped_unsolvable[split] += 1
            else:
                kept.append(dialogue)
        splits[split] = kept
    return corpus
