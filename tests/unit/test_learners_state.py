"""Initial knowledge states per level: Table 5's counts, topological assignment, the released code's
clamps, custom ratios, and a level outside the three (FIDELITY.md, "Learners")."""

from __future__ import annotations

import itertools

import pytest

from simhub.errors import ConfigError, UnknownNameError
from simhub.learners import LevelRatios, initial_state
from simhub.learners.graph import IUEdge, IUGraph, IUNode, validate_graph
from simhub.learners.state import PAPER_RATIOS, level_counts


def chain_graph(n: int):
    """X1 -> X2 -> ... -> Xn, but listed leaf first so graph order is the reverse of the topological one."""
    ids = [f"X{i}" for i in range(1, n + 1)]
    nodes = tuple(IUNode(id=iu, concept=iu, abstraction_level=1.0 - i / n) for i, iu in reversed(list(enumerate(ids))))
    return validate_graph(IUGraph(nodes=nodes, edges=tuple(
        IUEdge(source=a, target=b, delta_l=1 / n) for a, b in itertools.pairwise(ids))))


def test_table5_ratios():
    assert {k: (v.knows_well, v.partial_understanding, v.struggling, round(v.unaware, 9))
            for k, v in PAPER_RATIOS.items()} == {
        "novice": (0.10, 0.10, 0.30, 0.50), "intermediate": (0.55, 0.15, 0.20, 0.10),
        "advanced": (0.80, 0.10, 0.10, 0.00)}


@pytest.mark.parametrize(("level", "n", "counts"), [
    ("novice", 10, (1, 1, 3, 5)),
    ("intermediate", 10, (6, 2, 2, 0)),  # round(5.5) = 6, round(1.5) = 2: half to even
    ("advanced", 10, (8, 1, 1, 0)),
    ("novice", 20, (2, 2, 6, 10)),
    ("intermediate", 20, (11, 3, 4, 2)),
    ("advanced", 20, (16, 2, 2, 0)),
    ("novice", 15, (2, 2, 4, 7)),  # 1.5 -> 2, 4.5 -> 4
    ("advanced", 5, (4, 0, 0, 1)),  # one IU left: no partial frontier, and known stays ≤ n - 1
])
def test_counts_per_level(level, n, counts):
    c = level_counts(n, PAPER_RATIOS[level])
    assert (c["knows_well"], c["partial_understanding"], c["struggling"], c["unaware"]) == counts


def test_clamps_keep_one_known_one_partial_and_one_not_known():
    novice_4 = level_counts(4, PAPER_RATIOS["novice"])  # 0.4 rounds to 0 for known and partial
    assert (novice_4["knows_well"], novice_4["partial_understanding"]) == (1, 1)
    unclamped = level_counts(4, PAPER_RATIOS["novice"], clamps=False)
    assert (unclamped["knows_well"], unclamped["partial_understanding"], unclamped["struggling"]) == (0, 0, 1)
    everything = level_counts(6, LevelRatios(knows_well=1.0))
    assert everything["knows_well"] == 5 and everything["unaware"] == 1
    assert level_counts(6, LevelRatios(knows_well=1.0), clamps=False)["knows_well"] == 6


def test_states_are_assigned_along_the_topological_order():
    g = chain_graph(10)
    assert g.ids[0] == "X10" and g.order[0] == "X1"
    s = initial_state(g, "novice")
    assert [s.states[f"X{i}"] for i in range(1, 11)] == [
        "knows_well", "partial_understanding", "struggling", "struggling", "struggling",
        "unaware", "unaware", "unaware", "unaware", "unaware"]
    assert list(s.states) == list(g.ids)  # graph order in the mapping


def test_ties_at_one_depth_follow_graph_order():
    nodes = tuple(IUNode(id=iu, concept=iu, abstraction_level=0.9) for iu in ("B", "A", "C", "D"))
    g = validate_graph(IUGraph(nodes=nodes))
    s = initial_state(g, LevelRatios(knows_well=0.5, partial_understanding=0.25), clamps=False)
    assert s.states == {"B": "knows_well", "A": "knows_well", "C": "partial_understanding", "D": "unaware"}


def test_custom_ratios_replace_the_table():
    g = chain_graph(10)
    s = initial_state(g, {"knows_well": 0.3, "struggling": 0.2})
    # partial is clamped to 1 (the frontier); struggling follows it.
    assert [s.count(x) for x in ("knows_well", "partial_understanding", "struggling", "unaware")] == [3, 1, 2, 4]
    with pytest.raises(ConfigError) as info:
        initial_state(g, {"knows_well": 0.8, "struggling": 0.5})
    assert info.value.field == "ratios"
    with pytest.raises(ConfigError):
        LevelRatios(knows_well=1.5)


def test_a_level_outside_the_three_is_an_error():
    with pytest.raises(UnknownNameError) as info:
        initial_state(chain_graph(10), "expert")
    assert info.value.field == "level" and "novice" in str(info.value) and "advanced" in str(info.value)
    with pytest.raises(UnknownNameError, match="did you mean 'novice'"):
        initial_state(chain_graph(10), "novic")
