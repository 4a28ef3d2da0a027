"""``simhub learners replay`` on a small hand-made log in the knowsim repository's JSON format: exact
values worked out by hand under both presets, a log missing a field, and a list of runs."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from simhub.cli import main

# A four-IU chain, IU1 -> IU2 -> IU3 -> IU4, in the layout of knowsim's data/iu_cache/*.json.
CACHE = {
    "frac_add_demo": {
        "knowledge_areas": ["Fractions"],
        "nodes": [
            {"id": "IU1", "concept": "A fraction names equal parts of a whole", "abstraction_level": 0.9,
             "description": "The denominator counts the equal parts; the numerator counts those taken."},
            {"id": "IU2", "concept": "Equivalent fractions", "abstraction_level": 0.7,
             "description": "Multiplying top and bottom by one number keeps the value."},
            {"id": "IU3", "concept": "A common denominator", "abstraction_level": 0.5,
             "description": "Two fractions rewritten over one denominator can be compared and added."},
            {"id": "IU4", "concept": "Adding 1/3 and 1/4", "abstraction_level": 0.3,
             "description": "Over twelfths, 4/12 + 3/12 = 7/12."},
        ],
        "edges": [
            {"from": "IU1", "to": "IU2", "delta_l": 0.2, "reason": "Equivalence rescales the parts."},
            {"from": "IU2", "to": "IU3", "delta_l": 0.2, "reason": "A common denominator is found by equivalence."},
            {"from": "IU3", "to": "IU4", "delta_l": 0.2, "reason": "The sum needs one denominator."},
        ],
    }
}


def entry(iu: str, quality: str = "not_mentioned", attempt: str = "none") -> dict:
    return {"id": iu, "concept": "...", "teaching_quality": quality, "teaching_quality_reasoning": "...",
            "user_attempt_type": attempt, "assistant_response_role": "not_applicable"}


def label(iu: str) -> str:
    node = next(n for n in CACHE["frac_add_demo"]["nodes"] if n["id"] == iu)
    return f"{iu}: {node['concept']}"


def states(kw: str, pu: str = "", st: str = "", un: str = "") -> dict:
    out = {}
    for name, ius in (("knows_well", kw), ("partial_understanding", pu), ("struggling", st), ("unaware", un)):
        out.update({label(iu): {"state": name} for iu in ius.split()})
    return out


HISTORY = [
    [entry("IU1"), entry("IU2", "well_explained", "articulation"), entry("IU3"), entry("IU4")],
    [entry("IU1", "shallow"), entry("IU2"), entry("IU3", "well_explained"), entry("IU4", "well_explained", "reasoning")],
    [entry("IU1"), entry("IU2"), entry("IU3", "well_explained"), entry("IU4", "shallow")],
    [entry("IU1", "shallow"), entry("IU2", "shallow"), entry("IU3", "shallow", "reasoning"),
     entry("IU4", attempt="reasoning")],
]

RUN = {
    "problem_id": "frac_add_demo",
    "knowledge_level": "intermediate",
    "initial_knowledge_state": states("IU1", "IU2", "IU3", "IU4"),
    "iu_analysis_history": HISTORY,
    # What the released code logs beside the signals; the replay compares itself against it.
    "knowledge_state_history": [states("IU1", "IU2", "IU3", "IU4"), states("IU1 IU2", "", "IU3", "IU4"),
                                states("IU1 IU2", "", "IU3", "IU4"), states("IU1 IU2", "", "IU3 IU4"),
                                states("IU1 IU2", "", "IU3 IU4")],
    "turn_metrics_history": [
        {"turn": t, "comprehension_load": c, "attempt_load": a, "effective_load": c + a, "overload_threshold": 2.0,
         "overload": c + a >= 2, "n_upward_transitions": up}
        for t, (c, a, up) in enumerate([(0.70, 0.35, 1), (3.10, 1.75, 0), (2.75, 0.0, 1), (1.70, 2.80, 0)], 1)],
}


def released_eta(load: float) -> float:
    return 1 / (1 + ((load - 2) / (2 * 1.3)) ** 2)


def paper_eta(load: float) -> float:
    return 1 / (1 + ((load - 2) / 2) ** 2)


@pytest.fixture
def files(tmp_path):
    cache = tmp_path / "iu_cache.json"
    cache.write_text(json.dumps(CACHE))

    def write(data, name="run.json"):
        path = tmp_path / name
        path.write_text(json.dumps(data))
        return str(path)

    return str(cache), write


def replay(capsys, *argv):
    code = main(["learners", "replay", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_replay_json_under_the_released_preset_matches_the_hand_computation(files, capsys):
    cache, write = files
    code, out, _ = replay(capsys, write(RUN), "--graphs", cache, "--json")
    assert code == 0
    result = json.loads(out)
    turns = result["turns"]
    # τ = max(2, round(0.55 · 4)) = 2 every turn.
    assert [t["threshold"] for t in turns] == [2, 2, 2, 2]
    # Turn 1: IU2 (partial) well explained, articulated: 0.70 + 0.35; under capacity, IU2 -> knows_well.
    # Turn 2: IU3 (struggling) 1.00 + IU4 (unaware) 1.75, then IU1 (knows_well) 0.35; reasoning on IU4 1.75.
    # Turn 3: IU3 1.00 + IU4 1.75. Turn 4: IU3 1.00, IU1 0.35, IU2 0.35; reasoning on IU3 and IU4 1.40 each.
    assert [(t["comprehension_load"], t["attempt_load"], t["effective_load"]) for t in turns] == [
        pytest.approx(x) for x in [(0.70, 0.35, 1.05), (3.10, 1.75, 4.85), (2.75, 0.0, 2.75), (1.70, 2.80, 4.50)]]
    assert [t["n_up"] for t in turns] == [1, 0, 1, 0]
    assert [t["overloaded"] for t in turns] == [False, True, True, True]  # L ≥ τ
    kw, st, un = "knows_well", "struggling", "unaware"
    assert [t["states"] for t in turns] == [
        {"IU1": kw, "IU2": kw, "IU3": st, "IU4": un},
        {"IU1": kw, "IU2": kw, "IU3": st, "IU4": un},
        {"IU1": kw, "IU2": kw, "IU3": st, "IU4": st},
        {"IU1": kw, "IU2": kw, "IU3": st, "IU4": st},
    ]
    # The hinge keeps η for one IU (N = max(1, round(0.143 · 4)) = 1), the neediest: IU4 (unaware), so
    # IU3 gets half of it; nothing reaches a whole step in turn 2, and the remainders carry over.
    e2, e3 = released_eta(4.85), released_eta(2.75)
    assert turns[1]["eta"] == pytest.approx(e2)
    assert turns[1]["progress"] == pytest.approx({"IU3": 0.5 * e2, "IU4": e2})
    # Turn 3: IU4 passes a whole step (struggling) and keeps the rest (no reset); IU3 still accumulates.
    assert turns[2]["progress"] == pytest.approx({"IU3": 0.5 * e2 + 0.5 * e3, "IU4": e2 + e3 - 1})
    # Turn 4: shallow teaching cannot lift IU3 (struggling), and the released code zeroes idle progress.
    assert turns[3]["progress"] == {}
    m = result["metrics"]
    assert (m["kg"], m["turns"]) == (2, 4)
    assert m["nkg"] == pytest.approx(2 / 6) and m["nkg_3n"] == pytest.approx(2 / 12)
    # A = {IU2} in turn 1 only; E: 1 + 3 + 2 + 3; Z (pre-turn): {IU2, IU3}, then {IU3} three times.
    assert (m["explained_total"], m["teachable_total"], m["absorbed_total"]) == (9, 5, 1)
    assert m["dc_precision"] == pytest.approx(1 / 9) and m["dc_recall"] == pytest.approx(1 / 5)
    assert m["dc"] == pytest.approx(1 / 7)
    assert m["co"] == pytest.approx((1.05 / 2 + 1 + 1 + 1) / 4)
    assert m["ic_precision"] == pytest.approx(4 / 9) and m["ic_recall"] == pytest.approx(4 / 5)
    # Released rule: turns 2-4 are overloaded with one upward transition in all.
    assert (result["early_stop_turn"], result["early_stop_reason"]) == (4, "overload")
    assert result["metrics_at_early_stop"]["kg"] == 2
    assert result["agreement"] == {"turns_compared": 4, "states": 4, "loads": 4, "n_up": 4, "overload_flags": 4,
                                   "first_mismatch": None, "dc": None, "dc_mode": None}
    # DC both ways. The legacy proxy's numerator is min(|E_t ∩ Z_t|, n_up) per turn: min(1, 1), min(1, 0),
    # min(1, 1), min(1, 0) = 2, so P = 2/9, R = 2/5 and F1 = 2/7; the definition counts |A| = 1: 1/7.
    assert result["dc"] == {"mode": "definition", "definition": pytest.approx(1 / 7),
                            "legacy_proxy": pytest.approx(2 / 7)}


def test_a_log_flagged_with_the_legacy_proxy_is_replayed_with_its_dc(files, capsys):
    """Rule (FIDELITY.md, "DC from the example logs"): a log the released code wrote without per-turn
    |A_t| (``absorbed_ic_uses_legacy_proxy``) has its DC from the proxy min(|E_t ∩ Z_t|, n_up); the replay
    computes it the same way, says so, and gives the definition's value beside it; --set forces either."""
    cache, write = files
    flagged = dict(RUN, metrics={"absorbed_ic_uses_legacy_proxy": True, "absorbed_ic_f1": 2 / 7})
    code, out, _ = replay(capsys, write(flagged), "--graphs", cache, "--json")
    result = json.loads(out)
    assert code == 0 and result["metrics"]["dc"] == pytest.approx(2 / 7)
    assert (result["metrics"]["dc_precision"], result["metrics"]["dc_recall"]) == (pytest.approx(2 / 9),
                                                                                   pytest.approx(2 / 5))
    assert result["dc"]["mode"] == "legacy_proxy" and result["dc"]["definition"] == pytest.approx(1 / 7)
    assert (result["agreement"]["dc"], result["agreement"]["dc_mode"]) == (True, "legacy_proxy")
    code, out, _ = replay(capsys, write(flagged), "--graphs", cache, "--json", "--set", "dc_numerator=definition")
    forced = json.loads(out)
    assert forced["metrics"]["dc"] == pytest.approx(1 / 7) and forced["agreement"]["dc"] is False
    assert forced["agreement"]["dc_mode"] == "definition"
    code, out, _ = replay(capsys, write(RUN), "--graphs", cache, "--set", "dc_numerator=legacy_proxy")
    assert code == 0 and "DC 0.286" in out and "DC by legacy_proxy" in out


