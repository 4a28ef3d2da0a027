"""`simhub score`, `simhub kt-cutoffs`, the demo profile and the evaluate module, end to end."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from simhub.cli import main
from simhub.schema import to_builtins

REPO = Path(__file__).resolve().parents[2]
#: The untrained tiny models (fast); the shipped demo profile is tested in test_demo.py.
TINY = str(REPO / "tests" / "profiles" / "tiny.yaml")


@pytest.fixture(scope="module")
def items_file(tmp_path_factory, sample_corpus):
    """Score items for every student turn of six test dialogues (the previous turn as candidate)."""
    path = tmp_path_factory.mktemp("items") / "items.jsonl"
    lines = []
    for dialogue in sample_corpus["test"][:6]:
        previous = "I don't know."
        for index in dialogue.student_turn_indices():
            lines.append(json.dumps({"dialogue": to_builtins(dialogue), "turn_index": index, "candidate": previous}))
            previous = dialogue.turns[index].content
    path.write_text("\n".join(lines) + "\n")
    return path


def test_score_cli_all_metrics(items_file, tmp_path, tiny_profile, capsys):
    out = tmp_path / "scores.jsonl"
    assert main(["score", "--input", str(items_file), "--output", str(out), "--profile", TINY]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == len(items_file.read_text().splitlines())
    names = {"acts", "correctness", "errors", "knowledge", "cosine", "rouge_l", "tutor_response"}
    assert all(set(r["scores"]) == names for r in rows)
    for r in rows:
        for name, value in r["scores"].items():
            low = -1.0 if name == "cosine" else 0.0
            assert value is None or low <= value <= 1.0
            if value is None:
                assert name in r["details"]["null_reasons"]
    # Knowledge: the first student turn of each dialogue is null, the others carry quantiles.
    scored = [r for r in rows if r["scores"]["knowledge"] is not None]
    assert scored and all(len(r["details"]["knowledge"]["real_quantiles"]) == len(r["details"]["knowledge"]["kcs"]) for r in scored)
    assert any(r["details"]["null_reasons"].get("knowledge") == "first student turn has no delta" for r in rows)
    table = capsys.readouterr().out
    assert "qwk=" in table and "tutor_response" in table


def test_score_cli_metric_subset_and_bad_input(items_file, tmp_path, capsys):
    out = tmp_path / "s.jsonl"
    assert main(["score", "--input", str(items_file), "--output", str(out), "--metrics", "rouge_l"]) == 0
    first = json.loads(out.read_text().splitlines()[0])
    assert set(first["scores"]) == {"rouge_l"}

    assert main(["score", "--input", str(items_file), "--output", str(out), "--metrics", "rougel"]) == 2
    assert "did you mean 'rouge_l'" in capsys.readouterr().err

    bad = tmp_path / "bad.jsonl"
    lines = items_file.read_text().splitlines()
    broken = json.loads(lines[1])
    broken["turn_index"] = "two"
    bad.write_text(lines[0] + "\n" + json.dumps(broken) + "\n")
    target = tmp_path / "never.jsonl"
    assert main(["score", "--input", str(bad), "--output", str(target), "--metrics", "rouge_l"]) == 2
    err = capsys.readouterr().err
    assert "bad.jsonl:2" in err and "$.turn_index" in err
    assert not target.exists()

    assert main(["score", "--input", str(tmp_path / "missing.jsonl"), "--output", str(target)]) == 2
    assert "no such file" in capsys.readouterr().err
    assert main(["score", "--input", str(items_file), "--output", str(target), "--profile", "nope"]) == 2
    assert "unknown profile 'nope'" in capsys.readouterr().err


def test_kt_cutoffs_then_service_mode(sample_corpus, tmp_path, tiny_profile, capsys):
    import msgspec

    from simhub.metrics import ScoreItem
    from simhub.metrics.knowledge import load_cutoffs
    from simhub.schema import write_jsonl
    from simhub.scoring import Scorer

    data = tmp_path / "val.jsonl"
    write_jsonl(data, sample_corpus["val"][:8])
    cut = tmp_path / "kt_cutoffs.json"
    assert main(["kt-cutoffs", "--data", str(data), "--output", str(cut), "--profile", TINY]) == 0
    cutoffs = load_cutoffs(cut)
    assert len(cutoffs) == 4 and list(cutoffs) == sorted(cutoffs)
    meta = json.loads(cut.read_text())
    assert meta["n_deltas"] > 0 and meta["source"] == str(data)

    def with_cutoffs(path):
        metrics = tiny_profile.scoring.metrics
        knowledge = msgspec.structs.replace(metrics.knowledge, cutoffs=str(path))
        scoring = msgspec.structs.replace(tiny_profile.scoring, metrics=msgspec.structs.replace(metrics, knowledge=knowledge))
        return Scorer.from_profile(msgspec.structs.replace(tiny_profile, scoring=scoring))

    dialogue = sample_corpus["test"][0]
    second = dialogue.student_turn_indices()[1]
    one = with_cutoffs(cut).score([ScoreItem(dialogue, second, "no idea")], ["knowledge"])
    assert one.items[0].scores["knowledge"] is not None  # one turn is scorable with shipped cutoffs
    assert one.summary["knowledge"]["cutoffs"] == pytest.approx(list(cutoffs))
    assert one.summary["knowledge"]["cutoff_source"] == str(cut)

    absent = with_cutoffs(tmp_path / "absent.json").score([ScoreItem(dialogue, second, "x")], ["knowledge"])
    assert "simhub kt-cutoffs" in absent.items[0].details["null_reasons"]["knowledge"]


def test_score_real_turn_is_ceiling(sample_corpus, tiny_profile):
    """Scoring a real turn against itself: rouge_l, cosine and knowledge are exactly 1 (short turns:
    the 500-character cut of candidates would lower a long one)."""
    from simhub.metrics import ScoreItem
    from simhub.scoring import Scorer

    scorer = Scorer.from_profile(tiny_profile)
    items = [ScoreItem(d, i, d.turns[i].content) for d in sample_corpus["val"][:3] for i in d.student_turn_indices()
             if len(d.turns[i].content) <= 500]
    result = scorer.score(items, ["rouge_l", "cosine", "knowledge"])
    assert result.summary["rouge_l"]["mean"] == 1.0
    assert result.summary["cosine"]["mean"] == pytest.approx(1.0, abs=1e-5)
    assert result.summary["knowledge"]["mean"] == 1.0 and result.summary["knowledge"]["qwk"] == pytest.approx(1.0)


def test_evaluate_module_text_and_dialogues(sample_corpus, tiny_profile):
    import evaluate

    realism = evaluate.load(str(REPO / "metrics" / "student_realism"))
    ref = "5/8 divided by 1/6?"
    out = realism.compute(predictions=["8/5", "So, would I divide 1/6 by 5/8?", "5/8 divided by 1/6"], references=[ref] * 3, return_items=True)
    values = [round(i["scores"]["rouge_l"], 4) for i in out["items"]]
    assert values == [0.25, 0.2667, 1.0]
    assert out["cosine_count"] == 3 and set(out) >= {"rouge_l", "rouge_l_std", "cosine"}

    dialogue = sample_corpus["test"][1]
    turns = dialogue.student_turn_indices()[:3]
    full = realism.compute(
        predictions=["ok"] * len(turns),
        references=[dialogue.turns[i].content for i in turns],
        dialogues=[to_builtins(dialogue)] * len(turns),
        turn_indices=turns,
        profile=TINY,
    )
    assert full["rouge_l_count"] == full["cosine_count"] == len(turns)
    assert full["knowledge_count"] == len(turns) - 1  # the first student turn has no delta
    labelled = [dialogue.turns[i] for i in turns]
    assert full["acts_count"] == sum(t.act is not None for t in labelled)
    assert full["correctness_count"] == sum(t.correctness in ("correct", "incorrect") for t in labelled)
    for name in ("acts", "correctness", "errors", "knowledge", "cosine", "rouge_l", "tutor_response"):
        assert f"{name}_count" in full
    with pytest.raises(ValueError, match="need dialogues"):
        realism.compute(predictions=["a"], references=["b"], metrics=["acts"])
    from simhub.schema import SchemaError

    for bad, message in ((len(dialogue.turns) + 3, "out of range"), (0 if dialogue.turns[0].role == "tutor" else 1, "tutor turn")):
        with pytest.raises(SchemaError, match=rf"turn_indices\[0\].*{message}"):
            realism.compute(predictions=["ok"], references=["x"], dialogues=[to_builtins(dialogue)], turn_indices=[bad], profile=TINY)
    with pytest.raises(ValueError, match=r"references\[0\] differs"):
        realism.compute(predictions=["ok"], references=["not the turn"], dialogues=[to_builtins(dialogue)], turn_indices=[turns[0]], profile=TINY)


def test_text_metrics_build_no_models(items_file, tmp_path, monkeypatch):
    """Reading the demo profile and scoring rouge_l must not build (train) the demo models."""
    home = tmp_path / "empty-home"
    monkeypatch.setenv("SIMHUB_HOME", str(home))
    out = tmp_path / "s.jsonl"
    assert main(["score", "--input", str(items_file), "--output", str(out), "--metrics", "rouge_l", "--profile", "demo"]) == 0
    assert not (home / "demo").exists() and not (home / "tiny").exists()


# --------------------------------------------------------------------------- a plugin metric

TOY_MODULE = """
from simhub.metrics import Metric, MetricResult, Output


