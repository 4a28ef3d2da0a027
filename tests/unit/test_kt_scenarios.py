"""The multi-day benchmark's scenarios: the shipped personalities and schedules, the specs of
``load_scenarios``, a scenario file read back, and the error of every kind of bad file."""

from __future__ import annotations

import doctest
import textwrap
from collections.abc import Mapping

import msgspec
import pytest

import simhub.learners.kt.scenarios as scenarios_module
from simhub.errors import ConfigError, DataError, UnknownNameError
from simhub.learners.kt import (
    PERSONALITIES,
    SCHEDULES,
    Personality,
    Scenario,
    Schedule,
    load_scenarios,
    shipped_personalities,
    shipped_schedules,
)

CORE = ["confused-productive", "silent-struggler", "frustrated-spiral", "eager-overconfident", "help-seeker",
        "disengaged", "steady-plodder", "anxious-perfectionist", "guesser", "quick-learner"]
SCHEDULE_IDS = ["after-school", "homework-only", "school-integrated", "weekend-warrior", "self-directed"]

# A valid file to break one piece of at a time.
GOOD = """\
schema_version: 1
personalities:
  my-learner: {description: Tries hard., help_trigger: struggling, help_rate: 0.5, engagement: 0.8, replies: 0.7}
schedules:
  sundays: {description: Sundays only., session_weekdays: [7], turns: 5, probe_items: 2}
scenarios:
  - {personality: my-learner, schedule: after-school, days: 10}
  - {personality: silent-struggler, schedule: sundays}
"""


def write(tmp_path, text: str, name: str = "scen.yaml") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return str(path)


# ------------------------------------------------------------------------------------ shipped


def test_eleven_personalities_ten_core_and_one_adversarial():
    assert list(PERSONALITIES) == [*CORE, "adversarial"]
    assert isinstance(PERSONALITIES, Mapping) and len(PERSONALITIES) == 11
    assert [p.id for p in PERSONALITIES.values() if p.adversarial] == ["adversarial"]
    for key, p in PERSONALITIES.items():
        assert p.id == key and p.description.strip()
    silent, seeker, disengaged = PERSONALITIES["silent-struggler"], PERSONALITIES["help-seeker"], PERSONALITIES[
        "disengaged"]
    assert (silent.help_trigger, silent.help_rate, silent.engagement) == ("struggling", 0.05, 0.6)
    assert (seeker.help_trigger, seeker.help_rate) == ("any_day", 0.9)
    assert (disengaged.engagement, disengaged.replies) == (0.3, 0.2)
    adversarial = PERSONALITIES["adversarial"]
    assert (adversarial.help_trigger, adversarial.help_rate) == ("any_day", 0.8)


def test_no_two_personalities_or_schedules_share_their_parameters():
    params = {(p.help_trigger, p.help_rate, p.engagement, p.replies, p.adversarial) for p in PERSONALITIES.values()}
    assert len(params) == 11
    assert len({(s.session_weekdays, s.turns) for s in SCHEDULES.values()}) == 5


def test_five_schedules():
    assert list(SCHEDULES) == SCHEDULE_IDS
    assert SCHEDULES["after-school"].session_weekdays == (1, 2, 3, 4, 5)
    assert (SCHEDULES["after-school"].turns, SCHEDULES["after-school"].probe_items) == (4, 5)
    assert (SCHEDULES["homework-only"].session_weekdays, SCHEDULES["homework-only"].turns) == ((1, 2, 3, 4), 2)
    assert SCHEDULES["school-integrated"].turns == 6
    assert (SCHEDULES["weekend-warrior"].session_weekdays, SCHEDULES["weekend-warrior"].turns) == ((6, 7), 8)
    for key, s in SCHEDULES.items():
        assert s.id == key and s.description.strip() and s.turns >= 1 and s.probe_items >= 1


def test_the_shipped_copies_are_the_callers_own():
    mine = shipped_personalities()
    mine.clear()
    shipped_schedules().pop("after-school")
    assert len(shipped_personalities()) == 11 and len(SCHEDULES) == 5
    with pytest.raises(TypeError):
        PERSONALITIES["x"] = PERSONALITIES["guesser"]  # type: ignore[index]
    with pytest.raises(AttributeError):
        PERSONALITIES["guesser"].help_rate = 1.0  # type: ignore[misc]