def test_an_initial_state_keyed_by_bare_id_is_read_as_each_preset_reads_it(files, capsys):
    """Rule (FIDELITY.md, "initial states"): the released code looks a state up by its label
    ("IU2: Equivalent fractions"); a bare-id key ("IU2") names nothing there, so that IU starts unaware,
    with a warning. The paper preset (simhub's reading) takes the id or the label."""
    cache, write = files
    bare = dict(RUN, initial_knowledge_state={**states("IU1", "", "IU3", "IU4"), "IU2": {"state": "partial_understanding"}})
    for key in ("knowledge_state_history", "turn_metrics_history"):
        del bare[key]
    code, out, err = replay(capsys, write(bare), "--graphs", cache, "--json")
    released = json.loads(out)
    assert code == 0 and released["initial_states"]["IU2"] == "unaware"
    assert any("initial_knowledge_state.IU2: a bare IU id; the released code looks states up by label "
               "('IU2: Equivalent fractions'), so IU2 starts unaware there" in w for w in released["warnings"])
    assert "warning: " in err
    code, out, err = replay(capsys, write(bare), "--graphs", cache, "--json", "--preset", "paper")
    paper = json.loads(out)
    assert code == 0 and paper["initial_states"]["IU2"] == "partial_understanding" and paper["warnings"] == []


