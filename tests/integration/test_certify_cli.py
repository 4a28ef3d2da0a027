"""``simhub tutor-bench certify RUN_DIR...``: the same tutors under several learner families.

The two built-in families give their episodes' learning outcomes from their run folders (KG per
conversation for KnowSim's learner, ΔSolve per run for the KT learner). The command itself is run on
folders of two families registered here (their episodes written as a file), whose agreement and
known order are set by construction: certified, not certified with the reason, refused inputs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

from simhub.cli import main
from simhub.tutoring import FAMILIES, BenchOutput, LearnerFamily
from simhub.tutoring.certify import FamilyOutcomes


def test_the_built_in_families_give_each_episodes_learning_outcome(tmp_path):
    from simhub.tutoring.family import family
    from simhub.tutoring.knowsim.trace import read_trace
    from simhub.tutoring.lms.bench import read_kt_trace
    from simhub.tutoring.lms.results import run_measures

    ks = tmp_path / "ks"
    assert main(["tutor-bench", "--tutor", "scripted:stepwise", "--tutor", "scripted:dump", "--n", "2",
                 "--extractor", "offline:lexical", "--bootstrap", "100", "--no-cache", "--output", str(ks)]) == 0
    got = family("knowsim").outcomes(str(ks))
    traces = [read_trace(p) for p in sorted((ks / "traces").glob("*.json"))]
    assert got.outcome == "kg" and got.higher_is_better
    assert sorted(got.episodes) == sorted((t.tutor, t.item, float(t.metrics.kg)) for t in traces)
    kt = tmp_path / "kt"
    assert main(["tutor-bench", "--learner", "kt-learner", "--tutor", "scripted:weakest", "--tutor", "scripted:silent",
                 "--scenarios", "confused-productive,help-seeker", "--days", "3", "--bootstrap", "100", "--no-cache",
                 "--output", str(kt)]) == 0
    got = family("kt-learner").outcomes(str(kt))
    measures = [run_measures(read_kt_trace(p)) for p in sorted((kt / "traces").glob("*.json"))]
    assert got.outcome == "delta_solve" and len(got.episodes) == len(measures) > 0
    assert sorted(got.episodes, key=str) == sorted(((m.tutor, m.scenario, m.delta_solve) for m in measures), key=str)


# ------------------------------------------------------------------------------------ two test families

TUTORS = ["silent", "dump", "asked", "stepwise"]


class _Listed(LearnerFamily):
    """A family whose run folder is a results.json of its kind and an episodes.json of its outcomes."""

    forms: ClassVar[tuple[str, ...]] = ()
    outputs: ClassVar[tuple[BenchOutput, ...]] = (BenchOutput("gain", "gain", ranked=True),)

    def run(self, args, learner, ctx):
        raise NotImplementedError

    def rescore(self, args, ctx):
        raise NotImplementedError

    def outcomes(self, folder):
        episodes = json.loads((Path(folder) / "episodes.json").read_text())
        return FamilyOutcomes(self.name, "gain", [tuple(e) for e in episodes])


class AlphaFamily(_Listed):
    name = "alpha"
    title = "alpha"
    results_kind = "alpha-results"


class BetaFamily(_Listed):
    name = "beta"
    title = "beta"
    results_kind = "beta-results"


@pytest.fixture
def two_families():
    FAMILIES.register("alpha", AlphaFamily)
    FAMILIES.register("beta", BetaFamily)
    try:
        yield
    finally:
        FAMILIES.unregister("alpha")
        FAMILIES.unregister("beta")


def _folder(root: Path, fam: type[_Listed], means: dict[str, float], seed: int) -> str:
    rng = np.random.default_rng(seed)
    item = rng.normal(scale=0.1, size=10)
    folder = root / f"{fam.name}-{seed}"
    folder.mkdir()
    (folder / "results.json").write_text(json.dumps({"kind": fam.results_kind}))
    episodes = [(t, f"item-{c}", float(m + item[c] + rng.normal(scale=0.05))) for t, m in means.items()
                for c in range(10)]
    (folder / "episodes.json").write_text(json.dumps(episodes))
    return str(folder)


GOOD = {"silent": 0.0, "dump": 0.2, "asked": 0.4, "stepwise": 0.6}


def test_certify_writes_a_certification_with_the_verdict_and_the_run_to_run_floor(two_families, tmp_path, capsys):
    runs = [_folder(tmp_path, AlphaFamily, GOOD, 1), _folder(tmp_path, AlphaFamily, GOOD, 2),
            _folder(tmp_path, BetaFamily, GOOD, 3)]
    out = tmp_path / "cert"
    assert main(["tutor-bench", "certify", *runs, "--output", str(out), "--known-order", ",".join(TUTORS),
                 "--bootstrap", "300"]) == 0
    printed = capsys.readouterr().out
    assert "verdict: certified" in printed and "run-to-run floor, alpha (2 runs): mean tau 1.00" in printed
    doc = json.loads((out / "results.json").read_text())
    assert doc["kind"] == "certification" and doc["schema_version"] == 1
    assert doc["families"] == ["alpha", "beta"] and doc["folders"]["alpha"] == runs[:2]
    assert doc["concordance"]["kendall_w"] == pytest.approx(1.0) and doc["verdict"]["certified"]
    assert doc["ranks"]["beta"]["stepwise"] == 1.0 and doc["known_groups"]["order"] == TUTORS
    # simhub report renders it: the verdict, the rankings side by side, the known groups
    assert main(["report", str(out), "--output", str(tmp_path / "report.html")]) == 0
    page = (tmp_path / "report.html").read_text()
    assert "Tutor ranking certification" in page and "<strong>Certified</strong>" in page
    assert "alpha (gain): mean, rank [95% interval]" in page and "silent &lt; dump" in page


def test_a_family_that_reverses_the_known_order_is_not_certified_and_named(two_families, tmp_path, capsys):
    reversed_ = {t: -v for t, v in GOOD.items()}
    runs = [_folder(tmp_path, AlphaFamily, GOOD, 1), _folder(tmp_path, BetaFamily, reversed_, 2)]
    assert main(["tutor-bench", "certify", *runs, "--output", str(tmp_path / "cert"), "--known-order",
                 ",".join(TUTORS), "--bootstrap", "300"]) == 0
    printed = capsys.readouterr().out
    assert "verdict: not certified" in printed
    assert "beta does not recover the known order silent < dump (reversed" in printed
    assert "rank flip: dump above silent under alpha, below it under beta" in printed


def test_certify_refuses_what_it_cannot_compare(two_families, tmp_path, capsys):
    one = _folder(tmp_path, AlphaFamily, GOOD, 1)
    assert main(["tutor-bench", "certify", one, _folder(tmp_path, AlphaFamily, GOOD, 2), "--output",
                 str(tmp_path / "c1")]) == 2
    assert "1 learner family; a cross-learner check needs two or more" in capsys.readouterr().err
    other = _folder(tmp_path, BetaFamily, {**GOOD, "tiny-tutor": 0.3}, 3)
    assert main(["tutor-bench", "certify", one, other, "--output", str(tmp_path / "c2")]) == 2
    assert "only alpha: none; only beta: tiny-tutor" in capsys.readouterr().err
    fewer = _folder(tmp_path, AlphaFamily, GOOD, 4)
    episodes = json.loads((Path(fewer) / "episodes.json").read_text())
    (Path(fewer) / "episodes.json").write_text(json.dumps([e for e in episodes if e[1] != "item-9"]))
    assert main(["tutor-bench", "certify", one, fewer, other, "--output", str(tmp_path / "c4")]) == 2
    assert "(alpha) are on different items or scenarios (only the first: item-9; only" in capsys.readouterr().err
    assert main(["tutor-bench", "certify", one, str(tmp_path), "--output", str(tmp_path / "c3")]) == 2
    assert "is not a tutor-bench run folder" in capsys.readouterr().err
    assert main(["tutor-bench", "certify", one, other]) == 2
    assert "--output: certify writes DIR/results.json" in capsys.readouterr().err


# ------------------------------------------------------------------- the designed tutors, every family


def test_certify_from_nothing_runs_the_designed_tutors_under_every_family_and_checks_their_order(tmp_path, capsys):
    """``certify --output DIR`` with no folder: the three default families run the designed tutors into
    DIR/runs/FAMILY (small here), and the known-groups check takes the designed chain by default."""
    from simhub.tutoring.designed import DESIGNED, KNOWN_ORDER

    out = tmp_path / "cert"
    argv = ["tutor-bench", "certify", "--profile", "demo", "--student", "tiny-student-base", "--output", str(out),
            "--n", "2", "--extractor", "offline:lexical", "--scenarios", "help-seeker__after-school,"
            "confused-productive__after-school", "--days", "8", "--questions", "2", "--probes", "1",
            "--turns", "2", "--bootstrap", "200"]
    assert main(argv) == 0
    doc = json.loads((out / "results.json").read_text())
    assert doc["families"] == ["knowsim", "kt-learner", "sim-student"]
    assert sorted(doc["tutors"]) == sorted(DESIGNED)
    assert doc["folders"] == {f: [str(out / "runs" / f)] for f in doc["families"]}
    assert doc["known_groups"]["order"] == list(KNOWN_ORDER)
    assert set(doc["known_groups"]["families"]) == set(doc["families"])
    first = capsys.readouterr().out
    assert "tutor ranking under 3 learner families" in first
    # every learner's realism certificate: its dialogues against real ones on the same questions, beside
    # real against real (two halves of the corpus's dialogues on those questions)
    for fam in doc["families"]:
        cert = doc["realism"][fam]
        assert cert["dialogues"] > 0 and cert["real"] >= 4 and set(cert["metrics"]) == set(cert["reference"]) == {
            "detect_auroc", "acts_jsd", "length_w1", "turns_w1"}
        assert 0.0 <= cert["metrics"]["detect_auroc"]["value"] <= 1.0
        assert f"realism of the learner of {fam} (" in first
    # a rerun resumes every family's folder (nothing asked again) and certifies the same
    assert main(argv) == 0
    again = json.loads((out / "results.json").read_text())
    assert again["means"] == doc["means"] and again["verdict"] == doc["verdict"]
    assert "model calls: {'student': 0, 'tutor': 0}" in capsys.readouterr().out


def test_an_explicit_known_order_replaces_the_designed_chain(two_families, tmp_path):
    runs = [_folder(tmp_path, AlphaFamily, GOOD, 1), _folder(tmp_path, BetaFamily, GOOD, 2)]
    from simhub.tutoring.family import certify_folders

    assert certify_folders(runs, n_resamples=100)["known_groups"]["order"] == []  # no designed tutors: none
    assert certify_folders(runs, known_order=["silent", "stepwise"], n_resamples=100)["known_groups"]["order"] == [
        "silent", "stepwise"]


def test_a_familys_folders_are_pooled_into_its_ranking(two_families, tmp_path):
    """Two folders (seeds) of a family: its means are over both folders' episodes, every item's episodes
    of both resampled together; the floor still compares the two."""
    from simhub.tutoring.family import certify_folders

    a1, a2 = _folder(tmp_path, AlphaFamily, GOOD, 1), _folder(tmp_path, AlphaFamily, GOOD, 2)
    b = _folder(tmp_path, BetaFamily, GOOD, 3)
    doc = certify_folders([a1, a2, b], n_resamples=200)
    episodes = [e for f in (a1, a2) for e in json.loads((Path(f) / "episodes.json").read_text())]
    for tutor in TUTORS:
        mine = [v for t, _, v in episodes if t == tutor]
        assert doc["means"]["alpha"][tutor] == pytest.approx(sum(mine) / len(mine))
    assert doc["concordance"]["run_to_run_floor"]["alpha"]["folders"] == [a1, a2]
