"""``simhub train``: LoRA fine-tuning of the student, tutor, classifier and KT models (SPEC §4).

One entry point, :func:`train`, for every kind but ``student-dpo`` (see :mod:`simhub.training.dpo`).
It checks the recipe's resources, builds the examples, trains with a transformers ``Trainer``
(a custom loss for KT), keeps the best checkpoint by validation loss and writes into the output
folder: the LoRA adapter and tokenizer, ``training_config.json`` (resolved recipe, data counts,
versions, log history), ``eval_results.json`` and, for KT, ``kt_cutoffs.json``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
from pathlib import Path
from typing import Any

from simhub.errors import ConfigError, require
from simhub.schema import atomic_write_bytes
from simhub.training.config import TrainRecipe, check_resources

logger = logging.getLogger("simhub.training")

TRAINING_CONFIG_FILE = "training_config.json"
EVAL_RESULTS_FILE = "eval_results.json"


def _log(message: str) -> None:
    if int(os.environ.get("RANK", "0")) == 0:
        print(f"[simhub train] {message}", flush=True)


def write_json(path: Path, data: Any) -> None:
    atomic_write_bytes(path, json.dumps(data, indent=2, default=str).encode() + b"\n")


def hub_id_of(recipe: TrainRecipe) -> str | None:
    """The base model's Hub id for a published adapter (``base_model_hub_id``, else a Hub-id ``base_model``)."""
    if recipe.base_model_hub_id:
        return recipe.base_model_hub_id
    spec = recipe.base_model
    if spec.startswith("tiny:") or Path(spec).expanduser().exists() or spec.count("/") != 1:
        return None
    return spec


def release_models() -> None:
    """Free every model cached by :func:`simhub.backends.hf.load_causal_lm` and unreferenced objects,
    then return the freed CUDA memory to the device (so the next stage can load its own models)."""
    import gc

    from simhub.backends.hf import unload_models

    unload_models()
    gc.collect()
    if _cuda():
        require("torch", "train").cuda.empty_cache()


def versions() -> dict[str, str]:
    import importlib.metadata as md

    out = {}
    for name in ("simhub", "torch", "transformers", "peft", "trl", "accelerate"):
        with contextlib.suppress(md.PackageNotFoundError):
            out[name] = md.version(name)
    return out


# ---------------------------------------------------------------------------------- model


def load_tokenizer(path: str, revision: str | None = None):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path, revision=revision)
    if tokenizer.pad_token_id is None:
        # Llama 3 ships a reserved padding token; anything but EOS keeps EOS a trained target.
        pad = "<|finetune_right_pad_id|>"
        tokenizer.pad_token = pad if pad in tokenizer.get_vocab() else tokenizer.eos_token
    return tokenizer


def torch_dtype(recipe: TrainRecipe):
    torch = require("torch", "train")
    return torch.bfloat16 if recipe.bf16 else torch.float32


def load_base(recipe: TrainRecipe, path: str):
    from transformers import AutoModelForCausalLM

    try:
        return AutoModelForCausalLM.from_pretrained(
            path, revision=recipe.base_model_revision, dtype=torch_dtype(recipe),
            attn_implementation=recipe.attn_implementation,
        )
    except OSError as exc:
        raise ConfigError(f"base_model {recipe.base_model!r} could not be loaded: {exc}") from None


def lora_config(recipe: TrainRecipe):
    peft = require("peft", "train")
    return peft.LoraConfig(
        r=recipe.lora_r, lora_alpha=recipe.lora_alpha, lora_dropout=recipe.lora_dropout,
        use_rslora=recipe.use_rslora, target_modules=recipe.lora_target_modules, task_type="CAUSAL_LM",
    )


