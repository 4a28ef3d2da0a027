"""Benchmark the demo's two act classifiers on generated student turns, not only on real ones.

The demo table's act accuracy of each classifier is measured on the real test turns. A simulator's
act score, though, is the classifier's reading of *generated* text. ``benchmarks/data/generated_acts.jsonl``
holds 80 generated turns of the sample test split, drawn at random (seed 0) from the rows of one
`simhub eval` run each: 40 of the fine-tuned SmolLM2 student (``smol-student-sft``) and 40 of
SmolLM2 zero-shot (``baseline:zero-shot``), each with its act labelled by hand from the five acts'
definitions (one annotator, a simhub developer; ``ambiguous`` marks the turns where a second
label was defensible). It scores them with:

- ``demo:acts``, the demo's act classifier: logistic regression on MiniLM sentence embeddings;
- ``demo:acts-llm``, the paper's kind of classifier: a LoRA-tuned tiny Llama that reads the dialogue
  and the turn and scores the five labels as continuations (built on first use),

and writes each one's agreement with the hand labels, overall, per simulator and without the
ambiguous turns, and the time it took (loading the classifier included). 56 of the turns also
carry a hand correctness label (``correct`` or ``incorrect``: the turn's answer to what the tutor
last asked; turns without a clear answer have none), against which it measures the demo judge's
correctness call. benchmarks/README.md quotes it.

Usage::

    python benchmarks/bench_acts_generated.py [--output benchmarks/results/acts_generated.json]
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from pathlib import Path

DATA = Path(__file__).parent / "data" / "generated_acts.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", default="benchmarks/results/acts_generated.json")
    args = parser.parse_args()

    from simhub.config import ModelRef
    from simhub.data.sample import load_sample_corpus
    from simhub.metrics import MetricContext
    from simhub.metrics.acts import Acts
    from simhub.provision import build_demo_model

    rows = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines() if line.strip()]
    test = {d.id: d for d in load_sample_corpus()["test"]}
    items = [(test[r["dialogue_id"]].turns[: r["turn_index"]], r["candidate"], test[r["dialogue_id"]]) for r in rows]
    report: dict = {"turns": len(rows), "labels": dict(Counter(r["act"] for r in rows)),
                    "ambiguous": sum(r["ambiguous"] for r in rows), "classifiers": {}}
    for name in ("acts", "acts-llm"):
        metric = Acts(ModelRef(model=str(build_demo_model(name))), MetricContext())
        start = time.perf_counter()
        predicted = metric.predict(items)
        seconds = time.perf_counter() - start
        agree = [p == r["act"] for p, r in zip(predicted, rows, strict=True)]
        report["classifiers"][f"demo:{name}"] = {
            "all": _rate(agree, [True] * len(rows)),
            "by_run": {run: _rate(agree, [r["run"] == run for r in rows]) for run in sorted({r["run"] for r in rows})},
            "unambiguous": _rate(agree, [not r["ambiguous"] for r in rows]),
            "seconds": round(seconds, 2),
            "disagreements": [{"run": r["run"], "label": r["act"], "predicted": p, "text": r["candidate"][:80]}
                              for p, r, a in zip(predicted, rows, agree, strict=True) if not a],
        }
        print(name, json.dumps(report["classifiers"][f"demo:{name}"]["all"]), flush=True)
    report["judge"] = _judge(rows, test)
    print("judge", json.dumps(report["judge"]["all"]), flush=True)
    report["correctness_classifier"] = _correctness_classifier(rows, test)
    print("correctness-emb", json.dumps(report["correctness_classifier"]["all"]), flush=True)
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _judge(rows: list[dict], test: dict) -> dict:
    """The demo judge's correctness call on the turns with a hand correctness label (the same
    call the correctness metric compares with the real turn's label): its answer ``correct``
    against ``incorrect, ...``; ``na`` counts as a disagreement."""
    from simhub.config import load_profile
    from simhub.metrics import MetricContext
    from simhub.metrics.base import ScoreItem
    from simhub.metrics.judge import Judge, item_messages
    from simhub.provision import provision_profile, restrict

    profile = provision_profile(restrict(load_profile("demo-smol"), simulators=[], tutors=[]), on_step=None)
    judge = Judge(profile.scoring.metrics.judge, MetricContext())
    labelled = [r for r in rows if r.get("correctness")]
    items = [ScoreItem(dialogue=test[r["dialogue_id"]], turn_index=r["turn_index"], candidate=r["candidate"]) for r in labelled]
    start = time.perf_counter()
    answers = judge.answers([item_messages(item) for item in items])
    seconds = time.perf_counter() - start
    called = ["na" if a.text == "na" else "correct" if a.text == "correct" else "incorrect" for a in answers]
    return {**_agreement(called, labelled), "answers": dict(Counter(a.text for a in answers)), "seconds": round(seconds, 2)}


def _correctness_classifier(rows: list[dict], test: dict) -> dict:
    """The demo's embedding correctness labeller (``demo:correctness-emb``, the dialogue-level
    statistics' correctness classifier) on the same turns: it labels a turn by itself."""
    from simhub.models.embedding_classifier import load_embedding_classifier
    from simhub.provision import build_demo_model

    classifier = load_embedding_classifier(build_demo_model("correctness-emb"))
    labelled = [r for r in rows if r.get("correctness")]
    start = time.perf_counter()
    called = classifier.predict_turns([(test[r["dialogue_id"]].turns[: r["turn_index"]], r["candidate"], test[r["dialogue_id"]])
                                       for r in labelled])
    seconds = time.perf_counter() - start
    return {**_agreement(called, labelled), "answers": dict(Counter(called)), "seconds": round(seconds, 2)}


def _agreement(called: list[str], labelled: list[dict]) -> dict:
    agree = [c == r["correctness"] for c, r in zip(called, labelled, strict=True)]
    correct = [r["correctness"] == "correct" for r in labelled]  # what calling every turn correct agrees with
    return {
        "labels": dict(Counter(r["correctness"] for r in labelled)),
        "all": _rate(agree, [True] * len(labelled)),
        "every_turn_correct": _rate(correct, [True] * len(labelled)),
        "by_run": {run: _rate(agree, [r["run"] == run for r in labelled]) for run in sorted({r["run"] for r in labelled})},
        "by_label": {lab: _rate(agree, [r["correctness"] == lab for r in labelled]) for lab in ("correct", "incorrect")},
    }


def _rate(agree: list[bool], keep: list[bool]) -> dict:
    """How many of the kept turns agree."""
    kept = [a for a, k in zip(agree, keep, strict=True) if k]
    return {"agree": sum(kept), "of": len(kept), "rate": round(sum(kept) / len(kept), 3) if kept else None}


if __name__ == "__main__":
    main()