def test_replay_json_under_the_paper_preset(files, capsys):
    cache, write = files
    code, out, _ = replay(capsys, write(RUN), "--graphs", cache, "--preset", "paper", "--json")
    assert code == 0
    result = json.loads(out)
    turns = result["turns"]
    # No hinge, k = 1: turn 2 leaves both IU3 and IU4 at η2 of a step; turn 3 adds η3 and both pass a step
    # (1.21). IU3 reaches partial first, so IU4's live ceiling is partial too. Progress resets.
    e2, e3 = paper_eta(4.85), paper_eta(2.75)
    assert turns[1]["progress"] == pytest.approx({"IU3": e2, "IU4": e2})
    assert e2 + e3 > 1
    assert turns[2]["states"] == {"IU1": "knows_well", "IU2": "knows_well", "IU3": "partial_understanding",
                                  "IU4": "struggling"}
    assert turns[2]["progress"] == {} and turns[2]["n_up"] == 2
    assert turns[3]["effective_load"] == pytest.approx(0.70 + 0.35 + 0.35 + 0.70 + 1.40)
    assert result["metrics"]["kg"] == 3
    assert result["early_stop_turn"] is None  # the paper's rule is not checked before turn 5
    assert result["agreement"]["first_mismatch"]["turn"] == 3
    assert result["agreement"]["first_mismatch"]["what"] == "states"


