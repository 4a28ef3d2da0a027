#!/usr/bin/env bash
# The demo on a fresh machine, no network: the bundled sample corpus, the demo profile's tiny models
# (built on first use), a Table-1 row with confidence intervals between its floor and its ceiling,
# a paired comparison, dialogue-level realism and the HTML report.
set -euo pipefail
OUT="${1:-out/demo}"
SAMPLE="$(python -c 'from simhub.data.sample import SAMPLE_DIR; print(SAMPLE_DIR)')"
simhub data convert-eedi --source "$SAMPLE/raw" --annotations "$SAMPLE/annotations" --output "$OUT/data"
simhub data stats "$OUT/data/test.jsonl"
for sim in tiny-student-sft reference:previous-turn reference:real; do
  simhub eval --profile demo --simulator "$sim" --data "$OUT/data/test.jsonl" --output "$OUT/runs/${sim//:/-}"
done
simhub compare "$OUT/runs/tiny-student-sft" "$OUT/runs/reference-real"
simhub rollout --profile demo --simulator tiny-student-sft --tutor tiny-tutor --data "$OUT/data/test.jsonl" \
  --output "$OUT/rollouts" --max-turns 20 --max-tokens 64
simhub eval-dialogues --profile demo --real "$OUT/data/test.jsonl" --sim "$OUT/rollouts" --output "$OUT/runs/tiny-student-sft"
simhub report "$OUT"/runs/* --output "$OUT/report.html"
echo "open $OUT/report.html"
