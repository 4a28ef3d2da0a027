"""The KT-grounded learner's parts: grading, the item bank from dialogues, the stand-in's P(correct),
persona seeds, and the LMS a tutor acts in (the belief against BKT worked by hand, help requests,
resuming, failed days, tool validation and the OpenAI tool schemas)."""

from __future__ import annotations

import math

import msgspec
import pytest

from simhub.errors import ConfigError
from simhub.learners.kt import BKT, BKTParams
from simhub.learners.kt.items import ItemBank, KTItem, grade, items_from_dialogues
from simhub.learners.kt.lms import ACTIONS, MAX_ASSIGN, TOOLS, DayRecord, HelpRecord, LMSRun, RunPlan, ToolError
from simhub.learners.kt.student import (
    DayContext,
    ItemAnswer,
    LearnerSettings,
    PersonaSeed,
    RolePlayer,
    Said,
    adjusted_p,
    assign_seeds,
)
from simhub.schema import Dialogue, Question, Turn

# ------------------------------------------------------------------------------------ grading

ITEM = KTItem(id="q1", kc="Decimals", question="Write 3/8 as a decimal.",
              options={"A": "3.8", "B": "0.38", "C": "0.375"}, answer="B")


@pytest.mark.parametrize(("answer", "correct"), [
    ("B", True),
    ("B) 0.38", True),
    ("I pick B", True),  # "I" is a standalone capital but not an option, so B is the choice
    ("b", False),  # only a capital letter chooses
    ("C", False),
    ("A, no wait, B", False),  # the first option letter counts
    ("0.38", False),  # the option's text is not its letter
    ("", False),
    (None, False),
])
def test_grading_takes_the_first_standalone_capital_that_is_an_option(answer, correct):
    assert grade(ITEM, answer) is correct


def test_the_item_text_is_the_stem_then_one_line_per_option():
    assert ITEM.text() == "Write 3/8 as a decimal.\nA) 3.8\nB) 0.38\nC) 0.375"


# ------------------------------------------------------------------------------ the item bank


def test_the_sample_corpus_gives_45_items(sample_corpus):
    dialogues = [d for split in ("train", "val", "test") for d in sample_corpus[split]]
    bank = items_from_dialogues(dialogues)
    assert len(bank) == 45
    first = next(iter(bank.items.values()))
    assert first.id == "4990"
    assert first.question == "Write 3/8 as a decimal."
    assert first.options == {"A": "3.8", "B": "0.38", "C": "0.375", "D": "2.67"}
    assert first.answer == "C" and first.kc == "Convert fractions to terminating decimals"
    assert first.explanation == "3/8 means 3 ÷ 8 = 0.375."
    # Question 6015's tutor turns name Default most often (18 turns), then the perimeter (13): Default
    # is left out of the choice.
    assert bank.items["6015"].kc == "Calculate the perimeter of a square"


def _dialogue(did: str, tutor_kcs: list[list[str]], *, text: str | None = None, key: str | None = "A") -> Dialogue:
    text = text or "Question Text: 1 + 1 = ?\nAnswer A Text: 2\nAnswer B Text: 3"
    turns = [Turn(role="tutor", content="Let's see.", kcs=kcs) for kcs in tutor_kcs]
    return Dialogue(id=did, question=Question(text=text, correct_option=key), turns=turns)


