"""KnowSim's validation statistics (Cliff's delta, the one-sided binomial test, cell-level Spearman)
by hand, and `simhub tutor-bench agree` on a real run folder."""

from __future__ import annotations

import json

import pytest

from simhub.cli import main
from simhub.tutoring.knowsim.agree import binomial_greater, cliffs_delta, spearman


def test_cliffs_delta_by_hand():
    assert cliffs_delta([3, 4], [1, 2]) == 1.0
    assert cliffs_delta([1, 2], [3, 4]) == -1.0
    assert cliffs_delta([1, 2, 3], [2, 2]) == 0.0  # 2 above, 2 below, 2 ties of 6 pairs
    assert cliffs_delta([1, 3], [2]) == 0.0
    assert cliffs_delta([2, 3, 3], [1, 3]) == pytest.approx((3 - 1) / 6)  # 2>1, 3>1, 3>1; 2<3


def test_one_sided_exact_binomial_matches_the_papers_table():
    assert binomial_greater(13, 17) == pytest.approx(3214 / 2**17)  # 0.025 in KnowSim's Table 3
    assert round(binomial_greater(16, 20), 3) == 0.006 and round(binomial_greater(14, 20), 3) == 0.058
    assert binomial_greater(0, 5) == 1.0 and binomial_greater(5, 5) == 1 / 32


def test_cohen_kappa_by_hand():
    from simhub.tutoring.knowsim.results import cohen_kappa

    # observed 0.75; expected (2*3 + 2*1) / 16 = 0.5 -> kappa 0.5
    assert cohen_kappa(["a", "a", "b", "b"], ["a", "a", "a", "b"]) == pytest.approx(0.5)
    assert cohen_kappa(["x", "x"], ["x", "x"]) == 1.0
    assert cohen_kappa([], []) is None


def test_spearman_by_hand():
    rho, p = spearman([1, 2, 3, 4], [1, 3, 2, 4], n_permutations=2000)
    assert rho == pytest.approx(0.8)  # 1 - 6 * 2 / (4 * 15)
    assert 0 < p <= 1
    rho, _ = spearman([1, 2, 2, 3], [10, 20, 20, 30], n_permutations=10)
    assert rho == pytest.approx(1.0)
    assert spearman([1, 2], [2, 1]) == (None, None)


def test_agree_against_human_ratings(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["tutor-bench", "--tutor", "scripted:stepwise", "--tutor", "scripted:dump", "--n", "4", "--output",
                 str(run), "--no-cache", "--extractor", "offline:lexical", "--bootstrap", "200"]) == 0
    rows = ["block,level,condition,metric,value"]
    for level in ("novice", "intermediate", "advanced"):
        # People found stepwise better calibrated and less overloading, as the simulator does...
        rows += [f"arm,{level},scripted:stepwise,dc,{v}" for v in (7, 8, 6)]
        rows += [f"arm,{level},scripted:dump,dc,{v}" for v in (3, 4, 2)]
        rows += [f"arm,{level},scripted:stepwise,co,{v}" for v in (2, 3)]
        rows += [f"arm,{level},scripted:dump,co,{v}" for v in (8, 9)]
        # ...and a contrast too small to count.
        rows += [f"arm,{level},scripted:stepwise,kg,{v}" for v in (5, 5)]
        rows += [f"arm,{level},scripted:dump,kg,{v}" for v in (5, 5)]
    human = tmp_path / "human.csv"
    human.write_text("\n".join(rows) + "\n")
    capsys.readouterr()
    assert main(["tutor-bench", "agree", str(human), str(run)]) == 0
    assert "6/6 = 100%" in capsys.readouterr().out
    result = json.loads((run / "agreement.json").read_text())
    assert result["pooled"] == {"agree": 6, "high_signal": 6, "rate": 1.0, "p": 1 / 64}
    assert result["by_metric"]["kg"]["high_signal"] == 0
    assert {c["metric"] for c in result["contrasts"] if c["high_signal"]} == {"dc", "co"}
    # Reversed human ratings disagree everywhere.
    flipped = tmp_path / "flipped.csv"
    flipped.write_text(human.read_text().replace("scripted:stepwise", "X").replace("scripted:dump", "scripted:stepwise")
                       .replace("X", "scripted:dump"))
    assert main(["tutor-bench", "agree", str(flipped), str(run)]) == 0
    assert json.loads((run / "agreement.json").read_text())["pooled"]["agree"] == 0
    # Bad input names the row and column.
    bad = tmp_path / "bad.csv"
    bad.write_text("level,condition,metric,value\nexpert,scripted:dump,dc,3\n")
    capsys.readouterr()
    assert main(["tutor-bench", "agree", str(bad), str(run)]) == 2
    assert "bad.csv:2: level 'expert'" in capsys.readouterr().err
    bad.write_text("level,condition,value\nnovice,scripted:dump,3\n")
    assert main(["tutor-bench", "agree", str(bad), str(run)]) == 2
    assert "missing column metric" in capsys.readouterr().err
    assert main(["tutor-bench", "agree", str(human)]) == 2
