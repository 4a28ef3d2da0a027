"""The knowledge-state update against hand computations, rule by rule (FIDELITY.md, "Learners")."""

from __future__ import annotations

import random

import pytest

from simhub.errors import UnknownNameError
from simhub.learners import PAPER, RELEASED, IUSignal, KnowledgeState, capacity, dropoff, resolve_preset, update
from simhub.learners.graph import IUEdge, IUGraph, IUNode, validate_graph
from simhub.learners.state import KNOWS_WELL, ORDINAL, PARTIAL, STATES, STRUGGLING, UNAWARE
from simhub.learners.update import ceiling

WELL, SHALLOW = "well_explained", "shallow"


def graph(n: int, edges: list[tuple[str, str]] = (), name: str = "g"):
    """IUs X1..Xn (levels stepping down by 0.05), with the given prerequisite edges."""
    nodes = tuple(IUNode(id=f"X{i}", concept=f"concept {i}", abstraction_level=0.9 - 0.05 * (i - 1)) for i in
                  range(1, n + 1))
    level = {nd.id: nd.abstraction_level for nd in nodes}
    return validate_graph(IUGraph(nodes=nodes, edges=tuple(
        IUEdge(source=a, target=b, delta_l=abs(level[a] - level[b])) for a, b in edges)), name=name)


def state(g, states: dict[str, str], progress: dict[str, float] | None = None) -> KnowledgeState:
    full = dict.fromkeys(g.ids, "unaware")
    full.update(states)
    return KnowledgeState(states=full, progress=progress or {})


def sig(quality: str = "not_mentioned", attempt: str = "none") -> IUSignal:
    return IUSignal(teaching_quality=quality, user_attempt_type=attempt)


# ------------------------------------------------------------------------------------------ load (Table 6)


def test_table6_loads_comprehension_reasoning_and_articulation():
    # Four independent IUs, one per state, all mentioned; attempts on three of them.
    g = graph(4)
    s = state(g, {"X1": "knows_well", "X2": "partial_understanding", "X3": "struggling", "X4": "unaware"})
    signals = {"X1": sig(SHALLOW, "articulation"), "X2": sig(WELL, "articulation"), "X3": sig(WELL, "reasoning"),
               "X4": sig(SHALLOW, "reasoning")}
    r = update(g, s, signals, PAPER)
    assert r.comprehension_load == pytest.approx(0.35 + 0.70 + 1.00 + 1.75)  # W_S
    assert r.attempt_load == pytest.approx(0.35 + 0.35 + 1.40 + 1.75)  # 2·W_A + W_R(struggling) + W_R(unaware)
    assert r.effective_load == pytest.approx(3.80 + 3.85)


def test_reasoning_weight_differs_from_mention_weight_only_at_struggling():
    g = graph(4)
    for name, w_s, w_r in (("unaware", 1.75, 1.75), ("struggling", 1.00, 1.40),
                           ("partial_understanding", 0.70, 0.70), ("knows_well", 0.35, 0.35)):
        r = update(g, state(g, {"X1": name}), {"X1": sig(WELL, "reasoning")}, PAPER)
        assert (r.comprehension_load, r.attempt_load) == pytest.approx((w_s, w_r)), name


def test_not_mentioned_ius_add_no_comprehension_load_and_attempt_load_can_be_switched_off():
    g = graph(4)
    s = state(g, {})
    signals = {"X1": sig("not_mentioned", "reasoning"), "X2": sig(WELL)}
    assert update(g, s, signals, PAPER).effective_load == pytest.approx(1.75 + 1.75)
    off = resolve_preset("paper", {"attempt_load": False})
    r = update(g, s, signals, off)
    assert (r.comprehension_load, r.attempt_load) == (1.75, 0.0)


# ------------------------------------------------------------------------------------------ capacity τ


@pytest.mark.parametrize(("n", "tau"), [(1, 2), (3, 2), (4, 2), (5, 3), (9, 5), (10, 6), (11, 6), (14, 8), (15, 8),
                                        (20, 11), (26, 14), (30, 16)])
