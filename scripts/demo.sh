#!/usr/bin/env bash
# The demo on a fresh machine: the bundled sample corpus, the tiny model kit, all seven metrics.
set -euo pipefail
OUT="${1:-out/demo}"
SAMPLE="$(python -c 'from simhub.data.sample import SAMPLE_DIR; print(SAMPLE_DIR)')"
simhub data convert-eedi --source "$SAMPLE/raw" --annotations "$SAMPLE/annotations" --output "$OUT/data"
simhub data stats "$OUT/data/test.jsonl"
simhub data items "$OUT/data/test.jsonl" --candidate previous --output "$OUT/items.jsonl"
simhub score --input "$OUT/items.jsonl" --output "$OUT/scores.jsonl" --profile demo
