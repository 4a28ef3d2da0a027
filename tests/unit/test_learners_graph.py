"""IU graphs: the validator's errors and warnings, depths and order, the file layouts, and the graphs
shipped for the sample corpus's questions (FIDELITY.md, "Learners")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simhub.errors import DataError
from simhub.learners.graph import (
    GRAPH_FORMAT,
    GraphError,
    IUEdge,
    IUGraph,
    IUNode,
    parse_graphs,
    read_graphs,
    validate_graph,
    write_graphs,
)


def make(levels: dict[str, float], edges: list[tuple[str, str]], **kw) -> IUGraph:
    nodes = tuple(IUNode(id=iu, concept=f"concept {iu}", abstraction_level=level) for iu, level in levels.items())
    return IUGraph(nodes=nodes, edges=tuple(
        IUEdge(source=a, target=b, delta_l=round(abs(levels.get(a, 0) - levels.get(b, 0)), 6)) for a, b in edges), **kw)


def ladder(n: int = 10) -> dict[str, float]:
    """Levels for X1..Xn falling 0.05 a step from 0.95."""
    return {f"X{i}": round(0.95 - 0.05 * (i - 1), 2) for i in range(1, n + 1)}


def chain(n: int = 10) -> list[tuple[str, str]]:
    return [(f"X{i}", f"X{i + 1}") for i in range(1, n)]


def codes(g) -> list[str]:
    return sorted(w.code for w in g.warnings)


# ------------------------------------------------------------------------------------------ errors


def test_a_cycle_is_an_error_that_names_its_ius():
    g = make(ladder(10), [*chain(10), ("X6", "X3")])
    with pytest.raises(GraphError) as info:
        validate_graph(g, name="q1", file="graphs.json")
    message = str(info.value)
    assert message.startswith("graphs.json: q1: cycle: ")
    cycle = message.split("cycle: ")[1].split(" -> ")
    assert cycle[0] == cycle[-1] and set(cycle) == {"X3", "X4", "X5", "X6"}
    assert info.value.iu in {"X3", "X4", "X5", "X6"} and info.value.graph == "q1" and info.value.file == "graphs.json"
    assert isinstance(info.value, DataError)


def test_a_self_loop_is_a_cycle():
    with pytest.raises(GraphError, match=r"cycle: X2 -> X2") as info:
        validate_graph(make(ladder(3), [("X1", "X2"), ("X2", "X2")]))
    assert info.value.field == "edges[1]"


def test_an_edge_to_an_unknown_iu_is_an_error_naming_it():
    with pytest.raises(GraphError) as info:
        validate_graph(make(ladder(3), [("X1", "X2"), ("X2", "X33")]))
    assert info.value.iu == "X33" and info.value.field == "edges[1].to"
    assert "X33" in str(info.value) and "did you mean 'X3'" in str(info.value)
    with pytest.raises(GraphError) as info:
        validate_graph(make(ladder(3), [("Y1", "X2")]))
    assert info.value.field == "edges[0].from"


def test_duplicate_ids_bad_levels_and_empty_graphs_are_errors():
    twice = IUGraph(nodes=(IUNode(id="A", concept="a", abstraction_level=0.5),
                           IUNode(id="A", concept="b", abstraction_level=0.4)))
    with pytest.raises(GraphError, match="'A' is defined twice") as info:
        validate_graph(twice)
    assert info.value.field == "nodes[1].id"
    with pytest.raises(GraphError, match="outside"):
        validate_graph(IUGraph(nodes=(IUNode(id="A", concept="a", abstraction_level=1.5),)))
    with pytest.raises(GraphError, match="no nodes"):
        validate_graph(IUGraph(nodes=()))


# ------------------------------------------------------------------------------------------ warnings


def test_a_good_graph_has_no_warnings_and_its_depths_and_order():
    levels = ladder(10)
    # X1 -> X2 -> X3 and X1 -> X3: X3's depth is the longest path (2), not the shortest.
    edges = [("X1", "X2"), ("X2", "X3"), ("X1", "X3"), *chain(10)[2:]]
    g = validate_graph(make(levels, edges))
    assert g.warnings == ()
    assert g.depth["X1"] == 0 and g.depth["X3"] == 2 and g.depth["X10"] == 9
    assert g.order == tuple(f"X{i}" for i in range(1, 11))
    assert g.prereqs["X3"] == ("X2", "X1") and g.neighbours["X2"] == ("X1", "X3")
    assert g.label("X3") == "X3: concept X3"


def test_size_outside_10_to_30_is_a_warning():
    assert codes(validate_graph(make(ladder(9), chain(9)))) == ["size"]
    levels = {f"X{i}": round(0.95 - 0.025 * i, 3) for i in range(1, 32)}
    assert codes(validate_graph(make(levels, chain(31)))) == ["size"]
    assert codes(validate_graph(make(ladder(10), chain(10)))) == []


def test_a_large_abstraction_step_is_a_warning():
    levels = ladder(10)
    levels["X2"] = 0.5  # X1 (0.95) -> X2 (0.5): Δl = 0.45
    g = validate_graph(make(levels, chain(10)))
    assert codes(g) == ["delta_l"] and g.warnings[0].subject == "X1->X2"


def test_delta_l_that_disagrees_with_the_levels_is_a_warning():
    g = make(ladder(10), chain(10))
    edges = list(g.edges)
    edges[0] = IUEdge(source="X1", target="X2", delta_l=0.3)
    assert codes(validate_graph(IUGraph(nodes=g.nodes, edges=tuple(edges)))) == ["delta_l_mismatch"]


def test_a_low_level_iu_without_prerequisites_is_an_orphan_and_one_without_edges_is_isolated():
    levels = {**ladder(10), "O": 0.2, "I": 0.9}
    edges = [*chain(10), ("O", "X10")]  # O has a dependent but no prerequisite, far below the top (0.95)
    g = validate_graph(make(levels, edges))
    assert [(w.code, w.subject) for w in g.warnings] == [("orphan", "O"), ("isolated", "I")]


def test_a_duplicate_edge_is_a_warning_and_counted_once():
    g = validate_graph(make(ladder(10), [*chain(10), ("X1", "X2")]))
    assert codes(g) == ["duplicate_edge"] and g.prereqs["X2"] == ("X1",)


# ------------------------------------------------------------------------------------------ files


KNOWSIM_CACHE = {
    "item_a": {
        "knowledge_areas": ["Place value"],
        "nodes": [
            {"id": "IU1", "concept": "Digits have place values", "abstraction_level": 0.9,
             "description": "Each digit's value depends on its column.", "extra": "ignored"},
            {"id": "IU2", "concept": "Rounding to a column", "abstraction_level": 0.6, "description": "Look right."},
        ],
        "edges": [{"from": "IU1", "to": "IU2", "delta_l": 0.3, "reason": "Rounding reads columns.", "weight": 1}],
    },
    "item_b": {"knowledge_areas": [], "nodes": [{"id": "IU1", "concept": "x", "abstraction_level": 0.5}],
               "edges": []},
}


def test_reads_the_knowsim_iu_cache_layout(tmp_path):
    path = tmp_path / "cache.json"
    path.write_text(json.dumps(KNOWSIM_CACHE))
    graphs = read_graphs(path)
    assert list(graphs) == ["item_a", "item_b"]
    a = graphs["item_a"]
    assert a.knowledge_areas == ("Place value",) and a.nodes[1].concept == "Rounding to a column"
    assert a.edges[0] == IUEdge(source="IU1", target="IU2", delta_l=0.3, reason="Rounding reads columns.")


def test_simhub_format_round_trips_and_fills_delta_l(tmp_path):
    graphs = read_graphs(_write(tmp_path / "c.json", KNOWSIM_CACHE))
    out = tmp_path / "graphs.json"
    write_graphs(out, graphs)
    doc = json.loads(out.read_text())
    assert (doc["format"], doc["version"]) == (GRAPH_FORMAT, 1) and doc["graphs"]["item_a"]["edges"][0]["from"] == "IU1"
    assert read_graphs(out) == graphs
    del doc["graphs"]["item_a"]["edges"][0]["delta_l"]
    doc["graphs"]["item_a"]["question"] = "Round 6849 to the nearest hundred."
    yaml_path = tmp_path / "graphs.yaml"
    import yaml

    yaml_path.write_text(yaml.safe_dump(doc))
    again = read_graphs(yaml_path)["item_a"]
    assert again.edges[0].delta_l == pytest.approx(0.3) and again.question.startswith("Round")


def test_one_bare_graph_is_an_item_named_after_the_file(tmp_path):
    path = _write(tmp_path / "lamps.json", KNOWSIM_CACHE["item_a"])
    assert list(read_graphs(path)) == ["lamps"]


def test_malformed_graph_files_name_the_file_and_field(tmp_path):
    with pytest.raises(DataError, match="version 7"):
        parse_graphs({"format": GRAPH_FORMAT, "version": 7, "graphs": {}}, file="g.json")
    with pytest.raises(DataError, match="not an IU graph file"):
        parse_graphs({"something": 1}, file="g.json")
    bad = {"format": GRAPH_FORMAT, "version": 1, "graphs": {"q": {"nodes": [{"id": "A", "concept": "a"}]}}}
    with pytest.raises(DataError) as info:
        parse_graphs(bad, file="g.json")
    assert "abstraction_level" in str(info.value) and info.value.file == "g.json"
    (tmp_path / "broken.json").write_text("{")
    with pytest.raises(DataError, match="not valid JSON"):
        read_graphs(tmp_path / "broken.json")
    with pytest.raises(DataError, match="cannot read"):
        read_graphs(tmp_path / "missing.json")


def _write(path, data):
    path.write_text(json.dumps(data))
    return path


# ------------------------------------------------------------------------------------------ shipped graphs


def _sample_questions() -> dict[str, str]:
    import csv

    from simhub.data.sample import sample_raw_dir

    with open(sample_raw_dir() / "dq-question-metadata.csv", encoding="utf-8", newline="") as f:
        return {row["QuestionId_DQ"]: row["Text"] for row in csv.DictReader(f) if row["Label"] == "Question Text"}


def test_every_shipped_graph_validates_without_errors_or_warnings():
    import simhub
    from simhub.learners.graph import SHIPPED_DIR, shipped_graph_files, shipped_graphs

    assert SHIPPED_DIR.is_relative_to(Path(simhub.__file__).parent)  # package data, shipped in the wheel
    assert len(shipped_graph_files()) >= 9
    graphs = shipped_graphs()
    for name, graph in graphs.items():
        checked = validate_graph(graph, name=name)
        assert checked.warnings == (), (name, checked.warnings)
        assert 10 <= checked.size <= 30 and graph.knowledge_areas and graph.question
        assert all(node.description for node in graph.nodes) and all(edge.reason for edge in graph.edges)


def test_every_sample_question_has_a_shipped_graph_of_its_text():
    from simhub.data.sample import load_sample_corpus
    from simhub.learners.graph import shipped_graphs

    graphs = shipped_graphs()
    questions = _sample_questions()
    assert len(questions) == 46 and set(graphs) == set(questions)
    for qid, text in questions.items():
        assert graphs[qid].question == text, qid
    # The corpus's dialogues name their question by id; each one's text starts with the graph's question.
    corpus = load_sample_corpus()
    for split in ("train", "val", "test"):
        for dialogue in corpus[split]:
            qid = dialogue.id.split("-")[0]
            first = dialogue.question.text.split("\n")[0].removeprefix("Question Text: ")
            assert first == " ".join(graphs[qid].question.split()), dialogue.id
