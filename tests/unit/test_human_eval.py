"""The human-evaluation analysis (simhub.evaluation.human_eval): κ and Pearson, Tables 2–3 on a
hand-computed example, and the ratings file's errors (file, row and column named; the CLI exits 2).

The example: one simulator, four turns. Rater ``a`` rates all four, rater ``b`` the first two. The
expected values below are worked out by hand in the comments (fractions), not by the code under test.
"""

from __future__ import annotations

import csv
import json
from fractions import Fraction
from pathlib import Path

import pytest

from simhub.cli import main
from simhub.errors import DataError
from simhub.evaluation.human_eval import (
    COLUMNS,
    KEY_FILE,
    NA,
    TASKS_KIND,
    cohen_kappa,
    human_eval_report,
    load_key,
    pearson,
    read_ratings,
)
from simhub.evaluation.paper import HUMAN_AGREEMENT, TABLE2_HUMAN, TABLE3

# ------------------------------------------------------------------------------------ statistics


def test_cohen_kappa_by_hand():
    # p_o = 5/6; shares a: 1 3/6, 0 2/6, na 1/6; b: 1 2/6, 0 3/6, na 1/6; p_e = (6 + 6 + 1)/36 = 13/36;
    # κ = (30/36 − 13/36) / (23/36) = 17/23.
    a = [1, 1, 0, 0, 1, NA]
    b = [1, 0, 0, 0, 1, NA]
    assert cohen_kappa(a, b) == pytest.approx(17 / 23, abs=1e-12)
    assert cohen_kappa([], []) is None
    assert cohen_kappa(["x", "x"], ["x", "x"]) is None  # one category on both sides: undefined
    assert cohen_kappa([1, 0], [0, 1]) == pytest.approx(-1.0)


