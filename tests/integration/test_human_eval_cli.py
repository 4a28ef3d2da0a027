"""``simhub human-eval`` end to end: run directories -> rating tasks -> filled-in CSVs -> report.

The run directories are written here as ``simhub eval`` writes them (scores.jsonl and results.json
over the sample corpus's test dialogues), with metric values that follow the metrics' null rules.
The raters are scripted: they label the real turns as the LLM annotation did and judge each
candidate the way its metrics did, so every human–metric, human–label and human–human κ is 1.
"""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

import pytest

from simhub.cli import main
from simhub.evaluation.runs import sha256_of
from simhub.metrics.acts import NO_LABEL as NO_ACT_LABEL
from simhub.metrics.judge import NO_LABEL, NOT_INCORRECT, REAL_NA
from simhub.schema import ACTS, write_jsonl


@pytest.fixture
def data(tmp_path, sample_corpus) -> Path:
    path = tmp_path / "test.jsonl"
    write_jsonl(path, sample_corpus["test"])
    return path


def make_run(root: Path, name: str, data: Path, dialogues, seed: int) -> Path:
    """A run directory as simhub eval writes it; a candidate's act/correctness follow random draws."""
    rng = random.Random(seed)
    run = root / name
    run.mkdir(parents=True)
    lines = []
    for d in dialogues:
        for position, i in enumerate(d.student_turn_indices()):
            real = d.turns[i]
            scores, reasons = {}, {}
            scores["acts"] = None if real.act is None else float(rng.random() < 0.6)
            if real.act is None:
                reasons["acts"] = NO_ACT_LABEL
            label = real.correctness
            if label is None:
                scores["correctness"] = scores["errors"] = None
                reasons["correctness"] = reasons["errors"] = NO_LABEL
            elif label == "na":
                scores["correctness"] = scores["errors"] = None
                reasons["correctness"] = reasons["errors"] = REAL_NA
            elif label == "correct":
                scores["correctness"], scores["errors"] = float(rng.random() < 0.6), None
                reasons["errors"] = NOT_INCORRECT
            else:
                scores["correctness"] = float(rng.random() < 0.6)
                scores["errors"] = float(scores["correctness"] == 1.0 and rng.random() < 0.5)
            scores["rouge_l"] = round(rng.random(), 4)
            scores["cosine"] = round(min(1.0, scores["rouge_l"] + rng.random() / 4), 4)
            details = {"null_reasons": reasons} if reasons else {}
            lines.append({"dialogue_id": d.id, "turn_index": i, "position": position, "real": real.content,
                          "candidate": f"{name} says {rng.randint(1, 99)} [end of dialogue]", "scores": scores,
                          "details": details})
    (run / "scores.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    results = {"simulator": name, "profile": "demo", "metrics": {},
               "data": {"path": str(data), "sha256": sha256_of(data), "dialogues": len(dialogues), "turns": len(lines)}}
    (run / "results.json").write_text(json.dumps(results))
    return run