def test_replay_table_without_json(files, capsys):
    cache, write = files
    code, out, _ = replay(capsys, write(RUN), "--graphs", cache)
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "item frac_add_demo · preset released · 4 IUs · τ = 2"
    assert lines[3].split()[:7] == ["2", "3.10", "1.75", "4.85", "2.42", f"{released_eta(4.85):.2f}", "0"]
    assert any(line.startswith("early stop: turn 4 (overload)") for line in lines)


def test_a_list_of_runs_gives_a_list_in_the_same_order(files, capsys):
    cache, write = files
    advanced = copy.deepcopy(RUN)
    advanced["initial_knowledge_state"] = states("IU1 IU2 IU3", "IU4")
    for key in ("knowledge_state_history", "turn_metrics_history"):
        del advanced[key]
    code, out, _ = replay(capsys, write([RUN, advanced]), "--graphs", cache, "--json")
    assert code == 0
    results = json.loads(out)
    assert isinstance(results, list) and len(results) == 2
    assert results[0]["metrics"]["kg"] == 2
    assert results[1]["initial_states"]["IU4"] == "partial_understanding"
    assert results[1]["agreement"] is None
    single = json.loads(replay(capsys, write(RUN, "one.json"), "--graphs", cache, "--json")[1])
    assert single == results[0]


def test_a_log_missing_a_field_names_the_file_and_the_field(files, capsys):
    """In a list file, a broken run is reported with its index and reason and the others are replayed
    (exit 1); a single run that is broken, or a file that is not a run log at all, exits 2."""
    cache, write = files
    broken = copy.deepcopy(RUN)
    del broken["iu_analysis_history"]
    path = write([RUN, broken, RUN], "broken.json")
    code, out, err = replay(capsys, path, "--graphs", cache, "--json")
    assert code == 1
    results = json.loads(out)
    assert results[0]["metrics"]["kg"] == results[2]["metrics"]["kg"] == 2
    assert results[1] == {"index": 1, "error": results[1]["error"]} and "'iu_analysis_history'" in results[1]["error"]
    assert f"run [1] not replayed: {path}: [1]: missing field 'iu_analysis_history'" in err
    assert "2 of 3 runs replayed, 1 failed" in err
    code, out, err = replay(capsys, path, "--graphs", cache)  # the table: the two good runs, printed
    assert code == 1 and out.count("item frac_add_demo") == 2 and "run [1] not replayed" in err
    malformed = Path(path).with_name("malformed.json")
    malformed.write_text("[{not json")
    code, out, err = replay(capsys, str(malformed), "--graphs", cache)
    assert code == 2 and out == "" and "not valid JSON" in err
    no_initial = {k: v for k, v in RUN.items() if k != "initial_knowledge_state"}
    code, _, err = replay(capsys, write(no_initial, "single.json"), "--graphs", cache)
    assert code == 2 and "single.json" in err and "'initial_knowledge_state'" in err


def test_bad_signals_and_unknown_items_are_named(files, capsys):
    cache, write = files
    unknown = copy.deepcopy(RUN)
    unknown["iu_analysis_history"][2][1]["id"] = "IU9"
    code, _, err = replay(capsys, write(unknown), "--graphs", cache)
    assert code == 2 and "iu_analysis_history[2][1].id" in err and "IU9" in err
    odd = copy.deepcopy(RUN)
    odd["iu_analysis_history"][0][0]["teaching_quality"] = "brilliant"
    code, _, err = replay(capsys, write(odd), "--graphs", cache)
    assert code == 2 and "teaching_quality" in err and "brilliant" in err
    elsewhere = dict(RUN, problem_id="math_999")
    code, _, err = replay(capsys, write(elsewhere), "--graphs", cache)
    assert code == 2 and "math_999" in err
    code, _, err = replay(capsys, write(RUN), "--graphs", cache, "--set", "softnening=1")
    assert code == 2 and "did you mean 'softening'" in err


