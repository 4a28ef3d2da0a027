"""Replaying knowsim run logs through simhub's rules (``simhub learners replay``).

A knowsim run log (one run object, or a list of them as the repository's example files hold) gives
per run the item (``problem_id``), ``initial_knowledge_state`` (state per IU, keyed ``"IU3: Concept"``
or by id) and ``iu_analysis_history``: per turn, a list of ``{id, teaching_quality,
user_attempt_type, ...}``, the signals its extractor produced. The graph comes from the IU cache.
The replay recomputes every turn under a preset, the metrics, and the virtual early stop; where
the log also holds its own per-turn results (``knowledge_state_history``, ``turn_metrics_history``)
it reports how many turns agree, so simhub's rules are checked against the released code's logs.

The log's ``virtual_early_stop_turn`` is 0-based; ``early_stop_turn`` here is the 1-based turn at
which the rule fired (the number of turns a stopped run would have had).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import msgspec

from simhub.errors import DataError, did_you_mean
from simhub.learners.graph import CycleRule, IUGraph, ValidatedGraph, read_graphs, validate_graph
from simhub.learners.metrics import ConversationMetrics, conversation_metrics, f1
from simhub.learners.presets import Preset
from simhub.learners.state import ORDINAL, STATE_ALIASES, STATES, KnowledgeState
from simhub.learners.termination import early_stop
from simhub.learners.update import ATTEMPT_TYPES, TEACHING_QUALITIES, IUSignal, TurnRecord, run_turns

#: Tolerance when comparing replayed loads with a log's (sums in another order differ in the last bits).
LOAD_TOLERANCE = 1e-9


class ReplayTurn(msgspec.Struct, frozen=True, kw_only=True):
    states: dict[str, str]
    progress: dict[str, float]
    comprehension_load: float
    attempt_load: float
    effective_load: float
    threshold: int
    overloaded: bool
    eta: float
    n_up: int
    explained: list[str]
    teachable: list[str]
    absorbed: list[str]


class Agreement(msgspec.Struct, frozen=True, kw_only=True):
    """How many replayed turns match the log's own records, and the first that does not."""

    turns_compared: int
    states: int
    loads: int
    n_up: int
    overload_flags: int
    first_mismatch: dict[str, Any] | None = None
    #: Whether the replay's DC equals the log's (``absorbed_ic_f1``), computed as ``dc_mode`` says;
    #: None when the log records no DC.
    dc: bool | None = None
    dc_mode: str | None = None


class DCReadings(msgspec.Struct, frozen=True, kw_only=True):
    """DC both ways: by its definition and by the released code's legacy proxy; ``mode`` is the one in
    ``metrics`` (and compared with the log)."""

    mode: Literal["definition", "legacy_proxy"]
    definition: float
    legacy_proxy: float


class ReplayResult(msgspec.Struct, frozen=True, kw_only=True):
    item: str
    preset: str
    graph_size: int
    initial_states: dict[str, str]
    turns: list[ReplayTurn]
    metrics: ConversationMetrics
    early_stop_turn: int | None
    early_stop_reason: str | None
    metrics_at_early_stop: ConversationMetrics | None
    agreement: Agreement | None = None
    #: What the replay had to read leniently, as the released code does (a cycle in the graph, an
    #: initial state keyed by bare id), one line each.
    warnings: list[str] = msgspec.field(default_factory=list)
    dc: DCReadings | None = None


class RunFailure(msgspec.Struct, frozen=True, kw_only=True):
    """A run of a list file that could not be replayed (its graph refused, a field missing): its index
    in the file and why. The other runs of the file are replayed."""

    index: int
    error: str


def _missing(file: str, where: str, name: str) -> DataError:
    field = f"{where}.{name}" if where else name
    return DataError(f"{file}: {where + ': ' if where else ''}missing field {name!r}", file=file, field=field)


def resolve_iu(graph: ValidatedGraph, key: str) -> str | None:
    """The IU id a log key names: the id itself, or the knowsim label ``"IU3: Concept"``."""
    if key in graph.index:
        return key
    head, colon, _ = key.partition(":")
    return head.strip() if colon and head.strip() in graph.index else None


def _state_name(value: Any, file: str, field: str) -> str:
    raw = value.get("state") if isinstance(value, Mapping) else value
    if not isinstance(raw, str):
        raise DataError(f"{file}: {field}: expected a state name, got {raw!r}", file=file, field=field)
    name = STATE_ALIASES.get(raw.strip(), raw.strip())
    if name not in ORDINAL:
        raise DataError(f"{file}: {field}: unknown knowledge state {raw!r}; known: {', '.join(STATES)}", file=file,
                        field=field)
    return name


