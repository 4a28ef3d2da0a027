"""The IU graph of a question: typed nodes and edges, the validator, and the graph files.

An Information Unit (IU) is one self-contained concept a learner needs for the question; an edge
``from -> to`` says that ``from`` is a prerequisite of ``to``. :func:`validate_graph` turns an
:class:`IUGraph` into a :class:`ValidatedGraph`: a DAG with a topological order, the depth of every
IU (the longest path from a root) and its prerequisites, plus the warnings a graph author should see.

Two file layouts are read (``docs/learners.md`` describes both):

* simhub's own: ``{"format": "simhub-iu-graphs", "version": 1, "graphs": {ITEM: GRAPH}}``, as JSON
  or YAML, where an edge may leave out ``delta_l`` (it is then ``|l_from - l_to|``);
* the knowsim repository's IU cache (``data/iu_cache/*.json``): ``{ITEM: GRAPH}``.

A file holding one bare ``GRAPH`` is read as one item named after the file. Keys simhub does not use
are dropped from the knowsim layout and from a bare graph; simhub's own layout allows none.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import msgspec

from simhub.errors import DataError, did_you_mean

#: The ``format`` marker of simhub's graph files and the version this code writes and reads.
GRAPH_FORMAT = "simhub-iu-graphs"
GRAPH_VERSION = 1

#: Authoring targets of the KnowSim paper (FIDELITY.md, "Learners"): a graph of 10-30 IUs, prerequisite
#: steps of at most about 0.35 in abstraction level.
MIN_SIZE, MAX_SIZE = 10, 30
MAX_DELTA_L = 0.35

SHIPPED_DIR = Path(__file__).parent.parent / "resources" / "learners"


class IUNode(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One IU: ``abstraction_level`` is 1 for a general principle, 0 for a question-specific step."""

    id: str
    concept: str
    abstraction_level: float
    description: str = ""