def test_the_kc_is_the_most_named_one_default_aside_ties_alphabetical():
    bank = items_from_dialogues([
        # q1: Default 3 turns, Zeta 2, Alpha 2 (one turn naming Alpha twice counts once): Alpha by the tie
        _dialogue("q1-1", [["Default"], ["Default", "Zeta"], ["Alpha", "Alpha"]]),
        _dialogue("q1-2", [["Default", "Alpha"], ["Zeta"]]),
        # q2: only Default is named, so Default it is
        _dialogue("q2-1", [["Default"], []]),
        # q3: a student turn's KCs do not count; no tutor KC at all gives Default
        Dialogue(id="q3-1", question=Question(text="Question Text: x\nAnswer A Text: 1\nAnswer B Text: 2",
                                              correct_option="B"),
                 turns=[Turn(role="student", content="1", kcs=["Alpha"])]),
        # no key, or fewer than two options: not an item
        _dialogue("q4-1", [["Alpha"]], key=None),
        _dialogue("q5-1", [["Alpha"]], text="Question Text: 1 + 1 = ?\nAnswer A Text: 2"),
    ])
    assert {i: it.kc for i, it in bank.items.items()} == {"q1": "Alpha", "q2": "Default", "q3": "Default"}
    assert bank.items["q1"].question == "1 + 1 = ?" and bank.items["q1"].options == {"A": "2", "B": "3"}


# ---------------------------------------------------------------------- the stand-in's P(correct)


def _ctx(ability: str = "average", addressed: frozenset[str] = frozenset()) -> DayContext:
    return DayContext(day=1, ability=ability, personality="test", adversarial=False, weakest=(), strongest=(),
                      addressed=addressed)


def test_adjusted_p_by_hand():
    s = LearnerSettings()
    # weak: log-odds of 0.5 is 0, minus 1 -> 1 / (1 + e)
    assert adjusted_p(0.5, "Fractions", _ctx("weak"), s) == pytest.approx(1 / (1 + math.e))
    # strong: 0 + 1 -> 1 / (1 + e^-1)
    assert adjusted_p(0.5, "Fractions", _ctx("strong"), s) == pytest.approx(1 / (1 + math.exp(-1)))
    # average leaves the prediction as it is
    assert adjusted_p(0.38, "Fractions", _ctx(), s) == 0.38
    # a KC the tutor addressed today: p + 0.15 (1 - p)
    assert adjusted_p(0.38, "Fractions", _ctx(addressed=frozenset({"Fractions"})), s) == pytest.approx(
        0.38 + 0.15 * 0.62)
    assert adjusted_p(0.38, "Decimals", _ctx(addressed=frozenset({"Fractions"})), s) == 0.38
    # both: the ability shift first, then the gain on what is left
    weak = 1 / (1 + math.e)
    assert adjusted_p(0.5, "Fractions", _ctx("weak", frozenset({"Fractions"})), s) == pytest.approx(
        weak + 0.15 * (1 - weak))


def test_learner_settings_are_checked():
    with pytest.raises(ConfigError) as e:
        LearnerSettings(context_gain=1.5)
    assert e.value.field == "learner.context_gain"
    with pytest.raises(ConfigError) as e:
        LearnerSettings(ability_logit={"weak": -1.0, "average": 0.0})
    assert e.value.field == "learner.ability_logit" and "strong" in str(e.value)


# ---------------------------------------------------------------------------- persona seeds

POOL = [PersonaSeed(f"s{i}", ((f"q{i}", "Fractions", i % 2 == 0),)) for i in range(5)]


def test_seeds_are_distinct_and_fixed_by_the_seed():
    runs = ["r0", "r1", "r2", "r3"]
    got = assign_seeds(POOL, runs, seed=7)
    assert list(got) == runs
    assert len({s.student for s in got.values()}) == 4
    assert assign_seeds(POOL, runs, seed=7) == got
    # another seed, another seeded order (some seed among a few gives another assignment)
    assert any(assign_seeds(POOL, runs, seed=k) != got for k in range(8, 12))


def test_more_runs_than_seeds_needs_sharing():
    runs = [f"r{i}" for i in range(7)]
    with pytest.raises(ConfigError) as e:
        assign_seeds(POOL, runs, seed=0)
    assert e.value.field == "share_seeds" and "7 runs but only 5" in str(e.value)
    shared = assign_seeds(POOL, runs, seed=0, share=True)
    students = [shared[r].student for r in runs]
    assert sorted(students[:5]) == [s.student for s in POOL]  # the first five are all distinct
    assert students[5:] == students[:2]  # then the order wraps around


