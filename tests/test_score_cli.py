"""`simhub score`, `simhub kt-cutoffs`, the demo profile and the evaluate module, end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simhub.cli import main
from simhub.schema import to_builtins

REPO = Path(__file__).resolve().parents[1]
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


def test_score_cli_all_metrics(items_file, tmp_path, simhub_home, capsys):
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
    assert "no such profile" in capsys.readouterr().err


def test_kt_cutoffs_then_service_mode(sample_corpus, tmp_path, simhub_home, capsys):
    from simhub.metrics.knowledge import load_cutoffs
    from simhub.profiles import load_profile, scorer_config
    from simhub.schema import write_jsonl
    from simhub.scoring import ScoreItem, Scorer

    data = tmp_path / "val.jsonl"
    write_jsonl(data, sample_corpus["val"][:8])
    cut = tmp_path / "kt_cutoffs.json"
    assert main(["kt-cutoffs", "--data", str(data), "--output", str(cut), "--profile", TINY]) == 0
    cutoffs = load_cutoffs(cut)
    assert len(cutoffs) == 4 and list(cutoffs) == sorted(cutoffs)
    meta = json.loads(cut.read_text())
    assert meta["n_deltas"] > 0 and meta["source"] == str(data)

    config = scorer_config(load_profile(TINY))
    config.knowledge_cutoffs = str(cut)
    scorer = Scorer(config)
    dialogue = sample_corpus["test"][0]
    second = dialogue.student_turn_indices()[1]
    one = scorer.score([ScoreItem(dialogue, second, "no idea")], ["knowledge"])
    assert one.items[0].scores["knowledge"] is not None  # one turn is scorable with shipped cutoffs
    assert one.summary["knowledge"]["cutoffs"] == pytest.approx(list(cutoffs))

    config.knowledge_cutoffs = str(tmp_path / "absent.json")
    from simhub.errors import ConfigError

    with pytest.raises(ConfigError, match="simhub kt-cutoffs"):
        Scorer(config).score([ScoreItem(dialogue, second, "x")], ["knowledge"])


def test_score_real_turn_is_ceiling(sample_corpus, simhub_home):
    """Scoring a real turn against itself: rouge_l, cosine and knowledge are exactly 1."""
    from simhub.profiles import load_profile, scorer_config
    from simhub.scoring import ScoreItem, Scorer

    scorer = Scorer(scorer_config(load_profile(TINY)))
    items = [ScoreItem(d, i, d.turns[i].content) for d in sample_corpus["val"][:3] for i in d.student_turn_indices()]
    result = scorer.score(items, ["rouge_l", "cosine", "knowledge"])
    assert result.summary["rouge_l"]["mean"] == 1.0
    assert result.summary["cosine"]["mean"] == pytest.approx(1.0, abs=1e-5)
    assert result.summary["knowledge"]["mean"] == 1.0 and result.summary["knowledge"]["qwk"] == pytest.approx(1.0)


def test_evaluate_module_text_and_dialogues(sample_corpus, simhub_home):
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
