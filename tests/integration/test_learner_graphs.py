"""``simhub learners graphs``: IU graphs for items through an OpenAI-compatible endpoint double, JSON
mode, checked and retried; failures named and counted, never fatal; a rerun asks nothing again."""

from __future__ import annotations

import json

import pytest

from simhub.cli import main
from simhub.errors import DataError
from simhub.learners.graph import GraphError, read_graphs, validate_graph
from simhub.learners.graphgen import GraphItem, parse_answer, read_items


def _graph(n: int = 10, *, cycle: bool = False) -> dict:
    nodes = [{"id": f"IU{k}", "concept": f"idea {k}", "abstraction_level": round(0.9 - 0.06 * k, 2),
              "description": f"Idea {k} of the solution."} for k in range(1, n + 1)]
    edges = [{"from": f"IU{k}", "to": f"IU{k + 1}", "reason": "needed next"} for k in range(1, n)]
    if cycle:
        edges.append({"from": f"IU{n}", "to": "IU1", "reason": "back"})
    return {"knowledge_areas": ["fractions"], "nodes": nodes, "edges": edges}


def _profile(tmp_path, url: str):
    path = tmp_path / "g.yaml"
    path.write_text(f"name: g\nsimulators:\n  grapher: {{kind: openai, model: graph-model, endpoint: "
                    f"{{base_url: '{url}', max_retries: 1, concurrency: 4}}}}\n")
    return path


def test_items_come_from_the_sample_corpus_a_split_and_knowsim_jsonl(tmp_path):
    sample = read_items("sample")
    assert len(sample) == len({i.id for i in sample}) and all(i.question for i in sample)
    assert any(i.reference and "Correct option:" in i.reference for i in sample)  # the answer key as reference
    knowsim = tmp_path / "math.jsonl"
    knowsim.write_text(json.dumps({"id": "math_001", "problem": "What is 2+2?", "solution": "It is $4$."}) + "\n")
    assert read_items(str(knowsim)) == [GraphItem("math_001", "What is 2+2?", "It is $4$.")]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"problem": "no id"}\n')
    with pytest.raises(DataError, match="needs an id"):
        read_items(str(bad))


def test_an_answer_is_parsed_checked_and_given_its_question():
    item = GraphItem("q1", "What is 1/3 + 1/4?")
    graph, checked = parse_answer("Here it is: " + json.dumps(_graph()), item)
    assert graph.question == item.question and checked.size == 10 and graph.edges[0].delta_l == pytest.approx(0.06)
    chatty = _graph()
    chatty["nodes"][0]["depth"] = 0  # keys simhub does not use are dropped, as in a knowsim IU cache
    chatty["notes"] = "made by a model"
    assert parse_answer(json.dumps(chatty), item)[0] == graph
    with pytest.raises(GraphError, match="cycle"):
        parse_answer(json.dumps(_graph(cycle=True)), item)
    with pytest.raises(DataError, match="no JSON object"):
        parse_answer("I cannot do that.", item)


def test_graphs_through_an_endpoint_retry_bad_answers_and_name_failures(tmp_path, fake_openai, capsys):
    asked: list[tuple[str, object]] = []

    def responder(body):
        user = body["messages"][-1]["content"]
        asked.append((user.split("\n")[1], body.get("seed")))
        if "Write 3/8 as a decimal" in user and body.get("seed") is None:
            return json.dumps(_graph(cycle=True))  # invalid first, valid on the retry
        if "never" in asked[-1][0]:
            return "no"
        return json.dumps(_graph(12))

    fake_openai.responder = responder
    items = tmp_path / "items.jsonl"
    rows = [{"id": "a", "problem": "Write 3/8 as a decimal."}, {"id": "b", "problem": "Solve x + 1 = 3."},
            {"id": "c", "problem": "A question never answered."}]
    items.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "graphs.json"
    profile = _profile(tmp_path, fake_openai.base_url)
    assert main(["learners", "graphs", "--items", str(items), "--model", "grapher", "--profile", str(profile),
                 "--output", str(out), "--retries", "1"]) == 0
    printed = capsys.readouterr()
    assert "2 graph(s) built, 0 already in" in printed.out and "1 failed" in printed.out
    assert "failed c: the answer holds no JSON object" in printed.out
    graphs = read_graphs(out)
    assert sorted(graphs) == ["a", "b"] and graphs["a"].question == "Write 3/8 as a decimal."
    assert all(validate_graph(g, name=k).size == 12 for k, g in graphs.items())
    bodies = fake_openai.chat_requests()
    assert all(r.body["response_format"] == {"type": "json_object"} and r.body["model"] == "graph-model" for r in bodies)
    # a: a bad answer, then a retry with a seed; b: one request; c: two unusable answers.
    assert len(bodies) == 5 and sorted(str(s) for _, s in asked).count("1") == 2
    # A rerun keeps the file's graphs, asks only for the failed item, and the cache answers it.
    before = len(fake_openai.chat_requests())
    assert main(["learners", "graphs", "--items", str(items), "--model", "grapher", "--profile", str(profile),
                 "--output", str(out), "--retries", "1"]) == 0
    assert "2 already in" in capsys.readouterr().out
    assert len(fake_openai.chat_requests()) == before  # cached answers: nothing sent again


def test_every_item_failing_exits_1_and_bad_input_exits_2(tmp_path, fake_openai, capsys):
    fake_openai.responder = lambda body: "nothing useful"
    items = tmp_path / "items.jsonl"
    items.write_text(json.dumps({"id": "a", "problem": "2+2?"}) + "\n")
    profile = _profile(tmp_path, fake_openai.base_url)
    out = tmp_path / "g.json"
    assert main(["learners", "graphs", "--items", str(items), "--model", "grapher", "--profile", str(profile),
                 "--output", str(out), "--retries", "0"]) == 1
    assert "failed a:" in capsys.readouterr().out
    assert main(["learners", "graphs", "--items", str(items), "--model", "nope", "--profile", str(profile),
                 "--output", str(out)]) == 2
    assert "grapher" in capsys.readouterr().err  # the unknown model's message lists the known ones
    assert main(["learners", "graphs", "--items", str(tmp_path / "missing.jsonl"), "--model", "grapher",
                 "--profile", str(profile), "--output", str(out)]) == 2
    assert main(["learners", "graphs", "--items", str(items), "--model", "grapher", "--profile", str(profile),
                 "--output", str(out), "--retries", "-1"]) == 2