# ------------------------------------------------------------------------------------ days


def test_weekend_warrior_over_two_weeks():
    (scenario,) = load_scenarios("guesser__weekend-warrior", days=14)
    assert scenario.session_days() == [6, 7, 13, 14]
    assert scenario.id == "guesser__weekend-warrior"


def test_day_one_is_a_monday():
    after, self_directed = SCHEDULES["after-school"], SCHEDULES["self-directed"]
    assert [d for d in range(1, 15) if after.is_session_day(d)] == [1, 2, 3, 4, 5, 8, 9, 10, 11, 12]
    assert Scenario(personality=PERSONALITIES["guesser"], schedule=self_directed, days=8).session_days() == [
        1, 3, 5, 6, 8]
    with pytest.raises(ValueError, match="from 1"):
        after.is_session_day(0)


def test_a_scenario_lasts_thirty_days_unless_told():
    assert {s.days for s in load_scenarios("all")} == {30}
    assert {s.days for s in load_scenarios("core", days=3)} == {3}
    assert len(load_scenarios("silent-struggler__weekend-warrior")[0].session_days()) == 8


@pytest.mark.parametrize("days", [0, -2, True, 2.5])
def test_a_bad_days_override(days):
    with pytest.raises(ConfigError) as info:
        load_scenarios("core", days=days)
    assert info.value.field == "days"


# ------------------------------------------------------------------------------------ specs


def test_all_core_and_adversarial():
    every = load_scenarios("all")
    assert len(every) == 55 and len({s.id for s in every}) == 55
    assert every[0].id == "confused-productive__after-school" and every[-1].id == "adversarial__self-directed"
    core = load_scenarios("core")
    assert len(core) == 50 and not any(s.personality.adversarial for s in core)
    assert [s.id for s in core] == [f"{p}__{s}" for p in CORE for s in SCHEDULE_IDS]
    adversarial = load_scenarios("adversarial")
    assert [s.id for s in adversarial] == [f"adversarial__{s}" for s in SCHEDULE_IDS]


def test_a_bare_personality_takes_every_schedule():
    found = load_scenarios("help-seeker")
    assert [s.schedule.id for s in found] == SCHEDULE_IDS
    assert {s.personality.id for s in found} == {"help-seeker"}


def test_a_list_of_ids_in_order_without_repeats():
    found = load_scenarios(" disengaged__homework-only , guesser,disengaged__homework-only,guesser__after-school, ")
    assert [s.id for s in found] == ["disengaged__homework-only", *(f"guesser__{s}" for s in SCHEDULE_IDS)]
    assert len(load_scenarios("core,adversarial")) == 55


@pytest.mark.parametrize(("spec", "kind", "fragment"), [
    ("silent-strugler", "scenario", "unknown scenario 'silent-strugler' (did you mean 'silent-struggler'?)"),
    ("guesser__weekend-warior", "schedule", "unknown schedule 'weekend-warior' (did you mean 'weekend-warrior'?)"),
    ("gueser__after-school", "personality", "unknown personality 'gueser' (did you mean 'guesser'?)"),
    ("core,coer", "scenario", "unknown scenario 'coer' (did you mean 'core'?)"),
])
def test_an_unknown_name(spec, kind, fragment):
    with pytest.raises(UnknownNameError) as info:
        load_scenarios(spec)
    assert info.value.field == "scenarios" and info.value.kind == kind
    assert str(info.value).startswith(f"scenarios: {fragment}; known: ")


def test_an_empty_spec():
    for spec in ("", " , ,"):
        with pytest.raises(ConfigError) as info:
            load_scenarios(spec)
        assert info.value.field == "scenarios"


# ------------------------------------------------------------------------------------ files