# -------------------------------------------------------------------------------- the LMS

PARAMS = {
    "Angles": BKTParams(p_init=0.2, p_learn=0.1, p_guess=0.25, p_slip=0.1),
    "Decimals": BKTParams(p_init=0.4, p_learn=0.2, p_guess=0.2, p_slip=0.1),
    "Fractions": BKTParams(p_init=0.6, p_learn=0.1, p_guess=0.25, p_slip=0.2),
}
MODEL = BKT(PARAMS)


def _item(item_id: str, kc: str) -> KTItem:
    return KTItem(id=item_id, kc=kc, question=f"{item_id}?", options={"A": "1", "B": "2", "C": "3"}, answer="B",
                  explanation=f"Because {item_id}.")


# "Algebra" has an item but no KT parameters: the run's bank leaves it out.
BANK = ItemBank([_item("a1", "Angles"), _item("d1", "Decimals"), _item("d2", "Decimals"), _item("f1", "Fractions"),
                 _item("x1", "Algebra")])


class Fixed(RolePlayer):
    """Always answers the key (``right``) or always the first wrong option; records what it was asked."""

    def __init__(self, right: bool = True):
        self.right = right
        self.batches: list[tuple[list[str], list[float], DayContext]] = []

    def describe(self):
        return {"kind": "test", "right": self.right}

    def answer(self, ctx, items, predicted, seed):
        self.batches.append(([it.id for it in items], list(predicted), ctx))
        return [ItemAnswer(it.answer if self.right else next(k for k in it.options if k != it.answer)) for it in items]

    def say(self, ctx, history, seed, *, ask_help=None):
        return Said(f"Help me with {ask_help}." if ask_help else f"Reply to {len(history)} messages.")


def _plan(**changes) -> RunPlan:
    plan = RunPlan(run="r1", scenario="tester__test-schedule", personality="tester", personality_text="A test learner.",
                   help_trigger="never", help_rate=0.0, engagement=1.0, replies=0.0, adversarial=False,
                   session_days=(1, 2, 3), days=3, turns=2, probe_items=3, ability="average", persona="s1", seed=0)
    return msgspec.structs.replace(plan, **changes)


def _run(right: bool = True, **changes) -> LMSRun:
    return LMSRun(_plan(**changes), model=MODEL, bank=BANK, persona=PersonaSeed("s1", ()), role_player=Fixed(right))


def _bkt_by_hand(p: float, correct: bool, prm: BKTParams) -> float:
    """One observation: Bayes' rule on the answer, then the chance to learn."""
    g, s, t = prm.p_guess, prm.p_slip, prm.p_learn
    right, wrong = p * (1 - s) / (p * (1 - s) + (1 - p) * g), p * s / (p * s + (1 - p) * (1 - g))
    post = right if correct else wrong
    return post + (1 - post) * t


def _predict_by_hand(p: float, prm: BKTParams) -> float:
    return p * (1 - prm.p_slip) + (1 - p) * prm.p_guess


def _silent_day(run: LMSRun, day: int):
    run.start_day(day)
    for t in range(1, run.plan.turns + 1):
        run.begin_turn(t)
        run.end_turn()
    return run.end_day()


def test_the_unit_is_the_weakest_kcs_with_items_and_probes_repeat_after_the_session():
    run = _run()
    assert run.unit == ["Angles", "Decimals", "Fractions"]  # by initial mastery; Algebra has no parameters
    assert "x1" not in run.bank.items
    day = _silent_day(run, 1)
    assert [a.kc for a in day.pre] == ["Angles", "Decimals", "Fractions"]
    assert [a.item for a in day.post] == [a.item for a in day.pre]
    assert all(a.correct for a in (*day.pre, *day.post)) and day.practice == []
    assert [a.name for a in day.actions] == ["stay_silent", "stay_silent"]


