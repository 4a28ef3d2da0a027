"""The knowledge-state learner as a Simulator: its state replayed through real dialogue prefixes."""

from __future__ import annotations

import msgspec
import pytest

from simhub.errors import UnknownNameError
from simhub.evaluation.runs import simulate
from simhub.learners import PAPER, initial_state, shipped_graphs, validate_graph
from simhub.learners.extract import OfflineExtractor
from simhub.learners.roleplay import ScriptedLearner
from simhub.simulation import Target
from simhub.tutoring.knowsim.simulator import KnowledgeStateSimulator


@pytest.fixture(scope="module")
def simulator():
    graphs = {k: validate_graph(g, name=k) for k, g in shipped_graphs().items()}
    return KnowledgeStateSimulator(ScriptedLearner(), OfflineExtractor("lexical"), graphs, PAPER, level="novice")


def test_it_writes_the_next_student_turn_of_real_dialogues(sample_corpus, simulator):
    dialogues = list(sample_corpus["test"])[:6]
    targets = [Target(d, i) for d in dialogues for i in d.student_turn_indices()[:3]]
    records = simulate(simulator, targets, progress=False)
    assert len(records) == len(targets) and all(r["candidate"] for r in records)
    # The opening student turn is the learner's opening query, with the question in it.
    first, target = next((r, t) for r, t in zip(records, targets, strict=True)
                         if not [x for x in t.history if x.role == "student"])
    assert " ".join(target.dialogue.question.text.split())[:40] in first["candidate"]


def test_the_state_is_replayed_through_the_real_tutor_turns(sample_corpus, simulator):
    d = max(sample_corpus["test"], key=lambda d: len(d.turns))
    graph = simulator.graph_for(d)
    assert graph is not None and graph.name == d.id.split("-")[0]
    last = d.student_turn_indices()[-1]
    (state, history, record), = simulator._replay([Target(d, last)])
    assert len(history) == last and [r for r, _ in history].count("tutor") == sum(t.role == "tutor" for t in d.turns[:last])
    start = initial_state(graph, "novice")
    assert record is not None
    assert state.states != start.states  # the real tutor taught this learner something
    prompt = simulator.messages(Target(d, last))
    assert "Ideas you know well" in prompt[-1]["content"]


def test_a_rollout_or_a_sensitivity_prefix_keeps_its_dialogues_graph(sample_corpus, simulator):
    d = next(iter(sample_corpus["test"]))
    qid = d.id.split("-")[0]
    other = msgspec.structs.replace(d.question, text="What is 2 + 2?")  # the id alone must find the graph
    for id_ in (f"{qid}~0", f"{qid}@3:helpful", f"{d.id}~1"):
        assert simulator.graph_for(msgspec.structs.replace(d, id=id_, question=other)).name == qid, id_
    assert simulator.graph_for(msgspec.structs.replace(d, id=f"nope~{qid}", question=other)) is None


def test_a_dialogue_without_a_graph_is_a_counted_error(sample_corpus, simulator):
    d = msgspec.structs.replace(next(iter(sample_corpus["test"])), id="nope-1")
    d = msgspec.structs.replace(d, question=msgspec.structs.replace(d.question, text="What is 2 + 2?"))
    (record,) = simulate(simulator, [Target(d, d.student_turn_indices()[0])], progress=False)
    assert record["candidate"] is None and "no IU graph" in record["error"]
    with pytest.raises(UnknownNameError, match="expert"):
        KnowledgeStateSimulator(ScriptedLearner(), OfflineExtractor("lexical"), {}, PAPER, level="expert")


def test_simhub_eval_gives_the_learner_a_table_1_row(tmp_path, sample_corpus):
    import json

    from simhub.cli import main
    from simhub.schema import write_jsonl
    from tests.conftest import TINY_PROFILE

    data = tmp_path / "test.jsonl"
    write_jsonl(data, sample_corpus["test"][:3])
    out = tmp_path / "run"
    assert main(["eval", "--profile", TINY_PROFILE, "--simulator", "knowsim:intermediate", "--data", str(data),
                 "--metrics", "rouge_l", "--bootstrap", "200", "--output", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["metrics"]["rouge_l"]["n"] > 0
    assert "knowsim:intermediate" in json.dumps(results)