def test_a_file_round_trip(tmp_path):
    file = write(tmp_path, GOOD)
    first, second = load_scenarios(file)
    assert first.id == "my-learner__after-school" and first.days == 10
    assert first.personality == Personality(id="my-learner", description="Tries hard.", help_trigger="struggling",
                                            help_rate=0.5, engagement=0.8, replies=0.7)
    assert first.schedule is SCHEDULES["after-school"]
    assert second.personality == PERSONALITIES["silent-struggler"] and second.days == 30
    assert second.schedule == Schedule(id="sundays", description="Sundays only.", session_weekdays=(7,), turns=5,
                                       probe_items=2)
    assert second.session_days() == [7, 14, 21, 28]
    assert {s.days for s in load_scenarios(file, days=4)} == {4}
    # A struct written back and read again is the same scenario.
    assert msgspec.json.decode(msgspec.json.encode(first), type=Scenario) == first


def test_a_file_overrides_a_shipped_personality(tmp_path):
    file = write(tmp_path, """\
        schema_version: 1
        personalities:
          guesser: {description: Asks a lot now., help_trigger: any_day, help_rate: 1, engagement: 1, replies: 1}
        scenarios: [{personality: guesser, schedule: homework-only}]
        """)
    (scenario,) = load_scenarios(file)
    assert scenario.personality.help_rate == 1.0 and scenario.personality.help_trigger == "any_day"
    assert PERSONALITIES["guesser"].help_trigger == "never"  # the shipped one is untouched


def test_an_existing_file_without_a_yaml_suffix(tmp_path, monkeypatch):
    write(tmp_path, GOOD, name="my-scenarios")
    monkeypatch.chdir(tmp_path)
    assert [s.id for s in load_scenarios("my-scenarios")] == ["my-learner__after-school", "silent-struggler__sundays"]
    assert len(load_scenarios("quick-learner")) == 5  # a name is still a name


def _swap(old: str, new: str) -> str:
    assert old in GOOD
    return GOOD.replace(old, new)


