"""``simhub publish`` / ``simhub pull``: trained adapters to and from the Hugging Face Hub.

Publishing stages an upload folder holding only what a user needs — the adapter, tokenizer,
``training_config.json``, ``eval_results.json``, ``kt_cutoffs.json`` and a model card — with
``base_model_name_or_path`` rewritten to the base model's Hub id (a local path would make the
adapter unloadable anywhere else) and without checkpoints, DPO artifacts or DPO's frozen
``ref/`` adapter copy. The token comes from ``HF_TOKEN`` or ``huggingface-cli login`` via
``huggingface_hub``; simhub never reads, prints or writes it.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import yaml

from simhub.errors import ConfigError, require
from simhub.runformat import EvalResults, read_eval_results

CARD_DIR = Path(__file__).resolve().parent.parent / "resources" / "cards"
DATASET_ID = "Eedi/Question-Anchored-Tutoring-Dialogues-2k"
DEFAULT_LICENSE = "cc-by-nc-sa-4.0"

#: Files of a model folder that are published (globs); everything else stays home.
PUBLISHED = ("adapter_config.json", "adapter_model.safetensors", "adapter_model.bin", "tokenizer.json",
             "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja", "tokenizer.model",
             "training_config.json", "eval_results.json", "kt_cutoffs.json")

_KIND_INFO: dict[str, dict[str, str]] = {
    "student-sft": {"template": "student.md", "role": "student simulator (SFT)", "pipeline_tag": "text-generation",
                    "objective": "next-token NLL of every student turn of whole dialogues (loss on student turns only)"},
    "student-dpo": {"template": "student.md", "role": "student simulator (SFT + offline RL / DPO)",
                    "pipeline_tag": "text-generation",
                    "objective": "DPO on preference pairs of sampled student turns ranked by the realism metrics, "
                                 "SFT adapter as frozen reference"},
    "student-grpo": {"template": "student.md", "role": "student simulator (SFT + online RL / GRPO)",
                     "pipeline_tag": "text-generation",
                     "objective": "GRPO on groups of sampled student turns rewarded by the realism metrics (their "
                                  "weighted mean against the real turn), KL to the SFT adapter"},
    "tutor-sft": {"template": "metric_model.md", "role": "tutor model", "metric": "tutor_response",
                  "pipeline_tag": "text-generation", "objective": "next-token NLL of the tutor turns",
                  "prompt_function": "`tutor_messages`", "readout": "the likelihood of the real next tutor turn"},
    "acts": {"template": "metric_model.md", "role": "dialogue-act classifier", "metric": "acts",
             "pipeline_tag": "text-generation", "objective": "generate the act label of a student turn",
             "prompt_function": "`act_messages`", "readout": "the most likely of the five act labels"},
    "correctness": {"template": "metric_model.md", "role": "correctness classifier", "metric": "correctness",
                    "pipeline_tag": "text-generation",
                    "objective": "generate correct / incorrect / na for a student turn",
                    "prompt_function": "`correctness_messages`", "readout": "the most likely label"},
    "judge": {"template": "metric_model.md", "role": "local correctness judge (not in the paper, which uses GPT-5 mini)",
              "metric": "correctness", "pipeline_tag": "text-generation",
              "objective": "generate the verdict on a candidate turn, from examples built from the corpus's "
                           "correctness labels", "prompt_function": "`judge_messages`",
              "readout": "the most likely of the four verdicts"},
    "kt": {"template": "metric_model.md", "role": "LLM knowledge tracer (LLMKT)", "metric": "knowledge",
           "pipeline_tag": "text-generation",
           "objective": "BCE of the mean P(True) of the next tutor turn's KCs against the next student turn's "
                        "correctness", "prompt_function": "`build_kt_prompt` / `collate_packed`",
           "readout": "P(True) over {True, False} after each packed KC question"},
}

#: eval_results.json keys reported in model-index, per kind: (key, metric type, display name).
_RESULT_KEYS = {
    "acts": [("accuracy", "accuracy", "Accuracy"), ("macro_f1", "f1", "Macro F1")],
    "correctness": [("accuracy", "accuracy", "Accuracy"), ("macro_f1", "f1", "Macro F1")],
    "judge": [("accuracy", "accuracy", "Accuracy (correct / incorrect / na)"), ("macro_f1", "f1", "Macro F1")],
    "kt": [("auc", "roc_auc", "AUC"), ("accuracy", "accuracy", "Accuracy")],
}
_GENERATOR_KEYS = [("eval_loss", "loss", "Validation loss"), ("perplexity", "perplexity", "Perplexity"),
                   ("eval_rewards/accuracies", "accuracy", "DPO reward accuracy")]


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot read ({exc})", field=str(path)) from None


def _hyperparameters(recipe: dict) -> str:
    keys = ["epochs", "learning_rate", "lr_scheduler_type", "warmup_ratio", "effective_batch_size",
            "weight_decay", "max_grad_norm", "lora_r", "lora_alpha", "lora_dropout", "use_rslora",
            "lora_target_modules", "bf16", "seed", "max_prompt_chars", "persona"]
    lines = [f"- {k}: `{recipe[k]}`" for k in keys if k in recipe]
    if recipe.get("kind") == "student-dpo":
        dpo = recipe.get("dpo") or {}
        lines += [f"- dpo.{k}: `{dpo[k]}`" for k in ("beta", "num_candidates", "temperature", "top_p", "subsample",
                                                    "epsilon", "max_pairs_per_turn", "skip_turns",
                                                    "reward_metrics") if k in dpo]
    if recipe.get("kind") == "student-grpo":
        grpo = recipe.get("grpo") or {}
        lines += [f"- grpo.{k}: `{grpo[k]}`" for k in ("beta", "num_generations", "temperature", "top_p",
                                                     "max_new_tokens", "subsample", "reward_metrics",
                                                     "reward_weights", "held_out_metrics") if k in grpo]
    return "\n".join(lines)


def run_model_index(run: EvalResults) -> dict[str, Any]:
    """A model-index result from a ``simhub eval`` run's ``results.json``: the realism metrics with
    their 95% confidence intervals, on the data the run evaluated."""
    metrics = []
    for name, m in run.metrics.items():
        if m.mean is not None:
            entry = {"type": name, "value": round(float(m.mean), 6), "name": f"{name} (simhub realism)"}
            if m.ci95:
                entry["args"] = {"ci95": [round(float(v), 6) for v in m.ci95], "n": m.n}
            metrics.append(entry)
    return {
        "task": {"type": "text-generation", "name": "student simulation (turn-level realism)"},
        "dataset": {"name": Path(run.data.path if run.data.path is not None else "eval data").name,
                    "type": DATASET_ID, "revision": run.data.sha256},
        "metrics": metrics,
    }


def card_data(model_dir: str | os.PathLike[str], repo_id: str, license: str = DEFAULT_LICENSE,
              config: dict | None = None, runs: list[EvalResults] | None = None) -> dict[str, Any]:
    """The template variables of a model folder's card (front matter included).

    ``config`` is the folder's ``training_config.json`` when the caller has read it already;
    ``runs`` are ``simhub eval`` results whose numbers go into the card's ``model-index``.
    """
    model_dir = Path(model_dir)
    if config is None:
        config = _read_json(model_dir / "training_config.json")
    results = _read_json(model_dir / "eval_results.json") if (model_dir / "eval_results.json").is_file() else {}
    recipe = config.get("recipe") or {}
    kind = recipe.get("kind", "student-sft")
    info = _KIND_INFO.get(kind, _KIND_INFO["student-sft"])
    base = (config.get("resolved") or {}).get("base_model_hub_id") or recipe.get("base_model_hub_id")
    if not base:
        raise ConfigError(f"{model_dir}: the base model has no Hub id; set base_model_hub_id in the recipe "
                          "(or --set base_model_hub_id=ORG/NAME when training)")
    metrics = []
    for key, mtype, name in _RESULT_KEYS.get(kind, _GENERATOR_KEYS):
        value = results.get(key)
        if isinstance(value, int | float):
            metrics.append({"type": mtype, "value": round(float(value), 6), "name": name})
    split = recipe.get("eval_split", "val")
    front: dict[str, Any] = {
        "base_model": base,
        "library_name": "peft",
        "license": license,
        "datasets": [DATASET_ID],
        "language": ["en"],
        "pipeline_tag": info["pipeline_tag"],
        "tags": ["simhub", "lora", "education", "tutoring", "student-simulation", kind],
    }
    index_results = []
    if metrics:
        index_results.append({
            "task": {"type": info["pipeline_tag"], "name": info["role"]},
            "dataset": {"name": "Eedi QATD-2k", "type": DATASET_ID, "split": split},
            "metrics": metrics,
        })
    index_results += [run_model_index(r) for r in runs or []]
    if index_results:
        front["model-index"] = [{"name": repo_id.split("/")[-1], "results": index_results}]
    table = "\n".join(["| metric | value |", "|---|---|", *(f"| {m['name']} | {m['value']:.4f} |" for m in metrics)])
    return {
        **info,
        "front_matter": yaml.safe_dump(front, sort_keys=False, allow_unicode=True),
        "title": repo_id.split("/")[-1],
        "repo_id": repo_id,
        "base_model": base,
        "license": license,
        "data": recipe.get("data", "?"),
        "train_split": recipe.get("train_split", "train"),
        "eval_split": split,
        "hyperparameters": _hyperparameters(recipe),
        "results_table": table if metrics else "No validation results were recorded.",
        "has_cutoffs": (model_dir / "kt_cutoffs.json").is_file(),
        "metric": info.get("metric", ""),
        "persona": recipe.get("persona", "none"),
        "runs_table": _runs_table(runs or []),
        "prompt_function": info.get("prompt_function", ""),
        "readout": info.get("readout", ""),
    }


def _runs_table(runs: list[EvalResults]) -> str:
    if not runs:
        return ""
    lines = ["| data | metric | mean | 95% CI | n |", "|---|---|---|---|---|"]
    for run in runs:
        name = Path(run.data.path if run.data.path is not None else "?").name
        for metric, m in run.metrics.items():
            if m.mean is not None:
                ci_text = f"[{m.ci95[0]:.4f}, {m.ci95[1]:.4f}]" if m.ci95 else "-"
                lines.append(f"| {name} | {metric} | {m.mean:.4f} | {ci_text} | {'' if m.n is None else m.n} |")
    return "\n".join(lines)


def _render(data: dict[str, Any]) -> str:
    jinja2 = require("jinja2", "publish")

    template = jinja2.Template((CARD_DIR / data["template"]).read_text(), keep_trailing_newline=True)
    return template.render(**data)


def render_card(model_dir: str | os.PathLike[str], repo_id: str, license: str = DEFAULT_LICENSE,
                runs: list[EvalResults] | None = None) -> str:
    return _render(card_data(model_dir, repo_id, license, runs=runs))


def read_runs(paths: list[str] | None) -> list[EvalResults]:
    """``results.json`` files of ``simhub eval`` runs (a run folder works too), read by the checked
    reader of run directories: a malformed file, or one of a ``schema_version`` this simhub does not
    read, is a DataError naming it."""
    return [read_eval_results(p) for p in paths or []]


def stage_upload(model_dir: str | os.PathLike[str], repo_id: str, target: str | os.PathLike[str],
                 license: str = DEFAULT_LICENSE, runs: list[EvalResults] | None = None) -> Path:
    """Write the exact upload folder for ``model_dir`` into ``target``."""
    model_dir, target = Path(model_dir), Path(target)
    if not (model_dir / "adapter_config.json").is_file():
        raise ConfigError(f"{model_dir}: no adapter_config.json; is this a `simhub train` output folder?")
    config = _read_json(model_dir / "training_config.json")
    data = card_data(model_dir, repo_id, license, config, runs=runs)
    card = _render(data)
    target.mkdir(parents=True, exist_ok=True)
    for name in PUBLISHED:
        if (model_dir / name).is_file():
            shutil.copy2(model_dir / name, target / name)
    adapter = _read_json(target / "adapter_config.json")
    adapter["base_model_name_or_path"] = data["base_model"]
    adapter.pop("revision", None)
    (target / "adapter_config.json").write_text(json.dumps(adapter, indent=2, sort_keys=True) + "\n")
    # Local paths in the published training config say nothing to others and can leak user names.
    resolved = config.get("resolved") or {}
    config["resolved"] = {k: v for k, v in resolved.items() if k == "base_model_hub_id"}
    config.pop("log_history", None)
    (target / "training_config.json").write_text(json.dumps(config, indent=2, default=str) + "\n")
    (target / "README.md").write_text(card)
    return target


def publish(model_dir: str | os.PathLike[str], repo_id: str, *, private: bool = False, revision: str | None = None,
            license: str = DEFAULT_LICENSE, dry_run_dir: str | None = None, results: list[str] | None = None) -> str:
    """Upload ``model_dir`` to ``repo_id``; returns the commit URL (or the staged folder on a dry run)."""
    if repo_id.count("/") != 1 or not all(repo_id.split("/")):
        raise ConfigError(f"repo_id {repo_id!r}: expected ORG/NAME", field="repo_id")
    runs = read_runs(results)
    if dry_run_dir:
        return str(stage_upload(model_dir, repo_id, dry_run_dir, license, runs))
    from huggingface_hub import HfApi

    api = HfApi()
    with tempfile.TemporaryDirectory(prefix="simhub-publish-") as tmp:
        folder = stage_upload(model_dir, repo_id, tmp, license, runs)
        api.create_repo(repo_id, private=private, exist_ok=True, repo_type="model")
        if revision:
            api.create_branch(repo_id, branch=revision, exist_ok=True)
        info = api.upload_folder(repo_id=repo_id, folder_path=str(folder), revision=revision,
                                 commit_message=f"simhub publish {Path(model_dir).name}",
                                 delete_patterns=["ref/*", "checkpoint-*/*"])
    return str(getattr(info, "commit_url", info))


def pull(repo_id: str, revision: str | None = None, output_dir: str | None = None) -> Path:
    """Download a published model (into the HF cache, or copied into ``output_dir``)."""
    from huggingface_hub import snapshot_download

    try:
        path = snapshot_download(repo_id, revision=revision, local_dir=output_dir)
    except Exception as exc:  # repo/revision not found, offline: the user's to fix
        raise ConfigError(f"pull {repo_id}: {type(exc).__name__}: {exc}", field="repo_id") from None
    return Path(path)