def test_capacity_is_max_2_round_055_n(n, tau):
    # Python's round: 5.5 -> 6 and 16.5 -> 16 (half to even), as the released code computes it.
    assert capacity(n, PAPER) == tau
    assert capacity(n, RELEASED) == tau


# ------------------------------------------------------------------------------------------ dropoff η


def test_eta_at_one_and_a_half_two_and_three_times_capacity_for_k_1():
    assert dropoff(12.0, 8, PAPER) == pytest.approx(0.8)
    assert dropoff(16.0, 8, PAPER) == pytest.approx(0.5)
    assert dropoff(24.0, 8, PAPER) == pytest.approx(0.2)
    assert dropoff(8.0, 8, PAPER) == 1.0 and dropoff(3.0, 8, PAPER) == 1.0


def test_released_softening_1_3_widens_the_curve():
    assert dropoff(16.0, 8, RELEASED) == pytest.approx(1 / (1 + (1 / 1.3) ** 2))
    assert dropoff(24.0, 8, RELEASED) == pytest.approx(1 / (1 + (2 / 1.3) ** 2))


def test_eta_inside_the_update_at_one_and_a_half_and_two_times_capacity():
    g = graph(4)  # τ = 2
    s = state(g, {f"X{i}": "struggling" for i in range(1, 5)})
    three = update(g, s, {f"X{i}": sig(WELL) for i in (1, 2, 3)}, PAPER)  # L = 3 = 1.5τ
    four = update(g, s, {f"X{i}": sig(WELL) for i in (1, 2, 3, 4)}, PAPER)  # L = 4 = 2τ
    assert (three.effective_load, three.threshold, three.eta) == (3.0, 2, pytest.approx(0.8))
    assert four.eta == pytest.approx(0.5)
    assert three.overloaded and four.overloaded
    # A damped single step below 1 advances nothing yet; the step is kept as progress.
    assert three.n_up == 0 and three.state.progress == pytest.approx({"X1": 0.8, "X2": 0.8, "X3": 0.8})


def test_overload_flag_at_exactly_capacity_differs_between_presets():
    g = graph(4)
    s = state(g, {"X1": "struggling", "X2": "struggling"})
    signals = {"X1": sig(WELL), "X2": sig(WELL)}  # L = 2.0 = τ
    assert update(g, s, signals, RELEASED).overloaded  # L ≥ τ
    assert not update(g, s, signals, PAPER).overloaded  # L > τ
    assert update(g, s, signals, RELEASED).eta == 1.0  # η only above capacity


# ------------------------------------------------------------------------------------------ prerequisite ceiling


@pytest.mark.parametrize(("prereqs", "expected"), [
    ((), KNOWS_WELL),
    ((KNOWS_WELL, KNOWS_WELL), KNOWS_WELL),
    ((KNOWS_WELL, PARTIAL), PARTIAL),
    ((PARTIAL, PARTIAL), PARTIAL),
    ((KNOWS_WELL, STRUGGLING), STRUGGLING),
    ((PARTIAL, UNAWARE), STRUGGLING),
    ((UNAWARE,), STRUGGLING),
])
def test_ceiling_table(prereqs, expected):
    assert ceiling(prereqs) == expected


def test_the_ceiling_caps_well_explained_teaching():
    # X1 -> X2: X2 cannot pass what X1 allows.
    g = graph(10, [("X1", "X2")])
    for pre_x1, pre_x2, post_x2 in (("unaware", "unaware", "struggling"), ("unaware", "struggling", "struggling"),
                                    ("partial_understanding", "struggling", "partial_understanding"),
                                    ("partial_understanding", "partial_understanding", "partial_understanding"),
                                    ("knows_well", "partial_understanding", "knows_well")):
        r = update(g, state(g, {"X1": pre_x1, "X2": pre_x2}), {"X2": sig(WELL)}, PAPER)
        assert r.state.states["X2"] == post_x2, (pre_x1, pre_x2)


