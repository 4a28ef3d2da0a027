"""The ``sim-student`` learner family: any simulator, probed before and after a tutor.

A scripted student stands in for a language model: it answers a probe with the key once a tutor turn
of the conversation has taught it something (a designed lesson, "Step ..."), and with a wrong option
before. So the pre/post outcome of each designed tutor is known: silent 0, partial and stepwise +1,
dump +0 (it teaches at once, without the "Step" lessons) on the item itself.
"""

from __future__ import annotations

import json

import pytest

from simhub.learners.kt.items import KTItem, grade
from simhub.simulation import Simulator
from simhub.simulation.base import Candidate, SimulationResult
from simhub.tutoring.designed import DESIGNED
from simhub.tutoring.family import family
from simhub.tutoring.probe.bench import ProbeBench, load_probe_items
from simhub.tutoring.tutors import build_bench_tutor


def _wrong(item: KTItem) -> str:
    return next(k for k in item.options if k != item.answer)


class LessonStudent(Simulator):
    """Answers a probe right once the conversation has a lesson in it; talks otherwise. Records every
    dialogue it was shown; ``fail_on`` names items whose conversation turns fail."""

    id = "lesson-student"

    def __init__(self, bank: dict[str, KTItem], fail_on: str | None = None):
        self.bank, self.fail_on, self.seen = bank, fail_on, []

    def messages(self, target):
        return [{"role": "user", "content": target.dialogue.question.text}]

    def simulate(self, targets, sampling=None, *, progress=False):
        out = []
        for t in targets:
            self.seen.append(t.dialogue)
            last = t.dialogue.turns[-1].content if t.dialogue.turns else ""
            taught = any(x.role == "tutor" and x.content.startswith("Step") for x in t.dialogue.turns)
            if "Answer with the letter" in last:
                probe = next(i for i in self.bank.values() if i.text() in last)
                text = f"I pick {probe.answer if taught else _wrong(probe)}."
            elif self.fail_on and self.fail_on in t.dialogue.id:
                out.append(SimulationResult(error="endpoint down"))
                continue
            else:
                text = "I am not sure how to start."
            out.append(SimulationResult(candidates=[Candidate(text=text, finish_reason="stop")]))
        return out


def _bench(tmp_path, student, items, name="run", **kw):
    tutors = [build_bench_tutor(t, None, scripted=DESIGNED, capability="text") for t in DESIGNED]
    return ProbeBench(tutors, student, items, turns=3, output=tmp_path / name, cache_dir=str(tmp_path / "cache"), **kw)


def test_the_pre_post_outcome_of_each_designed_tutor_on_a_scripted_student(tmp_path):
    items = load_probe_items("sample", n=3, probes=2)
    student = LessonStudent({p.id: p for i in items for p in i.probes})
    traces = _bench(tmp_path, student, items).run()
    assert len(traces) == len(DESIGNED) * 3 and all(t.failed is None for t in traces)
    gains = {(t.tutor, t.item): t.gain for t in traces}
    for i in items:
        assert gains[("designed:silent", i.id)] == 0.0
        assert gains[("designed:partial", i.id)] == gains[("designed:stepwise", i.id)] == 1.0
        assert gains[("designed:dump", i.id)] == 0.0
    one = next(t for t in traces if t.tutor == "designed:stepwise")
    assert [g.item for g in one.pre] == [p.id for p in items[0].probes]  # the item first, then its KC's
    assert all(not g.correct for g in one.pre) and all(g.correct for g in one.post)
    # the conversation: the student opens, then 3 rounds; the student never sees the key or the solution
    assert [t.role for t in one.turns] == ["student"] + ["tutor", "student"] * 3
    assert all(d.question.correct_option is None and d.question.solution is None for d in student.seen)
    # the pre-probe is the student's and the item's alone: asked once per probe, whatever the tutors
    assert sum(1 for d in student.seen if len(d.turns) == 1 and d.turns[0].role == "tutor") == sum(
        len(i.probes) for i in items)


def test_a_rerun_reads_the_folder_and_a_new_folder_copies_from_the_cache(tmp_path):
    items = load_probe_items("sample", n=2, probes=1)
    bank = {p.id: p for i in items for p in i.probes}
    first = _bench(tmp_path, LessonStudent(bank), items).run()
    again = LessonStudent(bank)
    assert _bench(tmp_path, again, items).run() == first and again.seen == []
    other = LessonStudent(bank)
    copy = _bench(tmp_path, other, items, name="other")
    assert copy.run() == first and other.seen == [] and copy.runner.report.from_cache == len(first)


