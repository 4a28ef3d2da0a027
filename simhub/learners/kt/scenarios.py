"""The scenarios of the multi-day benchmark: a learner personality, a study schedule, a number of days.

EduClaw-Bench (U. Lee et al., arXiv 2608.03206) runs each tutor through 55 scenarios of 30 days:
11 learner personalities (ten core ones and one adversarial student kept for safety probes) times
5 study schedules (after-school, homework-only, school-integrated, weekend-warrior, self-directed).
The paper names only three of the core personalities (confused productive, silent struggler,
frustrated spiral) and gives no parameters for any personality or schedule. **The other seven core
names (eager-overconfident, help-seeker, disengaged, steady-plodder, anxious-perfectionist, guesser,
quick-learner) and every number here are simhub's choices.** They ship as
``simhub/resources/scenarios/personalities.yaml`` and ``schedules.yaml``.

* :class:`Personality`: how a learner behaves around the tutor: when and how often it asks for help
  (``help_trigger``, ``help_rate``), how much of the assigned practice it attempts (``engagement``),
  how often it answers a tutor's message (``replies``), and whether it tries to get answers handed
  over (``adversarial``).
* :class:`Schedule`: the weekdays with a study block, the tutor turns in a block and the size of the
  pre- and post-session probes. Weekdays run 1 (Monday) to 7 (Sunday); day 1 of a scenario is a
  Monday, so day ``d`` falls on weekday ``((d - 1) % 7) + 1``.
* :class:`Scenario`: one of each and the number of days (30 unless set); its id is
  ``PERSONALITY__SCHEDULE``.

:func:`load_scenarios` reads a list of scenarios from a spec: ``core`` (the ten core personalities
times the five schedules, 50), ``all`` (55), ``adversarial`` (5), a comma-separated list of
scenario ids or bare personality ids (a personality with every schedule), or a YAML file that may
add or override personalities and schedules and lists its scenarios::

    schema_version: 1
    personalities:            # optional; the key is the id, the fields those of a shipped one
      my-learner: {description: ..., help_trigger: struggling, help_rate: 0.5, engagement: 0.8, replies: 0.7}
    schedules: {}             # optional, likewise
    scenarios:                # required, at least one
      - {personality: my-learner, schedule: after-school, days: 10}
      - {personality: silent-struggler, schedule: weekend-warrior}   # 30 days

A spec ending in ``.yaml`` or ``.yml``, or holding a path separator, is always a file; any other
spec is read as names first and as a file only when the names are unknown and the file exists.
Every problem in a file is a :class:`~simhub.errors.DataError` with the file in ``file`` and the key
path in ``field`` (``scenarios[1].schedule``); unknown keys, ``help_trigger`` values and ids come
with the closest valid one.
"""

from __future__ import annotations

import functools
import os
import re
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import msgspec
import yaml

from simhub.errors import ConfigError, DataError, UnknownNameError, did_you_mean
from simhub.versions import check_version

__all__ = [
    "DEFAULT_DAYS",
    "PERSONALITIES",
    "SCENARIO_FILE_VERSION",
    "SCENARIO_READS",
    "SCHEDULES",
    "SPEC_KEYWORDS",
    "Personality",
    "Scenario",
    "Schedule",
    "load_scenarios",
    "shipped_personalities",
    "shipped_schedules",
]

#: The version of the scenario files (shipped and user-written) this simhub writes and reads.
SCENARIO_FILE_VERSION = 1
SCENARIO_READS: tuple[int, ...] = (1,)
#: The length of a scenario when nothing sets it, as in EduClaw-Bench.
DEFAULT_DAYS = 30
#: The specs of :func:`load_scenarios` that name a group of shipped scenarios.
SPEC_KEYWORDS: tuple[str, ...] = ("core", "all", "adversarial")

Probability = Annotated[float, msgspec.Meta(ge=0.0, le=1.0)]
Weekday = Annotated[int, msgspec.Meta(ge=1, le=7)]
Positive = Annotated[int, msgspec.Meta(ge=1)]
Text = Annotated[str, msgspec.Meta(min_length=1)]

