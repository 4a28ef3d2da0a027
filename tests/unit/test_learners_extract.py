"""Signals of a turn (the offline stand-in's rules, the LLM answer's checks) and the learner's turns
(density, articulation mode, connectable unknowns, the scripted learner, the role-play answer)."""

from __future__ import annotations

import json

import pytest

from simhub.learners import PAPER, IUSignal, KnowledgeState, initial_state, shipped_graphs, update, validate_graph
from simhub.learners.chat import ChatModel, ChatOutcome
from simhub.learners.extract import ExtractRequest, LLMExtractor, OfflineExtractor, has_cue, parse_signals
from simhub.learners.graph import IUEdge, IUGraph, IUNode
from simhub.learners.roleplay import (
    LearnerRequest,
    ScriptedLearner,
    articulation_mode,
    neighbourhood_density,
    parse_learner_turn,
    state_view,
)
from simhub.prompts.learners import extractor_messages, learner_messages
from simhub.tutoring.knowsim.tutors import DumpTutor, StepwiseTutor, next_teachable

NODES = (
    IUNode(id="A", concept="Equivalent fractions", abstraction_level=0.9,
           description="Multiplying the top and bottom of a fraction by the same number gives an equal fraction."),
    IUNode(id="B", concept="Common denominator", abstraction_level=0.7,
           description="Two fractions are rewritten over one shared bottom number before they are added."),
    IUNode(id="C", concept="Add the numerators", abstraction_level=0.5,
           description="With a shared bottom number, the tops are added and the bottom stays the same."),
    IUNode(id="D", concept="Rounding to tens", abstraction_level=0.9,
           description="A whole number is rounded to the nearest multiple of ten."),
)
GRAPH = validate_graph(IUGraph(nodes=NODES, edges=(IUEdge(source="A", target="B", delta_l=0.2),
                                                   IUEdge(source="B", target="C", delta_l=0.2))), name="frac")


def states(**kw: str) -> KnowledgeState:
    full = dict.fromkeys(GRAPH.ids, "unaware")
    full.update(kw)
    return KnowledgeState(states=full)


def extract(tutor: str, learner: str = "ok", previous: str = "") -> dict:
    history = (("learner", "hi"), ("tutor", previous)) if previous else ()
    (r,) = OfflineExtractor("lexical").extract([ExtractRequest(GRAPH, states(), history, learner, tutor)])
    assert r.error is None and r.flagged is None
    return {iu: (s.teaching_quality, s.user_attempt_type) for iu, s in r.signals.items()}


# ------------------------------------------------------------------------------------ offline extractor


def test_a_worked_explanation_is_well_explained_and_a_mention_is_shallow():
    worked = ("A common denominator means both fractions are rewritten over one shared bottom number. "
              "For example, 1/3 and 1/4 are rewritten over 12 because 12 is a shared bottom number of both.")
    got = extract(worked)
    assert got["B"][0] == "well_explained"
    assert got["D"][0] == "not_mentioned"
    # The same IU in one sentence, with no reason, example or numbers: shallow.
    assert extract("You need a common denominator, a shared bottom number.")["B"][0] == "shallow"
    # Two long sentences without any elaboration cue are still shallow.
    assert extract("Two fractions are rewritten over one shared bottom number before they are added together. "
                   "The common denominator is the shared bottom number of the two fractions we have.")["B"][0] == "shallow"


def test_every_iu_gets_a_signal_and_unrelated_text_mentions_nothing():
    got = extract("The weather is nice today. Let us take a short break.")
    assert set(got) == set(GRAPH.ids) and all(v == ("not_mentioned", "none") for v in got.values())


def test_attempts_restating_is_articulation_new_content_is_reasoning_a_question_is_none():
    previous = "With a shared bottom number, the tops are added and the bottom stays the same."
    assert extract("Nice.", learner="So the tops are added and the bottom stays the same.", previous=previous)["C"][1] == \
        "articulation"
    assert extract("Nice.", learner="So I add 1 and 2 on top and keep the shared bottom 5, giving tops 3.",
                   previous=previous)["C"][1] == "reasoning"
    assert extract("Nice.", learner="Are the tops added while the bottom stays the same?",
                   previous=previous)["C"][1] == "none"


