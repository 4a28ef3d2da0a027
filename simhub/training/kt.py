"""LLMKT training: BCE of the mean P(True) over a tutor turn's KCs against the next student turn's correctness.

The paper trains the KT model at a constant learning rate with no warm-up (docs/protocol.md §8): the KT recipes
say so (``lr_scheduler_type: constant``, ``warmup_ratio: 0``).

The batch is exactly what the ``knowledge`` metric reads: packed prompts from
:func:`~simhub.metrics.knowledge.build_kt_prompt`, collated by
:func:`~simhub.metrics.knowledge.collate_packed` (4-D mask, restarted positions), and the answer
read at the last token of each KC segment as softmax over the ``" True"``/``" False"`` tokens.
Only the readout positions go through the LM head (``logits_to_keep``), which keeps the
128k-vocabulary projection off the long context.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from simhub.metrics.knowledge import KTPrompt, collate_packed, true_false_ids
from simhub.training.config import TrainRecipe


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


def evaluate_kt(trainer, dataset) -> dict:
    import numpy as np

    trainer.args.prediction_loss_only = False
    out = trainer.predict(dataset, metric_key_prefix="eval")
    p = np.asarray(out.predictions, dtype=np.float64).ravel()
    y = np.asarray(out.label_ids, dtype=np.float64).ravel()
    auc = None
    if 0 < y.sum() < len(y):
        from sklearn.metrics import roc_auc_score

        auc = float(roc_auc_score(y, p))
    return {"auc": auc, "accuracy": float(((p >= 0.5) == (y >= 0.5)).mean()) if len(y) else None,
            "eval_loss": out.metrics.get("eval_loss"), "count": len(y), "positive_rate": float(y.mean()) if len(y) else None}


def write_kt_cutoffs(output_dir: Path, dialogues, recipe: TrainRecipe) -> dict:
    """Service-mode cutoffs of the freshly trained KT model, from real deltas of the validation split.

    Loads the saved adapter, so the caller must have dropped the trainer's copy of the model first.
    """
    from simhub.config import ModelRef
    from simhub.metrics.knowledge import KT_CUTOFFS_FILE, KnowledgeTracer
    from simhub.models import LoadOptions, load_lm
    from simhub.scoring.cutoffs import reference_cutoffs

    source = f"{recipe.data} split {recipe.eval_split}"
    # A bf16 recipe's model is scored in bf16 (kt_dtype: bfloat16), so its cutoffs sit on the same grid.
    dtype = "bfloat16" if recipe.bf16 else "float32"
    lm = load_lm(ModelRef(model=str(output_dir)), LoadOptions(batch_size=recipe.per_device_eval_batch_size,
                                                             dtype=dtype if recipe.bf16 else None))
    tracer = KnowledgeTracer(lm, persona=recipe.persona if recipe.persona != "profile" else "none", dtype=dtype)
    cutoffs, n = reference_cutoffs(tracer, dialogues, output_dir / KT_CUTOFFS_FILE,
                                   {"source": source, "model": str(output_dir)}, where=source)
    return {"cutoffs": [float(c) for c in cutoffs], "n_deltas": n}


def train_kt(recipe: TrainRecipe, output_dir: str | os.PathLike[str], resume: bool = False) -> dict:
    from simhub.training.common import run_supervised, torch_dtype
    from simhub.training.data import build_kt_examples

    persona = "ocean" if recipe.persona == "ocean" else "none"
    return run_supervised(
        recipe, output_dir, resume,
        build=lambda tok, ds: build_kt_examples(tok, ds, recipe.max_prompt_chars, persona),
        trainer_cls=make_kt_trainer_class(), collator=lambda tok: KTCollator(tok, torch_dtype(recipe)),
        evaluate=lambda trainer, items, tok: evaluate_kt(trainer, items),
        after=(lambda out, dialogues: {"kt_cutoffs": write_kt_cutoffs(Path(out), dialogues, recipe)})
        if recipe.kt_cutoffs else None,
    )
