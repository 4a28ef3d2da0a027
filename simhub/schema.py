"""The canonical dialogue format (docs/protocol.md §7) and its JSONL reader/writer.

Every part of simhub (the converter, training, scoring and the service) speaks these types.
They are ``msgspec`` structs so that decoding validates types and reports the exact field
that is wrong (``$.turns[3].role``).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Literal

import msgspec

from simhub.errors import SchemaError

Role = Literal["tutor", "student"]
Correctness = Literal["correct", "incorrect", "na"]
Level = Literal["low", "neutral", "high"]
Option = Literal["A", "B", "C", "D"]

#: The five student dialogue acts of the paper, in the order used by the act classifier.
ACTS: tuple[str, ...] = (
    "Math Answer",
    "Seek Information",
    "Not Understanding",
    "Acknowledge",
    "Off-Topic",
)
Act = Literal["Math Answer", "Seek Information", "Not Understanding", "Acknowledge", "Off-Topic"]
CORRECTNESS_LABELS: tuple[str, ...] = ("correct", "incorrect", "na")
OCEAN_TRAITS: tuple[str, ...] = ("openness", "conscientiousness", "extraversion", "agreeableness", "neuroticism")
OPTIONS: tuple[str, ...] = ("A", "B", "C", "D")
#: The catch-all knowledge component every dialogue has in addition to its level-3 subjects.
DEFAULT_KC = "Default"


class Question(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    text: str
    correct_option: Option | None = None
    solution: str | None = None
    option_explanations: dict[str, str] | None = None
    solvable: bool | None = None


class Persona(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """OCEAN persona: each trait is low, neutral or high."""

    openness: Level
    conscientiousness: Level
    extraversion: Level
    agreeableness: Level
    neuroticism: Level


class Turn(msgspec.Struct, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    role: Role
    content: str
    act: Act | None = None
    correctness: Correctness | None = None
    kcs: list[str] | None = None


class Dialogue(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """A tutoring dialogue. ``failed_labels`` names the annotation labels (``acts``, ``correctness``,
    ``kcs``, ``question``, ``ocean``, ``freeform``) whose annotation failed for this dialogue, so
    the turns that depend on them carry no label; ``meta`` holds provenance (e.g. of a rollout)."""

    id: str
    question: Question
    kcs: list[str] = msgspec.field(default_factory=list)
    persona: Persona | None = None
    profile: str | None = None
    turns: list[Turn] = msgspec.field(default_factory=list)
    failed_labels: list[str] = msgspec.field(default_factory=list)
    meta: dict[str, Any] = msgspec.field(default_factory=dict)

    @property
    def all_kcs(self) -> list[str]:
        """The dialogue's level-3 KCs plus the catch-all ``Default`` (evaluation KC set)."""
        return [*self.kcs, *([] if DEFAULT_KC in self.kcs else [DEFAULT_KC])]

    def student_turn_indices(self) -> list[int]:
        return [i for i, t in enumerate(self.turns) if t.role == "student"]

    def check_student_turn(self, index: int, field: str = "turn_index") -> Turn:
        """Return turn ``index`` if it exists and is a student turn, else raise SchemaError naming ``field``."""
        if isinstance(index, bool) or not isinstance(index, int):
            raise SchemaError(f"{field}: expected an integer, got {type(index).__name__}", field=field)
        if not 0 <= index < len(self.turns):
            raise SchemaError(
                f"{field}: {index} is out of range for dialogue {self.id!r} with {len(self.turns)} turns", field=field
            )
        turn = self.turns[index]
        if turn.role != "student":
            raise SchemaError(f"{field}: turn {index} of dialogue {self.id!r} is a tutor turn, not a student turn",
                              field=field)
        return turn


_encoder = msgspec.json.Encoder()


def to_json(obj: msgspec.Struct) -> bytes:
    return _encoder.encode(obj)


def to_builtins(obj: msgspec.Struct) -> dict:
    return msgspec.to_builtins(obj)