def test_a_silent_day_of_right_answers_by_hand():
    run = _run()
    day = _silent_day(run, 1)
    # Angles: 0.2 -> posterior 0.18 / 0.38 = 9/19 -> transition 10/19; then 10/19 * 0.9 = 9/19 against
    # 9/19 * 0.25: posterior 0.8 -> transition 0.8 + 0.2 * 0.1 = 0.82.
    assert MODEL.mastery(run.belief, "Angles") == pytest.approx(0.82)
    assert day.mastery["Angles"] == pytest.approx(0.82, abs=1e-6)
    # Predicted before each answer: 0.2 * 0.9 + 0.8 * 0.25 = 0.38, then (10/19) 0.9 + (9/19) 0.25 = 11.25/19.
    assert day.pre[0].predicted == pytest.approx(0.38, abs=1e-6)
    assert day.post[0].predicted == pytest.approx(11.25 / 19, abs=1e-6)
    assert day.pre[0].p is None and day.pre[0].answer == "B"


def test_the_belief_after_a_day_is_bkt_over_pre_practice_and_post_in_order():
    run = _run(right=False, turns=2, probe_items=4)
    day = run.start_day(1)
    run.begin_turn(1)
    assert run.call("assign_items", {"item_ids": ["d2", "a1", "d1"]}) == {"queued": ["d2", "a1", "d1"]}
    run.end_turn()
    run.begin_turn(2)
    run.call("assign_items", {"item_ids": ["f1"]})
    run.end_turn()
    run.end_day()
    assert [a.item for a in day.practice] == ["d2", "a1", "d1", "f1"]
    assert not any(a.correct for a in (*day.pre, *day.practice, *day.post))

    p = {kc: prm.p_init for kc, prm in PARAMS.items()}
    for batch in (day.pre, day.practice[:3], day.practice[3:], day.post):
        before = dict(p)
        for a in batch:
            # the prediction recorded is the belief's before the batch, not before the answer
            assert a.predicted == pytest.approx(_predict_by_hand(before[a.kc], PARAMS[a.kc]), abs=1e-6)
            p[a.kc] = _bkt_by_hand(p[a.kc], a.correct, PARAMS[a.kc])
    for kc in PARAMS:
        assert MODEL.mastery(run.belief, kc) == pytest.approx(p[kc], rel=1e-12)
        assert day.mastery[kc] == round(MODEL.mastery(run.belief, kc), 6)
    # Four probe items over three KCs: the fourth is Angles again, predicted as the first was.
    assert day.pre[3].kc == "Angles" and day.pre[3].predicted == day.pre[0].predicted
    assert day.pre[3].item == day.pre[0].item == "a1"
    # The role-player saw one batch per probe and per turn's practice.
    batches = run.role_player.batches
    assert [ids for ids, _, _ in batches] == [[a.item for a in day.pre], ["d2", "a1", "d1"], ["f1"],
                                              [a.item for a in day.post]]


def test_practice_is_attempted_with_the_personalitys_engagement():
    run = _run(engagement=0.0)
    day = run.start_day(1)
    run.begin_turn(1)
    run.call("assign_items", {"item_ids": ["d1", "d2"]})
    run.end_turn()
    assert day.practice == [] and day.skipped == 2
    # a turn with an assignment is not a silent one
    assert [a.name for a in day.actions] == ["assign_items"]


def test_a_turn_with_only_queries_records_stay_silent():
    run = _run()
    day = run.start_day(1)
    run.begin_turn(1)
    mastery = run.call("get_mastery")
    assert list(mastery) == run.unit and mastery["Angles"] == 0.5263  # 10/19 after the right pre answer
    run.call("get_schedule")
    run.end_turn()
    run.begin_turn(2)
    run.call("send_message", {"text": "Well done today."})
    run.end_turn()
    assert [(a.turn, a.name) for a in day.actions] == [(1, "get_mastery"), (1, "get_schedule"), (1, "stay_silent"),
                                                       (2, "send_message")]


