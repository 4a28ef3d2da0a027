"""LLMKT training: BCE of the mean P(True) over a tutor turn's KCs against the next student turn's correctness.

The batch is exactly what the ``knowledge`` metric reads: packed prompts from
:func:`~simhub.metrics.knowledge.build_kt_prompt`, collated by
:func:`~simhub.metrics.knowledge.collate_packed` (4-D mask, restarted positions), and the answer
read at the last token of each KC segment as softmax over the ``" True"``/``" False"`` tokens.
Only the readout positions go through the LM head (``logits_to_keep``), which keeps the
128k-vocabulary projection off the long context.
"""

from __future__ import annotations

from typing import Any

from simhub.metrics.knowledge import KTPrompt, collate_packed, true_false_ids


class KTCollator:
    def __init__(self, tokenizer, dtype):
        self.pad_id = tokenizer.pad_token_id
        self.dtype = dtype

    def __call__(self, features: list[dict]) -> dict[str, Any]:
        import torch

        prompts = [KTPrompt(list(f["input_ids"]), int(f["context_len"]), [tuple(s) for s in f["segments"]])
                   for f in features]
        batch = collate_packed(prompts, self.pad_id, self.dtype)
        rows = [r for r, p in enumerate(prompts) for _ in p.readout]
        cols = [c for p in prompts for c in p.readout]
        batch["readout_rows"] = torch.tensor(rows, dtype=torch.long)
        batch["readout_cols"] = torch.tensor(cols, dtype=torch.long)
        batch["labels"] = torch.tensor([float(f["labels"]) for f in features], dtype=torch.float32)
        return batch


def kt_probabilities(model, inputs: dict, true_id: int, false_id: int):
    """Mean P(True) over each example's KCs, shape ``(batch,)``, float32."""
    import torch

    rows, cols = inputs["readout_rows"], inputs["readout_cols"]
    keep, where = torch.unique(cols, sorted=True, return_inverse=True)
    out = model(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"],
                position_ids=inputs["position_ids"], logits_to_keep=keep, use_cache=False)
    logits = out.logits[rows, where][:, [true_id, false_id]].float()
    p_true = torch.softmax(logits, dim=-1)[:, 0]
    n = inputs["input_ids"].shape[0]
    total = torch.zeros(n, device=p_true.device, dtype=p_true.dtype).index_add(0, rows, p_true)
    count = torch.zeros(n, device=p_true.device, dtype=p_true.dtype).index_add(0, rows, torch.ones_like(p_true))
    return total / count.clamp(min=1)


def kt_loss(model, inputs: dict, true_id: int, false_id: int):
    """The LLMKT training loss of a batch: ``(BCE of mean P(True) against inputs["labels"], P(True))``.

    P(True) is clamped to ``[1e-6, 1 - 1e-6]`` so that the loss stays finite.
    """
    import torch

    p = kt_probabilities(model, inputs, true_id, false_id).clamp(1e-6, 1 - 1e-6)
    return torch.nn.functional.binary_cross_entropy(p, inputs["labels"].to(p.dtype)), p


def make_kt_trainer_class():
    from transformers import Trainer

    class KTTrainer(Trainer):
        """A Trainer whose loss is the LLMKT BCE; predictions are the mean P(True) per example."""

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.true_id, self.false_id = true_false_ids(self.processing_class)
            # The loss is a per-batch mean: let the Trainer divide it by the accumulation steps.
            self.model_accepts_loss_kwargs = False

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            loss, p = kt_loss(model, inputs, self.true_id, self.false_id)
            return (loss, {"p_true": p.detach()}) if return_outputs else loss

    return KTTrainer
