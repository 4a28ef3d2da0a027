"""The designed tutors (simhub.tutoring.designed): one pedagogy each, the same under every family.

Their known-groups order rests on construction: ``partial`` says what ``stepwise`` says on its first
half of the units and nudges after, ``silent`` only nudges. These tests pin that nesting on the
turns themselves (text) and on the LMS actions (tools), so the known-groups check is a check of the
learner, not of the tutors.
"""

from __future__ import annotations

from simhub.learners.graph import shipped_graphs, validate_graph
from simhub.models import Sampling
from simhub.schema import Dialogue, Question, Turn
from simhub.tutoring.designed import DESIGNED, DONE, KNOWN_ORDER, NUDGE, lesson_units
from simhub.tutoring.tutors import BenchRequest, build_bench_tutor

GREEDY = Sampling(temperature=0.0)


def _graph():
    name, g = next(iter(shipped_graphs().items()))
    return validate_graph(g, name=name)


def _turns(name: str, graph, n: int) -> list[str]:
    """The tutor's first ``n`` turns of a conversation whose learner says "ok" each time."""
    tutor = build_bench_tutor(name, None, scripted=DESIGNED, capability="text")
    turns: list[Turn] = [Turn(role="student", content="I need help.")]
    said = []
    for _ in range(n):
        request = BenchRequest(Dialogue(id="d", question=Question(text=graph.graph.question or "q"), turns=list(turns)),
                               graph=graph)
        (turn,) = tutor.respond([request], GREEDY)
        said.append(turn.text)
        turns += [Turn(role="tutor", content=turn.text), Turn(role="student", content="ok")]
    return said


def test_the_known_order_is_the_nested_chain_and_every_designed_tutor_has_both_capabilities():
    assert KNOWN_ORDER == ("designed:silent", "designed:partial", "designed:stepwise")
    for name in DESIGNED:
        tutor = build_bench_tutor(name, None, scripted=DESIGNED, capability="tools")
        assert tutor.id == name and tutor.capabilities == {"text", "tools"}


def test_text_turns_are_nested_silent_in_partial_in_stepwise():
    graph = _graph()
    units = lesson_units(graph, None)
    n = len(units) + 2
    silent, partial, stepwise, dump = (_turns(f"designed:{d}", graph, n) for d in ("silent", "partial", "stepwise",
                                                                                 "dump"))
    assert silent == [NUDGE] * n
    # stepwise: unit k on turn k, in the graph's order, each with a check question; then "put it together"
    for k, (name, text) in enumerate(units):
        assert stepwise[k].startswith(f"Step {k + 1}: {name}.") and text in stepwise[k] and stepwise[k].endswith("?")
    assert stepwise[len(units):] == [DONE, DONE]
    # partial: stepwise's words on the first half (rounded up), then nudges only
    half = (len(units) + 1) // 2
    assert partial[:half] == stepwise[:half] and partial[half:] == [NUDGE] * (n - half)
    # dump: every unit on the first turn, no check, then nudges
    assert all(text in dump[0] for _, text in units) and "?" not in dump[0] and dump[1:] == [NUDGE] * (n - 1)


def test_without_a_graph_the_units_are_the_solutions_sentences():
    q = Question(text="2 + 3 x 4?", solution="Multiply first: 3 x 4 = 12. Then add: 2 + 12 = 14.")
    assert lesson_units(None, q) == [("step 1", "Multiply first: 3 x 4 = 12."), ("step 2", "Then add: 2 + 12 = 14.")]
    assert lesson_units(None, Question(text="q")) == []
    tutor = build_bench_tutor("designed:partial", None, scripted=DESIGNED, capability="text")
    (turn,) = tutor.respond([BenchRequest(Dialogue(id="d", question=q))], GREEDY)
    assert turn.text.startswith("Step 1: step 1. Multiply first") and "explain that back" in turn.text


def test_in_the_lms_each_tutors_lessons_contain_the_one_before_it(tmp_path):
    """One KT-learner run per tutor on the same scenario: the actions of partial are stepwise's on the
    first half of each day's turns; silent takes none; dump pushes every KC's example on turn 1 only."""
    from simhub.cli import main
    from simhub.tutoring.lms.bench import read_kt_trace

    out = tmp_path / "kt"
    assert main(["tutor-bench", "--learner", "kt-learner", *[a for t in DESIGNED for a in ("--tutor", t)],
                 "--scenarios", "help-seeker", "--days", "6", "--bootstrap", "50", "--no-cache",
                 "--output", str(out)]) == 0
    traces = [read_kt_trace(p) for p in sorted((out / "traces").glob("*.json"))]
    plans = {t.plan.run for t in traces}
    assert len(traces) == len(DESIGNED) * len(plans) and plans
    writes = {"provide_content", "send_message", "assign_items"}

    def acts(tutor: str, plan: str) -> list[list[tuple[int, str]]]:
        (run,) = [t for t in traces if t.tutor == tutor and t.plan.run == plan]
        return [[(a.turn, a.name) for a in d.actions if a.name in writes] for d in run.days]

    taught = [p for p in plans if any(acts("designed:stepwise", p))]  # a schedule may have no session in 4 days
    assert taught
    for plan in taught:
        assert all(day == [] for day in acts("designed:silent", plan))
        steps = acts("designed:stepwise", plan)
        half = (next(t.plan.turns for t in traces if t.plan.run == plan) + 1) // 2
        for partial_day, step_day in zip(acts("designed:partial", plan), steps, strict=True):
            assert partial_day == [a for a in step_day if a[0] <= half] and len(step_day) > len(partial_day) > 0
        for day in acts("designed:dump", plan):
            assert {turn for turn, _ in day} == {1} and "assign_items" not in {name for _, name in day}


def test_a_local_text_tutor_in_the_lms_only_talks(tmp_path):
    """The demo's tiny-tutor (a local model, no tools) under the KT learner: its turns are sent as
    messages, it pushes no content and assigns no practice; it is given the day's chat."""
    from simhub.cli import main
    from simhub.config import load_profile
    from simhub.tutoring.lms.bench import read_kt_trace
    from simhub.tutoring.tutors import MessageTutor

    out = tmp_path / "kt"
    assert main(["tutor-bench", "--learner", "kt-learner", "--tutor", "tiny-tutor", "--scenarios",
                 "help-seeker__after-school", "--days", "6", "--bootstrap", "50", "--no-cache", "--output",
                 str(out)]) == 0
    (trace,) = [read_kt_trace(p) for p in (out / "traces").glob("*.json")]
    days = [d for d in trace.days if d.actions]
    assert days and trace.tutor == "tiny-tutor"
    writes = {a.name for d in days for a in d.actions} - {"get_messages"}
    assert writes <= {"send_message", "stay_silent"} and "send_message" in writes
    sent = [m.text for d in days for m in d.messages if m.role == "tutor"]
    assert sent and all(t.strip() for t in sent)
    tutor = build_bench_tutor("tiny-tutor", load_profile("demo"), scripted=DESIGNED, capability="tools")
    assert isinstance(tutor, MessageTutor) and tutor.describe()["acts_by"] == "messages"