def test_a_help_request_answered_later_that_day():
    run = _run(help_trigger="any_day", help_rate=1.0, replies=1.0)
    day = run.start_day(1)
    # every pre answer is right, so the request is on the unit's first KC
    assert [(h.day, h.kc, h.answered_day) for h in run.help] == [(1, "Angles", None)]
    assert [(m.turn, m.role, m.text) for m in day.messages] == [(0, "learner", "Help me with Angles.")]
    run.begin_turn(1)
    assert run.call("get_messages")["open_help_requests"] == [{"day": 1, "kc": "Angles",
                                                               "text": "Help me with Angles."}]
    run.end_turn()
    run.begin_turn(2)
    run.call("send_message", {"text": "Angles on a straight line add up to 180."})
    run.end_turn()
    run.end_day()
    (h,) = run.help
    assert (h.answered_day, h.answered_turn) == (1, 2)
    # the learner replied to the message (replies = 1), and the post probe knew Angles was addressed
    assert [(m.turn, m.role) for m in day.messages] == [(0, "learner"), (2, "tutor"), (2, "learner")]
    post_ctx = run.role_player.batches[-1][2]
    assert post_ctx.addressed == frozenset({"Angles"})
    assert "Tutor said: Angles on a straight line add up to 180." in post_ctx.context


def test_a_help_request_never_answered_and_one_answered_the_next_day():
    run = _run(help_trigger="any_day", help_rate=1.0)
    _silent_day(run, 1)
    run.start_day(2)
    run.begin_turn(1)
    assert [r["day"] for r in run.call("get_messages")["open_help_requests"]] == [1, 2]
    run.end_turn()
    run.end_day()
    assert [h.answered_day for h in run.help] == [None, None]
    run.start_day(3)
    run.begin_turn(1)
    run.call("send_message", {"text": "Let's catch up."})
    run.end_turn()
    run.end_day()
    assert [(h.day, h.answered_day, h.answered_turn) for h in run.help] == [(1, 3, 1), (2, 3, 1), (3, 3, 1)]


def test_the_struggling_trigger_asks_on_the_first_wrong_kc():
    run = _run(right=False, help_trigger="struggling", help_rate=1.0)
    run.start_day(1)
    assert [h.kc for h in run.help] == ["Angles"]
    right = _run(right=True, help_trigger="struggling", help_rate=1.0)
    right.start_day(1)
    assert right.help == []  # no wrong answer, no trigger


def _busy_day(run: LMSRun, day: int) -> None:
    run.start_day(day)
    run.begin_turn(1)
    run.call("adjust_level", {"kcs": ["Decimals"], "delta": 1})
    run.call("provide_content", {"kc": "Decimals", "kind": "example", "text": "0.5 is a half."})
    run.call("assign_items", {"item_ids": ["d1", "f1"]})
    run.end_turn()
    run.begin_turn(2)
    run.call("send_message", {"text": "Try d2 next."})
    run.end_turn()
    run.end_day()


def test_restoring_recorded_days_gives_the_live_belief_and_the_same_next_day():
    live = _run(help_trigger="any_day", help_rate=1.0, replies=1.0)
    _busy_day(live, 1)
    _silent_day(live, 2)
    copy = LMSRun(live.plan, model=MODEL, bank=BANK, persona=PersonaSeed("s1", ()), role_player=Fixed(True))
    days = msgspec.convert(msgspec.to_builtins(live.days), list[DayRecord])  # as read back from a trace file
    helps = msgspec.convert(msgspec.to_builtins(live.help), list[HelpRecord])
    copy.restore(days, helps)
    assert MODEL.masteries(copy.belief) == MODEL.masteries(live.belief)
    assert copy.levels == live.levels == {"Decimals": 1}
    _busy_day(live, 3)
    _busy_day(copy, 3)
    assert msgspec.to_builtins(copy.days) == msgspec.to_builtins(live.days)
    assert msgspec.to_builtins(copy.help) == msgspec.to_builtins(live.help)


