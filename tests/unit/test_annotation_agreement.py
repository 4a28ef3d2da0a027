"""Agreement of two annotators: Cohen's κ as scikit-learn computes it, Jaccard for KCs, and the
folder comparison on the shipped sample's annotation files."""

from __future__ import annotations

import shutil

import pandas as pd
import pytest

from simhub.annotation import cohen_kappa, compare_annotations, format_agreement, jaccard
from simhub.data.annotations import parse_literal
from simhub.data.eedi import load_eedi
from simhub.data.sample import sample_annotations_dir
from simhub.errors import ConfigError

# A known 3x3 table: rows are annotator A's labels, columns annotator B's.
TABLE = {
    ("correct", "correct"): 20, ("correct", "incorrect"): 5, ("correct", "na"): 1,
    ("incorrect", "correct"): 4, ("incorrect", "incorrect"): 15, ("incorrect", "na"): 3,
    ("na", "correct"): 2, ("na", "incorrect"): 1, ("na", "na"): 9,
}


def sequences(table):
    a, b = [], []
    for (x, y), count in table.items():
        a += [x] * count
        b += [y] * count
    return a, b


def test_kappa_matches_scikit_learn_on_a_known_table():
    sklearn = pytest.importorskip("sklearn.metrics")
    a, b = sequences(TABLE)
    assert cohen_kappa(a, b) == pytest.approx(sklearn.cohen_kappa_score(a, b), abs=1e-12)
    # The textbook 2x2 case: p_o = 0.7, p_e = 0.5 -> 0.4.
    two = sequences({("yes", "yes"): 20, ("yes", "no"): 5, ("no", "yes"): 10, ("no", "no"): 15})
    assert cohen_kappa(*two) == pytest.approx(0.4) == pytest.approx(sklearn.cohen_kappa_score(*two))
    # A label only one annotator uses.
    odd = sequences({("a", "a"): 3, ("a", "b"): 1, ("b", "c"): 2})
    assert cohen_kappa(*odd) == pytest.approx(sklearn.cohen_kappa_score(*odd))


def test_kappa_undefined_cases_and_jaccard():
    assert cohen_kappa([], []) is None
    assert cohen_kappa(["x", "x"], ["x", "x"]) is None  # p_e = 1
    with pytest.raises(ValueError):
        cohen_kappa(["x"], [])
    assert jaccard({"a", "b"}, {"b", "c"}) == pytest.approx(1 / 3)
    assert jaccard(set(), set()) is None and jaccard({"a"}, set()) == 0.0


def _copy(tmp_path, name, annotator="gpt-4.1"):
    folder = tmp_path / name
    folder.mkdir()
    for path in sample_annotations_dir().glob("*.csv"):
        shutil.copy(path, folder / path.name.replace("gpt-4.1", annotator))
    return folder


def test_compare_folders_on_the_sample(tmp_path):
    a = _copy(tmp_path, "a")
    b = _copy(tmp_path, "b", annotator="local-model")
    same = compare_annotations(a, a)
    assert same["dialogues"]["only_a"] == same["dialogues"]["only_b"] == 0
    assert same["acts"]["kappa"] == pytest.approx(1.0) and same["correctness"]["kappa"] == pytest.approx(1.0)
    assert same["kcs"]["jaccard"] == 1.0 and same["question"]["agreement"] == 1.0 and same["ocean"]["agreement"] == 1.0

    # B: every act of the first test dialogue becomes Acknowledge, its KCs go, and one row is missing.
    path = b / "test_local-model.csv"
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    acts = parse_literal(frame.loc[0, "acts"])
    frame.loc[0, "acts"] = str({k: {**v, "act": "Acknowledge"} for k, v in acts.items()})
    frame.loc[0, "eedi_kcs"] = "{}"
    frame = frame.drop(index=len(frame) - 1)
    frame.to_csv(path, index=False)

    result = compare_annotations(a, b, annotator_b="local-model")
    assert result["dialogues"]["only_a"] == 1 and result["dialogues"]["only_b"] == 0
    # The expected kappa from the same pairs, computed independently with scikit-learn.
    sklearn = pytest.importorskip("sklearn.metrics")
    ca = load_eedi(annotations=a, drop_unsolvable=False)
    cb = load_eedi(annotations=b, annotator="local-model", drop_unsolvable=False)
    db = {d.id: d for s in ("train", "val", "test") for d in cb[s]}
    pairs = [(ta.act, tb.act) for s in ("train", "val", "test") for d in ca[s] if d.id in db
             for ta, tb in zip(d.turns, db[d.id].turns, strict=True) if ta.act and tb.act]
    assert result["acts"]["n"] == len(pairs)
    assert result["acts"]["kappa"] == pytest.approx(sklearn.cohen_kappa_score(*zip(*pairs, strict=True)))
    assert result["acts"]["kappa"] < 1.0 and result["correctness"]["kappa"] == pytest.approx(1.0)
    assert result["kcs"]["jaccard"] < 1.0

    table = format_agreement(result)
    assert "Cohen's kappa" in table and "acts 0.73, correctness 0.69, errors 0.61" in table and "linguistic 0.74" in table


def test_annotator_names_are_found_or_asked_for(tmp_path):
    a = _copy(tmp_path, "a")
    shutil.copy(a / "test_gpt-4.1.csv", a / "test_other.csv")
    with pytest.raises(ConfigError, match="several annotators"):
        compare_annotations(a, a)
    assert compare_annotations(a, a, annotator_a="other", annotator_b="gpt-4.1")["dialogues"]["only_b"] > 0
