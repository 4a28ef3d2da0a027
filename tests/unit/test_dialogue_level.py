"""The dialogue-level metric interface and registry: a metric registered through the public registry
is one of eval_dialogues' statistics (value, CI, stability, null reason) and a row of the report."""

from __future__ import annotations

import hashlib
import json

import msgspec
import numpy as np
import pytest

from simhub.config import Profile
from simhub.errors import ConfigError, DataError, UnknownNameError
from simhub.evaluation import dialogue_metrics as dm
from simhub.evaluation.dialogue_eval import DialogueEvalOptions, eval_dialogues, write_results
from simhub.evaluation.dialogue_level import (
    DialogueData,
    DialogueMetric,
    DialogueOutput,
    dialogue_metric_class,
    dialogue_output_metadata,
    dialogue_output_names,
    register_dialogue_metric,
    unregister_dialogue_metric,
)
from simhub.evaluation.report import render_report
from simhub.evaluation.rundir import load_run
from simhub.metrics.cosine import Cosine

BUILTIN = ("acts_jsd", "correctness_rate_diff", "length_w1", "question_rate_w1", "turns_w1", "mattr_z", "hdd_z",
           "yule_z", "detect_auroc", "pi_calibrated", "kt_gain_diff", "tutor_sensitivity")


class StudentTurnsGap(DialogueMetric):
    """A throwaway plug-in: |real - simulated| mean student turns per dialogue, and a number that is
    never defined (to see its null reason)."""

    outputs = (DialogueOutput("student_turns_gap", "|real - simulated| mean student turns per dialogue", "never",
                              high=float("inf"), label="Student-turn gap"),
               DialogueOutput("never_defined", "always null", "always", better="higher", label="Never defined"))

    def statistic(self, output, idx):
        if output == "never_defined":
            raise DataError("never_defined: this statistic has no value")
        real, sim = self.data.inputs(idx)
        return abs(float(np.mean(real.turn_counts)) - float(np.mean(sim.turn_counts)))

    def details(self):
        real, sim = self.data.inputs(self.data.everything)
        return {"student_turns_gap": {"real_mean": float(np.mean(real.turn_counts)),
                                      "sim_mean": float(np.mean(sim.turn_counts))}}

    @classmethod
    def detail_lines(cls, output, details):
        return [f"turns real {details['real_mean']:.2f}, simulated {details['sim_mean']:.2f}"]


@pytest.fixture
def plugin():
    register_dialogue_metric("student_turns_gap", StudentTurnsGap)
    yield StudentTurnsGap
    unregister_dialogue_metric("student_turns_gap")


class _HashedEmbedder:
    """A fast, deterministic stand-in for the sentence embedder: hashed bag of words."""

    def encode(self, texts, dim: int = 32):
        out = np.zeros((len(texts), dim))
        for i, text in enumerate(texts):
            for word in dm.tokenize(text):
                out[i, int(hashlib.md5(word.encode()).hexdigest(), 16) % dim] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms > 0, norms, 1.0)


@pytest.fixture
def dialogues(sample_corpus):
    real = sample_corpus["test"][:6]

    def rollout(d, k):  # every other student turn dropped, two samples per real dialogue
        turns = [t for n, t in enumerate(d.turns) if t.role != "student" or (n + k) % 2]
        return msgspec.structs.replace(d, id=f"{d.id}~{k}", turns=turns, meta={"real_id": d.id, "sample": k})

    return real, [rollout(d, k) for d in real for k in (0, 1)]


def test_the_builtin_statistics_are_registered_in_order_with_their_metadata():
    assert dialogue_output_names() == BUILTIN
    assert dialogue_metric_class("lexical").output_names() == ("mattr_z", "hdd_z", "yule_z")
    assert [dialogue_output_metadata(n).arrow for n in ("acts_jsd", "detect_auroc", "pi_calibrated", "mattr_z")] == [
        "↓", "→0.5", "↑", "→0"]
    with pytest.raises(UnknownNameError, match=r"unknown dialogue metric 'lexicon'.*did you mean 'lexical'"):
        dialogue_metric_class("lexicon")
    with pytest.raises(ConfigError, match="better must be one of"):
        DialogueOutput("x", "x", "never", better="sideways")
    with pytest.raises(ConfigError, match="a target goes with better='closer'"):
        DialogueOutput("x", "x", "never", better="closer")


def test_resample_inputs_are_those_of_the_drawn_dialogues_and_their_rollouts(dialogues):
    real, sim = dialogues
    data = DialogueData(real, sim, [d.meta["real_id"] for d in sim])
    idx = np.array([2, 0, 2])
    r, s = data.inputs(idx)
    assert r == dm.dialogue_inputs([real[2], real[0], real[2]])
    assert s == dm.dialogue_inputs([sim[4], sim[5], sim[0], sim[1], sim[4], sim[5]])
    assert data.draws(idx) == {real[2].id: 2, real[0].id: 1}
    assert dialogue_metric_class("detect_auroc").applies(data) is False


def test_a_registered_dialogue_metric_is_evaluated_and_reported(plugin, dialogues, monkeypatch, tmp_path):
    monkeypatch.setattr(Cosine, "load", lambda self: _HashedEmbedder())
    real, sim = dialogues
    results = eval_dialogues(Profile(name="no-models"), real, sim,
                             DialogueEvalOptions(n_resamples=200, no_cache=True, progress=False))
    metrics = results["metrics"]
    # The built-ins that have their inputs, then the plug-in's outputs, in registry order; no judge
    # endpoint, knowledge model or simulator here, so PI, the KT gain and tutor sensitivity are left out.
    assert list(metrics) == [n for n in BUILTIN if n not in ("pi_calibrated", "kt_gain_diff", "tutor_sensitivity")] + [
        "student_turns_gap", "never_defined"]
    gap = metrics["student_turns_gap"]
    real_turns = np.mean([len(d.student_turn_indices()) for d in real])
    sim_turns = np.mean([len(d.student_turn_indices()) for d in sim])
    assert gap["value"] == pytest.approx(abs(real_turns - sim_turns)) and gap["n"] == len(real)
    assert gap["ci95"] is not None and gap["ci95"][0] <= gap["value"] <= gap["ci95"][1]
    assert "student_turns_gap" in results["stability_sd"]  # two samples per real dialogue
    assert results["details"]["student_turns_gap"]["sim_mean"] == pytest.approx(sim_turns)
    # A statistic that raises a DataError is null, with the message as its reason; a label no model
    # gives is the reason behind the correctness gap.
    assert metrics["never_defined"] == {"value": None, "ci95": None, "n": len(real)}
    assert results["null_reasons"]["never_defined"] == "never_defined: this statistic has no value"
    assert results["null_reasons"]["correctness_rate_diff"].startswith("no correctness labels")
    # The report shows the plug-in's label, arrow, metadata and details like a built-in's.
    write_results(results, tmp_path, {"kind": "dialogue-level", "real": "real.jsonl", "simulator": "s"})
    assert json.loads((tmp_path / "dialogue_results.json").read_text())["metrics"]["student_turns_gap"]["n"] == 6
    page = render_report([load_run(tmp_path)])
    assert ('title="|real - simulated| mean student turns per dialogue; range [0, ∞]; lower is more realistic; '
            'null when: never">Student-turn gap ↓<span class="sub"><code>student_turns_gap</code></span></th>') in page
    assert f"turns real {real_turns:.2f}, simulated {sim_turns:.2f}" in page
    assert "Never defined ↑" in page and "never_defined: this statistic has no value" in page