# (file text, key path, the message after "FILE: PATH: ")
BAD = {
    "unknown scenario key": (
        _swap("schedule: sundays}", "schedul: sundays}"), "scenarios[1].schedul",
        "unknown key (did you mean 'schedule'?); allowed: personality, schedule, days"),
    "unknown top-level key": (
        _swap("scenarios:", "scenario:"), "scenario",
        "unknown key (did you mean 'scenarios'?); allowed: schema_version, personalities, schedules, scenarios"),
    "unknown personality key": (
        _swap("help_rate: 0.5", "help_rat: 0.5"), "personalities.my-learner.help_rat",
        "unknown key (did you mean 'help_rate'?)"),
    "unknown schedule key": (
        _swap("turns: 5", "turn: 5"), "schedules.sundays.turn", "unknown key (did you mean 'turns'?)"),
    "an id inside the entry": (
        _swap("{description: Tries", "{id: x, description: Tries"), "personalities.my-learner.id",
        "not a field here: the entry's key is its id"),
    "help_rate above 1": (
        _swap("help_rate: 0.5", "help_rate: 1.5"), "personalities.my-learner.help_rate",
        "expected a number <= 1.0, got 1.5"),
    "negative engagement": (
        _swap("engagement: 0.8", "engagement: -0.1"), "personalities.my-learner.engagement",
        "expected a number >= 0.0, got -0.1"),
    "a word for a rate": (
        _swap("replies: 0.7", "replies: often"), "personalities.my-learner.replies",
        "expected a number, got 'often'"),
    "a misspelt help trigger": (
        _swap("help_trigger: struggling", "help_trigger: strugling"), "personalities.my-learner.help_trigger",
        "'strugling' is not one of struggling, any_day, never (did you mean 'struggling'?)"),
    "a missing description": (
        _swap("description: Tries hard., ", ""), "personalities.my-learner.description",
        "missing (a required field)"),
    "zero turns": (
        _swap("turns: 5", "turns: 0"), "schedules.sundays.turns", "expected an integer >= 1, got 0"),
    "weekday 8": (
        _swap("session_weekdays: [7]", "session_weekdays: [7, 8]"), "schedules.sundays.session_weekdays[1]",
        "expected an integer <= 7, got 8"),
    "a boolean weekday": (
        _swap("session_weekdays: [7]", "session_weekdays: [yes]"), "schedules.sundays.session_weekdays[0]",
        "expected an integer, got True"),
    "no weekdays": (
        _swap("session_weekdays: [7]", "session_weekdays: []"), "schedules.sundays.session_weekdays",
        "expected a list of length >= 1"),
    "a weekday twice": (
        _swap("session_weekdays: [7]", "session_weekdays: [7, 6, 7]"), "schedules.sundays.session_weekdays[2]",
        "weekday 7 is listed twice"),
    "zero days": (
        _swap("days: 10", "days: 0"), "scenarios[0].days", "expected an integer >= 1, got 0"),
    "an unknown personality in a scenario": (
        _swap("personality: silent-struggler", "personality: silent-strugler"), "scenarios[1].personality",
        "unknown personality 'silent-strugler' (did you mean 'silent-struggler'?); known: confused-productive"),
    "an unknown schedule in a scenario, close to the file's own": (
        _swap("schedule: sundays}", "schedule: sunday}"), "scenarios[1].schedule",
        "unknown schedule 'sunday' (did you mean 'sundays'?); known: after-school"),
    "a scenario twice": (
        GOOD + "  - {personality: my-learner, schedule: after-school, days: 3}\n", "scenarios[2]",
        "my-learner__after-school is already scenarios[0]"),
    "a scenario that is not a mapping": (
        GOOD + "  - my-learner__after-school\n", "scenarios[2]",
        "expected a mapping of personality, schedule, days, got a string"),
    "an id with a double underscore": (
        _swap("  my-learner: {", "  my__learner: {"), "personalities.my__learner",
        "an id is letters, digits, '-' and single '_' (no '__', spaces or commas)"),
    "personalities as a list": (
        _swap("personalities:\n  my-learner:", "personalities:\n  - my-learner:"), "personalities",
        "expected a mapping of id to fields, got a list"),
    "no scenarios": (
        GOOD.split("scenarios:")[0], "scenarios", "missing (a list of {personality, schedule, days} is required)"),
    "an empty scenario list": (
        GOOD.split("scenarios:")[0] + "scenarios: []\n", "scenarios",
        "expected a list of at least one scenario, got an empty list"),
    "a newer schema_version": (
        _swap("schema_version: 1", "schema_version: 2"), "schema_version",
        "scenario file schema_version 2 is newer than this simhub reads (1); upgrade simhub to read it"),
    "no schema_version": (
        _swap("schema_version: 1\n", ""), "schema_version", "scenario file has no schema_version (this simhub reads 1)"),
}


@pytest.mark.parametrize("case", BAD)
def test_a_bad_file(tmp_path, case):
    text, field, message = BAD[case]
    file = write(tmp_path, text)
    with pytest.raises(DataError) as info:
        load_scenarios(file)
    if field == "schema_version":  # check_version's message names the file only
        assert str(info.value).startswith(f"{file}: {message}")
    else:
        assert str(info.value).startswith(f"{file}: {field}: {message}")
    assert info.value.field == field and info.value.file == file


@pytest.mark.parametrize(("text", "fragment"), [
    ("scenarios: [unclosed\n", "invalid YAML"),
    ("- a list\n", "expected a mapping at the top level, got a list"),
    ("", "expected a mapping at the top level, got nothing"),
])
def test_a_file_that_is_not_a_scenario_mapping(tmp_path, text, fragment):
    file = write(tmp_path, text)
    with pytest.raises(DataError) as info:
        load_scenarios(file)
    assert str(info.value).startswith(f"{file}: {fragment}")
    assert info.value.file == file and info.value.field == "$"


def test_a_missing_file(tmp_path):
    for file in (str(tmp_path / "nothing.yaml"), str(tmp_path / "nothing")):
        with pytest.raises(DataError) as info:
            load_scenarios(file)
        assert str(info.value) == f"{file}: not found"
        assert info.value.file == file and info.value.field == "$"


def test_the_docstring_examples():
    failed, attempted = doctest.testmod(scenarios_module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert failed == 0 and attempted > 0