def states_from_log(graph: ValidatedGraph, raw: Any, *, file: str, field: str, labels_only: bool = False,
                    warnings: list[str] | None = None) -> KnowledgeState:
    """A log's knowledge-state mapping as a :class:`KnowledgeState` of the graph's IUs.

    IUs the mapping leaves out start ``unaware`` (as the released code reads them); a key that names
    no IU of the graph is an error, and so is an unknown state name. A key may be the IU's id or its
    knowsim label ``"IU3: Concept"``; with ``labels_only`` (the released code's lookup) a bare id of an
    IU that has a label names nothing there, so that IU stays unaware, and a line saying so goes to
    ``warnings``.
    """
    if not isinstance(raw, Mapping):
        raise DataError(f"{file}: {field}: expected an object of IU states", file=file, field=field)
    states = dict.fromkeys(graph.ids, "unaware")
    progress: dict[str, float] = {}
    for key, value in raw.items():
        iu = resolve_iu(graph, str(key))
        if iu is None:
            raise DataError(f"{file}: {field}: {key!r} names no IU of graph {graph.name}", file=file,
                            field=f"{field}.{key}")
        if labels_only and str(key) == iu and graph.label(iu) != iu:
            if warnings is not None:
                warnings.append(f"{field}.{key}: a bare IU id; the released code looks states up by label "
                                f"({graph.label(iu)!r}), so {iu} starts unaware there (preset state_keys: "
                                "id_or_label reads it by id)")
            continue
        states[iu] = _state_name(value, file, f"{field}.{key}")
        carried = value.get("fractional_progress") if isinstance(value, Mapping) else None
        if isinstance(carried, int | float) and carried:
            progress[iu] = float(carried)
    return KnowledgeState(states=states, progress=progress)


