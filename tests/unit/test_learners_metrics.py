"""Per-conversation metrics: KG and its normalisations, DC's edge conventions, CO, the released
code's information calibration, and the failure-mode tree's order (FIDELITY.md, "Learners")."""

from __future__ import annotations

import pytest

from simhub.learners import PAPER, KnowledgeState, TurnRecord, conversation_metrics, failure_modes, update
from simhub.learners.graph import IUEdge, IUGraph, IUNode, validate_graph
from simhub.learners.metrics import FAILURE_MODES
from simhub.learners.update import IUSignal


def graph(n: int, edges=()):
    nodes = tuple(IUNode(id=f"X{i}", concept=f"c{i}", abstraction_level=0.5) for i in range(1, n + 1))
    return validate_graph(IUGraph(nodes=nodes, edges=tuple(IUEdge(source=a, target=b, delta_l=0.0) for a, b in edges)))


def record(states: dict[str, str], *, explained=(), teachable=(), absorbed=(), advanced=(), load=1.0, tau=6,
           overloaded=False) -> TurnRecord:
    return TurnRecord(state=KnowledgeState(states=states), comprehension_load=load, attempt_load=0.0,
                      effective_load=load, threshold=tau, overloaded=overloaded, eta=1.0, n_up=len(advanced),
                      gain=len(advanced), explained=tuple(explained), teachable=tuple(teachable),
                      absorbed=tuple(absorbed), advanced=tuple(advanced))


def test_kg_is_the_raw_ordinal_gain_with_two_normalisations():
    g = graph(4)
    s0 = KnowledgeState(states={"X1": "unaware", "X2": "struggling", "X3": "partial_understanding",
                                "X4": "knows_well"})
    final = record({"X1": "partial_understanding", "X2": "struggling", "X3": "knows_well", "X4": "knows_well"})
    m = conversation_metrics(g, s0, [final])
    assert m.kg == 3
    assert m.nkg == pytest.approx(3 / (3 + 2 + 1 + 0))  # the headroom Σ(3 - s0)
    assert m.nkg_3n == pytest.approx(3 / 12)


def test_dc_micro_averages_over_turns():
    g = graph(4)
    s0 = KnowledgeState(states=dict.fromkeys(g.ids, "unaware"))
    turns = [record(s0.states, explained=("X1", "X2", "X3"), teachable=("X1", "X2"), absorbed=("X1",)),
             record(s0.states, explained=("X4",), teachable=("X1", "X2", "X3", "X4"), absorbed=("X4",))]
    m = conversation_metrics(g, s0, turns)
    p, r = 2 / 4, 2 / 6  # not the mean of the per-turn ratios (1/3, 1 and 1/2, 1/4)
    assert (m.dc_precision, m.dc_recall) == (pytest.approx(p), pytest.approx(r))
    assert m.dc == pytest.approx(2 * p * r / (p + r))
    assert (m.explained_total, m.teachable_total, m.absorbed_total) == (4, 6, 2)
    # Information calibration counts explained ∩ teachable, absorbed or not: {X1, X2} + {X4}.
    assert (m.ic_precision, m.ic_recall) == (pytest.approx(3 / 4), pytest.approx(3 / 6))


def test_dc_precision_is_0_when_nothing_is_explained_and_recall_1_when_nothing_is_teachable():
    g = graph(2)
    s0 = KnowledgeState(states=dict.fromkeys(g.ids, "knows_well"))
    silent = conversation_metrics(g, s0, [record(s0.states)])
    assert (silent.dc_precision, silent.dc_recall, silent.dc) == (0.0, 1.0, 0.0)
    nothing_teachable = conversation_metrics(g, s0, [record(s0.states, explained=("X1",))])
    assert (nothing_teachable.dc_precision, nothing_teachable.dc_recall, nothing_teachable.dc) == (0.0, 1.0, 0.0)
    # With the released code's looser ceiling an IU can count as absorbed although the ZPD was empty.
    loose = conversation_metrics(g, s0, [record(s0.states, explained=("X1",), absorbed=("X1",))])
    assert (loose.dc_precision, loose.dc_recall, loose.dc) == (1.0, 1.0, 1.0)
    assert conversation_metrics(g, s0, []).dc == 0.0


def test_co_is_the_mean_of_load_over_capacity_saturating_at_1():
    g = graph(2)
    s0 = KnowledgeState(states=dict.fromkeys(g.ids, "unaware"))
    m = conversation_metrics(g, s0, [record(s0.states, load=3.0, tau=6), record(s0.states, load=18.0, tau=6),
                                     record(s0.states, load=0.0, tau=6)])
    assert m.co == pytest.approx((0.5 + 1.0 + 0.0) / 3)
    assert m.po_legacy == pytest.approx((0.0 + 12 / 18 + 0.0) / 3)  # max(0, L - τ) / L


def test_failure_modes_follow_the_ordered_tree():
    # X1 -> X3, X2 -> X4; 10 IUs so that τ = 6.
    g = graph(10, [("X1", "X3"), ("X2", "X4")])
    s0 = KnowledgeState(states={**dict.fromkeys(g.ids, "unaware"), "X1": "knows_well", "X2": "unaware",
                                "X3": "struggling", "X4": "struggling", "X5": "struggling", "X6": "unaware"})
    calm = {
        "X1": IUSignal(teaching_quality="shallow"),  # already knows_well: REDUNDANT
        "X4": IUSignal(teaching_quality="well_explained"),  # prerequisite X2 unaware, stays: PREREQ-BLOCKED
        "X6": IUSignal(teaching_quality="shallow"),  # unaware -> struggling: EFFECTIVE
        "X5": IUSignal(teaching_quality="shallow"),  # in the ZPD, shallow does not lift struggling: UNDER-ABSORBED
    }
    first = update(g, s0, calm, PAPER)
    assert not first.overloaded
    # Overloaded: X3 (ceiling knows_well) is taught well but the dropoff leaves it where it was.
    heavy = {"X3": IUSignal(teaching_quality="well_explained"),
             **{f"X{i}": IUSignal(teaching_quality="not_mentioned", user_attempt_type="reasoning")
                for i in (7, 8, 9, 10)}}
    second = update(g, first.state, heavy, PAPER)
    assert second.overloaded and second.n_up == 0
    modes = failure_modes(s0, [first, second])
    assert modes == [{"X1": "REDUNDANT", "X4": "PREREQ-BLOCKED", "X5": "UNDER-ABSORBED", "X6": "EFFECTIVE"},
                     {"X3": "OVERLOAD-WASTED"}]
    counts = conversation_metrics(g, s0, [first, second]).failure_modes
    assert list(counts) == list(FAILURE_MODES)
    assert counts == {"REDUNDANT": 1, "PREREQ-BLOCKED": 1, "EFFECTIVE": 1, "OVERLOAD-WASTED": 1, "UNDER-ABSORBED": 1}


def test_failure_mode_order_decides_overlapping_cases():
    # Out of the ZPD (ceiling struggling) yet advanced: EFFECTIVE comes after PREREQ-BLOCKED only when
    # the IU did not advance. And an IU at knows_well is REDUNDANT even in an overloaded turn.
    g = graph(10, [("X1", "X2")])
    s0 = KnowledgeState(states={**dict.fromkeys(g.ids, "unaware"), "X3": "knows_well"})
    r = update(g, s0, {"X2": IUSignal(teaching_quality="shallow"), "X3": IUSignal(teaching_quality="shallow")},
               PAPER)
    assert "X2" not in r.teachable and r.advanced == ("X2",)
    assert failure_modes(s0, [r]) == [{"X2": "EFFECTIVE", "X3": "REDUNDANT"}]
