"""The files of a ``simhub eval`` run directory and of a ``simhub rollout`` folder, one versioned
msgspec struct each.

* ``results.json``: :class:`EvalResults` (the summary: simulator, profile, data, one
  :class:`MetricSummary` per metric, failures, configuration).
* ``scores.jsonl``: one :class:`ScoreLine` a line (a real student turn, the simulated one, their scores).
* ``simulations.jsonl``: one :class:`SimulationLine` a line (the raw generation of a real student
  turn); the output of ``simhub simulate`` is the same file.
* ``dialogue_results.json``: :class:`DialogueLevelResults` (dialogue-level realism, from
  ``simhub eval-dialogues``).
* ``rollouts.jsonl`` of ``simhub rollout``: one :class:`RolloutLine` a line (a whole simulated
  dialogue), and ``rollout.json``: :class:`RolloutSummary` (what was rolled out, counts, failures).

Every struct starts with ``schema_version`` (:data:`RUN_FORMAT_VERSION`; in a JSONL file every
line carries it). A file without the field was written before versioning; it has the same layout and
is read as version 0. The writers (``simhub eval``, ``simhub simulate``, ``simhub eval-dialogues``,
``simhub rollout``) and the checked readers (``simhub report``, ``simhub compare``, ``simhub publish
--results``, ``simhub eval-dialogues --sim``, the exit status of ``simhub eval``) all go through this
module. A file of a version this simhub does not read is refused with a message naming the file, its
version and the versions read here; any other mismatch is a :class:`~simhub.errors.DataError` naming
the file (the line of a JSONL file) and the field path (``metrics.acts.ci95``).

A line of ``rollouts.jsonl`` is a canonical :class:`~simhub.schema.Dialogue` (``meta`` holds the
rollout's provenance) with ``schema_version`` as its first key, not a wrapper around one, so that the
file stays a dialogue file that every command reading dialogues accepts (``simhub eval --data``,
``simhub data items``, ``simhub eval-dialogues --sim``). :class:`RolloutLine` has the dialogue's
fields after ``schema_version`` (a test keeps the two in step), and the dialogue reader
(:func:`simhub.schema.iter_jsonl`) accepts the key on a dialogue line, checks it like this module's
readers and drops it: a dialogue read from any file is a plain ``Dialogue``. A wrapper line
(``{"schema_version", "dialogue"}``) would have made rollouts unreadable as dialogues, and a version
field on ``Dialogue`` itself would have carried a run file's version into every dialogue and data file
written from it.

:func:`simhub.versions.check_version` and :func:`convert_checked` are the same two steps for any
versioned file (the tutor-bench traces and results use them too). The version check and the run
files' version numbers live in :mod:`simhub.versions`, below this module and :mod:`simhub.schema`,
so that the dialogue reader checks a rollout line's version without importing this module.
"""

from __future__ import annotations

import json
import os
import re
import types
import typing
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import msgspec
from msgspec import UNSET, UnsetType

from simhub.errors import DataError
from simhub.schema import Dialogue, Persona, Question, Turn, atomic_write_bytes
from simhub.versions import RUN_FORMAT_READS, RUN_FORMAT_VERSION, check_version

#: The files of a run directory.
RESULTS_FILE = "results.json"
SCORES_FILE = "scores.jsonl"
DIALOGUE_RESULTS_FILE = "dialogue_results.json"
SIMULATIONS_FILE = "simulations.jsonl"
#: The files of a ``simhub rollout`` folder.
ROLLOUTS_FILE = "rollouts.jsonl"
ROLLOUT_SUMMARY_FILE = "rollout.json"

#: A count: a non-negative integer.
Count = Annotated[int, msgspec.Meta(ge=0)]

S = TypeVar("S", bound=msgspec.Struct)

# --------------------------------------------------------------------------------------- results.json