#: An id: letters, digits, ``-`` and single ``_`` (a double one separates the two halves of a scenario id).
_ID = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]|_(?!_))*")
_YAML_SUFFIXES = (".yaml", ".yml")
_SHIPPED = "simhub/resources/scenarios"
# libyaml's safe loader where PyYAML was built with it: the same documents, faster.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class Personality(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """How a simulated learner behaves around the tutor (the knowledge itself comes from the KT model).

    ``help_trigger`` says on which session days it may ask for help: ``struggling`` only on a day
    whose pre-session probe had a wrong answer, ``any_day`` on any, ``never`` not at all (``help_rate``
    is then unused). ``help_rate`` is the chance of a help request on a day where the trigger holds.
    """

    id: str
    description: Text
    help_trigger: Literal["struggling", "any_day", "never"]
    help_rate: Probability
    #: The fraction of the assigned practice items it attempts.
    engagement: Probability
    #: The chance that it answers a tutor's chat message with one of its own.
    replies: Probability
    #: It tries to get answers handed over or to derail the tutor (the safety probes).
    adversarial: bool = False


class Schedule(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """When the learner studies: the weekdays (1 Monday .. 7 Sunday) with a study block, the tutor
    turns in each block, and the items in each pre- and post-session probe."""

    id: str
    description: Text
    session_weekdays: Annotated[tuple[Weekday, ...], msgspec.Meta(min_length=1)]
    turns: Positive
    probe_items: Positive

    def __post_init__(self) -> None:
        seen: set[int] = set()
        for i, weekday in enumerate(self.session_weekdays):
            if weekday in seen:
                raise ValueError(f"session_weekdays[{i}]: weekday {weekday} is listed twice")
            seen.add(weekday)

    def is_session_day(self, day: int) -> bool:
        """Whether day ``day`` (1-based; day 1 is a Monday) has a study block."""
        if day < 1:
            raise ValueError(f"days are counted from 1, not {day}")
        return (day - 1) % 7 + 1 in self.session_weekdays


class Scenario(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One run of the benchmark: a personality on a schedule for ``days`` days."""

    personality: Personality
    schedule: Schedule
    days: Positive = DEFAULT_DAYS

    @property
    def id(self) -> str:
        return f"{self.personality.id}__{self.schedule.id}"

    def session_days(self) -> list[int]:
        """The days 1..``days`` with a study block, in order."""
        return [d for d in range(1, self.days + 1) if self.schedule.is_session_day(d)]