def training_arguments(recipe: TrainRecipe, output_dir: Path, has_eval: bool, cls=None, **extra):
    """TrainingArguments (or ``cls``, e.g. trl's DPOConfig) carrying the recipe's hyperparameters."""
    if cls is None:
        from transformers import TrainingArguments as cls
    strategy = recipe.eval_strategy if has_eval else "no"
    kwargs = dict(
        output_dir=str(output_dir),
        num_train_epochs=recipe.epochs,
        max_steps=recipe.max_steps,
        learning_rate=recipe.learning_rate,
        lr_scheduler_type=recipe.lr_scheduler_type,
        warmup_steps=recipe.warmup_ratio,
        per_device_train_batch_size=recipe.per_device_train_batch_size,
        per_device_eval_batch_size=recipe.per_device_eval_batch_size,
        gradient_accumulation_steps=recipe.gradient_accumulation_steps(),
        weight_decay=recipe.weight_decay,
        max_grad_norm=recipe.max_grad_norm,
        optim="adamw_torch",
        bf16=recipe.bf16,
        gradient_checkpointing=recipe.gradient_checkpointing,
        gradient_checkpointing_kwargs={"use_reentrant": False} if recipe.gradient_checkpointing else None,
        eval_strategy=strategy,
        save_strategy=strategy if has_eval else "epoch",
        eval_steps=recipe.eval_steps,
        save_steps=recipe.eval_steps,
        load_best_model_at_end=has_eval,
        metric_for_best_model="eval_loss" if has_eval else None,
        greater_is_better=False if has_eval else None,
        save_total_limit=recipe.save_total_limit,
        logging_steps=recipe.logging_steps,
        seed=recipe.seed,
        data_seed=recipe.seed,
        report_to=recipe.report_to,
        dataloader_num_workers=recipe.dataloader_num_workers,
        ddp_find_unused_parameters=False,
        use_cpu=not _cuda(),
    )
    kwargs.update(extra)
    return cls(**kwargs)


def _cuda() -> bool:
    torch = require("torch", "train")
    return torch.cuda.is_available()


def last_checkpoint(output_dir: Path, resume: bool) -> str | None:
    """The checkpoint to resume from; refuses to train over existing checkpoints without ``--resume``."""
    from transformers.trainer_utils import get_last_checkpoint

    found = get_last_checkpoint(str(output_dir)) if output_dir.is_dir() else None
    if found and not resume:
        raise ConfigError(f"--output-dir {output_dir}: holds checkpoints from an earlier run ({Path(found).name}); "
                          "pass --resume to continue it or choose another folder")
    if resume and not found:
        _log(f"--resume: no checkpoint in {output_dir}, starting from scratch")
    return found


class PadCollator:
    """Right-pads ``input_ids`` (pad id), ``labels`` (-100) and builds the 2-D attention mask."""

    def __init__(self, pad_id: int):
        self.pad_id = pad_id

    def __call__(self, features: list[dict]) -> dict:
        import torch

        width = max(len(f["input_ids"]) for f in features)
        n = len(features)
        ids = torch.full((n, width), self.pad_id, dtype=torch.long)
        labels = torch.full((n, width), -100, dtype=torch.long)
        mask = torch.zeros((n, width), dtype=torch.long)
        for row, f in enumerate(features):
            k = len(f["input_ids"])
            ids[row, :k] = torch.tensor(f["input_ids"])
            labels[row, :k] = torch.tensor(f["labels"])
            mask[row, :k] = 1
        return {"input_ids": ids, "labels": labels, "attention_mask": mask}


# ---------------------------------------------------------------------------------- evaluation


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
    from simhub.backends.hf import ModelRef
    from simhub.metrics.knowledge import KT_CUTOFFS_FILE, KnowledgeTracer
    from simhub.scoring import reference_cutoffs

    source = f"{recipe.data} split {recipe.eval_split}"
    tracer = KnowledgeTracer(ModelRef(str(output_dir)), persona=recipe.persona,
                             batch_size=recipe.per_device_eval_batch_size)
    cutoffs, n = reference_cutoffs(tracer, dialogues, output_dir / KT_CUTOFFS_FILE,
                                   {"source": source, "model": str(output_dir)}, where=source)
    return {"cutoffs": [float(c) for c in cutoffs], "n_deltas": n}


def save_run(trainer, tokenizer, output_dir: Path, recipe: TrainRecipe, resolved: dict[str, str],
             data: dict[str, Any]) -> None:
    """Save the adapter, the tokenizer and ``training_config.json`` (resolved recipe and model paths,
    data counts, versions, log history) into ``output_dir``; call on the main process only."""
    trainer.save_model(str(output_dir))
    tokenizer.save_pretrained(str(output_dir))
    write_json(output_dir / TRAINING_CONFIG_FILE, {
        "recipe": recipe.to_dict(),
        "resolved": {**resolved, "base_model_hub_id": hub_id_of(recipe)},
        "gradient_accumulation_steps": recipe.gradient_accumulation_steps(),
        "world_size": int(os.environ.get("WORLD_SIZE", "1")),
        "data": data,
        "versions": versions(),
        "log_history": trainer.state.log_history,
    })


# ---------------------------------------------------------------------------------- entry point


