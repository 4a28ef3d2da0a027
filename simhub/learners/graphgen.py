"""IU graphs for new items, built by a chat model (``simhub learners graphs``).

Each item (a question and, when known, its reference solution) gets one JSON-mode request
(:func:`simhub.prompts.learners.graph_messages`). The answer is parsed as a graph and checked by
:func:`~simhub.learners.graph.validate_graph`; an answer that is not JSON, not a graph, or not a
valid one (a cycle, an edge to an unknown IU) is retried with another seed, up to ``retries`` times.
An item whose every attempt failed is counted and named with its last cause; it never stops the
run. Warnings (size outside 10-30, a step above 0.35, an orphan) are kept with the graph, as for a
hand-written one.

Answers are cached by the model's client (on the request: model, prompt, seed), so a rerun sends
nothing it has already asked; graphs already in the output file are kept and their items skipped.

Items come from:

* ``sample``: the sample corpus's questions (id ``QuestionId_DQ``, the question with its answer key
  and solution as the reference);
* a dialogue file of the canonical format (a QATD-2k split): one item per question;
* a JSONL of items as the knowsim repository ships them (``data/paper_subset/*.jsonl``): ``id``,
  ``problem`` or ``question``, and ``solution`` or ``answer`` as the reference; read from where it
  is, never copied.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import msgspec

from simhub.errors import DataError, SimhubError
from simhub.learners.chat import ChatModel, find_json_object
from simhub.learners.graph import IUGraph, ValidatedGraph, parse_graphs, read_graphs, validate_graph
from simhub.prompts.learners import graph_messages


@dataclasses.dataclass(frozen=True)
class GraphItem:
    id: str
    question: str
    reference: str | None = None


@dataclasses.dataclass
class GraphRun:
    """What :func:`build_graphs` made: the graphs by item id (those already in the output file
    included), the items it could not make a graph for, with the last cause, and the attempts."""

    graphs: dict[str, IUGraph]
    failures: dict[str, str]
    attempts: int = 0
    skipped: int = 0
    checked: dict[str, ValidatedGraph] = dataclasses.field(default_factory=dict)


def _dialogue_items(dialogues) -> list[GraphItem]:
    """One item per question: its id is the dialogue id's ``QuestionId_DQ`` part (``QID-INTERVENTION``),
    its reference the annotated answer key, solution and option explanations."""
    from simhub.prompts.common import format_question

    items: dict[str, GraphItem] = {}
    for d in dialogues:
        qid = str(d.id).split("-", 1)[0]
        if qid not in items:
            key = format_question(d)[len(d.question.text):].strip()
            items[qid] = GraphItem(qid, d.question.text, key or None)
    return list(items.values())


def read_items(spec: str) -> list[GraphItem]:
    """The items of ``sample``, a dialogue file or a knowsim item JSONL (see the module docstring)."""
    if spec == "sample":
        from simhub.data.sample import load_sample_corpus

        corpus = load_sample_corpus()
        return _dialogue_items([d for split in ("train", "val", "test") for d in corpus[split]])
    path = Path(spec)
    try:
        lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except OSError as exc:
        raise DataError(f"--items {spec}: cannot read ({exc.strerror or exc})", file=spec, field="items") from None
    if not lines:
        raise DataError(f"--items {spec}: no items", file=spec, field="items")
    try:
        first = json.loads(lines[0])
    except ValueError as exc:
        raise DataError(f"{spec}:1: not JSON ({exc})", file=spec, field="items") from None
    if isinstance(first, dict) and "turns" in first:
        from simhub.schema import read_jsonl

        return _dialogue_items(read_jsonl(path))
    items = []
    for n, line in enumerate(lines, 1):
        try:
            raw = json.loads(line)
        except ValueError as exc:
            raise DataError(f"{spec}:{n}: not JSON ({exc})", file=spec, field="items") from None
        question = raw.get("problem") or raw.get("question") if isinstance(raw, dict) else None
        if not isinstance(question, str) or "id" not in raw:
            raise DataError(f"{spec}:{n}: an item needs an id and a problem (or question)", file=spec, field="items")
        reference = raw.get("solution") or raw.get("answer")
        items.append(GraphItem(str(raw["id"]), question, reference if isinstance(reference, str) else None))
    return items


def parse_answer(text: str, item: GraphItem) -> tuple[IUGraph, ValidatedGraph]:
    """The graph in a model's answer, checked; a DataError saying what is wrong otherwise."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise DataError("the answer holds no JSON object")
    raw, flag = find_json_object(text)
    if raw is None:
        raise DataError(f"the answer is {flag}")
    if "nodes" not in raw:
        raise DataError("the answer is not a graph (no nodes)")
    # One graph, read as a graph file's single graph: keys simhub does not use are dropped, Δl filled in.
    (graph,) = parse_graphs(raw, file=f"answer for {item.id}").values()
    graph = msgspec.structs.replace(graph, question=item.question)
    return graph, validate_graph(graph, name=item.id)


def build_graphs(items: Sequence[GraphItem], chat: ChatModel, *, retries: int = 2, max_tokens: int = 8000,
                 existing: dict[str, IUGraph] | None = None,
                 on_item: Callable[[GraphItem, str | None], None] | None = None) -> GraphRun:
    """A graph per item through ``chat`` (JSON mode), with ``retries`` more attempts for an unusable
    answer; items in ``existing`` are kept and not asked again."""
    if retries < 0:
        raise DataError(f"--retries: {retries} must be at least 0", field="retries")
    run = GraphRun(graphs=dict(existing or {}), failures={})
    todo = [it for it in items if it.id not in run.graphs]
    run.skipped = len(items) - len(todo)
    causes: dict[str, str] = {}
    for attempt in range(retries + 1):
        if not todo:
            break
        prompts = [graph_messages(it.question, it.reference) for it in todo]
        # Attempt 0 sends no seed (the plain request); a retry changes the request, so the cache
        # cannot answer it with the unusable answer again.
        outcomes = chat.chat(prompts, json_mode=True, temperature=0.0, max_tokens=max_tokens,
                             seeds=[None if attempt == 0 else attempt] * len(todo))
        run.attempts += len(todo)
        left = []
        for it, out in zip(todo, outcomes, strict=True):
            if not out.ok:
                causes[it.id] = f"request failed: {out.error}"
                left.append(it)
                continue
            try:
                graph, checked = parse_answer(out.text, it)
            except SimhubError as exc:
                causes[it.id] = str(exc)
                left.append(it)
                continue
            run.graphs[it.id], run.checked[it.id] = graph, checked
            if on_item is not None:
                on_item(it, None)
        todo = left
    for it in todo:
        run.failures[it.id] = causes[it.id]
        if on_item is not None:
            on_item(it, causes[it.id])
    return run


def existing_graphs(output: str | os.PathLike[str]) -> dict[str, IUGraph]:
    """The graphs already in ``output`` (none when it does not exist yet)."""
    return read_graphs(output) if Path(output).is_file() else {}


__all__ = ["GraphItem", "GraphRun", "build_graphs", "existing_graphs", "parse_answer", "read_items"]