def test_a_failed_conversation_counts_as_failed_in_every_aggregate(tmp_path):
    items = load_probe_items("sample", n=2, probes=1)
    bad = items[1].id
    student = LessonStudent({p.id: p for i in items for p in i.probes}, fail_on=bad)
    bench = _bench(tmp_path, student, items)
    traces = bench.run()
    failed = [t for t in traces if t.failed]
    assert {t.item for t in failed} == {bad} and len(failed) == len(DESIGNED)
    assert all(t.gain is None and "endpoint down" in t.failed for t in failed)
    fam = family("sim-student")
    results = fam.summarize(traces, settings={}, order=list(DESIGNED), n_resamples=100, seed=0)
    assert results.failed == len(DESIGNED) and results.episodes == len(traces)
    assert results.tutors["designed:stepwise"]["gain"].n == 1  # one item left per tutor
    # certify reads the same: the failed conversations are there with no value
    from simhub.tutoring.report import write_kit_results

    write_kit_results(results, bench.output)
    got = fam.outcomes(str(bench.output))
    assert sorted(v is None for _, c, v in got.episodes if c == bad) == [True] * len(DESIGNED)


def test_grading_is_the_exact_option_letter():
    item = load_probe_items("sample", n=1)[0].item
    assert grade(item, f"{item.answer}) whatever") and not grade(item, _wrong(item))
    assert not grade(item, "I do not know")


def test_the_command_line_names_a_bad_student_and_bad_options(tmp_path, capsys):
    from simhub.cli import main

    out = str(tmp_path / "x")
    assert main(["tutor-bench", "--learner", "student:nobody", "--tutor", "designed:silent", "--output", out]) == 2
    assert "nobody" in capsys.readouterr().err
    assert main(["tutor-bench", "--learner", "student:tiny-student-base", "--tutor", "designed:silent",
                 "--probes", "0", "--output", out]) == 2
    assert "--probes: 0 must be at least 1" in capsys.readouterr().err
    assert main(["tutor-bench", "--learner", "student:tiny-student-base", "--tutor", "designed:silent",
                 "--turns", "0", "--output", out]) == 2
    assert "--turns: 0 must be at least 1" in capsys.readouterr().err
    assert main(["tutor-bench", "--learner", "student", "--tutor", "designed:silent", "--output", out]) == 2
    assert "student:MODEL" in capsys.readouterr().err
    assert main(["tutor-bench", "--learner", "knowsim", "--tutor", "designed:silent", "--turns", "2",
                 "--output", out]) == 2
    assert "an option of the sim-student learner family" in capsys.readouterr().err


@pytest.mark.slow
def test_the_command_runs_a_real_local_student(tmp_path):
    """The demo's tiny base student through the command: traces, kit results, and certify's outcomes."""
    from simhub.cli import main

    out = tmp_path / "run"
    assert main(["tutor-bench", "--learner", "student:tiny-student-base", "--tutor", "designed:silent",
                 "--tutor", "designed:stepwise", "--questions", "2", "--probes", "1", "--turns", "2",
                 "--bootstrap", "50", "--output", str(out)]) == 0
    doc = json.loads((out / "results.json").read_text())
    assert doc["kind"] == "simhub-probe-bench-results" and doc["family"] == "sim-student" and doc["episodes"] == 4
    got = family("sim-student").outcomes(str(out))
    assert len(got.episodes) == 4 and got.outcome == "gain"
    # --rescore finds the family from the folder and recomputes the same results with no model call
    assert main(["tutor-bench", "--rescore", "--bootstrap", "50", "--output", str(out)]) == 0
    again = json.loads((out / "results.json").read_text())
    assert again["tutors"] == doc["tutors"] and again["ranks"] == doc["ranks"]
    # the learner's side of the conversations, on the sample corpus's question text (for realism)
    dialogues = family("sim-student").learner_dialogues(str(out))
    assert len(dialogues) == 4 and all(d.turns[0].role == "student" for d in dialogues)
    assert all(d.question.text.startswith("Question Text:") for d in dialogues)