def test_live_cascade_inside_a_turn_but_the_pre_turn_snapshot_for_the_zpd():
    # X1 -> X2, both struggling and both well explained: X1 reaches partial first, which lifts X2's
    # ceiling in the same turn; the ZPD (teachable set) still reads the states entering the turn.
    g = graph(10, [("X1", "X2")])
    r = update(g, state(g, {"X1": "struggling", "X2": "struggling"}), {"X1": sig(WELL), "X2": sig(WELL)}, PAPER)
    assert (r.state.states["X1"], r.state.states["X2"]) == ("partial_understanding", "partial_understanding")
    assert "X1" in r.teachable and "X2" not in r.teachable
    assert r.absorbed == ("X1",)  # X2 advanced, but was out of reach entering the turn
    assert r.advanced == ("X1", "X2") and r.n_up == 2 and r.gain == 2


def test_the_pre_turn_reading_of_the_ceiling_rule_stops_the_cascade():
    """Rule (FIDELITY.md, "prerequisite ceiling: live or pre-turn", ambiguous): with ``ceiling_states:
    pre_turn`` the ceiling reads the states entering the turn, so X2, capped by X1's pre-turn struggling,
    stays struggling although X1 reaches partial in the same turn; the live reading (the default, and the
    released code's) lets both advance."""
    import msgspec

    g = graph(10, [("X1", "X2")])
    s = state(g, {"X1": "struggling", "X2": "struggling"})
    signals = {"X1": sig(WELL), "X2": sig(WELL)}
    live = update(g, s, signals, PAPER)
    pre_turn = update(g, s, signals, msgspec.structs.replace(PAPER, ceiling_states="pre_turn"))
    assert (live.state.states["X1"], live.state.states["X2"]) == ("partial_understanding", "partial_understanding")
    assert (pre_turn.state.states["X1"], pre_turn.state.states["X2"]) == ("partial_understanding", "struggling")
    assert pre_turn.n_up == 1 and live.n_up == 2


def test_the_absorbed_set_reads_the_ceiling_per_preset():
    # X1 (partial) and X2 (struggling) -> X3 (struggling); X2 and X3 are taught. X2 reaches partial, so X3
    # advances through the live ceiling. Before the turn its weakest prerequisite was struggling (paper:
    # not absorbed), but one prerequisite was at partial (the released metric code: absorbed).
    g = graph(10, [("X1", "X3"), ("X2", "X3")])
    s = state(g, {"X1": "partial_understanding", "X2": "struggling", "X3": "struggling"})
    signals = {"X2": sig(WELL), "X3": sig(WELL)}
    paper, released = update(g, s, signals, PAPER), update(g, s, signals, RELEASED)
    assert paper.state.states == released.state.states
    assert paper.state.states["X3"] == "partial_understanding"
    assert paper.absorbed == ("X2",)
    assert released.absorbed == ("X2", "X3")


# ------------------------------------------------------------------------------------------ shallow teaching


def test_shallow_teaching_only_lifts_unaware_to_struggling():
    g = graph(10)  # τ = 6: the load of 3.8 below stays under capacity
    s = state(g, {"X1": "unaware", "X2": "struggling", "X3": "partial_understanding", "X4": "knows_well"})
    shallow = {iu: sig(SHALLOW) for iu in ("X1", "X2", "X3", "X4")}
    r = update(g, s, shallow, PAPER)
    assert r.eta == 1.0
    assert {iu: r.state.states[iu] for iu in shallow} == {
        "X1": "struggling", "X2": "struggling", "X3": "partial_understanding", "X4": "knows_well"}
    loose = update(g, s, shallow, resolve_preset("paper", {"shallow_unaware_only": False}))
    assert loose.state.states["X2"] == "partial_understanding"