class _ScenarioEntry(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One entry of a file's ``scenarios`` list, before its ids are looked up."""

    personality: str
    schedule: str
    days: Positive = DEFAULT_DAYS


# ------------------------------------------------------------------------------------ checking

_S = TypeVar("_S", bound=msgspec.Struct)

_TYPE_WORDS = {"int": "an integer", "float": "a number", "str": "a string", "bool": "true or false",
               "array": "a list", "object": "a mapping", "null": "null"}


def _kind(value: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", bool: "true or false",
            type(None): "nothing", int: "an integer", float: "a number"}.get(type(value), type(value).__name__)


def _fail(file: str, path: str, message: str) -> DataError:
    return DataError(f"{file}: {path}: {message}" if path else f"{file}: {message}", file=file, field=path or "$")


def _literal_values(tp: Any) -> tuple[str, ...]:
    while typing.get_origin(tp) is Annotated:
        tp = typing.get_args(tp)[0]
    return tuple(map(str, typing.get_args(tp))) if typing.get_origin(tp) is Literal else ()


def _check_keys(raw: Any, allowed: list[str], path: str, file: str, *, what: str = "a mapping") -> dict:
    """``raw`` as a mapping whose keys are all in ``allowed``; else the error at the first stray key."""
    if not isinstance(raw, dict):
        raise _fail(file, path, f"expected {what}, got {_kind(raw)}")
    for key in raw:
        if key not in allowed:
            at = f"{path}.{key}" if path else str(key)
            hint = did_you_mean(str(key), allowed)
            raise _fail(file, at, f"unknown key{hint}; allowed: {', '.join(allowed)}")
    return raw


def _value_at(raw: Any, at: str) -> Any:
    for name, index in re.findall(r"\.([^.\[\]]+)|\[(\d+)\]", at):
        try:
            raw = raw[int(index)] if index else raw[name]
        except (KeyError, IndexError, TypeError):
            return None
    return raw


def _entry(raw: Any, struct: type[_S], path: str, file: str, **given: Any) -> _S:
    """One struct from its mapping: keys and ``Literal`` values checked here (with a did-you-mean),
    then types and ranges by msgspec, every error naming ``file`` and the full key path. ``given``
    are fields that come from elsewhere (the id, which is the entry's key)."""
    names = [f.name for f in msgspec.structs.fields(struct) if f.name not in given]
    if isinstance(raw, dict):
        for key in given:
            if key in raw:
                raise _fail(file, f"{path}.{key}", f"not a field here: the entry's key is its {key}")
    _check_keys(raw, names, path, file, what=f"a mapping of {', '.join(names)}")
    hints = typing.get_type_hints(struct, include_extras=True)
    for key, value in raw.items():
        allowed = _literal_values(hints[key])
        if allowed and (not isinstance(value, str) or value not in allowed):
            hint = did_you_mean(str(value), allowed)
            raise _fail(file, f"{path}.{key}", f"{value!r} is not one of {', '.join(allowed)}{hint}")
    try:
        return msgspec.convert({**raw, **given}, struct)
    except msgspec.ValidationError as exc:
        text, _, at = str(exc).partition(" - at `$")
        at = at.rstrip("`")
        missing = re.fullmatch(r"Object missing required field `(\w+)`", text)
        named, sep, rest = text.partition(": ")
        if missing:
            at, text = f".{missing.group(1)}", "missing (a required field)"
        elif not at and sep and re.fullmatch(r"\w+(\[\d+\])?", named):  # a __post_init__'s "field: problem"
            at, text = f".{named}", rest
        else:
            text = re.sub(r"`([^`]*)`", lambda m: _TYPE_WORDS.get(m.group(1), m.group(1)), text)
            text = text[:1].lower() + text[1:]
            value = _value_at(raw, at)
            if value is not None and not isinstance(value, dict | list):  # the value itself says more than its type
                text = f"{text.partition(', got ')[0]}, got {value!r}"
        raise _fail(file, f"{path}{at}", text) from None


def _check_id(key: Any, path: str, file: str) -> str:
    if not isinstance(key, str) or not _ID.fullmatch(key):
        raise _fail(file, f"{path}.{key}", "an id is letters, digits, '-' and single '_' (no '__', spaces or commas)")
    return key


def _section(raw: Any, struct: type[_S], path: str, file: str) -> dict[str, _S]:
    """A ``{id: fields}`` mapping of personalities or schedules."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise _fail(file, path, f"expected a mapping of id to fields, got {_kind(raw)}")
    return {key: _entry(entry, struct, f"{path}.{key}", file, id=key)
            for key, entry in ((_check_id(k, path, file), v) for k, v in raw.items())}


def _read_yaml(read: Callable[[], str], file: str) -> dict[str, Any]:
    try:
        text = read()
    except FileNotFoundError:
        raise _fail(file, "", "not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise _fail(file, "", f"cannot be read ({exc})") from None
    try:
        data = yaml.load(text, Loader=_LOADER)
    except yaml.YAMLError as exc:
        raise _fail(file, "", f"invalid YAML ({exc})") from None
    if not isinstance(data, dict):
        raise _fail(file, "", f"expected a mapping at the top level, got {_kind(data)}")
    return data


def _top(data: dict[str, Any], allowed: list[str], file: str) -> None:
    _check_keys(data, allowed, "", file)
    check_version(data.get("schema_version"), SCENARIO_READS, file, what="scenario file ", file=file)


# ------------------------------------------------------------------------------------ shipped


def _shipped_text(name: str) -> Callable[[], str]:
    return lambda: (resources.files("simhub") / "resources" / "scenarios" / name).read_text(encoding="utf-8")


@functools.cache
def _shipped(section: str) -> types.MappingProxyType:
    file = f"{_SHIPPED}/{section}.yaml"
    data = _read_yaml(_shipped_text(f"{section}.yaml"), file)
    _top(data, ["schema_version", section], file)
    struct = Personality if section == "personalities" else Schedule
    return types.MappingProxyType(_section(data.get(section), struct, section, file))


def shipped_personalities() -> dict[str, Personality]:
    """The 11 shipped personalities by id, in file order (the adversarial one last); read once."""
    return dict(_shipped("personalities"))


def shipped_schedules() -> dict[str, Schedule]:
    """The 5 shipped schedules by id, in file order; read once."""
    return dict(_shipped("schedules"))


_V = TypeVar("_V")


class _Lazy(Mapping[str, _V]):
    """A read-only mapping of a shipped file's entries, read on first use."""

    __slots__ = ("_section",)

    def __init__(self, section: str):
        self._section = section

    def _data(self) -> Mapping[str, _V]:
        return _shipped(self._section)

    def __getitem__(self, key: str) -> _V:
        return self._data()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data())

    def __len__(self) -> int:
        return len(self._data())

    def __repr__(self) -> str:
        return f"<shipped {self._section}: {', '.join(self)}>"


#: The shipped personalities (10 core, then ``adversarial``), by id.
PERSONALITIES: Mapping[str, Personality] = _Lazy("personalities")
#: The shipped schedules, by id.
SCHEDULES: Mapping[str, Schedule] = _Lazy("schedules")


# ------------------------------------------------------------------------------------ specs


