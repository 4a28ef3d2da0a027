"""The act and correctness classifiers and the local judge: chat examples whose assistant message
is the label (the judge's is its verdict).

Validation accuracy and per-class F1 read the logits of each label's first token at the label
position (the metric itself scores whole labels as continuations). Labels that share a first token
are one class there: the judge's two ``incorrect, ...`` verdicts count as ``incorrect``.
"""

from __future__ import annotations

import os

from simhub.errors import ConfigError
from simhub.training.common import run_supervised
from simhub.training.config import TrainRecipe


def _first_token_ids(tokenizer, labels: tuple[str, ...]) -> list[int]:
    ids = [tokenizer.encode(label, add_special_tokens=False)[0] for label in labels]
    if len(set(ids)) != len(ids):
        raise ConfigError(f"the tokenizer gives two labels of {labels} the same first token; "
                          "classifier evaluation reads the first label token")
    return ids


def classifier_metrics(pred: list[int], gold: list[int], labels: tuple[str, ...]) -> dict:
    """Accuracy, per-class precision/recall/F1/support and macro F1."""
    n = len(gold)
    per_class = {}
    for k, name in enumerate(labels):
        tp = sum(1 for p, g in zip(pred, gold, strict=True) if p == k and g == k)
        fp = sum(1 for p, g in zip(pred, gold, strict=True) if p == k and g != k)
        fn = sum(1 for p, g in zip(pred, gold, strict=True) if p != k and g == k)
        precision = tp / (tp + fp) if tp + fp else 0.0
        recall = tp / (tp + fn) if tp + fn else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        per_class[name] = {"precision": precision, "recall": recall, "f1": f1, "support": tp + fn}
    present = [v["f1"] for v in per_class.values() if v["support"]]
    return {
        "accuracy": sum(1 for p, g in zip(pred, gold, strict=True) if p == g) / n if n else None,
        "macro_f1": sum(present) / len(present) if present else None,
        "per_class": per_class,
        "count": n,
    }


def evaluate_classifier(trainer, dataset, tokenizer, labels: tuple[str, ...]) -> dict:
    """Predict the label from the logits of its first token, at the label position; works under DDP."""
    import torch

    first = torch.tensor(_first_token_ids(tokenizer, labels))

    def reduce(logits, target):
        logits = logits[0] if isinstance(logits, tuple) else logits
        pos = (target != -100).int().argmax(dim=1)  # first label token
        rows = torch.arange(target.shape[0], device=target.device)
        scores = logits[rows, (pos - 1).clamp(min=0)][:, first.to(logits.device)].float()
        # The gold class rides along as a last column: evaluation batches may be length-sorted.
        gold = (target[rows, pos][:, None] == first.to(target.device)[None]).float().argmax(dim=1)
        return torch.cat([scores, gold[:, None].float()], dim=1)

    trainer.preprocess_logits_for_metrics = reduce
    trainer.args.prediction_loss_only = False
    out = trainer.predict(dataset, metric_key_prefix="eval")
    pred = [int(i) for i in out.predictions[:, :-1].argmax(axis=1)]
    gold = [int(i) for i in out.predictions[:, -1]]
    result = classifier_metrics(pred, gold, labels)
    result["eval_loss"] = out.metrics.get("eval_loss")
    result["method"] = "argmax over the first token of each label at the label position"
    return result


def first_token_classes(labels: tuple[str, ...]) -> tuple[str, ...]:
    """The classes evaluation tells apart: each label's first word (``incorrect, same error`` and
    ``incorrect, different error`` are both ``incorrect``), in order, once."""
    return tuple(dict.fromkeys(label.split(",")[0] for label in labels))


def judge_sample_weights(items: list[dict], real_weight: float) -> list[float]:
    """Draw weights of judge examples: ``real_weight`` for a real turn put as its own candidate
    (``source`` ``real``), 1 for any other candidate."""
    return [real_weight if item.get("source") == "real" else 1.0 for item in items]


def _weighted_trainer(real_weight: float, seed: int):
    """transformers' Trainer drawing each epoch's examples with replacement, weighted by
    :func:`judge_sample_weights` (seeded: the same recipe draws the same batches)."""
    import torch

    from simhub.training.common import label_logits_trainer

    class WeightedJudgeTrainer(label_logits_trainer()):
        def _get_train_sampler(self, train_dataset=None):
            dataset = train_dataset if train_dataset is not None else self.train_dataset
            weights = judge_sample_weights(list(dataset), real_weight)
            generator = torch.Generator().manual_seed(seed)
            return torch.utils.data.WeightedRandomSampler(weights, num_samples=len(weights), replacement=True,
                                                          generator=generator)

    return WeightedJudgeTrainer


def train_classifier(recipe: TrainRecipe, output_dir: str | os.PathLike[str], resume: bool = False) -> dict:
    from simhub.training.data import CLASS_LABELS, build_chat_examples

    labels = first_token_classes(CLASS_LABELS[recipe.kind])
    weighted = recipe.kind == "judge" and recipe.judge_real_weight != 1.0
    return run_supervised(
        recipe, output_dir, resume,
        build=lambda tok, ds: build_chat_examples(tok, recipe.kind, ds, recipe.max_prompt_chars, recipe.persona,
                                                 judge_candidates=recipe.judge_candidates,
                                                 judge_tutor_candidates=recipe.judge_tutor_candidates, seed=recipe.seed),
        trainer_cls=_weighted_trainer(recipe.judge_real_weight, recipe.seed) if weighted else None,
        evaluate=lambda trainer, items, tok: evaluate_classifier(trainer, items, tok, labels),
    )