def test_a_failed_day_leaves_the_belief_and_help_requests_as_they_were():
    run = _run(help_trigger="any_day", help_rate=1.0)
    _silent_day(run, 1)
    before = MODEL.masteries(run.belief)
    run.start_day(2)
    run.begin_turn(1)
    run.call("assign_items", {"item_ids": ["d1"]})
    run.call("send_message", {"text": "Here is some help."})  # answers day 1's request and day 2's
    run.end_turn()
    assert MODEL.masteries(run.belief) != before
    day = run.fail_day("learner: HTTP 500 at somewhere")
    assert day.failed == "learner: HTTP 500 at somewhere" and day.day == 2
    assert day.pre and day.practice  # what happened is kept, but none of it reaches the belief
    assert day.observations() == []
    assert MODEL.masteries(run.belief) == before
    assert [(h.day, h.answered_day, h.answered_turn) for h in run.help] == [(1, None, None)]
    assert [d.day for d in run.days] == [1, 2]
    # and restoring the recorded days agrees
    copy = LMSRun(run.plan, model=MODEL, bank=BANK, persona=PersonaSeed("s1", ()), role_player=Fixed(True))
    copy.restore(run.days, run.help)
    assert MODEL.masteries(copy.belief) == before


# ----------------------------------------------------------------------------- tool validation


def _bad(run: LMSRun, name: str, args=None) -> ToolError:
    with pytest.raises(ToolError) as e:
        run.call(name, args)
    return e.value


def test_bad_tool_calls_are_logged_errors_and_the_run_goes_on():
    run = _run()
    day = run.start_day(1)
    run.begin_turn(1)
    cases = [
        ("get_mastry", None, "action", "did you mean 'get_mastery'"),
        ("assign_items", {"item_ids": ["d1", "nosuch"]}, "item_ids", "'nosuch'"),
        ("assign_items", {"item_ids": ["x1"]}, "item_ids", "'x1'"),  # in the bank, but not a KC of the model
        ("get_mastery", {"kcs": ["Fractons"]}, "kcs", "did you mean 'Fractions'"),
        ("provide_content", {"kc": "Algebra", "kind": "note", "text": "x"}, "kc", "unknown KC 'Algebra'"),
        ("adjust_level", {"kcs": ["Angles"], "delta": 2}, "delta", "2 is not one of -1, 1"),
        ("adjust_level", {"kcs": ["Angles"], "delta": True}, "delta", "expected an integer"),
        ("adjust_level", {"kcs": [], "delta": 1}, "kcs", "at least one"),
        ("get_mastery", {"kc": "Angles"}, "kc", "takes no argument 'kc' (did you mean 'kcs'?)"),
        ("send_message", {}, "text", "send_message needs 'text'"),
        ("send_message", {"text": "   "}, "text", "empty"),
        ("provide_content", {"kc": "Angles", "kind": "video", "text": "x"}, "kind", "'video' is not one of"),
        ("assign_items", {"item_ids": ["d1"] * (MAX_ASSIGN + 1)}, "item_ids", f"at most {MAX_ASSIGN}"),
        ("assign_items", {"item_ids": "d1"}, "item_ids", "expected a list of strings"),
    ]
    for name, args, field, words in cases:
        err = _bad(run, name, args)
        assert err.field == field, (name, args, str(err))
        assert words in str(err), (name, args, str(err))
        logged = day.actions[-1]
        assert (logged.turn, logged.name, logged.args, logged.error) == (1, name, dict(args or {}), str(err))
    assert len(day.actions) == len(cases)
    assert run._queue == []  # a call with one unknown item queued nothing
    assert run.levels == {}
    run.end_turn()
    assert day.actions[-1].name == "stay_silent"  # failed writes are not acting
    assert day.practice == []
    # the run goes on: a good call works and the day ends
    run.begin_turn(2)
    assert run.call("assign_items", {"item_ids": ["d1"]}) == {"queued": ["d1"]}
    run.end_turn()
    run.end_day()
    assert [a.item for a in day.practice] == ["d1"] and len(day.post) == 3