def dialogue_from_dict(data: object, where: str = "dialogue") -> Dialogue:
    """Validate a decoded JSON object as a Dialogue; errors name ``where`` and the field path."""
    try:
        return msgspec.convert(data, type=Dialogue)
    except msgspec.ValidationError as exc:
        raise SchemaError(f"{where}: {exc}") from None


def read_jsonl(path: str | os.PathLike[str]) -> list[Dialogue]:
    return list(iter_jsonl(path))


def iter_jsonl(path: str | os.PathLike[str], type: type = Dialogue) -> Iterator:
    """Yield validated records; a bad line raises SchemaError with ``file:line: message``.

    A dialogue line may start with ``schema_version``: a line of ``rollouts.jsonl``
    (:class:`simhub.runformat.RolloutLine`) is a dialogue with its version in front. The version is
    checked as the run files' readers check it (a DataError for one this simhub does not read) and
    dropped: the record is a plain :class:`Dialogue`."""
    path = Path(path)
    if path.is_dir():
        inside = sorted(p.name for p in path.glob("*.jsonl"))[:5]
        raise SchemaError(f"{path}: is a folder, not a JSONL file"
                          + (f" (it holds {', '.join(inside)}: give one of them)" if inside else ""))
    if not path.is_file():
        raise SchemaError(f"{path}: no such file")
    decoder = msgspec.json.Decoder(type=type)
    with path.open("rb") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            yield _decode_line(decoder, line, path, lineno, versioned=type is Dialogue)


_VERSIONED = "Object contains unknown field `schema_version`"


class _Version(msgspec.Struct):
    schema_version: Any = None


class _VersionedDialogue(Dialogue, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """A dialogue line with a run file's ``schema_version`` (a line of ``rollouts.jsonl``)."""

    schema_version: Any = None


_version_decoder = msgspec.json.Decoder(type=_Version)
_versioned_decoder = msgspec.json.Decoder(type=_VersionedDialogue)


def _decode_line(decoder: msgspec.json.Decoder, line: bytes, path: Path, lineno: int, *, versioned: bool) -> Any:
    try:
        return decoder.decode(line)
    except msgspec.ValidationError as exc:
        if versioned and str(exc) == _VERSIONED:
            return _versioned_dialogue(line, path, lineno)
        raise SchemaError(f"{path}:{lineno}: {exc}") from None
    except msgspec.DecodeError as exc:
        raise SchemaError(f"{path}:{lineno}: invalid JSON ({exc})") from None


def _versioned_dialogue(line: bytes, path: Path, lineno: int) -> Dialogue:
    """A dialogue line that carries ``schema_version``: the version checked first (a newer file is
    named as newer, not as malformed), then the dialogue, without it."""
    from simhub.versions import RUN_FORMAT_READS, check_version

    check_version(_version_decoder.decode(line).schema_version, RUN_FORMAT_READS, f"{path}:{lineno}", file=str(path),
                  row=lineno)
    try:
        record = _versioned_decoder.decode(line)
    except msgspec.ValidationError as exc:
        raise SchemaError(f"{path}:{lineno}: {exc}") from None
    return Dialogue(**{name: getattr(record, name) for name in Dialogue.__struct_fields__})


def _umask() -> int:
    """The process's umask, read without changing it where the system tells it (Linux), else by
    setting and restoring it (a brief window other threads creating files could notice)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder, then rename.

    The file gets the permissions a plain ``open(path, "w")`` would give (0666 less the umask):
    ``mkstemp`` creates private 0600 files, which other users of a shared output folder could not read.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        if hasattr(os, "fchmod"):
            os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_jsonl(path: str | os.PathLike[str], records: Iterable[msgspec.Struct | dict]) -> int:
    """Atomically write records as JSON lines; returns the number written."""
    lines = [_encoder.encode(r) for r in records]
    atomic_write_bytes(path, b"".join(line + b"\n" for line in lines))
    return len(lines)