def read_canonical_starts(path: str | os.PathLike[str]) -> dict[str, dict[str, Mapping[str, Any]]]:
    """KnowSim's canonical starting states (its repository's ``data/init_ks_cache.json``), as item ->
    level -> the state mapping (keyed by label, as its logs are). The file's layout is task -> item ->
    level -> state; the tasks are merged (their item ids differ) and ``_meta`` is skipped. A file that
    is not such a mapping is a DataError naming the file and the place."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise DataError(f"{path}: cannot read the starting states ({exc.strerror or exc})", file=str(path),
                        field="initial_states") from None
    except ValueError as exc:
        raise DataError(f"{path}: not valid JSON: {exc}", file=str(path), field="initial_states") from None
    if not isinstance(data, Mapping):
        raise DataError(f"{path}: expected task -> item -> level -> states", file=str(path), field="initial_states")
    out: dict[str, dict[str, Mapping[str, Any]]] = {}
    for task, items in data.items():
        if str(task).startswith("_"):
            continue
        if not isinstance(items, Mapping):
            raise DataError(f"{path}: {task}: expected item -> level -> states", file=str(path), field=str(task))
        for item, levels in items.items():
            if not isinstance(levels, Mapping) or not all(isinstance(v, Mapping) for v in levels.values()):
                raise DataError(f"{path}: {task}.{item}: expected level -> states", file=str(path),
                                field=f"{task}.{item}")
            out[str(item)] = {str(level): states for level, states in levels.items()}
    return out


def signals_from_log(graph: ValidatedGraph, entries: Any, *, file: str, field: str) -> dict[str, IUSignal]:
    """One turn of ``iu_analysis_history`` as signals, in the log's order.

    A missing ``teaching_quality`` reads as not_mentioned and a missing ``user_attempt_type`` as the
    legacy ``attempted_by_user`` (true: reasoning), as the released code reads them.
    """
    if not isinstance(entries, list):
        raise DataError(f"{file}: {field}: expected a list of per-IU entries", file=file, field=field)
    signals: dict[str, IUSignal] = {}
    for j, entry in enumerate(entries):
        where = f"{field}[{j}]"
        if not isinstance(entry, Mapping):
            raise DataError(f"{file}: {where}: expected an object", file=file, field=where)
        if "id" not in entry:
            raise _missing(file, where, "id")
        iu = entry["id"]
        if iu not in graph.index:
            raise DataError(f"{file}: {where}.id: {iu!r} is not an IU of graph {graph.name}"
                            f"{did_you_mean(str(iu), graph.ids)}", file=file, field=f"{where}.id")
        if iu in signals:
            raise DataError(f"{file}: {where}.id: IU {iu} appears twice in one turn", file=file, field=f"{where}.id")
        quality = entry.get("teaching_quality", "not_mentioned")
        if quality not in TEACHING_QUALITIES:
            raise DataError(f"{file}: {where}.teaching_quality: {quality!r} is not one of "
                            f"{', '.join(TEACHING_QUALITIES)}", file=file, field=f"{where}.teaching_quality")
        attempt = entry.get("user_attempt_type")
        if attempt is None:
            attempt = "reasoning" if entry.get("attempted_by_user") else "none"
        if attempt not in ATTEMPT_TYPES:
            raise DataError(f"{file}: {where}.user_attempt_type: {attempt!r} is not one of {', '.join(ATTEMPT_TYPES)}",
                            file=file, field=f"{where}.user_attempt_type")
        signals[iu] = IUSignal(teaching_quality=quality, user_attempt_type=attempt)
    return signals


class GraphSource:
    """The graphs of one file, each validated the first time a run needs it: one unusable graph in
    an IU cache (the released math cache has two cyclic ones) stops only the runs that use it."""

    def __init__(self, graphs: Mapping[str, IUGraph | ValidatedGraph], file: str = "the graphs file", *,
                 cycles: CycleRule = "refuse"):
        self.raw, self.file, self.cycles = dict(graphs), file, cycles
        self._done: dict[str, ValidatedGraph] = {}

    @classmethod
    def read(cls, path: str | os.PathLike[str], *, cycles: CycleRule = "refuse") -> GraphSource:
        return cls(read_graphs(path), str(path), cycles=cycles)

    def __len__(self) -> int:
        return len(self.raw)

    def __contains__(self, item: str) -> bool:
        return item in self.raw

    def get(self, item: str) -> ValidatedGraph:
        if item not in self._done:
            g = self.raw[item]
            self._done[item] = g if isinstance(g, ValidatedGraph) else validate_graph(g, name=item, file=self.file,
                                                                                   cycles=self.cycles)
        return self._done[item]


def _graph_for(run: Mapping[str, Any], graphs: GraphSource, file: str, where: str) -> tuple[str, ValidatedGraph]:
    item = run.get("problem_id")
    if item is None:
        if len(graphs) == 1:
            only = next(iter(graphs.raw))
            return only, graphs.get(only)
        raise _missing(file, where, "problem_id")
    if str(item) not in graphs:
        raise DataError(f"{file}: {where + ': ' if where else ''}problem_id {item!r} has no graph in {graphs.file}",
                        file=file, field=f"{where}.problem_id" if where else "problem_id")
    return str(item), graphs.get(str(item))


def replay_run(run: Any, graphs: GraphSource | Mapping[str, IUGraph | ValidatedGraph], preset: Preset, *,
               file: str = "run", where: str = "") -> ReplayResult:
    """Recompute one knowsim run (its decoded JSON object) under ``preset``."""
    if not isinstance(graphs, GraphSource):
        graphs = GraphSource(graphs)
    if not isinstance(run, Mapping):
        raise DataError(f"{file}: {where or 'the run'} must be a JSON object", file=file, field=where or None)
    prefix = f"{where}." if where else ""
    for name in ("initial_knowledge_state", "iu_analysis_history"):
        if name not in run:
            raise _missing(file, where, name)
    item, graph = _graph_for(run, graphs, file, where)
    initial_warnings: list[str] = []
    initial = states_from_log(graph, run["initial_knowledge_state"], file=file,
                              field=f"{prefix}initial_knowledge_state", labels_only=preset.state_keys == "label",
                              warnings=initial_warnings)
    history = run["iu_analysis_history"]
    if not isinstance(history, list):
        raise DataError(f"{file}: {prefix}iu_analysis_history: expected a list of turns", file=file,
                        field=f"{prefix}iu_analysis_history")
    turns = [signals_from_log(graph, entries, file=file, field=f"{prefix}iu_analysis_history[{t}]")
             for t, entries in enumerate(history)]
    records = run_turns(graph, initial, turns, preset)
    stop = early_stop(records, preset)
    logged = run.get("metrics") if isinstance(run.get("metrics"), Mapping) else {}
    mode = preset.dc_numerator
    if mode == "auto":
        mode = "legacy_proxy" if logged.get("absorbed_ic_uses_legacy_proxy") else "definition"
    metrics = conversation_metrics(graph, initial, records)
    proxy = _with_proxy_dc(metrics, records)
    readings = DCReadings(mode=mode, definition=metrics.dc, legacy_proxy=proxy.dc)
    at_stop = conversation_metrics(graph, initial, records[: stop.turn]) if stop else None
    if mode == "legacy_proxy":
        metrics = proxy
        at_stop = _with_proxy_dc(at_stop, records[: stop.turn]) if stop else None
    agreement = _agreement(run, graph, records, file=file, prefix=prefix)
    if agreement is not None and isinstance(logged.get("absorbed_ic_f1"), int | float):
        agreement = msgspec.structs.replace(agreement, dc_mode=mode,
                                            dc=math.isclose(metrics.dc, logged["absorbed_ic_f1"], abs_tol=1e-9))
    return ReplayResult(
        item=item,
        preset=preset.name,
        graph_size=graph.size,
        initial_states=dict(initial.states),
        turns=[_turn(r) for r in records],
        metrics=metrics,
        early_stop_turn=stop.turn if stop else None,
        early_stop_reason=stop.reason if stop else None,
        metrics_at_early_stop=at_stop,
        agreement=agreement,
        warnings=[f"{item}: cycle: {w.message}" for w in graph.warnings if w.code == "cycle"] + initial_warnings,
        dc=readings,
    )


def _with_proxy_dc(metrics: ConversationMetrics, records: Sequence[TurnRecord]) -> ConversationMetrics:
    """``metrics`` with DC from the released code's legacy numerator min(|E_t ∩ Z_t|, n_up) per turn
    (the same denominators, Σ|E_t| and Σ|Z_t|)."""
    absorbed = sum(min(len(set(r.explained).intersection(r.teachable)), r.n_up) for r in records)
    p = absorbed / metrics.explained_total if metrics.explained_total else 0.0
    r = absorbed / metrics.teachable_total if metrics.teachable_total else 1.0
    return msgspec.structs.replace(metrics, dc=f1(p, r), dc_precision=p, dc_recall=r)


def _turn(r: TurnRecord) -> ReplayTurn:
    return ReplayTurn(
        states=dict(r.state.states), progress=dict(r.state.progress), comprehension_load=r.comprehension_load,
        attempt_load=r.attempt_load, effective_load=r.effective_load, threshold=r.threshold,
        overloaded=r.overloaded, eta=r.eta, n_up=r.n_up, explained=list(r.explained), teachable=list(r.teachable),
        absorbed=list(r.absorbed),
    )


def _agreement(run: Mapping[str, Any], graph: ValidatedGraph, records: Sequence[TurnRecord], *, file: str,
               prefix: str) -> Agreement | None:
    states_log = run.get("knowledge_state_history")
    metrics_log = run.get("turn_metrics_history")
    if not isinstance(states_log, list) and not isinstance(metrics_log, list):
        return None
    counts = {"states": 0, "loads": 0, "n_up": 0, "overload_flags": 0}
    first: dict[str, Any] | None = None
    compared = 0
    for t, record in enumerate(records):
        logged_states = states_log[t + 1] if isinstance(states_log, list) and t + 1 < len(states_log) else None
        logged = metrics_log[t] if isinstance(metrics_log, list) and t < len(metrics_log) else None
        if logged_states is None and logged is None:
            break
        compared += 1
        checks: dict[str, tuple[bool, Any, Any]] = {}
        if logged_states is not None:
            theirs = states_from_log(graph, logged_states, file=file, field=f"{prefix}knowledge_state_history[{t + 1}]")
            diff = {iu: (theirs.states[iu], s) for iu, s in record.state.states.items() if theirs.states[iu] != s}
            checks["states"] = (not diff, {k: v[0] for k, v in diff.items()}, {k: v[1] for k, v in diff.items()})
        if isinstance(logged, Mapping):
            ours = (record.comprehension_load, record.attempt_load, record.effective_load, record.threshold)
            keys = ("comprehension_load", "attempt_load", "effective_load", "overload_threshold")
            theirs_loads = tuple(logged.get(k) for k in keys)
            ok = all(isinstance(b, int | float) and math.isclose(a, b, rel_tol=0, abs_tol=LOAD_TOLERANCE)
                     for a, b in zip(ours, theirs_loads, strict=True))
            checks["loads"] = (ok, dict(zip(keys, theirs_loads, strict=True)), dict(zip(keys, ours, strict=True)))
            checks["n_up"] = (logged.get("n_upward_transitions") == record.n_up, logged.get("n_upward_transitions"),
                              record.n_up)
            checks["overload_flags"] = (logged.get("overload") == record.overloaded, logged.get("overload"),
                                        record.overloaded)
        for name, (ok, theirs_v, ours_v) in checks.items():
            counts[name] += ok
            if not ok and first is None:
                first = {"turn": t + 1, "what": name, "log": theirs_v, "replay": ours_v}
    return Agreement(turns_compared=compared, first_mismatch=first, **counts)


def read_runs(path: str | os.PathLike[str]) -> tuple[list[Any], bool]:
    """The runs of a knowsim log file and whether the file held a list (else one run)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise DataError(f"{path}: cannot read the run log ({exc.strerror or exc})", file=str(path)) from None
    except ValueError as exc:
        raise DataError(f"{path}: not valid JSON: {exc}", file=str(path)) from None
    if isinstance(data, list):
        return data, True
    return [data], False