def scripted_ratings(folder: Path, rater: str) -> None:
    """Fill ``ratings/RATER.csv`` the way the metrics saw each turn."""
    key = json.loads((folder / "key.json").read_text())
    groups = {g["group"]: g for g in key["groups"]}
    path = folder / "ratings" / f"{rater}.csv"
    rows = list(csv.DictReader(path.open(newline="")))
    assert rows and all(r["rater"] == rater and not r["act"] for r in rows)
    for row in rows:
        g = groups[row["item"].rsplit("-", 1)[0]]
        labels = g["real"]["labels"]
        real_act = labels["act"] or "Math Answer"
        real_label = labels["correctness"] or "na"
        if row["item"].endswith("-real"):
            row.update(act=real_act, correctness=real_label)
            continue
        auto = next(c for c in g["candidates"] if c["item"] == row["item"])["auto"]
        act = real_act if auto["acts"] in (1, None) else next(a for a in ACTS if a != real_act)
        if real_label == "na":
            label = "na"
        elif auto["correctness"] == 1:
            label = real_label
        else:
            label = "correct" if real_label == "incorrect" else "incorrect"
        same = "" if not (label == "incorrect" and real_label == "incorrect") else ("yes" if auto["errors"] == 1 else "no")
        row.update(act=act, correctness=label, same_error=same, linguistic=str(1 + round(4 * auto["rouge_l"])))
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def test_round_trip_tasks_ratings_report(tmp_path, data, sample_corpus, capsys):
    dialogues = sample_corpus["test"]
    runs = [make_run(tmp_path / "runs", name, data, dialogues, seed) for seed, name in enumerate(["sft", "zero-shot"])]
    folder = tmp_path / "human"
    argv = ["human-eval", "tasks", *map(str, runs), "--output", str(folder), "--dialogues", "6", "--turns", "3",
            "--start-turn", "3", "--raters", "r1,r2", "--overlap", "2"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "18 turns from 6 dialogues" in out and "54 items to rate" in out

    key = json.loads((folder / "key.json").read_text())
    items = [json.loads(line) for line in (folder / "items.jsonl").read_text().splitlines()]
    assert len(items) == len(key["groups"]) == 18
    by_id = {d.id: d for d in dialogues}
    for item, group in zip(items, key["groups"], strict=True):
        d = by_id[item["dialogue_id"]]
        assert item["turn_index"] >= 3 and d.turns[item["turn_index"]].role == "student"
        assert item["real"]["text"] == d.turns[item["turn_index"]].content
        assert [t["content"] for t in item["context"]] == [t.content for t in d.turns[: item["turn_index"]]]
        assert item["question"] == d.question.text
        # What raters see is blind: no run name, the end-of-dialogue marker removed as the scorer does.
        assert [c["item"] for c in item["candidates"]] == [f"{item['group']}-A", f"{item['group']}-B"]
        assert all("[end of dialogue]" not in c["text"] for c in item["candidates"])
        assert "run" not in json.dumps(item["candidates"])
        assert sorted(c["run"] for c in group["candidates"]) == ["sft", "zero-shot"]
        for shown, hidden in zip(item["candidates"], group["candidates"], strict=True):
            assert shown["text"].startswith(f"{hidden['run']} says")
    # Consecutive student turns per dialogue, and the shuffle puts both runs first at times.
    firsts = {g["candidates"][0]["run"] for g in key["groups"]}
    assert firsts == {"sft", "zero-shot"}
    assert key["assignment"]["r1"][:6] == key["assignment"]["r2"][:6]  # the two shared dialogues
    assert len(key["assignment"]["r1"]) == len(key["assignment"]["r2"]) == 12
    assert "Rating sheet for r1" in (folder / "sheets" / "r1.md").read_text()

    # The same seed draws the same tasks; another seed others.
    again = tmp_path / "again"
    assert main([*argv[:argv.index("--output") + 1], str(again), *argv[argv.index("--output") + 2:]]) == 0
    for name in ("key.json", "items.jsonl", "ratings/r1.csv", "sheets/r2.md"):
        assert (again / name).read_bytes() == (folder / name).read_bytes(), name
    other = tmp_path / "other"
    assert main([*argv[:argv.index("--output") + 1], str(other), *argv[argv.index("--output") + 2:],
                 "--seed", "5"]) == 0
    assert (other / "items.jsonl").read_bytes() != (folder / "items.jsonl").read_bytes()
    # A folder holding tasks is never overwritten (its ratings would be lost).
    assert main(argv) == 2
    assert "already holds rating tasks" in capsys.readouterr().err

    for rater in ("r1", "r2"):
        scripted_ratings(folder, rater)
    ratings = [str(folder / "ratings" / f"{r}.csv") for r in ("r1", "r2")]
    assert main(["human-eval", "report", str(folder), *ratings]) == 0
    assert "Table 3" in capsys.readouterr().out
    report = json.loads((folder / "report.json").read_text())
    assert report["ratings"]["rated"] == 72 and report["ratings"]["shared_turns"] == 18
    hm, hl, hh = (report["table3"][k] for k in ("human_metric", "human_label", "human_human"))
    for name in ("acts", "correctness", "errors"):
        assert hm[name]["kappa"] == pytest.approx(1.0), (name, hm[name])
        assert hh[name]["agreement"] == 1.0 and hh[name]["kappa"] in (pytest.approx(1.0), None), (name, hh[name])
    assert hl["acts"]["kappa"] == pytest.approx(1.0) and hl["correctness"]["kappa"] == pytest.approx(1.0)
    assert hm["linguistic_rouge_l"]["pearson"] > 0.95 and hm["linguistic_rouge_l"]["n"] == 48
    assert hh["linguistic"]["pearson"] == pytest.approx(1.0)
    assert set(report["table2"]) == {"sft", "zero-shot"}
    # Table 2 from the human outcomes equals the metrics' means over the same rated turns.
    for run in ("sft", "zero-shot"):
        autos = [(c["auto"]) for g in key["groups"] for c in g["candidates"] if c["run"] == run
                 for _ in g["raters"]]
        acts = [a["acts"] for a in autos if a["acts"] is not None]
        assert report["table2"][run]["acts"]["n"] == len(autos)
        if len(acts) == len(autos):
            assert report["table2"][run]["acts"]["mean"] == pytest.approx(sum(acts) / len(acts))


def test_real_turns_alone_and_bad_task_options(tmp_path, data, capsys):
    folder = tmp_path / "real-only"
    assert main(["human-eval", "tasks", "--data", str(data), "--output", str(folder), "--dialogues", "3",
                 "--turns", "2", "--start-turn", "1"]) == 0
    assert "real turns only" in capsys.readouterr().out
    key = json.loads((folder / "key.json").read_text())
    assert len(key["groups"]) == 6 and all(g["candidates"] == [] for g in key["groups"])

    bad = [
        (["--output", str(tmp_path / "x")], "--data: without runs"),
        (["--data", str(data), "--output", str(tmp_path / "x"), "--overlap", "1"], "need at least two raters"),
        (["--data", str(data), "--output", str(tmp_path / "x"), "--raters", "a,a"], "'a' is named twice"),
        (["--data", str(data), "--output", str(tmp_path / "x"), "--raters", "a/b"], "not a usable rater id"),
        (["--data", str(data), "--output", str(tmp_path / "x"), "--turns", "0"], "turns_per_dialogue: must be at least 1"),
        (["--data", str(data), "--output", str(tmp_path / "x"), "--start-turn", "500"], "no dialogue has 5 consecutive"),
        (["--data", str(tmp_path / "nope.jsonl"), "--output", str(tmp_path / "x")], "no such file"),
        ([str(tmp_path / "no-run"), "--output", str(tmp_path / "x")], "not a directory"),
    ]
    for args, words in bad:
        assert main(["human-eval", "tasks", *args]) == 2, args
        err = capsys.readouterr().err
        assert words in err, (args, err)
    assert not (tmp_path / "x").exists()


def test_runs_over_other_data_are_refused(tmp_path, data, sample_corpus, capsys):
    dialogues = sample_corpus["test"]
    run = make_run(tmp_path / "runs", "sft", data, dialogues, 0)
    other = tmp_path / "other.jsonl"
    write_jsonl(other, dialogues[:-1])
    assert main(["human-eval", "tasks", str(run), "--data", str(other), "--output", str(tmp_path / "h")]) == 2
    assert "another data file" in capsys.readouterr().err
    twin = make_run(tmp_path / "more", "sft", data, dialogues, 1)
    assert main(["human-eval", "tasks", str(run), str(twin), "--output", str(tmp_path / "h")]) == 2
    assert "name them apart with NAME=DIR" in capsys.readouterr().err
    assert main(["human-eval", "tasks", f"a={run}", f"b={twin}", "--output", str(tmp_path / "h"),
                 "--start-turn", "1", "--turns", "2"]) == 0
    key = json.loads((tmp_path / "h" / "key.json").read_text())
    assert [r["name"] for r in key["runs"]] == ["a", "b"]