def test_well_explained_advances_one_step_unless_configured():
    g = graph(4)
    s = state(g, {"X1": "unaware"})
    assert update(g, s, {"X1": sig(WELL)}, PAPER).state.states["X1"] == "struggling"
    two = resolve_preset("paper", {"well_explained_steps": 2})
    assert update(g, s, {"X1": sig(WELL)}, two).state.states["X1"] == "partial_understanding"


# ------------------------------------------------------------------------------------------ fractional carry


def _three_struggling():
    g = graph(4)  # τ = 2; three struggling IUs well explained give L = 3 = 1.5τ, η = 0.8 (k = 1)
    return g, state(g, {"X1": "struggling", "X2": "struggling", "X3": "struggling"}), {
        f"X{i}": sig(WELL) for i in (1, 2, 3)}


def test_fractional_carry_resets_on_a_transition_in_the_paper_preset():
    g, s, taught = _three_struggling()
    first = update(g, s, taught, PAPER)
    assert first.state.states["X1"] == "struggling" and first.state.progress["X1"] == pytest.approx(0.8)
    second = update(g, first.state, taught, PAPER)  # 0.8 + 0.8 = 1.6: one step
    assert second.state.states["X1"] == "partial_understanding"
    assert second.state.progress == {}


def test_fractional_carry_keeps_the_remainder_without_reset():
    g, s, taught = _three_struggling()
    no_reset = resolve_preset("paper", {"reset_progress_on_transition": False})
    second = update(g, update(g, s, taught, no_reset).state, taught, no_reset)
    assert second.state.states["X1"] == "partial_understanding"
    assert second.state.progress["X1"] == pytest.approx(0.6)


def test_idle_progress_is_kept_by_the_paper_and_zeroed_by_the_released_code():
    g, s, taught = _three_struggling()
    released_k1 = resolve_preset("released", {"hinge": False, "softening": 1.0})
    for preset, kept in ((PAPER, 0.8), (released_k1, None)):
        after = update(g, update(g, s, taught, preset).state, {}, preset)  # a silent turn
        assert after.state.progress.get("X1") == (pytest.approx(kept) if kept else None), preset.name
    # Taught again in a turn without overload, the paper's learner advances (and resets).
    first = update(g, s, taught, PAPER)
    calm = update(g, first.state, {"X1": sig(WELL)}, PAPER)
    assert calm.eta == 1.0 and calm.state.states["X1"] == "partial_understanding" and calm.state.progress.get(
        "X1") is None


def test_without_fractional_accumulation_a_damped_step_is_rounded():
    g, s, taught = _three_struggling()
    rounding = resolve_preset("paper", {"fractional": False})
    r = update(g, s, taught, rounding)  # round(1 · 0.8) = 1
    assert r.n_up == 3 and r.state.progress == {}
    half = update(g, state(g, {f"X{i}": "struggling" for i in range(1, 5)}), {f"X{i}": sig(WELL) for i in range(1, 5)},
                  rounding)  # η = 0.5: round(0.5) = 0 (half to even)
    assert half.n_up == 0


# ------------------------------------------------------------------------------------------ per-IU hinge


def test_hinge_keeps_eta_for_the_top_n_neediest_mentioned_ius_only():
    # 14 IUs: τ = 8, N = max(1, round(0.143 · 14)) = 2. X1 -> X5, so X5 sits at depth 1.
    g = graph(14, [("X1", "X5")])
    s = state(g, {"X1": "knows_well", "X4": "struggling"})
    signals = {"X5": sig(WELL), "X2": sig(WELL), "X3": sig(WELL), "X4": sig(WELL),
               "X8": sig(attempt="reasoning"), "X9": sig(attempt="reasoning")}
    r = update(g, s, signals, RELEASED)
    assert r.effective_load == pytest.approx(3 * 1.75 + 1.00 + 2 * 1.75)  # 9.75 > τ = 8
    eta = 1 / (1 + (1.75 / (8 * 1.3)) ** 2)
    assert r.eta == pytest.approx(eta)
    # Highest W_S first (the three unaware IUs), then shallower depth (X2, X3 before X5), then graph order.
    assert r.iu_eta == pytest.approx({"X2": eta, "X3": eta, "X5": 0.5 * eta, "X4": 0.5 * eta})
    assert r.state.progress == pytest.approx({"X2": eta, "X3": eta, "X5": 0.5 * eta, "X4": 0.5 * eta})
    no_hinge = update(g, s, signals, PAPER)
    paper_eta = 1 / (1 + (1.75 / 8) ** 2)
    assert no_hinge.iu_eta == pytest.approx(dict.fromkeys(("X2", "X3", "X4", "X5"), paper_eta))