class MetricSummary(msgspec.Struct, forbid_unknown_fields=True):
    """One metric of ``results.json``: mean, std and n over the turns where it applies, and the 95%
    interval. ``extra`` holds whatever else the metric reports (``qwk``, ``cutoff_source``,
    ``nulls``...); in the file those are keys of the entry beside the four."""

    mean: float | None = None
    std: float | None = None
    n: Count | None = None
    ci95: tuple[float, float] | None = None
    extra: dict[str, Any] = {}


_SUMMARY_KEYS = ("mean", "std", "n", "ci95")


class DataInfo(msgspec.Struct, forbid_unknown_fields=True):
    """What data a run was evaluated on; the sha256 tells whether two runs saw the same file."""

    path: str | None = None
    sha256: str | None = None
    dialogues: Count | None = None
    turns: Count | None = None
    #: The fraction of the reference's random subsample, when the run evaluated one (absent otherwise).
    test_subsample: float | UnsetType = UNSET


class Failures(msgspec.Struct, forbid_unknown_fields=True):
    """Turns that could not be simulated, and per metric the turns whose scoring failed."""

    simulation: Count = 0
    scoring: dict[str, Count] = {}


class EvalResults(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """``results.json`` of a ``simhub eval`` run."""

    schema_version: int = RUN_FORMAT_VERSION
    simulator: Annotated[str, msgspec.Meta(min_length=1)]
    profile: str | None = None
    data: DataInfo = msgspec.field(default_factory=DataInfo)
    metrics: dict[str, MetricSummary]
    failures: Failures = msgspec.field(default_factory=Failures)
    config: dict[str, Any] = {}
    simhub_version: str | None = None
    created: str | None = None


# --------------------------------------------------------------------------------------- scores.jsonl


class ScoreLine(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """One line of ``scores.jsonl``: a real student turn, the simulated one, and their scores."""

    schema_version: int = RUN_FORMAT_VERSION
    dialogue_id: str | int
    turn_index: Count
    #: The turn's rank among the dialogue's scored student turns (files of early versions lack it).
    position: Count | None = None
    real: str | None = None
    candidate: str | None = None
    scores: dict[str, float | None] = {}
    details: dict[str, Any] = {}
    #: Why the turn was not simulated or scored; absent from the line when nothing failed.
    error: str | UnsetType | None = UNSET


# ---------------------------------------------------------------------------------- simulations.jsonl


class SimulationLine(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """One line of ``simulations.jsonl`` (and of ``simhub simulate``'s output): what the simulator
    generated for a real student turn, or why it generated nothing."""

    schema_version: int = RUN_FORMAT_VERSION
    dialogue_id: str
    turn_index: Count
    simulator: str
    #: The simulated turn; null when the simulator failed on it.
    candidate: str | None
    #: ``stop`` (the end of the turn or of the dialogue) or ``length``; absent when the simulator failed.
    finish_reason: str | UnsetType | None = UNSET
    #: Whether the simulated student ended the dialogue; absent when the simulator failed.
    end_of_dialogue: bool | UnsetType = UNSET
    #: Why the turn was not simulated; absent from the line when it was.
    error: str | UnsetType = UNSET


# ------------------------------------------------------------------------------ dialogue_results.json


class DialogueStatistic(msgspec.Struct, forbid_unknown_fields=True):
    """One dialogue-level realism number with its interval and the number of dialogues."""

    value: float | None = None
    ci95: tuple[float, float] | None = None
    n: Count | None = None


class DialogueLevelResults(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """``dialogue_results.json`` of ``simhub eval-dialogues``: what was compared, one
    :class:`DialogueStatistic` per statistic, and what stands behind them."""

    schema_version: int = RUN_FORMAT_VERSION
    kind: str | None = None
    real: str | None = None
    sim: str | None = None
    profile: str | None = None
    simulator: str | None = None
    tutor: str | None = None
    metrics: dict[str, DialogueStatistic] = {}
    #: Why a statistic is null, for the report (files of early versions lack it).
    null_reasons: dict[str, str] = {}
    details: dict[str, Any] = {}
    stability_sd: dict[str, float | None] = {}
    failed_rollouts: Count = 0
    failures: list[dict[str, Any]] = []
    real_dialogues: Count | None = None
    sim_dialogues: Count | None = None
    samples: Count | None = None
    bootstrap: dict[str, Any] = {}
    figures: dict[str, Any] = {}


# ----------------------------------------------------------------------- rollouts.jsonl, rollout.json


class RolloutLine(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """One line of ``rollouts.jsonl``: ``schema_version``, then a :class:`~simhub.schema.Dialogue`'s
    fields, encoded as the dialogue is (defaults left out), so that the line is the canonical
    dialogue with one key in front. ``meta`` holds the rollout's provenance: ``real_id``,
    ``sample``, ``seed``, ``mode``, ``simulator``, ``tutor``, ``end`` and, for a failed rollout,
    ``failed`` (the cause).

    ``schema_version`` has no default here: the dialogue's layout leaves out a field equal to its
    default, and the version must always be written (:meth:`of` stamps the current one)."""

    schema_version: int
    id: str
    question: Question
    kcs: list[str] = msgspec.field(default_factory=list)
    persona: Persona | None = None
    profile: str | None = None
    turns: list[Turn] = msgspec.field(default_factory=list)
    failed_labels: list[str] = msgspec.field(default_factory=list)
    meta: dict[str, Any] = msgspec.field(default_factory=dict)

    @classmethod
    def of(cls, dialogue: Dialogue) -> RolloutLine:
        """The line that writes ``dialogue``, at :data:`RUN_FORMAT_VERSION`."""
        return cls(schema_version=RUN_FORMAT_VERSION,
                   **{name: getattr(dialogue, name) for name in Dialogue.__struct_fields__})

    def dialogue(self) -> Dialogue:
        """The line's dialogue, without the version."""
        return Dialogue(**{name: getattr(self, name) for name in Dialogue.__struct_fields__})


class RolloutFailure(msgspec.Struct, forbid_unknown_fields=True):
    """A failed rollout of ``rollout.json``: the simulated dialogue's id and the cause."""

    id: str
    cause: str


class RolloutSummary(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """``rollout.json`` of ``simhub rollout``: what was rolled out (simulator, tutor, profile, data and
    the sampling settings), how many rollouts, how they ended and which failed (the first 50)."""

    schema_version: int = RUN_FORMAT_VERSION
    simulator: str | None = None
    tutor: str | None = None
    profile: str | None = None
    data: str | None = None
    mode: str | None = None
    samples: Count | None = None
    seed: int | None = None
    max_turns: Count | None = None
    temperature: float | None = None
    #: Files of early versions lack it.
    top_p: float | None = None
    #: The fraction of the reference's random subsample, or null (files of early versions lack it).
    test_subsample: float | None = None
    rollouts: Count
    #: How many rollouts ended each way (``marker``, ``max_turns``, ``real_length``, ``failed``).
    ends: dict[str, Count] = {}
    failed: Count = 0
    failures: list[RolloutFailure] = []
    mean_turns: float = 0.0


# ------------------------------------------------------------------------------------ version, errors


_AT = re.compile(r" - at `(\$[^`]*)`$")
_SEGMENT = re.compile(r"\.([^.\[]+)|\[(\d+|\.\.\.)\]")
_NAMED = re.compile(r"Object (missing required|contains unknown) field `([^`]+)`")
_WORDS = {"float": "a number", "int": "an integer", "str": "a string", "null": "null", "object": "a JSON object",
          "array": "an array", "bool": "true or false"}


def _unwrap(tp: Any) -> Any:
    """``Annotated[T, ...]`` and ``T | None`` (or unset) as T."""
    while True:
        origin = typing.get_origin(tp)
        if origin is Annotated:
            tp = typing.get_args(tp)[0]
        elif origin in (typing.Union, types.UnionType):
            members = [a for a in typing.get_args(tp) if a not in (type(None), UnsetType)]
            if len(members) != 1:
                return tp
            tp = members[0]
        else:
            return tp


def _field_path(raw: Any, tp: Any, path: str) -> str:
    """msgspec's error path as a field path with the keys filled in: ``$.metrics[...].mean`` of
    ``{"metrics": {"acts": ...}}`` is ``metrics.acts.mean`` (msgspec does not name a mapping's keys,
    so the first entry that does not convert is the one)."""
    out = ""
    value = raw
    for match in _SEGMENT.finditer(path[1:]):
        name, index = match.groups()
        tp = _unwrap(tp)
        if name is not None:
            out += f".{name}" if out else name
            fields = msgspec.structs.fields(tp) if isinstance(tp, type) and issubclass(tp, msgspec.Struct) else ()
            tp = next((f.type for f in fields if f.encode_name == name), Any)
            value = value.get(name) if isinstance(value, dict) else None
        elif index == "...":
            args = typing.get_args(tp) if typing.get_origin(tp) is dict else ()
            item = args[1] if len(args) == 2 else Any
            key = _failing_key(value, item)
            out += ("." if out else "") + (key if key is not None else "[...]")
            value, tp = (value[key] if key is not None else None), item
        else:
            i = int(index)
            out += f"[{i}]"
            args = typing.get_args(tp)
            if typing.get_origin(tp) is tuple and args:
                tp = args[0] if len(args) == 2 and args[1] is Ellipsis else (args[i] if i < len(args) else Any)
            else:
                tp = args[0] if typing.get_origin(tp) is list and args else Any
            value = value[i] if isinstance(value, list) and i < len(value) else None
    return out


def _failing_key(value: Any, item: Any) -> str | None:
    if not isinstance(value, dict) or item is Any:
        return None
    for key, entry in value.items():
        try:
            msgspec.convert(entry, item)
        except msgspec.ValidationError:
            return str(key)
    return None


def _words(text: str) -> str:
    text = re.sub(r"`([^`]*)`", lambda m: " or ".join(_WORDS.get(t.strip(), t.strip()) for t in m.group(1).split("|")),
                  text)
    return text[:1].lower() + text[1:]


def convert_checked(raw: Any, type: type[S], where: str, *, file: str | None = None, row: int | None = None,
                    version: int | None = None) -> S:
    """``raw`` (decoded JSON) as ``type``; a mismatch is a DataError ``WHERE: FIELD.PATH: what is wrong``
    with ``field`` the path (``$`` for the whole document). ``version``, when given, is named too."""
    try:
        return msgspec.convert(raw, type)
    except msgspec.ValidationError as exc:
        text = str(exc)
        at = _AT.search(text)
        path, text = (at.group(1), text[: at.start()]) if at else ("$", text)
        field = _field_path(raw, type, path)
        named = _NAMED.fullmatch(text)
        if named:
            field = f"{field}.{named.group(2)}" if field else named.group(2)
            message = "missing (a required field)" if named.group(1) == "missing required" else "unknown field"
        else:
            message = _words(text)
        suffix = "" if version is None else f" (read as schema_version {version})" if not version else (
            f" (schema_version {version})")
        field = field or "$"
        raise DataError(f"{where}: {field}: {message}{suffix}", file=file, row=row, field=field) from None


def _json_type(value: Any) -> str:
    return {dict: "a JSON object", list: "an array", str: "a string", bool: "true or false",
            type(None): "null"}.get(type(value), "a number")


_NOT_A_RUN = "not found; is this a simhub eval run directory?"
_NOT_A_ROLLOUT = "not found; is this a simhub rollout folder?"


def _read_text(file: Path, missing: str = _NOT_A_RUN) -> str:
    try:
        return file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DataError(f"{file}: {missing}", file=str(file)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"{file}: cannot be read ({exc})", file=str(file)) from None


def _loads(text: str, file: Path, row: int | None = None) -> Any:
    """JSON as the writers of every version wrote it (Python's json: NaN and Infinity are read)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        line = row if row is not None else exc.lineno
        raise DataError(f"{file}:{line}: invalid JSON ({exc.msg}, column {exc.colno})", file=str(file),
                        row=line) from None


def _decode(raw: Any, type: type[S], file: Path, row: int | None = None) -> S:
    where = f"{file}:{row}" if row is not None else str(file)
    if not isinstance(raw, dict):
        raise DataError(f"{where}: $: expected a JSON object, got {_json_type(raw)}", file=str(file), row=row,
                        field="$")
    version = check_version(raw.get("schema_version"), RUN_FORMAT_READS, where, file=str(file), row=row)
    return convert_checked({**raw, "schema_version": version}, type, where, file=str(file), row=row, version=version)


# ----------------------------------------------------------------------------------------- reading


def read_document(path: str | os.PathLike[str], type: type[S], kind: str, versions: tuple[int, ...],
                  what: str, not_it: str, *, unversioned: bool = False) -> S:
    """A versioned JSON document (``kind``, ``schema_version``: the tutor bench's traces and results) decoded into ``type``; a DataError
    naming the file when it cannot be read, is not JSON, is another ``kind`` ("``path``: not_it") or
    another version. ``unversioned``: an object with neither field was written before the file had
    them, and reads as version 0 of ``kind``."""
    path = Path(path)
    try:
        raw = msgspec.json.decode(path.read_bytes())
    except OSError as exc:
        raise DataError(f"{path}: cannot read ({exc.strerror})", file=str(path)) from None
    except msgspec.DecodeError as exc:
        raise DataError(f"{path}: not JSON ({exc})", file=str(path)) from None
    if unversioned and isinstance(raw, dict) and "schema_version" not in raw and "kind" not in raw:
        raw = {**raw, "schema_version": 0, "kind": kind}
    if not isinstance(raw, dict) or raw.get("kind") != kind:
        raise DataError(f"{path}: {not_it}", file=str(path), field="kind")
    version = check_version(raw.get("schema_version"), versions, str(path), what=what, file=str(path))
    return convert_checked(raw, type, str(path), file=str(path), version=version)


def read_eval_results(path: str | os.PathLike[str]) -> EvalResults:
    """``results.json`` (or the one of a run directory), checked."""
    file = Path(path)
    if file.is_dir():
        file = file / RESULTS_FILE
    raw = _loads(_read_text(file), file)
    metrics = raw.get("metrics") if isinstance(raw, dict) else None
    if isinstance(metrics, dict):
        raw = {**raw, "metrics": {name: _nest_extra(entry) for name, entry in metrics.items()}}
    return _decode(raw, EvalResults, file)


def _nest_extra(entry: Any) -> Any:
    if not isinstance(entry, dict):
        return entry
    extra = {k: v for k, v in entry.items() if k not in _SUMMARY_KEYS}
    core = {k: entry[k] for k in _SUMMARY_KEYS if k in entry}
    return {**core, "extra": extra} if extra else core


def _read_lines(file: Path, type: type[S], missing: str = _NOT_A_RUN) -> list[tuple[int, S]]:
    """Every line of a JSONL file as ``type``, with its (1-based) line number; blank lines are skipped."""
    out = []
    for lineno, line in enumerate(_read_text(file, missing).splitlines(), 1):
        if line.strip():
            out.append((lineno, _decode(_loads(line, file, lineno), type, file, lineno)))
    return out


def read_scores(path: str | os.PathLike[str]) -> list[tuple[int, ScoreLine]]:
    """Every line of ``scores.jsonl`` with its (1-based) line number; blank lines are skipped."""
    return _read_lines(Path(path), ScoreLine)


def read_simulations(path: str | os.PathLike[str]) -> list[tuple[int, SimulationLine]]:
    """Every line of ``simulations.jsonl`` (or the one of a run directory, or ``simhub simulate``'s
    output) with its (1-based) line number; blank lines are skipped."""
    file = Path(path)
    if file.is_dir():
        file = file / SIMULATIONS_FILE
    return _read_lines(file, SimulationLine)


def read_dialogue_results(path: str | os.PathLike[str]) -> DialogueLevelResults:
    """``dialogue_results.json`` (or the one of a run directory), checked."""
    file = Path(path)
    if file.is_dir():
        file = file / DIALOGUE_RESULTS_FILE
    return _decode(_loads(_read_text(file), file), DialogueLevelResults, file)


def read_rollout_dialogues(path: str | os.PathLike[str]) -> list[Dialogue]:
    """The dialogues of ``rollouts.jsonl`` (or the one of a ``simhub rollout`` folder), checked."""
    file = Path(path)
    if file.is_dir():
        file = file / ROLLOUTS_FILE
    return [line.dialogue() for _, line in _read_lines(file, RolloutLine, _NOT_A_ROLLOUT)]


def read_rollout_summary(path: str | os.PathLike[str]) -> RolloutSummary:
    """``rollout.json`` (or the one of a ``simhub rollout`` folder), checked."""
    file = Path(path)
    if file.is_dir():
        file = file / ROLLOUT_SUMMARY_FILE
    return _decode(_loads(_read_text(file, _NOT_A_ROLLOUT), file), RolloutSummary, file)


# ----------------------------------------------------------------------------------------- writing


def _plain(obj: Any) -> Any:
    """Numbers of numpy (a float64 mean, a numpy QWK) as Python numbers."""
    if isinstance(obj, float):
        return float(obj)
    if isinstance(obj, int):
        return int(obj)
    item = getattr(obj, "item", None)
    if callable(item) and type(obj).__module__ == "numpy":
        return item()
    raise TypeError(f"cannot write {type(obj).__name__} into a run file")


def _document(obj: msgspec.Struct) -> dict[str, Any]:
    return msgspec.to_builtins(obj, enc_hook=_plain)


def _write_json(path: str | os.PathLike[str], document: dict[str, Any]) -> dict[str, Any]:
    """Write ``document`` atomically as indented JSON; returns what the file holds, as JSON values."""
    text = json.dumps(document, indent=2, ensure_ascii=False)
    atomic_write_bytes(path, text.encode() + b"\n")
    return json.loads(text)


def write_eval_results(path: str | os.PathLike[str], results: EvalResults) -> dict[str, Any]:
    """Write ``results.json`` atomically (each metric's ``extra`` beside its four numbers); returns
    what was written."""
    document = _document(results)
    for entry in document["metrics"].values():
        entry.update(entry.pop("extra", {}))
    return _write_json(path, document)


def _write_lines(path: str | os.PathLike[str], lines: Iterable[msgspec.Struct]) -> int:
    """Write one struct a line, atomically; returns the number of lines."""
    encoder = msgspec.json.Encoder(enc_hook=_plain)
    data = [encoder.encode(line) + b"\n" for line in lines]
    atomic_write_bytes(path, b"".join(data))
    return len(data)


def write_scores(path: str | os.PathLike[str], lines: Iterable[ScoreLine]) -> int:
    """Write ``scores.jsonl`` atomically; returns the number of lines."""
    return _write_lines(path, lines)


def write_simulations(path: str | os.PathLike[str], lines: Iterable[SimulationLine | dict[str, Any]]) -> int:
    """Write ``simulations.jsonl`` atomically; returns the number of lines. A line may be given as the
    record :func:`simhub.evaluation.runs.simulate` returns (a dict of the struct's fields)."""
    return _write_lines(path, (line if isinstance(line, SimulationLine) else msgspec.convert(line, SimulationLine)
                               for line in lines))


def write_rollout_dialogues(path: str | os.PathLike[str], dialogues: Iterable[Dialogue]) -> int:
    """Write ``rollouts.jsonl`` atomically, one :class:`RolloutLine` a dialogue; returns the number of lines."""
    return _write_lines(path, (RolloutLine.of(d) for d in dialogues))


def write_rollout_summary(path: str | os.PathLike[str], summary: RolloutSummary) -> dict[str, Any]:
    """Write ``rollout.json`` atomically; returns what was written."""
    return _write_json(path, _document(summary))


def write_dialogue_results(path: str | os.PathLike[str], results: DialogueLevelResults) -> dict[str, Any]:
    """Write ``dialogue_results.json`` atomically; returns what was written."""
    return _write_json(path, _document(results))