def replay_file(runs_path: str | os.PathLike[str], graphs_path: str | os.PathLike[str],
                preset: Preset) -> list[ReplayResult | RunFailure] | ReplayResult:
    """Replay every run of a log file. A file of one run gives its result (or raises its DataError);
    a list gives one entry per run in file order: its result, or a :class:`RunFailure` with its index
    and reason, so one run's unusable graph or broken field stops that run only. An unreadable or
    malformed file, or graphs file, raises."""
    graphs = GraphSource.read(graphs_path, cycles=preset.cycles)
    runs, many = read_runs(runs_path)
    if not many:
        return replay_run(runs[0], graphs, preset, file=str(runs_path))
    out: list[ReplayResult | RunFailure] = []
    for i, run in enumerate(runs):
        try:
            out.append(replay_run(run, graphs, preset, file=str(runs_path), where=f"[{i}]"))
        except DataError as exc:
            out.append(RunFailure(index=i, error=str(exc)))
    return out


def format_result(result: ReplayResult) -> str:
    """A short table of one replayed run."""
    lines = [f"item {result.item} · preset {result.preset} · {result.graph_size} IUs · "
             f"τ = {result.turns[0].threshold if result.turns else '-'}",
             f"{'turn':>4} {'L_comp':>7} {'L_att':>6} {'L':>6} {'L/τ':>5} {'η':>5} {'up':>3}  kw/pu/st/un"]
    for t, turn in enumerate(result.turns, 1):
        c = [sum(1 for s in turn.states.values() if s == name) for name in reversed(STATES)]
        lines.append(f"{t:>4} {turn.comprehension_load:>7.2f} {turn.attempt_load:>6.2f} {turn.effective_load:>6.2f} "
                     f"{turn.effective_load / turn.threshold:>5.2f} {turn.eta:>5.2f} {turn.n_up:>3}  "
                     f"{c[0]}/{c[1]}/{c[2]}/{c[3]}{'  overloaded' if turn.overloaded else ''}")
    m = result.metrics
    lines.append(f"KG {m.kg} (nkg {m.nkg:.3f})  DC {m.dc:.3f} (P {m.dc_precision:.3f}, R {m.dc_recall:.3f})  "
                 f"CO {m.co:.3f}  IC P {m.ic_precision:.3f} R {m.ic_recall:.3f}")
    if result.dc is not None:
        other = "definition" if result.dc.mode == "legacy_proxy" else "legacy_proxy"
        lines.append(f"DC by {result.dc.mode} (the one above); by {other}: "
                     f"{getattr(result.dc, other):.3f}")
    if result.early_stop_turn is not None:
        e = result.metrics_at_early_stop
        assert e is not None
        lines.append(f"early stop: turn {result.early_stop_turn} ({result.early_stop_reason}); there KG {e.kg}, "
                     f"DC {e.dc:.3f}, CO {e.co:.3f}")
    else:
        lines.append("early stop: none (no rule fired)")
    if result.agreement is not None:
        a = result.agreement
        lines.append(f"agreement with the log over {a.turns_compared} turns: states {a.states}, loads {a.loads}, "
                     f"n_up {a.n_up}, overload flags {a.overload_flags}"
                     + (f"; DC ({a.dc_mode}) {'equal' if a.dc else 'differs'}" if a.dc is not None else "")
                     + (f"; first mismatch at turn {a.first_mismatch['turn']} ({a.first_mismatch['what']})"
                        if a.first_mismatch else ""))
    return "\n".join(lines)