def test_hinge_does_nothing_in_a_turn_without_overload():
    g = graph(14)
    r = update(g, state(g, {}), {"X1": sig(WELL), "X2": sig(WELL), "X3": sig(WELL)}, RELEASED)  # L = 5.25 < 8
    assert r.eta == 1.0 and r.iu_eta == {} and r.n_up == 3


# ------------------------------------------------------------------------------------------ monotonicity


def test_states_never_go_down():
    # X2 is above what its prerequisite allows: teaching it again must not pull it down to the ceiling.
    g = graph(10, [("X1", "X2")])
    r = update(g, state(g, {"X1": "unaware", "X2": "partial_understanding"}), {"X2": sig(WELL), "X1": sig(SHALLOW)},
               PAPER)
    assert r.state.states["X2"] == "partial_understanding"


@pytest.mark.parametrize("preset", [PAPER, RELEASED], ids=["paper", "released"])
def test_monotonic_over_random_conversations(preset):
    rng = random.Random(7)
    ids = [f"X{i}" for i in range(1, 13)]
    edges = sorted({(ids[a], ids[b]) for b in range(1, 12) for a in rng.sample(range(b), k=min(b, 2))})
    g = graph(12, edges)
    for _ in range(30):
        s = state(g, {iu: rng.choice(STATES) for iu in ids})
        for _ in range(15):
            signals = {iu: sig(rng.choice(["well_explained", "shallow", "not_mentioned"]),
                           rng.choice(["reasoning", "articulation", "none"])) for iu in ids if rng.random() < 0.7}
            r = update(g, s, signals, preset)
            assert all(ORDINAL[r.state.states[iu]] >= ORDINAL[s.states[iu]] for iu in ids)
            assert all(0.0 <= p < 1.0 for p in r.state.progress.values())
            assert r.n_up == len(r.advanced) and set(r.absorbed) <= set(r.explained) & set(r.advanced)
            s = r.state


# ------------------------------------------------------------------------------------------ bad input


def test_signals_naming_an_unknown_iu_are_an_error_naming_it():
    g = graph(4)
    with pytest.raises(UnknownNameError) as info:
        update(g, state(g, {}), {"X1": sig(WELL), "X7": sig(WELL)}, PAPER)
    assert info.value.name == "X7" and "X7" in str(info.value) and info.value.field == "signals.X7"


def test_the_update_is_pure():
    g, s, taught = _three_struggling()
    before = (dict(s.states), dict(s.progress))
    a, b = update(g, s, taught, PAPER), update(g, s, taught, PAPER)
    assert (dict(s.states), dict(s.progress)) == before
    assert a == b


def test_a_state_that_does_not_fit_the_graph_is_an_error_naming_what_is_wrong():
    from simhub.errors import DataError

    g = graph(4)
    with pytest.raises(DataError, match="no state for IU X4"):
        update(g, KnowledgeState(states={"X1": "unaware", "X2": "unaware", "X3": "unaware"}), {}, PAPER)
    with pytest.raises(UnknownNameError, match="'kinda'") as info:
        update(g, state(g, {"X2": "kinda"}), {}, PAPER)
    assert info.value.field == "state.states.X2"
    with pytest.raises(UnknownNameError, match="unknown IU 'Y1'"):
        update(g, KnowledgeState(states={**state(g, {}).states, "Y1": "unaware"}), {}, PAPER)
