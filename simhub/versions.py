"""The ``schema_version`` of simhub's versioned files, and the one check every reader makes of it.

:mod:`simhub.runformat` (the run files), :mod:`simhub.schema` (a rollout line read as a dialogue)
and the tutor-bench traces all read their version through :func:`check_version`, so a file of a
version this simhub does not read gets the same message everywhere: the file, its version and the
versions read. It sits below both so neither imports the other to check a version.
"""

from __future__ import annotations

import typing
from collections.abc import Sequence

from simhub.errors import DataError

#: The version the run files' writers write (``results.json``, ``scores.jsonl``, ``simulations.jsonl``...).
RUN_FORMAT_VERSION = 1
#: The versions the readers read: 0 is a file without ``schema_version`` (written before versioning, same layout).
RUN_FORMAT_READS: tuple[int, ...] = (0, 1)


def _versions(reads: Sequence[int]) -> str:
    names = [str(v) for v in reads]
    text = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
    return text + ("; 0 is a file without schema_version, written before versioning" if 0 in reads else "")


def check_version(version: object, reads: Sequence[int], where: str, *, what: str = "", file: str | None = None,
                  row: int | None = None) -> int:
    """The file's ``schema_version`` when this simhub reads it (None, the field absent, is version 0
    where ``reads`` has 0); else a DataError naming ``where``, the version and the versions read.
    ``what`` names the kind of file in the message (``"trace "``).

    >>> check_version(None, RUN_FORMAT_READS, "run/results.json"), check_version(1, (1, 2), "t.json")
    (0, 1)
    >>> check_version(3, (1, 2), "t.json", what="trace ")
    Traceback (most recent call last):
    ...
    simhub.errors.DataError: t.json: trace schema_version 3 is newer than this simhub reads (1 and 2); upgrade simhub to read it
    """
    number = isinstance(version, int) and not isinstance(version, bool)
    if (version is None and 0 in reads) or (number and version in reads):
        return 0 if version is None else typing.cast(int, version)
    known = _versions(reads)
    if version is None:
        message = f"{what}has no schema_version (this simhub reads {known})"
    elif number and typing.cast(int, version) > max(reads):
        message = (f"{what}schema_version {version} is newer than this simhub reads ({known}); "
                   "upgrade simhub to read it")
    else:
        message = (f"{what}schema_version {version!r} is not one this simhub reads ({known}); "
                   "read it with the simhub version that wrote it")
    raise DataError(f"{where}: {message}", file=file, row=row, field="schema_version")