class IUEdge(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``source`` (``from`` in files) is a prerequisite of ``target`` (``to``)."""

    source: str = msgspec.field(name="from")
    target: str = msgspec.field(name="to")
    delta_l: float
    reason: str = ""


class IUGraph(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """A question's IU graph as stored; ``question`` is the item's text where the file records it."""

    nodes: tuple[IUNode, ...]
    edges: tuple[IUEdge, ...] = ()
    knowledge_areas: tuple[str, ...] = ()
    question: str | None = None


class GraphError(DataError):
    """A graph that cannot be used: a cycle, an edge to an unknown IU, a duplicate id. ``iu`` names the
    IU at fault, ``graph`` the item; ``field`` is the JSON path (``edges[3].to``)."""

    def __init__(self, message: str, *, graph: str, iu: str | None = None, field: str | None = None,
                 file: str | None = None):
        super().__init__(message, file=file, field=field)
        self.graph, self.iu = graph, iu


@dataclass(frozen=True)
class GraphWarning:
    """Something a graph author should look at; the graph is still usable.

    ``code`` is one of ``size``, ``delta_l``, ``delta_l_mismatch``, ``orphan``, ``isolated``,
    ``duplicate_edge`` and, where cycles are ordered rather than refused, ``cycle``; ``subject`` the IU
    (``IU3``) or edge (``IU1->IU3``) it is about.
    """

    code: str
    subject: str
    message: str


@dataclass(frozen=True, eq=False)
class ValidatedGraph:
    """A graph that passed :func:`validate_graph`, indexed for the learner's rules.

    ``ids`` is graph (file) order; ``order`` is the topological order every rule walks: by depth,
    then graph order, so every prerequisite comes before its dependents.
    """

    name: str
    graph: IUGraph
    ids: tuple[str, ...]
    index: Mapping[str, int]
    order: tuple[str, ...]
    depth: Mapping[str, int]
    prereqs: Mapping[str, tuple[str, ...]]
    neighbours: Mapping[str, tuple[str, ...]]
    warnings: tuple[GraphWarning, ...]

    @property
    def size(self) -> int:
        return len(self.ids)

    def node(self, iu: str) -> IUNode:
        return self.graph.nodes[self.index[iu]]

    def label(self, iu: str) -> str:
        """The knowsim repository's state key of an IU: ``"IU3: Concept name"``."""
        node = self.node(iu)
        return f"{node.id}: {node.concept}" if node.concept else node.id


#: How a cycle is treated: ``refuse`` (an error naming it: the paper's graphs are DAGs) or ``released``
#: (a warning naming it, and the released code's own order on it: :func:`_released_depths`).
CycleRule = Literal["refuse", "released"]


def validate_graph(graph: IUGraph, *, name: str = "graph", file: str | None = None,
                   cycles: CycleRule = "refuse") -> ValidatedGraph:
    """Check ``graph`` and index it; raise :class:`GraphError` for what makes it unusable.

    Errors: no nodes, an empty or duplicate IU id, an abstraction level outside [0, 1], an edge to
    an unknown IU, a cycle (named IU by IU). Warnings (returned): a size outside 10-30, an edge with
    Δl > 0.35 or a ``delta_l`` that disagrees with the two levels, a duplicate edge, an IU with no
    edge at all, and an *orphan*: an IU with no prerequisite that sits more than 0.35 below the
    graph's most general IU, so it reads as a derived concept that nothing leads to.

    With ``cycles="released"`` a cycle is a warning (code ``cycle``, naming it) instead, and the
    depths are the released code's: a longest path found depth first, a prerequisite already on the
    path counting 0 (:func:`_released_depths`); on a graph without a cycle both give the same depths.
    A self-loop stays an error either way.
    """
    where = "".join(f"{part}: " for part in (file, name) if part)

    def error(message: str, *, iu: str | None = None, field: str | None = None) -> GraphError:
        return GraphError(where + message, graph=name, iu=iu, field=field, file=file)

    if not graph.nodes:
        raise error("the graph has no nodes", field="nodes")
    index: dict[str, int] = {}
    for i, node in enumerate(graph.nodes):
        if not node.id:
            raise error(f"nodes[{i}] has an empty id", field=f"nodes[{i}].id")
        if node.id in index:
            raise error(f"IU {node.id!r} is defined twice (nodes[{index[node.id]}] and nodes[{i}])", iu=node.id,
                        field=f"nodes[{i}].id")
        if not 0.0 <= node.abstraction_level <= 1.0:
            raise error(f"IU {node.id!r}: abstraction_level {node.abstraction_level} is outside [0, 1]", iu=node.id,
                        field=f"nodes[{i}].abstraction_level")
        index[node.id] = i
    ids = tuple(index)

    warnings: list[GraphWarning] = []
    prereqs: dict[str, list[str]] = {iu: [] for iu in ids}
    children: dict[str, list[str]] = {iu: [] for iu in ids}
    seen_edges: set[tuple[str, str]] = set()
    for i, edge in enumerate(graph.edges):
        for end, iu in (("from", edge.source), ("to", edge.target)):
            if iu not in index:
                raise error(f"edges[{i}] ({edge.source} -> {edge.target}) names unknown IU {iu!r}"
                            f"{did_you_mean(iu, ids)}", iu=iu, field=f"edges[{i}].{end}")
        subject = f"{edge.source}->{edge.target}"
        if edge.source == edge.target:
            raise error(f"cycle: {edge.source} -> {edge.source} (edges[{i}] makes an IU its own prerequisite)",
                        iu=edge.source, field=f"edges[{i}]")
        if (edge.source, edge.target) in seen_edges:
            warnings.append(GraphWarning("duplicate_edge", subject, f"edge {subject} appears more than once"))
            continue
        seen_edges.add((edge.source, edge.target))
        prereqs[edge.target].append(edge.source)
        children[edge.source].append(edge.target)
        levels = (graph.nodes[index[edge.source]].abstraction_level, graph.nodes[index[edge.target]].abstraction_level)
        if edge.delta_l > MAX_DELTA_L + 1e-9:
            warnings.append(GraphWarning("delta_l", subject, f"edge {subject} has delta_l {edge.delta_l:g} > "
                                         f"{MAX_DELTA_L}: a bridging IU between them would make the step natural"))
        if abs(edge.delta_l - abs(levels[0] - levels[1])) > 0.011:
            warnings.append(GraphWarning("delta_l_mismatch", subject, f"edge {subject} has delta_l {edge.delta_l:g} "
                                         f"but its IUs' levels differ by {abs(levels[0] - levels[1]):.2f}"))

    depth, cycle = _depths(ids, prereqs, children)
    if cycle is not None:
        named = " -> ".join(cycle)
        if cycles != "released":
            raise error(f"cycle: {named}", iu=cycle[0], field="edges")
        warnings.append(GraphWarning("cycle", cycle[0], f"{named}; ordered as the released code orders it "
                                     "(a prerequisite met again on the path counts depth 0)"))
        depth = _released_depths(ids, prereqs)
    order = tuple(sorted(ids, key=lambda iu: (depth[iu], index[iu])))
    neighbours = {iu: tuple(sorted(set(prereqs[iu]) | set(children[iu]))) for iu in ids}

    if not MIN_SIZE <= len(ids) <= MAX_SIZE:
        warnings.append(GraphWarning("size", name, f"{len(ids)} IUs, outside the target {MIN_SIZE}-{MAX_SIZE}"))
    top = max(n.abstraction_level for n in graph.nodes)
    for iu in ids:
        if prereqs[iu]:
            continue
        level = graph.nodes[index[iu]].abstraction_level
        if not children[iu] and len(ids) > 1:
            warnings.append(GraphWarning("isolated", iu, f"IU {iu} has no edge: nothing leads to it or from it"))
        elif top - level > MAX_DELTA_L + 1e-9:
            warnings.append(GraphWarning("orphan", iu, f"IU {iu} (level {level:g}) has no prerequisite although it "
                                         f"sits {top - level:.2f} below the most general IU ({top:g})"))
    return ValidatedGraph(
        name=name, graph=graph, ids=ids, index=index, order=order, depth=depth,
        prereqs={iu: tuple(p) for iu, p in prereqs.items()}, neighbours=neighbours, warnings=tuple(warnings),
    )


def _depths(ids, prereqs, children) -> tuple[dict[str, int], list[str] | None]:
    """Longest path from a root, by Kahn's algorithm, and None; or, when a node is left over (it lies
    on or after a cycle), the depths so far and a cycle, named IU by IU."""
    remaining = {iu: len(prereqs[iu]) for iu in ids}
    depth = dict.fromkeys(ids, 0)
    queue = [iu for iu in ids if remaining[iu] == 0]
    done = 0
    while queue:
        iu = queue.pop()
        done += 1
        for child in children[iu]:
            depth[child] = max(depth[child], depth[iu] + 1)
            remaining[child] -= 1
            if remaining[child] == 0:
                queue.append(child)
    if done < len(ids):
        return depth, _find_cycle([iu for iu in ids if remaining[iu] > 0], children)
    return depth, None


def _released_depths(ids, prereqs) -> dict[str, int]:
    """The released code's depths (its ``update_v2._compute_topo_depth``): for each IU in graph order,
    a depth-first longest path from a root through its prerequisites (in edge order), memoised; a
    prerequisite already on the current path (a cycle) counts 0 and is not memoised. On a cycle the
    result depends on which of its IUs the walk enters first, as it does there."""
    depth: dict[str, int] = {}

    def walk(iu: str, visiting: set[str]) -> int:
        if iu in depth:
            return depth[iu]
        if iu in visiting:
            return 0
        visiting.add(iu)
        parents = prereqs[iu]
        d = 1 + max(walk(p, visiting) for p in parents) if parents else 0
        depth[iu] = d
        return d

    for iu in ids:
        walk(iu, set())
    return depth


def _find_cycle(stuck: list[str], children) -> list[str]:
    # Every stuck node has a stuck prerequisite; walking stuck prerequisites backwards must repeat a node.
    stuck_set = set(stuck)
    parents: dict[str, str] = {}
    for iu in stuck:
        for child in children[iu]:
            if child in stuck_set:
                parents.setdefault(child, iu)
    path, seen = [stuck[0]], {stuck[0]: 0}
    while True:
        nxt = parents[path[-1]]
        if nxt in seen:
            cycle = path[seen[nxt]:][::-1]
            return [*cycle, cycle[0]]
        seen[nxt] = len(path)
        path.append(nxt)


# ---------------------------------------------------------------------------------------------- files


def parse_graphs(data: Any, *, file: str = "graphs") -> dict[str, IUGraph]:
    """The graphs of one file's decoded content, by item id (see the module docstring for layouts)."""
    if isinstance(data, Mapping) and "format" in data:
        if data["format"] != GRAPH_FORMAT:
            raise DataError(f"{file}: format {data['format']!r} is not {GRAPH_FORMAT!r}", file=file, field="format")
        if data.get("version") != GRAPH_VERSION:
            raise DataError(f"{file}: version {data.get('version')!r} is not supported (this simhub reads "
                            f"version {GRAPH_VERSION})", file=file, field="version")
        graphs = data.get("graphs")
        if not isinstance(graphs, Mapping):
            raise DataError(f"{file}: 'graphs' must map item ids to graphs", file=file, field="graphs")
        return {str(k): _graph(v, file, f"graphs.{k}", fill_delta=True) for k, v in graphs.items()}
    if isinstance(data, Mapping) and "nodes" in data:
        return {Path(file).stem: _graph(data, file, "", fill_delta=True, lenient=True)}
    if isinstance(data, Mapping) and data and all(isinstance(v, Mapping) and "nodes" in v for v in data.values()):
        # The knowsim IU cache; its nodes and edges may carry keys simhub does not use.
        return {str(k): _graph(v, file, str(k), fill_delta=False, lenient=True) for k, v in data.items()}
    raise DataError(f"{file}: not an IU graph file: expected simhub's {{\"format\": {GRAPH_FORMAT!r}, ...}}, an "
                    "IU cache {ITEM: {nodes, edges, knowledge_areas}} or one graph {nodes, edges}", file=file)


_NODE_KEYS = ("id", "concept", "abstraction_level", "description")
_EDGE_KEYS = ("from", "to", "delta_l", "reason")


def _graph(raw: Any, file: str, path: str, *, fill_delta: bool, lenient: bool = False) -> IUGraph:
    prefix = f"{path}." if path else ""
    if not isinstance(raw, Mapping):
        raise DataError(f"{file}: {path or 'graph'} must be an object", file=file, field=path or None)
    raw = dict(raw)
    nodes, edges = raw.get("nodes"), raw.get("edges", [])
    if not isinstance(nodes, list) or not isinstance(edges, list):
        raise DataError(f"{file}: {prefix}nodes and {prefix}edges must be lists", file=file, field=f"{prefix}nodes")
    if lenient:
        nodes = [{k: n[k] for k in _NODE_KEYS if k in n} if isinstance(n, Mapping) else n for n in nodes]
        edges = [{k: e[k] for k in _EDGE_KEYS if k in e} if isinstance(e, Mapping) else e for e in edges]
        raw = {k: raw[k] for k in ("knowledge_areas", "question") if k in raw}
    if fill_delta:
        levels = {n.get("id"): n.get("abstraction_level") for n in nodes if isinstance(n, Mapping)}
        edges = [_with_delta(e, levels) for e in edges]
    raw.update(nodes=nodes, edges=edges)
    try:
        return msgspec.convert(raw, IUGraph)
    except msgspec.ValidationError as exc:
        message = str(exc)
        field = message.split("at `$.", 1)[1].rstrip("`") if "at `$." in message else None
        raise DataError(f"{file}: {prefix.rstrip('.') or 'graph'}: {message}", file=file,
                        field=f"{prefix}{field}" if field else path or None) from None


def _with_delta(edge: Any, levels: Mapping[Any, Any]) -> Any:
    if not isinstance(edge, Mapping) or "delta_l" in edge:
        return edge
    a, b = levels.get(edge.get("from")), levels.get(edge.get("to"))
    if isinstance(a, int | float) and isinstance(b, int | float):
        return {**edge, "delta_l": round(abs(a - b), 6)}
    return {**edge, "delta_l": 0.0}  # an unknown endpoint: validate_graph names it


def read_graphs(path: str | os.PathLike[str]) -> dict[str, IUGraph]:
    """Every graph in a JSON or YAML graph file, by item id (nothing is validated yet)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise DataError(f"{path}: cannot read the graph file ({exc.strerror or exc})", file=str(path)) from None
    if path.suffix.lower() in (".yaml", ".yml"):
        import yaml

        try:
            # libyaml's safe loader when built: the same documents, ten times faster on the shipped graphs.
            data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        except yaml.YAMLError as exc:
            raise DataError(f"{path}: not valid YAML: {exc}", file=str(path)) from None
    else:
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise DataError(f"{path}: not valid JSON: {exc}", file=str(path)) from None
    return parse_graphs(data, file=str(path))


def load_graphs(path: str | os.PathLike[str]) -> dict[str, ValidatedGraph]:
    """:func:`read_graphs` then :func:`validate_graph` on each; the first unusable graph raises."""
    return {name: validate_graph(g, name=name, file=str(path)) for name, g in read_graphs(path).items()}


def graphs_document(graphs: Mapping[str, IUGraph]) -> dict[str, Any]:
    """The simhub-format document of ``graphs`` (what :func:`write_graphs` writes)."""
    return {"format": GRAPH_FORMAT, "version": GRAPH_VERSION,
            "graphs": {name: msgspec.to_builtins(g) for name, g in graphs.items()}}


def write_graphs(path: str | os.PathLike[str], graphs: Mapping[str, IUGraph]) -> None:
    """Write ``graphs`` as a simhub-format JSON file, atomically."""
    from simhub.schema import atomic_write_bytes

    text = json.dumps(graphs_document(graphs), indent=2, ensure_ascii=False) + "\n"
    atomic_write_bytes(path, text.encode("utf-8"))


def shipped_graph_files() -> list[Path]:
    """The graph files shipped with simhub (the sample corpus's questions)."""
    return sorted(SHIPPED_DIR.glob("*.yaml"))


def shipped_graphs() -> dict[str, IUGraph]:
    """Every shipped graph by item id (the sample corpus's ``QuestionId_DQ``)."""
    out: dict[str, IUGraph] = {}
    for path in shipped_graph_files():
        for name, graph in read_graphs(path).items():
            if name in out:
                raise DataError(f"{path}: item {name} already has a graph in another shipped file", file=str(path),
                                field=f"graphs.{name}")
            out[name] = graph
    return out