def test_cues():
    assert has_cue("This works because both are equal.") and has_cue("For example, take 1/2.")
    assert has_cue("Then 3 + 4 = 7.") and has_cue("Can you see why?")
    assert not has_cue("Fractions have tops and bottoms.")


def test_the_offline_extractor_is_deterministic_and_names_its_rules():
    ex = OfflineExtractor("lexical")
    req = ExtractRequest(GRAPH, states(), (), "hi", StepwiseTutor.explain(GRAPH, states(), "Add 1/3 + 1/4"))
    assert ex.extract([req]) == OfflineExtractor("lexical").extract([req])
    assert ex.describe()["threshold"] == 0.25 and ex.describe()["similarity"] == "lexical"


def test_on_the_shipped_graphs_the_stepwise_tutor_explains_its_iu_and_the_dump_mostly_mentions():
    ex = OfflineExtractor("lexical")
    hits = total = dump_well = dump_mentioned = 0
    for name, g in list(shipped_graphs().items())[:12]:
        vg = validate_graph(g, name=name)
        reqs = []
        for k, iu in enumerate(vg.order):
            s = KnowledgeState(states={v: "knows_well" if v in vg.order[:k] else "unaware" for v in vg.ids})
            assert next_teachable(vg, s) == iu
            reqs.append((iu, ExtractRequest(vg, s, (), "ok", StepwiseTutor.explain(vg, s, g.question))))
        for iu, r in zip((i for i, _ in reqs), ex.extract([r for _, r in reqs]), strict=True):
            total += 1
            hits += r.signals[iu].teaching_quality == "well_explained"
        (d,) = ex.extract([ExtractRequest(vg, initial_state(vg, "novice"), (), "ok", DumpTutor.dump(vg))])
        dump_mentioned += sum(s.teaching_quality != "not_mentioned" for s in d.signals.values())
        dump_well += sum(s.teaching_quality == "well_explained" for s in d.signals.values())
    assert hits / total > 0.9
    assert dump_mentioned > 0.8 * total and dump_well < 0.5 * dump_mentioned


# -------------------------------------------------------------------------------------- LLM answers


def answer(**overrides) -> str:
    labels = {iu: {"id": iu, "teaching_quality": "not_mentioned", "user_attempt_type": "none"} for iu in GRAPH.ids}
    for iu, (tq, at) in overrides.items():
        labels[iu] = {"id": iu, "teaching_quality": tq, "user_attempt_type": at}
    return json.dumps({"ius": list(labels.values())})


def test_parse_signals_checks_every_iu():
    got = parse_signals(GRAPH, "```json\n" + answer(B=("well_explained", "reasoning")) + "\n```")
    assert got["B"].teaching_quality == "well_explained" and got["B"].user_attempt_type == "reasoning"
    assert list(got) == list(GRAPH.ids)
    bad = json.loads(answer())
    bad["ius"][0]["id"] = "IU99"
    with pytest.raises(ValueError, match="unknown IU 'IU99'"):
        parse_signals(GRAPH, json.dumps(bad))
    bad = json.loads(answer())
    bad["ius"].pop()
    with pytest.raises(ValueError, match="no label for IU D"):
        parse_signals(GRAPH, json.dumps(bad))
    bad = json.loads(answer())
    bad["ius"][1]["teaching_quality"] = "great"
    with pytest.raises(ValueError, match="teaching_quality: 'great'"):
        parse_signals(GRAPH, json.dumps(bad))
    with pytest.raises(ValueError, match="not JSON"):
        parse_signals(GRAPH, "I cannot do that")


class Scripted(ChatModel):
    """A chat model answering from a list (the LLM code path without an endpoint)."""

    def __init__(self, answers):
        self.answers, self.prompts = list(answers), []

    def describe(self):
        return {"kind": "scripted-test"}

    def chat(self, prompts, *, json_mode, temperature, max_tokens, seeds, schemas=None):
        self.prompts += prompts
        return [self.answers.pop(0) for _ in prompts]