def _loop_cache() -> dict:
    """The chain with one more edge, IU4 -> IU2: the cycle IU3 -> IU4 -> IU2 -> IU3."""
    cache = copy.deepcopy(CACHE)
    cache["loop"] = copy.deepcopy(CACHE["frac_add_demo"])
    cache["loop"]["edges"].append({"from": "IU4", "to": "IU2", "delta_l": 0.4, "reason": "circular"})
    return cache


def test_a_cyclic_graph_is_refused_by_the_paper_and_ordered_as_the_released_code_does(files, capsys, tmp_path):
    """Rule (FIDELITY.md, "IU graph"): the paper preset refuses a cycle, naming it, for the runs that use
    its graph only; the released preset replays it as the released code does. Worked by hand: the released
    code's depth-first depths (a prerequisite met again on the path counts 0) are IU1 0, IU3 1, IU4 2,
    IU2 3, so a turn updates IU1, IU3, IU4, IU2 in that order with the live cascade. IU2 is then capped
    by IU4, which never passes struggling before IU2 moves: the cycle holds IU2 at partial."""
    _, write = files
    path = tmp_path / "cache2.json"
    path.write_text(json.dumps(_loop_cache()))
    assert replay(capsys, write(RUN), "--graphs", str(path), "--json", "--preset", "paper")[0] == 0
    looped = dict(RUN, problem_id="loop", initial_knowledge_state=states("IU1", "IU2", "IU3", "IU4"),
                  iu_analysis_history=[[entry("IU1"), entry("IU2"), entry("IU3", "well_explained"), entry("IU4")],
                                       [entry("IU1"), entry("IU2"), entry("IU3"), entry("IU4", "well_explained")],
                                       [entry("IU1"), entry("IU2", "well_explained"), entry("IU3"), entry("IU4")]])
    for key in ("knowledge_state_history", "turn_metrics_history"):
        del looped[key]
    code, _, err = replay(capsys, write(looped), "--graphs", str(path), "--preset", "paper")
    assert code == 2 and "loop: cycle: " in err and "IU4" in err
    code, out, err = replay(capsys, write(looped), "--graphs", str(path), "--json")  # released, the default
    assert code == 0
    result = json.loads(out)
    assert [t["states"] for t in result["turns"]] == [
        {"IU1": "knows_well", "IU2": "partial_understanding", "IU3": "partial_understanding", "IU4": "unaware"},
        {"IU1": "knows_well", "IU2": "partial_understanding", "IU3": "partial_understanding", "IU4": "struggling"},
        {"IU1": "knows_well", "IU2": "partial_understanding", "IU3": "partial_understanding", "IU4": "struggling"},
    ]
    assert [t["n_up"] for t in result["turns"]] == [1, 1, 0]
    assert result["warnings"] == ["loop: cycle: IU3 -> IU4 -> IU2 -> IU3; ordered as the released code orders it "
                                  "(a prerequisite met again on the path counts depth 0)"]
    assert "warning: loop: cycle: IU3 -> IU4 -> IU2 -> IU3" in err
    # a list with a run on the cyclic graph: under the paper preset the other runs are still replayed
    code, out, err = replay(capsys, write([RUN, looped], "two.json"), "--graphs", str(path), "--json",
                            "--preset", "paper")
    assert code == 1 and json.loads(out)[0]["item"] == "frac_add_demo"
    assert "run [1] not replayed" in err and "loop: cycle: " in err


def test_learners_check_calls_a_cycle_an_error_for_the_paper_and_a_warning_for_the_released_code(tmp_path, capsys):
    path = tmp_path / "cache2.json"
    path.write_text(json.dumps(_loop_cache()))
    assert main(["learners", "check", str(path)]) == 2
    assert "loop: cycle: IU3 -> IU4 -> IU2 -> IU3" in capsys.readouterr().err
    assert main(["learners", "check", str(path), "--preset", "released"]) == 0
    out = capsys.readouterr().out
    assert "loop: 4 IUs, 4 edges, depth 3" in out and "  cycle: IU3 -> IU4 -> IU2 -> IU3; ordered as the released" in out