class Shouting(Metric):
    \"\"\"Share of upper-case letters in the candidate (a toy metric: no model, one output).\"\"\"

    outputs = (Output("shouting", "share of upper-case letters", "no letters in the candidate"),)
    needs_dialogue = False

    def score(self, items):
        out = []
        for it in items:
            letters = [c for c in it.candidate if c.isalpha()]
            if not letters:
                out.append(MetricResult.null(["shouting"], "no letters in the candidate"))
            else:
                out.append(MetricResult({"shouting": sum(c.isupper() for c in letters) / len(letters)}))
        return out
"""


@pytest.fixture
def toy_metric(tmp_path, monkeypatch):
    """One module and one registry line: the whole cost of adding a metric."""
    import sys

    from simhub.metrics import register_metric, unregister_metric

    (tmp_path / "toy_metric.py").write_text(TOY_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    register_metric("shouting", "toy_metric:Shouting")
    yield
    unregister_metric("shouting")
    sys.modules.pop("toy_metric", None)


def test_a_toy_metric_appears_in_score_http_and_evaluate(toy_metric, items_file, tmp_path, tiny_profile):
    out = tmp_path / "s.jsonl"
    assert main(["score", "--input", str(items_file), "--output", str(out), "--metrics", "shouting,rouge_l"]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert set(rows[0]["scores"]) == {"shouting", "rouge_l"}
    assert all(r["scores"]["shouting"] is None or 0 <= r["scores"]["shouting"] <= 1 for r in rows)

    from litestar.testing import TestClient

    from simhub.config import load_profile
    from simhub.serving.app import create_app
    from simhub.serving.settings import ServiceSettings

    profile = load_profile(TINY)
    dialogue = json.loads(items_file.read_text().splitlines()[1])
    with TestClient(create_app(ServiceSettings.load(profile), profile)) as client:
        body = {"items": [{**dialogue, "candidate": "I THINK it is 8/5"}], "metrics": ["shouting", "rouge_l"]}
        got = client.post("/score", json=body).json()
    assert got["items"][0]["scores"]["shouting"] == pytest.approx(6 / 10)  # I THINK it is: 6 of 10 letters
    assert got["summary"]["shouting"]["count"] == 1

    import evaluate

    realism = evaluate.load(str(REPO / "metrics" / "student_realism"))
    res = realism.compute(predictions=["ABC def", "abc"], references=["x", "y"], metrics=["shouting"])
    assert res["shouting"] == pytest.approx(0.25) and res["shouting_count"] == 2


def test_score_shows_its_own_bars_and_none_of_transformers(items_file, tmp_path, tiny_profile):
    """transformers' per-file "Loading weights" bars are off in every command; simhub's bars stay.
    A subprocess, with the tests' own silencing of the Hugging Face libraries taken out of its environment."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_DISABLE_PROGRESS_BARS", "TQDM_DISABLE",
                                                           "TRANSFORMERS_VERBOSITY")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    out = tmp_path / "scores.jsonl"
    profile = tmp_path / "small-chunks.yaml"  # chunks smaller than the items, so simhub's bars show
    profile.write_text(f"extends: {TINY}\nname: small-chunks\nscoring: {{chunk_size: 16}}\n")
    done = subprocess.run([sys.executable, "-m", "simhub", "score", "--input", str(items_file), "--output", str(out),
                           "--profile", str(profile), "--metrics", "acts,rouge_l"],
                          env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert "Loading weights" not in done.stderr and "Writing model shards" not in done.stderr
    # simhub's own bar, one per metric; stderr is not a terminal here, so a bar is plain lines, no "\r" frames
    assert re.search(r"acts: (\d+)/\1 turn \[", done.stderr) and "\r" not in done.stderr
