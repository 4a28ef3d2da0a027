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
ambiguous turns, and the time it took (loading the classifier included). The README quotes it.

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

        def rate(keep, agree=agree):
            kept = [a for a, k in zip(agree, keep, strict=True) if k]
            return {"agree": sum(kept), "of": len(kept), "rate": round(sum(kept) / len(kept), 3)}

        report["classifiers"][f"demo:{name}"] = {
            "all": rate([True] * len(rows)),
            "by_run": {run: rate([r["run"] == run for r in rows]) for run in sorted({r["run"] for r in rows})},
            "unambiguous": rate([not r["ambiguous"] for r in rows]),
            "seconds": round(seconds, 2),
            "disagreements": [{"run": r["run"], "label": r["act"], "predicted": p, "text": r["candidate"][:80]}
                              for p, r, a in zip(predicted, rows, agree, strict=True) if not a],
        }
        print(name, json.dumps(report["classifiers"][f"demo:{name}"]["all"]), flush=True)
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