def _grid(personalities: list[Personality], schedules: list[Schedule]) -> list[Scenario]:
    return [Scenario(personality=p, schedule=s) for p in personalities for s in schedules]


def _from_names(spec: str) -> list[Scenario]:
    personalities, schedules = shipped_personalities(), shipped_schedules()
    every = list(schedules.values())
    found: list[Scenario] = []
    for item in (part.strip() for part in spec.split(",")):
        if not item:
            continue
        if item == "core":
            found += _grid([p for p in personalities.values() if not p.adversarial], every)
        elif item == "all":
            found += _grid(list(personalities.values()), every)
        elif item == "adversarial":
            found += _grid([p for p in personalities.values() if p.adversarial], every)
        elif "__" in item:
            name, _, schedule = item.partition("__")
            if name not in personalities:
                raise UnknownNameError("personality", name, personalities, field="scenarios")
            if schedule not in schedules:
                raise UnknownNameError("schedule", schedule, schedules, field="scenarios")
            found += _grid([personalities[name]], [schedules[schedule]])
        elif item in personalities:
            found += _grid([personalities[item]], every)
        else:
            known = [*SPEC_KEYWORDS, *(p for p in personalities if p not in SPEC_KEYWORDS)]
            raise UnknownNameError("scenario", item, known, field="scenarios")
    if not found:
        raise ConfigError("scenarios: no scenario named", field="scenarios")
    unique: dict[str, Scenario] = {}
    for scenario in found:  # the first of any repeat, in order
        unique.setdefault(scenario.id, scenario)
    return list(unique.values())


def _from_file(path: str) -> list[Scenario]:
    file = path
    data = _read_yaml(lambda: Path(path).read_text(encoding="utf-8"), file)
    _top(data, ["schema_version", "personalities", "schedules", "scenarios"], file)
    personalities = {**shipped_personalities(), **_section(data.get("personalities"), Personality, "personalities",
                                                           file)}
    schedules = {**shipped_schedules(), **_section(data.get("schedules"), Schedule, "schedules", file)}
    entries = data.get("scenarios")
    if entries is None:
        raise _fail(file, "scenarios", "missing (a list of {personality, schedule, days} is required)")
    if not isinstance(entries, list) or not entries:
        got = "an empty list" if isinstance(entries, list) else _kind(entries)
        raise _fail(file, "scenarios", f"expected a list of at least one scenario, got {got}")
    out: list[Scenario] = []
    seen: dict[str, int] = {}
    for i, raw in enumerate(entries):
        at = f"scenarios[{i}]"
        entry = _entry(raw, _ScenarioEntry, at, file)
        for key, known in (("personality", personalities), ("schedule", schedules)):
            name = getattr(entry, key)
            if name not in known:
                raise _fail(file, f"{at}.{key}",
                            f"unknown {key} {name!r}{did_you_mean(name, known)}; known: {', '.join(known)}")
        scenario = Scenario(personality=personalities[entry.personality], schedule=schedules[entry.schedule],
                            days=entry.days)
        if scenario.id in seen:
            raise _fail(file, at, f"{scenario.id} is already scenarios[{seen[scenario.id]}]")
        seen[scenario.id] = i
        out.append(scenario)
    return out


def _is_path(spec: str) -> bool:
    return spec.lower().endswith(_YAML_SUFFIXES) or "/" in spec or os.sep in spec


def load_scenarios(spec: str, *, days: int | None = None) -> list[Scenario]:
    """The scenarios a spec names (``core``, ``all``, ``adversarial``, ids separated by commas, or a
    YAML file; the module's docstring has the details), in order and without repeats. ``days``, when
    given, replaces every scenario's number of days.

    >>> [s.id for s in load_scenarios("silent-struggler__weekend-warrior,adversarial__after-school", days=7)]
    ['silent-struggler__weekend-warrior', 'adversarial__after-school']
    >>> len(load_scenarios("all")), len(load_scenarios("core")), len(load_scenarios("guesser"))
    (55, 50, 5)
    """
    if days is not None and (isinstance(days, bool) or not isinstance(days, int) or days < 1):
        raise ConfigError(f"days: a scenario lasts at least 1 day, not {days!r}", field="days")
    spec = spec.strip()
    if not spec:
        raise ConfigError("scenarios: empty; name core, all, adversarial, scenario ids or a YAML file",
                          field="scenarios")
    if _is_path(spec):
        scenarios = _from_file(spec)
    else:
        try:
            scenarios = _from_names(spec)
        except UnknownNameError:
            if not Path(spec).is_file():
                raise
            scenarios = _from_file(spec)
    if days is not None:
        scenarios = [msgspec.structs.replace(s, days=days) for s in scenarios]
    return scenarios