def train(recipe: TrainRecipe, output_dir: str | os.PathLike[str], resume: bool = False) -> dict:
    """Train ``recipe`` into ``output_dir``; returns the evaluation results."""
    if recipe.kind == "student-dpo":
        from simhub.training.dpo import run_dpo

        return run_dpo(recipe, output_dir, resume=resume)
    resolved = check_resources(recipe)
    output_dir = Path(output_dir)
    checkpoint = last_checkpoint(output_dir, resume)
    recipe.gradient_accumulation_steps()  # fail on a bad batch split before loading

    require("peft", "train")
    from peft import get_peft_model
    from transformers import Trainer, set_seed

    from simhub.training.data import CLASS_LABELS, build_chat_examples, build_kt_examples, load_split

    set_seed(recipe.seed)
    tokenizer = load_tokenizer(resolved["base_model"], recipe.base_model_revision)
    train_dialogues = load_split(recipe.data, recipe.train_split, recipe.max_train_dialogues)
    eval_dialogues = load_split(recipe.data, recipe.eval_split, recipe.max_eval_dialogues)
    if recipe.kind == "kt":
        build = lambda ds: build_kt_examples(tokenizer, ds, recipe.max_prompt_chars, recipe.persona)  # noqa: E731
    else:
        build = lambda ds: build_chat_examples(tokenizer, recipe.kind, ds, recipe.max_prompt_chars,  # noqa: E731
                                               recipe.persona)
    train_ex, eval_ex = build(train_dialogues), build(eval_dialogues)
    _log(f"{recipe.kind}: train {train_ex.summary()} from {len(train_dialogues)} dialogues; "
         f"eval {eval_ex.summary()} from {len(eval_dialogues)} dialogues "
         f"(prompts of {recipe.max_prompt_chars}+ characters left out)")
    if not train_ex.items:
        raise ConfigError(f"data: no {recipe.kind} training examples in {recipe.data!r} split {recipe.train_split!r}")

    model = get_peft_model(load_base(recipe, resolved["base_model"]), lora_config(recipe))
    if int(os.environ.get("RANK", "0")) == 0:
        model.print_trainable_parameters()
    has_eval = bool(eval_ex.items)
    args = training_arguments(
        recipe, output_dir, has_eval, remove_unused_columns=False, label_names=["labels"],
        prediction_loss_only=True,
        train_sampling_strategy="group_by_length" if recipe.group_by_length else "random",
    )
    if recipe.kind == "kt":
        from simhub.training.kt import KTCollator, make_kt_trainer_class

        trainer_cls, collator = make_kt_trainer_class(), KTCollator(tokenizer, torch_dtype(recipe))
    else:
        trainer_cls, collator = Trainer, PadCollator(tokenizer.pad_token_id)
    trainer = trainer_cls(model=model, args=args, train_dataset=train_ex.items,
                          eval_dataset=eval_ex.items if has_eval else None,
                          data_collator=collator, processing_class=tokenizer)
    result = trainer.train(resume_from_checkpoint=checkpoint)

    if recipe.kind == "kt" and has_eval:
        results = evaluate_kt(trainer, eval_ex.items)
    elif recipe.kind in CLASS_LABELS and has_eval:
        results = evaluate_classifier(trainer, eval_ex.items, tokenizer, CLASS_LABELS[recipe.kind])
    elif has_eval:
        metrics = trainer.evaluate()
        loss = metrics.get("eval_loss")
        results = {"eval_loss": loss, "perplexity": math.exp(loss) if loss is not None and loss < 50 else None}
    else:
        results = {}
    results.update({"kind": recipe.kind, "split": recipe.eval_split, "train_loss": result.training_loss,
                    "global_step": result.global_step,
                    "best_model_checkpoint": trainer.state.best_model_checkpoint})

    main_process = trainer.is_world_process_zero()
    if main_process:
        save_run(trainer, tokenizer, output_dir, recipe, resolved,
                 {"train": train_ex.summary(), "eval": eval_ex.summary()})
    if main_process and recipe.kind == "kt" and recipe.kt_cutoffs and has_eval:
        # The cutoffs load the saved adapter: drop the trained copy (and its optimizer state) first.
        del trainer, model
        release_models()
        results["kt_cutoffs"] = write_kt_cutoffs(output_dir, eval_dialogues, recipe)
    if main_process:
        write_json(output_dir / EVAL_RESULTS_FILE, results)
        _log(f"done: {output_dir} {json.dumps({k: v for k, v in results.items() if k != 'per_class'}, default=str)}")
    return results