def test_the_llm_extractor_flags_an_unusable_answer_and_fails_on_an_endpoint_error():
    chat = Scripted([ChatOutcome(text=answer(A=("shallow", "none"))), ChatOutcome(text="{}"),
                     ChatOutcome(error="HTTP 503")])
    req = ExtractRequest(GRAPH, states(), (), "hi", "Fractions!", "Add 1/3 + 1/4")
    ok, flagged, failed = LLMExtractor(chat).extract([req, req, req])
    assert ok.signals["A"].teaching_quality == "shallow" and ok.flagged is None
    assert flagged.flagged == "no 'ius' list" and all(s.teaching_quality == "not_mentioned" for s in flagged.signals.values())
    assert failed.error == "extractor: HTTP 503"
    prompt = chat.prompts[0][-1]["content"]
    assert "- A (unaware): Equivalent fractions." in prompt and "The tutor's reply:\nFractions!" in prompt


# ------------------------------------------------------------------------------------ learner's turns


def test_density_and_articulation_mode():
    # Neighbours: A-B, B-A/C, C-B; D has none (counts 1.0).
    s = states(A="knows_well", B="partial_understanding")
    # A: B ok -> 1; B: A ok, C not -> 0.5; C: B ok -> 1; D: 1.0  => 3.5 / 4
    assert neighbourhood_density(GRAPH, s) == pytest.approx(0.875)
    assert neighbourhood_density(GRAPH, states()) == pytest.approx(0.25)  # only D's 1.0
    assert articulation_mode(0.6) == "explicit" and articulation_mode(0.59) == "vague"
    assert articulation_mode(0.3) == "vague" and articulation_mode(0.29) == "deferential"


def test_connectable_unknowns_are_below_partial_with_prerequisites_at_partial_or_better():
    view = state_view(GRAPH, states(A="knows_well", B="struggling"))
    assert view.known == ("A",) and view.struggling == ("B",)
    assert view.connectable == ("D", "B")  # B: A known; D: a root; C: B only struggling
    view = state_view(GRAPH, states(A="partial_understanding"))
    assert "B" in view.connectable and "C" not in view.connectable


def test_the_scripted_learner_speaks_from_its_state():
    learner = ScriptedLearner()
    rich = states(A="knows_well", B="knows_well", D="knows_well")
    (t1,) = learner.speak([LearnerRequest(GRAPH, rich, "Add 1/3 + 1/4", (), 1)])
    assert t1.mode == "explicit" and "Add 1/3 + 1/4" in t1.message and "add the numerators" in t1.message
    (poor,) = learner.speak([LearnerRequest(GRAPH, states(), "Add 1/3 + 1/4", (), 1)])
    assert poor.mode == "deferential" and "help" in poor.message.lower()
    assert learner.speak([LearnerRequest(GRAPH, rich, "Add 1/3 + 1/4", (), 1)]) == [t1]  # deterministic
    # After a turn that advanced C, an explicit learner restates C and asks to verify it.
    record = update(GRAPH, rich, {"C": IUSignal(teaching_quality="well_explained")}, PAPER)
    assert record.advanced == ("C",)
    (t2,) = learner.speak([LearnerRequest(GRAPH, record.state, "q", (("learner", t1.message), ("tutor", "...")), 2,
                                          record)])
    assert t2.attempt_verify and NODES[2].description in t2.message


def test_a_role_play_answer_that_is_not_the_json_is_used_as_text_and_flagged():
    good = parse_learner_turn('{"thought": "hmm", "message": "Is it 7/12?", "attempt_verify": true}', "vague")
    assert good.message == "Is it 7/12?" and good.attempt_verify and good.flagged is None and good.mode == "vague"
    bad = parse_learner_turn("  I think   it is 2/7 ")
    assert bad.message == "I think it is 2/7" and bad.flagged


def test_the_prompts_carry_the_state():
    msgs = learner_messages("Add 1/3 + 1/4", [("learner", "hi"), ("tutor", "Hello")], known=["Equivalent fractions"],
                            struggling=[], unaware=["Rounding to tens"], connectable=["Common denominator"],
                            mode="deferential", turn=2)
    system, user = msgs[0]["content"], msgs[1]["content"]
    assert "follow the tutor's lead" in system and '"attempt_verify"' in system
    assert "never mention them):\n- Rounding to tens" in user and "Tutor: Hello" in user
    ext = extractor_messages("q", [("A", "c", "d")], {"A": "struggling"}, [], "u", "a")
    assert "- A (struggling): c. d" in ext[1]["content"] and "every IU listed exactly once" in ext[0]["content"]