def test_an_action_outside_a_day_is_an_error():
    run = _run()
    with pytest.raises(ToolError) as e:
        run.call("get_mastery")
    assert e.value.field == "day"


def test_the_tools_are_openai_function_tools_one_per_action():
    pydantic = pytest.importorskip("pydantic")
    pytest.importorskip("openai")
    from openai.types.chat import ChatCompletionFunctionToolParam

    check = pydantic.TypeAdapter(ChatCompletionFunctionToolParam)
    names = [t["function"]["name"] for t in TOOLS]
    assert sorted(names) == sorted(ACTIONS) and len(set(names)) == len(names) == 11
    for tool in TOOLS:
        check.validate_python(tool)
        assert set(tool) == {"type", "function"} and tool["type"] == "function"
        fn = tool["function"]
        assert set(fn) == {"name", "description", "parameters"} and fn["description"].strip()
        params = fn["parameters"]
        assert params["type"] == "object" and isinstance(params["properties"], dict)
        assert set(params["required"]) <= set(params["properties"])
        assert params["additionalProperties"] is False
        for spec in params["properties"].values():
            assert spec["type"] in ("string", "integer", "array")
            if spec["type"] == "array":
                assert spec["items"] == {"type": "string"}
    by_name = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
    assert by_name["assign_items"]["required"] == ["item_ids"]
    assert by_name["adjust_level"]["properties"]["delta"]["enum"] == [-1, 1]
    assert by_name["stay_silent"]["properties"] == {}


def test_the_run_owns_its_clock_and_advance_steps_it_as_the_manual_loop_does():
    """LMSRun.advance (the bench's loop and /lms/{run}/advance) is the manual day loop: a run stepped
    by it records the same days, beliefs and help requests as one stepped by start_day/begin_turn/
    end_turn/end_day; it says what the learner did since the last step, and refuses after the last day."""
    manual, clocked = (_run(help_trigger="any_day", help_rate=1.0, replies=1.0) for _ in range(2))
    for day in manual.plan.session_days:
        _busy_day(manual, day)
    ticks = []
    while not clocked.finished:
        tick = clocked.advance()
        ticks.append((tick.day_started, tick.day, tick.turn, tick.day_ended))
        if tick.day_started:
            assert clocked.day_open and clocked.turn == 1 and [m.role for m in tick.messages] == ["learner"]
            clocked.call("adjust_level", {"kcs": ["Decimals"], "delta": 1})
            clocked.call("provide_content", {"kc": "Decimals", "kind": "example", "text": "0.5 is a half."})
            clocked.call("assign_items", {"item_ids": ["d1", "f1"]})
        elif not tick.day_ended:
            assert [a.item for a in tick.practice] == ["d1", "f1"] and tick.skipped == 0
            clocked.call("send_message", {"text": "Try d2 next."})
        else:
            assert tick.record is clocked.days[-1] and [m.role for m in tick.messages] == ["learner"]  # the reply
    assert ticks == [(True, d, 1, False) for d in (1,)] + [(False, 1, 2, False), (False, 1, 0, True),
                                                           (True, 2, 1, False), (False, 2, 2, False), (False, 2, 0, True),
                                                           (True, 3, 1, False), (False, 3, 2, False), (False, 3, 0, True)]
    assert msgspec.to_builtins(clocked.days) == msgspec.to_builtins(manual.days)
    assert msgspec.to_builtins(clocked.help) == msgspec.to_builtins(manual.help)
    assert MODEL.masteries(clocked.belief) == MODEL.masteries(manual.belief)
    assert not clocked.day_open and clocked.turn == 0
    with pytest.raises(ToolError) as done:
        clocked.advance()
    assert done.value.field == "run" and "all 3 session days are done" in str(done.value)