def test_the_released_codes_own_example_logs_replay_exactly():
    """With a local clone of the knowsim repository (``SIMHUB_KNOWSIM_DIR``; nothing of it is copied
    here), every structured example run replays under the released preset to the logged states,
    loads, upward transitions, overload flags, KG, CO, information calibration and early stop."""
    import os
    from pathlib import Path

    from simhub.learners import RELEASED
    from simhub.learners.replay import GraphSource, read_runs, replay_run

    root = os.environ.get("SIMHUB_KNOWSIM_DIR")
    if not root:
        pytest.skip("set SIMHUB_KNOWSIM_DIR to a clone of the knowsim repository")
    root = Path(root)
    replayed = 0
    for log in sorted((root / "data" / "examples").glob("*_structured_*.json")):
        graphs = GraphSource.read(root / "data" / "iu_cache" / f"{'math' if log.name.startswith('math') else 'expertqa'}.json")
        runs, _ = read_runs(log)
        graphs = GraphSource(graphs.raw, graphs.file, cycles=RELEASED.cycles)  # math_004's graph has a cycle
        for run in runs:
            result = replay_run(run, graphs, RELEASED, file=str(log))
            turns = len(run["iu_analysis_history"])
            a = result.agreement
            assert (a.turns_compared, a.states, a.loads, a.n_up, a.overload_flags) == (turns,) * 5, (log.name, a)
            logged = run["metrics"]
            m = result.metrics
            assert m.kg == logged["knowledge_gain"] == logged["raw_state_progress"]
            assert (m.nkg, m.nkg_3n) == (pytest.approx(logged["normalized_knowledge_gain"]),
                                         pytest.approx(logged["normalized_knowledge_gain_3N"]))
            assert m.co == pytest.approx(logged["perceived_overload_capacity"])
            assert (m.ic_precision, m.ic_recall) == (pytest.approx(logged["ic_precision"]),
                                                     pytest.approx(logged["ic_recall"]))
            # DC as the code that wrote the log computed it: the legacy proxy, flagged
            assert logged["absorbed_ic_uses_legacy_proxy"] and result.dc.mode == "legacy_proxy"
            assert m.dc == pytest.approx(logged["absorbed_ic_f1"]) and a.dc is True
            assert result.dc.definition < m.dc  # the proxy overcounts |A_t|
            if run.get("virtual_early_stop_turn") is not None:
                assert result.early_stop_turn == run["virtual_early_stop_turn"] + 1  # the log counts from 0
                e, at = result.metrics_at_early_stop, run["metrics_at_early_stop"]
                assert e.kg == at["knowledge_gain"] and e.nkg == pytest.approx(at["normalized_knowledge_gain"])
            replayed += 1
    assert replayed == 4  # two MathQA runs (math_004's graph is cyclic) and two ExpertQA runs


def test_an_iu_the_initial_state_leaves_out_starts_unaware_and_counts_in_the_headroom(files, capsys):
    """Rule (FIDELITY.md, "NKG's headroom"): an IU the initial state leaves out starts unaware, and NKG's
    headroom Σ(3 − s_0) runs over every IU of the graph (the released recompute tool's denominator): here
    IU1 known well, IU2 partial, IU3 struggling and IU4 left out give 0 + 1 + 2 + 3 = 6."""
    cache, write = files
    partial = dict(RUN, initial_knowledge_state=states("IU1", "IU2", "IU3"))
    for key in ("knowledge_state_history", "turn_metrics_history"):
        del partial[key]
    code, out, _ = replay(capsys, write(partial), "--graphs", cache, "--json")
    result = json.loads(out)
    assert code == 0 and result["initial_states"]["IU4"] == "unaware"
    assert result["metrics"]["nkg"] == pytest.approx(result["metrics"]["kg"] / 6)


def test_an_iu_twice_in_one_turn_and_a_state_key_outside_the_graph_are_refused(files, capsys):
    """docs/learners.md, "Two more refusals": each exits 2 naming the file and the place."""
    cache, write = files
    twice = copy.deepcopy(RUN)
    twice["iu_analysis_history"][2].append(entry("IU4"))
    code, _, err = replay(capsys, write(twice, "twice.json"), "--graphs", cache)
    assert code == 2 and "twice.json: iu_analysis_history[2][4].id: IU IU4 appears twice in one turn" in err
    foreign = dict(RUN, initial_knowledge_state={**states("IU1", "IU2", "IU3", "IU4"), "IU9: Ratios": {"state": "unaware"}})
    code, _, err = replay(capsys, write(foreign, "foreign.json"), "--graphs", cache)
    assert code == 2 and "foreign.json: initial_knowledge_state: 'IU9: Ratios' names no IU of graph frac_add_demo" in err