def test_pearson_by_hand():
    # dx = dy·(±) : Σdxdy = 2.25 − 0.25 − 0.25 + 2.25 = 4, Σdx² = Σdy² = 5, r = 0.8.
    assert pearson([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8, abs=1e-12)
    assert pearson([1, 2], [3, 3]) is None
    assert pearson([1], [2]) is None


def test_the_statistics_equal_sklearn_and_scipy():
    sklearn = pytest.importorskip("sklearn.metrics")
    stats = pytest.importorskip("scipy.stats")
    import random

    rng = random.Random(3)
    for _ in range(20):
        a = [rng.choice([1, 0, -1]) for _ in range(40)]
        b = [x if rng.random() < 0.6 else rng.choice([1, 0, -1]) for x in a]
        assert cohen_kappa(a, b) == pytest.approx(sklearn.cohen_kappa_score(a, b), abs=1e-12)
        x = [rng.randint(1, 5) for _ in range(30)]
        y = [v / 5 + rng.random() for v in x]
        assert pearson(x, y) == pytest.approx(stats.pearsonr(x, y).statistic, abs=1e-12)


# --------------------------------------------------------------------------- the worked example


def _candidate(item: str, acts, correctness, errors, cosine: float, rouge: float) -> dict:
    return {"item": item, "run": "sim",
            "auto": {"acts": acts, "correctness": correctness, "errors": errors, "cosine": cosine, "rouge_l": rouge}}


def _group(group: str, act, label, candidate: dict, raters: list[str]) -> dict:
    return {"group": group, "dialogue_id": f"d-{group}", "turn_index": 5, "raters": raters,
            "real": {"item": f"{group}-real", "labels": {"act": act, "correctness": label}},
            "candidates": [candidate]}


#: g1: real incorrect; g2: real na; g3: real correct; g4: a failed annotation (no labels; acts null,
#: correctness left out, errors na as the reference's).
KEY = {
    "kind": TASKS_KIND, "schema_version": 1, "options": {"raters": ["a", "b"]},
    "runs": [{"name": "sim", "path": "runs/sim", "simulator": "sim", "profile": None}],
    "groups": [
        _group("g1", "Math Answer", "incorrect", _candidate("g1-A", 1, 1, 0, 0.9, 0.5), ["a", "b"]),
        _group("g2", "Acknowledge", "na", _candidate("g2-A", 0, NA, NA, 0.2, 0.0), ["a", "b"]),
        _group("g3", "Math Answer", "correct", _candidate("g3-A", 1, 0, NA, 0.6, 0.25), ["a"]),
        _group("g4", None, None, _candidate("g4-A", None, None, NA, 0.4, 0.2), ["a"]),
    ],
}

ROWS = [
    # item, rater, act, correctness, same_error, linguistic
    ("g1-real", "a", "Math Answer", "incorrect", "", ""),
    ("g1-A", "a", "Math Answer", "incorrect", "no", "4"),     # acts 1, corr 1, errors 0, ling 0.75
    ("g2-real", "a", "Acknowledge", "na", "", ""),
    ("g2-A", "a", "Seek Information", "na", "", "1"),         # acts 0, corr na, errors na, ling 0
    ("g3-real", "a", "Math Answer", "correct", "", ""),
    ("g3-A", "a", "Math Answer", "incorrect", "", "3"),       # acts 1, corr 0, errors na, ling 0.5
    ("g4-real", "a", "Not Understanding", "incorrect", "", ""),
    ("g4-A", "a", "not understanding", "Incorrect", "yes", "2"),  # acts 1, corr 1, errors 1, ling 0.25
    ("g1-real", "b", "Math Answer", "correct", "", ""),
    ("g1-A", "b", "Math Answer", "incorrect", "", "5"),       # acts 1, corr 0, errors na, ling 1
    ("g2-real", "b", "Off-Topic", "n/a", "", ""),
    ("g2-A", "b", "Off-Topic", "na", "", "2"),                # acts 1, corr na, errors na, ling 0.25
]


def _tasks(tmp_path: Path) -> Path:
    folder = tmp_path / "tasks"
    folder.mkdir()
    (folder / KEY_FILE).write_text(json.dumps(KEY))
    return folder


def _write(path: Path, rows, header=COLUMNS) -> Path:
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def _exact_pearson(x, y) -> float:
    x, y = [Fraction(v).limit_denominator(1000) for v in x], [Fraction(v).limit_denominator(1000) for v in y]
    mx, my = sum(x) / len(x), sum(y) / len(y)
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
    sxx, syy = sum((a - mx) ** 2 for a in x), sum((b - my) ** 2 for b in y)
    return float(sxy) / (float(sxx) * float(syy)) ** 0.5


def test_tables_2_and_3_on_the_worked_example(tmp_path):
    folder = _tasks(tmp_path)
    ratings, unrated = read_ratings([_write(tmp_path / "r.csv", ROWS)], load_key(folder))
    assert unrated == 0 and len(ratings) == 12
    report = human_eval_report(load_key(folder), ratings)

    t2 = report["table2"]["sim"]
    assert t2["acts"] == {"mean": pytest.approx(5 / 6), "n": 6}          # a: 1, 0, 1, 1; b: 1, 1
    assert t2["correctness"] == {"mean": pytest.approx(0.5), "n": 4}     # a: 1, 0, 1; b: 0 (na left out)
    assert t2["errors"] == {"mean": pytest.approx(0.5), "n": 2}          # a: 0 (g1), 1 (g4)
    assert t2["linguistic"] == {"mean": pytest.approx(2.75 / 6), "n": 6}

    hm = report["table3"]["human_metric"]
    # acts pairs (human, metric): (1,1) (0,0) (1,1) | b (1,1) (1,0); g4 left out (no act label).
    # p_o = 4/5, p_e = (4·3 + 1·2)/25 = 14/25 → κ = 6/11.
    assert hm["acts"]["kappa"] == pytest.approx(6 / 11) and hm["acts"]["n"] == 5
    # correctness: (1,1) (na,na) (0,0) | (0,1) (na,na); g4 left out. p_o = 4/5, p_e = (1·2 + 2·2 + 2·1)/25
    # = 8/25 → κ = 12/17; without na: (1,1) (0,0) (0,1): p_o = 2/3, p_e = 4/9 → κ = 2/5.
    assert hm["correctness"]["kappa"] == pytest.approx(12 / 17) and hm["correctness"]["n"] == 5
    assert hm["correctness"]["kappa_without_na"] == pytest.approx(0.4) and hm["correctness"]["n_na"] == 2
    # errors: (0,0) (na,na) (na,na) (1,na) | (na,0) (na,na): p_o = 4/6, p_e = (1·2 + 4·4)/36 = 1/2 → κ = 1/3;
    # without na only (0,0) is left: one category, undefined.
    assert hm["errors"]["kappa"] == pytest.approx(1 / 3) and hm["errors"]["n"] == 6
    assert hm["errors"]["kappa_without_na"] is None and hm["errors"]["n_without_na"] == 1
    ling = [0.75, 0.0, 0.5, 0.25, 1.0, 0.25]
    assert hm["linguistic_cosine"]["pearson"] == pytest.approx(_exact_pearson(ling, [0.9, 0.2, 0.6, 0.4, 0.9, 0.2]))
    assert hm["linguistic_rouge_l"]["pearson"] == pytest.approx(_exact_pearson(ling, [0.5, 0, 0.25, 0.2, 0.5, 0]))
    assert hm["linguistic_cosine"]["n"] == 6

    hl = report["table3"]["human_label"]
    # acts: (MA,MA) (Ack,Ack) (MA,MA) | (MA,MA) (OT,Ack): p_o = 4/5, p_e = (3·3 + 1·2)/25 = 11/25 → 9/14.
    assert hl["acts"]["kappa"] == pytest.approx(9 / 14) and hl["acts"]["n"] == 5
    # correctness: (inc,inc) (na,na) (cor,cor) | (cor,inc) (na,na): p_e = (1·2 + 2·2 + 2·1)/25 → 12/17.
    assert hl["correctness"]["kappa"] == pytest.approx(12 / 17)

    hh = report["table3"]["human_human"]
    # acts on the 4 shared turns: (MA,MA) (MA,MA) (Ack,OT) (SI,OT): p_o = 1/2, p_e = 4/16 → 1/3.
    assert hh["acts"]["kappa"] == pytest.approx(1 / 3) and hh["acts"]["n"] == 4
    # correctness: (inc,cor) (inc,inc) (na,na) (na,na): p_o = 3/4, p_e = (2·1 + 2·2)/16 → 3/5.
    assert hh["correctness"]["kappa"] == pytest.approx(0.6)
    # errors (candidates): (0,na) (na,na): p_o = 1/2, p_e = 1/2 → 0.
    assert hh["errors"]["kappa"] == pytest.approx(0.0) and hh["errors"]["n"] == 2
    assert hh["linguistic"] == {"pearson": pytest.approx(1.0), "n": 2}  # (0.75, 1), (0, 0.25)
    assert report["ratings"]["shared_turns"] == 4 and report["ratings"]["shared_by"] == {"a+b": 4}
    assert report["paper"]["table3"]["human_metric"]["acts"] == 0.7337


def test_the_cli_prints_the_tables_and_writes_the_json(tmp_path, capsys):
    folder = _tasks(tmp_path)
    ratings = _write(tmp_path / "r.csv", ROWS)
    assert main(["human-eval", "report", str(folder), str(ratings)]) == 0
    out = capsys.readouterr().out
    assert "Table 2" in out and "Table 3" in out and "0.7337" in out and "0.5455 (5)" in out
    written = json.loads((folder / "report.json").read_text())
    assert written["table3"]["human_metric"]["acts"]["kappa"] == pytest.approx(6 / 11)
    assert main(["human-eval", "report", str(folder), str(ratings), "--json", "--output", str(tmp_path / "o.json")]) == 0
    assert json.loads(capsys.readouterr().out)["kind"] == "simhub-human-eval-report"


def test_blank_template_rows_are_skipped_and_counted(tmp_path):
    folder = _tasks(tmp_path)
    rows = [*ROWS, ("g3-real", "b", "", "", "", ""), ("g3-A", "b", "", "", "", "")]
    ratings, unrated = read_ratings([_write(tmp_path / "r.csv", rows)], load_key(folder))
    assert len(ratings) == 12 and unrated == 2


def test_extra_columns_and_any_column_order_are_fine(tmp_path):
    folder = _tasks(tmp_path)
    header = ("comment", *reversed(COLUMNS))
    rows = [("", *reversed(r)) for r in ROWS]
    ratings, _ = read_ratings([_write(tmp_path / "r.csv", rows, header)], load_key(folder))
    assert len(ratings) == 12


# ------------------------------------------------------------------------------------- bad input


def _replace(row: int, column: str, value: str):
    """ROWS with one cell changed; ``row`` is the spreadsheet row (the header is row 1)."""
    rows = [list(r) for r in ROWS]
    rows[row - 2][COLUMNS.index(column)] = value
    return rows


BAD = {
    "unknown item": (_replace(3, "item", "g9-A"), "r.csv:3: item: 'g9-A' is not an item of these tasks"),
    "rating out of range": (_replace(3, "linguistic", "6"), "r.csv:3: linguistic: 6 is out of range"),
    "rating not whole": (_replace(5, "linguistic", "2.5"), "r.csv:5: linguistic: 2.5 is out of range"),
    "rating not a number": (_replace(5, "linguistic", "high"), "r.csv:5: linguistic: 'high' is not a number"),
    "no rating": (_replace(5, "linguistic", ""), "r.csv:5: linguistic: empty"),
    "unknown act": (_replace(2, "act", "Answer"), "r.csv:2: act: 'Answer' is not one of Math Answer"),
    "unknown correctness": (_replace(2, "correctness", "maybe"), "r.csv:2: correctness: 'maybe' is not one of"),
    "no rater": (_replace(4, "rater", ""), "r.csv:4: rater: empty"),
    "linguistic on a real turn": (_replace(2, "linguistic", "3"), "r.csv:2: linguistic: 'g1-real' is the real turn"),
    "same_error not yes or no": (_replace(3, "same_error", "perhaps"), "r.csv:3: same_error: 'perhaps' is not yes or no"),
    "same_error on a correct candidate": (_replace(5, "same_error", "no"), "r.csv:5: same_error: the candidate is rated na"),
    "same_error missing": (_replace(3, "same_error", ""), "r.csv:3: same_error: both this candidate and the real turn"),
    "a rating twice": ([*ROWS, ROWS[1]], "r.csv:14: item: rater 'a' rated 'g1-A' already"),
    "a candidate without its real turn": ([r for r in ROWS if r[:2] != ("g2-real", "b")],
                                          "r.csv:12: item: rater 'b' rated candidate 'g2-A' but not its real turn"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_cells_name_the_file_row_and_column_and_exit_2(case, tmp_path, capsys):
    folder = _tasks(tmp_path)
    rows, message = BAD[case]
    path = _write(tmp_path / "r.csv", rows)
    with pytest.raises(DataError) as info:
        read_ratings([path], load_key(folder))
    assert message in str(info.value), str(info.value)
    assert info.value.row is not None and info.value.column is not None
    assert main(["human-eval", "report", str(folder), str(path)]) == 2
    assert message in capsys.readouterr().err
    assert not (folder / "report.json").exists()


def test_a_missing_column_is_named(tmp_path, capsys):
    folder = _tasks(tmp_path)
    path = _write(tmp_path / "r.csv", [r[:5] for r in ROWS], COLUMNS[:5])
    assert main(["human-eval", "report", str(folder), str(path)]) == 2
    assert "r.csv:1: missing column 'linguistic'" in capsys.readouterr().err


def test_no_ratings_a_missing_file_and_a_folder_without_tasks_are_errors(tmp_path, capsys):
    folder = _tasks(tmp_path)
    empty = _write(tmp_path / "empty.csv", [("g1-real", "a", "", "", "", "")])
    assert main(["human-eval", "report", str(folder), str(empty)]) == 2
    assert "no ratings" in capsys.readouterr().err
    assert main(["human-eval", "report", str(folder), str(tmp_path / "nope.csv")]) == 2
    assert "nope.csv: cannot be read" in capsys.readouterr().err
    assert main(["human-eval", "report", str(tmp_path), str(empty)]) == 2
    assert "key.json: not found" in capsys.readouterr().err


# ------------------------------------------------------------------------------- paper figures


def test_the_papers_figures_are_tables_2_and_3():
    assert dict(TABLE3["human_metric"]) == {"acts": 0.7337, "correctness": 0.6891, "errors": 0.6127,
                                            "linguistic": 0.7397}
    assert dict(TABLE3["human_label"]) == {"acts": 0.7993, "correctness": 0.7219}
    assert dict(TABLE3["human_human"]) == {"acts": 0.4978, "correctness": 0.7187, "errors": 0.6154,
                                           "linguistic": 0.6910}
    assert HUMAN_AGREEMENT is TABLE3["human_metric"]
    assert TABLE2_HUMAN["DPO"]["acts"] == 0.7905 and TABLE2_HUMAN["Oracle"]["errors"] == 0.2449


def test_the_metric_cards_quote_table_3():
    """The evaluate module's card and the metric models' card template carry the published figures."""
    root = Path(__file__).parents[2]
    card = (root / "metrics" / "student_realism" / "README.md").read_text()
    template = (root / "simhub" / "resources" / "cards" / "metric_model.md").read_text()
    for row in TABLE3.values():
        for value in row.values():
            assert f"{value:.4f}" in card, value
    for name in ("acts", "correctness", "errors"):
        assert f"{TABLE3['human_metric'][name]:.4f}" in template, name
    assert f"{TABLE3['human_label']['acts']:.4f}" in template
    assert "simhub human-eval" in card and "simhub human-eval" in template
