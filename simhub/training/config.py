"""Training recipes: one typed, documented msgspec struct read from YAML, with ``--set key=value`` overrides.

A recipe says *what* to train (``kind``, ``base_model``, ``data``) and *how* (the paper's
hyperparameters, docs/protocol.md §4). Every field carries its help text (``msgspec.Meta``
description); this docstring groups them by concern.

Model and data
    ``kind`` (one of :data:`KINDS`), ``base_model`` (folder, Hub id or ``tiny:NAME``),
    ``base_model_hub_id`` (the Hub id written into a published adapter), ``data`` (``sample:`` for
    the bundled sample corpus, or a folder of ``train.jsonl``/``val.jsonl``/``test.jsonl``),
    ``persona``, ``max_prompt_chars``, ``max_train_dialogues``/``max_eval_dialogues``.
Optimisation (defaults are the paper's, not transformers')
    AdamW, ``learning_rate`` 5e-5, linear schedule with ``warmup_ratio`` 0.1, ``effective_batch_size``
    64 (= per-device batch × gradient accumulation × processes; accumulation is derived),
    ``weight_decay`` 0.01, ``max_grad_norm`` 1.0, ``bf16``; best checkpoint by validation loss.
LoRA
    ``lora_r`` 32, ``lora_alpha`` 64, ``lora_dropout`` 0.05, ``use_rslora`` on
    ``lora_target_modules`` ``all-linear``.
DPO (``kind: student-dpo``, section ``dpo:``)
    the offline RL pipeline of docs/protocol.md §4, see :class:`DPOSettings`.
GRPO (``kind: student-grpo``, section ``grpo:``)
    online RL on the realism reward (beyond the paper), see :class:`GRPOSettings`.

Loading is two steps: :func:`load_recipe` parses and type-checks (no I/O beyond the YAML file,
so every shipped recipe parses in CI), :func:`check_resources` verifies that the data files and
the base model exist, and is called before any model is loaded. Parsing is the profiles' checker,
:func:`simhub.config.convert`: an unknown key or a value outside a choice is an error naming the
file and the key path with a did-you-mean, a wrong type names the key path; the rules between
fields are :func:`check_values`.
"""

from __future__ import annotations

import os
import typing
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec
import yaml

from simhub.config import (
    PROVISIONED_SCHEMES,
    RECIPE_DIR,
    Backend,
    Persona,
    convert,
    load_yaml_mapping,
    struct_fields,
    unknown_key,
)
from simhub.errors import ConfigError, UnknownNameError
from simhub.prompts import MAX_PROMPT_CHARS
from simhub.training.data import JUDGE_CANDIDATES, SAMPLE_DATA, check_data

Kind = Literal["student-sft", "tutor-sft", "acts", "correctness", "judge", "kt", "student-dpo", "student-grpo",
               "acts-embedding", "correctness-embedding"]
#: The model kinds a recipe can train.
KINDS: tuple[str, ...] = typing.get_args(Kind)


def _help(text: str) -> msgspec.Meta:
    return msgspec.Meta(description=text)


class _Recipe(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Base of the recipe structs: keyword-only, unknown keys rejected, mutable (``--set`` and tests)."""


class DPOSettings(_Recipe, kw_only=True, forbid_unknown_fields=True):
    """The offline RL (DPO) pipeline: generate → score → pairs → train (docs/protocol.md §4)."""

    sft_adapter: Annotated[str | None, _help(
        "folder (or Hub id) of the SFT student adapter: sampling policy, initial policy and frozen reference")] = None
    subsample: Annotated[float, _help(
        "candidates are sampled on the first int(subsample·n) dialogues of the shuffled training split, and "
        "validation pairs come from the first int(subsample·n) of the validation split (the reference's data)")] = 0.2
    num_candidates: Annotated[int, _help("candidates sampled per student turn (before deduplication)")] = 4
    temperature: Annotated[float, _help("sampling temperature")] = 1.0
    top_p: Annotated[float, _help("nucleus sampling top-p")] = 0.95
    top_k: Annotated[int, _help("top-k sampling cut (0: none, as the reference's vLLM sampling)")] = 0
    max_new_tokens: Annotated[int, _help("maximum new tokens per candidate")] = 400
    generation_batch_size: Annotated[int, _help("prompts per generation batch")] = 8
    backend: Annotated[Backend, _help("generation backend: transformers or vllm")] = "transformers"
    scoring_profile: Annotated[str, _help(
        "simhub profile (name or path) whose metric models give the rewards")] = "paper-8b"
    reward_metrics: Annotated[list[str] | None, _help(
        "metrics averaged into the reward (default: every configured metric except rouge_l, as in the paper)")] = None
    reward_norm_level: Annotated[Literal["none", "group", "dataset"], _help(
        "normalise each reward metric before averaging: none (the paper), group (z-score over a turn's "
        "candidates; all equal: 0) or dataset (z-score over the split's candidates), as the reference's option")] = "none"
    square_rewards: Annotated[bool, _help(
        "square each (normalised) reward metric before averaging (the reference's option; a null stays null)")] = False
    pair_strategy: Annotated[Literal["max_delta", "each_wins"], _help(
        "max_delta: every pair with a gap above epsilon, the widest max_pairs_per_turn kept (the paper); "
        "each_wins: each candidate is chosen once, against a random one it beats by more than epsilon")] = "max_delta"
    epsilon: Annotated[float, _help("minimum reward gap for a preference pair")] = 0.1
    max_pairs_per_turn: Annotated[int, _help("keep at most this many widest-gap pairs per turn (max_delta)")] = 6
    skip_turns: Annotated[int, _help(
        "turns with an index below this are not paired (first turns of each dialogue)")] = 5
    beta: Annotated[float, _help("DPO beta")] = 0.1
    max_prompt_length: Annotated[int | None, _help(
        "keep the last this many prompt tokens (trl's truncation in the paper)")] = 512
    max_length: Annotated[int | None, _help(
        "prompt + completion at most this many tokens (trl's truncation in the paper)")] = 1024


class GRPOSettings(_Recipe, kw_only=True, forbid_unknown_fields=True):
    """Online RL on the realism reward (``simhub grpo``, docs/guides/rewards.md): sample a group of next
    student turns from the current policy, score them against the real turn, update (trl's GRPO)."""

    sft_adapter: Annotated[str | None, _help(
        "folder (or Hub id) of the SFT student adapter: the initial policy, trained further, and the frozen "
        "reference of the KL term")] = None
    subsample: Annotated[float, _help(
        "prompts come from the student turns of the first int(subsample·n) training dialogues")] = 0.2
    num_generations: Annotated[int, _help("completions sampled per prompt (the group)")] = 8
    max_new_tokens: Annotated[int, _help("maximum new tokens per completion")] = 128
    temperature: Annotated[float, _help("sampling temperature")] = 1.0
    top_p: Annotated[float, _help("nucleus sampling top-p")] = 1.0
    top_k: Annotated[int, _help("top-k sampling cut (0: none)")] = 0
    beta: Annotated[float, _help("weight of the KL term to the reference (the SFT policy)")] = 0.04
    use_vllm: Annotated[bool, _help("generate with a colocated vLLM engine (a GPU) instead of transformers")] = False
    scoring_profile: Annotated[str, _help(
        "simhub profile (name or path) whose metric models give the reward")] = "paper-8b"
    reward_metrics: Annotated[list[str] | None, _help(
        "metrics of the reward (default: every configured metric except rouge_l, as the paper's DPO reward)")] = None
    reward_weights: Annotated[dict[str, float] | None, _help(
        "a weight per reward metric (default: equal); the reward is their weighted mean")] = None
    held_out_metrics: Annotated[list[str] | None, _help(
        "metrics logged at every step but not rewarded, to catch reward hacking (default: the configured ones the "
        "reward leaves out)")] = None
    save_steps: Annotated[int, _help("save a checkpoint every this many steps (resume after a kill)")] = 50


class TrainRecipe(_Recipe, kw_only=True, forbid_unknown_fields=True):
    """One training run: model, data and hyperparameters. See the module docstring for the groups."""

    kind: Annotated[Kind, _help(f"what to train: {', '.join(KINDS)}")] = "student-sft"
    base_model: Annotated[str, _help(
        "base model: folder, Hub id, or tiny:NAME (built by the command line before training)")] = (
        "meta-llama/Llama-3.1-8B-Instruct")
    base_model_revision: Annotated[str | None, _help("Hub revision of the base model")] = None
    base_model_hub_id: Annotated[str | None, _help(
        "Hub id of the base model written into a published adapter (default: base_model when it is a Hub id)")] = None
    data: Annotated[str, _help("'sample:' (bundled sample corpus) or a folder with train/val/test .jsonl")] = SAMPLE_DATA
    train_split: Annotated[str, _help("split used for training")] = "train"
    eval_split: Annotated[str, _help("split used for validation loss, checkpoint selection and evaluation")] = "val"
    persona: Annotated[Persona, _help(
        "what student prompts say about the student: none (the paper's fine-tuned students), the OCEAN "
        "persona, or the free-text profile (the Oracle's leak); the KT model reads the OCEAN persona")] = "none"
    max_prompt_chars: Annotated[int, _help(
        "examples whose chat-templated prompt has this many characters or more are left out; the classifiers "
        "leave out only longer ones (FIDELITY.md, §2 rule 8)")] = MAX_PROMPT_CHARS
    max_train_dialogues: Annotated[int | None, _help("use at most this many training dialogues (smoke runs)")] = None
    max_eval_dialogues: Annotated[int | None, _help("use at most this many validation dialogues (smoke runs)")] = None
    # optimisation
    epochs: Annotated[float, _help("training epochs")] = 3.0
    max_steps: Annotated[int, _help("stop after this many optimiser steps (-1: run all epochs)")] = -1
    learning_rate: Annotated[float, _help("AdamW peak learning rate")] = 5e-5
    lr_scheduler_type: Annotated[str, _help("learning-rate schedule")] = "linear"
    warmup_ratio: Annotated[float, _help("fraction of steps used for linear warm-up")] = 0.1
    per_device_train_batch_size: Annotated[int, _help("examples per device per forward pass")] = 4
    per_device_eval_batch_size: Annotated[int, _help("evaluation examples per device per forward pass")] = 4
    effective_batch_size: Annotated[int, _help(
        "examples per optimiser step over all devices; gradient accumulation = effective / (per-device batch × "
        "processes)")] = 64
    weight_decay: Annotated[float, _help("AdamW weight decay")] = 0.01
    max_grad_norm: Annotated[float, _help("gradient clipping norm")] = 1.0
    bf16: Annotated[bool, _help("bf16 weights and autocast (needs a GPU); false trains in fp32")] = True
    gradient_checkpointing: Annotated[bool, _help("recompute activations to save memory")] = True
    attn_implementation: Annotated[str, _help("attention kernel; KT needs sdpa or eager (4-D masks)")] = "sdpa"
    eval_strategy: Annotated[Literal["epoch", "steps"], _help("when to evaluate and save: epoch or steps")] = "epoch"
    eval_steps: Annotated[int | None, _help("evaluate/save every N steps when eval_strategy is steps")] = None
    logging_steps: Annotated[int, _help("log the training loss every N steps")] = 10
    save_total_limit: Annotated[int | None, _help(
        "keep at most this many checkpoints (the best is always kept)")] = 2
    group_by_length: Annotated[bool, _help("batch examples of similar length (less padding)")] = True
    dataloader_num_workers: Annotated[int, _help("data loader worker processes")] = 0
    seed: Annotated[int, _help("random seed (model init of LoRA, data order, subsampling)")] = 42
    report_to: Annotated[list[str], _help("trackers for transformers (none, tensorboard, wandb, ...)")] = (
        msgspec.field(default_factory=lambda: ["none"]))
    # LoRA
    lora_r: Annotated[int, _help("LoRA rank")] = 32
    lora_alpha: Annotated[int, _help("LoRA alpha")] = 64
    lora_dropout: Annotated[float, _help("LoRA dropout")] = 0.05
    use_rslora: Annotated[bool, _help("rank-stabilised LoRA scaling (alpha / sqrt(r))")] = True
    lora_target_modules: Annotated[str, _help("modules that get LoRA (peft syntax)")] = "all-linear"
    lora_modules_to_save: Annotated[list[str], _help(
        "modules trained in full and saved with the adapter (peft's modules_to_save), e.g. [lm_head] for a tiny "
        "classifier; vLLM cannot serve such adapters")] = msgspec.field(default_factory=list)
    judge_candidates: Annotated[int, _help(
        "judge only: other student turns put to the judge per real turn, besides the real turn itself")] = (
        JUDGE_CANDIDATES)
    judge_tutor_candidates: Annotated[int, _help(
        "judge only: tutor turns of other questions put to the judge per real turn as candidates, verdict na")] = 0
    judge_real_weight: Annotated[float, _help(
        "judge only: how much more often a real turn is drawn as its own candidate than another turn's candidate "
        "(not 1: examples are drawn with replacement, weighted)")] = 1.0
    # evaluation extras
    kt_cutoffs: Annotated[bool, _help("KT only: write kt_cutoffs.json from the validation split after training")] = True
    dpo: Annotated[DPOSettings, _help("offline RL settings (student-dpo)")] = msgspec.field(default_factory=DPOSettings)
    grpo: Annotated[GRPOSettings, _help("online RL settings (student-grpo)")] = msgspec.field(
        default_factory=GRPOSettings)

    def gradient_accumulation_steps(self, world_size: int | None = None) -> int:
        world = world_size or int(os.environ.get("WORLD_SIZE", "1"))
        per_step = self.per_device_train_batch_size * world
        if self.effective_batch_size % per_step:
            raise ConfigError(
                f"effective_batch_size: {self.effective_batch_size} is not a multiple of "
                f"per_device_train_batch_size × processes = {self.per_device_train_batch_size} × {world}; "
                "change one of them with --set"
            )
        return self.effective_batch_size // per_step

    def to_dict(self) -> dict[str, Any]:
        return msgspec.to_builtins(self)


# ---------------------------------------------------------------------------------- parsing


def _set(data: dict[str, Any], assignment: str) -> None:
    """Apply one ``key=value`` (dotted keys reach nested sections; the value is read as YAML)."""
    if "=" not in assignment:
        raise ConfigError(f"--set {assignment!r}: expected key=value")
    key, raw = assignment.split("=", 1)
    key = key.strip()
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    parts = key.split(".")
    struct: Any = TrainRecipe
    target = data
    for i, part in enumerate(parts):
        hints = typing.get_type_hints(struct)
        if part not in hints:
            raise unknown_key("--set", ".".join(parts[:i + 1]), struct_fields(struct))
        tp = hints[part]
        is_section = isinstance(tp, type) and issubclass(tp, msgspec.Struct)
        if i == len(parts) - 1:
            if is_section:
                raise ConfigError(f"--set {key}: is a section; set one of its keys ({', '.join(struct_fields(tp))})",
                                  field=key)
            # Strings stay strings even when YAML would read them as numbers (e.g. a revision "1234").
            if tp is str:
                value = raw
            elif tp == (str | None):
                value = None if raw.strip().lower() in ("null", "none", "~", "") else raw
            target[part] = value
        else:
            if not is_section:
                raise ConfigError(f"--set {key}: {part!r} is not a section", field=key)
            struct = tp
            if not isinstance(target.get(part), dict):
                target[part] = {}
            target = target[part]


def available_recipes() -> list[str]:
    return sorted(p.stem for p in RECIPE_DIR.glob("*.yaml"))


def recipe_path(name_or_path: str | os.PathLike[str]) -> Path:
    """A recipe file by path, or a shipped recipe by name (``tiny-student-sft``, ``kt-8b``...)."""
    path = Path(name_or_path)
    if path.is_file():
        return path
    shipped = RECIPE_DIR / f"{str(name_or_path).removesuffix('.yaml')}.yaml"
    if shipped.is_file():
        return shipped
    raise UnknownNameError("recipe", str(name_or_path), available_recipes(), field="recipe")


def load_recipe(path: str | os.PathLike[str], overrides: list[str] | tuple[str, ...] = ()) -> TrainRecipe:
    """Parse a recipe (a path or a shipped name) and apply ``key=value`` overrides; no file but the
    recipe is read."""
    path = recipe_path(path)
    where = str(path)
    data = load_yaml_mapping(path, "recipe")
    for assignment in overrides:
        _set(data, assignment)
    if isinstance(data.get("persona"), bool):
        raise ConfigError(f"{where}: persona: {data['persona']!r} is not one of {', '.join(typing.get_args(Persona))} "
                          "(persona is no longer a boolean)", field="persona")
    recipe = convert(data, TrainRecipe, where)
    check_values(recipe, where)
    return recipe


def check_values(recipe: TrainRecipe, where: str = "recipe") -> None:
    """Value rules that need no I/O (the types and choices are the struct's)."""
    if recipe.eval_strategy == "steps" and not recipe.eval_steps:
        raise ConfigError(f"{where}: eval_strategy 'steps' needs eval_steps", field="eval_steps")
    for name in ("per_device_train_batch_size", "per_device_eval_batch_size", "effective_batch_size", "lora_r"):
        if getattr(recipe, name) < 1:
            raise ConfigError(f"{where}: {name} must be at least 1", field=name)
    for name in ("judge_candidates", "judge_tutor_candidates"):
        if getattr(recipe, name) < 0:
            raise ConfigError(f"{where}: {name} must be at least 0", field=name)
    if not recipe.judge_real_weight > 0:
        raise ConfigError(f"{where}: judge_real_weight must be positive, got {recipe.judge_real_weight}",
                          field="judge_real_weight")
    if not 0 <= recipe.warmup_ratio < 1:
        raise ConfigError(f"{where}: warmup_ratio must be in [0, 1)", field="warmup_ratio")
    if recipe.kind == "kt" and recipe.attn_implementation.startswith("flash"):
        raise ConfigError(f"{where}: attn_implementation {recipe.attn_implementation!r} cannot take the 4-D "
                          "packed-KC mask of the KT model; use sdpa or eager", field="attn_implementation")
    dpo = recipe.dpo
    if recipe.kind == "student-dpo":
        if not dpo.sft_adapter:
            raise ConfigError(f"{where}: dpo.sft_adapter is required for kind student-dpo", field="dpo.sft_adapter")
        if not 0 < dpo.subsample <= 1:
            raise ConfigError(f"{where}: dpo.subsample must be in (0, 1]", field="dpo.subsample")
        if dpo.reward_metrics is not None:
            from simhub.metrics.registry import check_metric_names

            check_metric_names(dpo.reward_metrics, "dpo.reward_metrics")
    if recipe.kind == "student-grpo":
        _check_grpo(recipe, where)


def _check_grpo(recipe: TrainRecipe, where: str) -> None:
    from simhub.metrics.registry import check_metric_names

    grpo = recipe.grpo
    if not grpo.sft_adapter:
        raise ConfigError(f"{where}: grpo.sft_adapter is required for kind student-grpo", field="grpo.sft_adapter")
    if not 0 < grpo.subsample <= 1:
        raise ConfigError(f"{where}: grpo.subsample must be in (0, 1]", field="grpo.subsample")
    if grpo.num_generations < 2:
        raise ConfigError(f"{where}: grpo.num_generations must be at least 2 (a group compares its completions)",
                          field="grpo.num_generations")
    for name in ("max_new_tokens", "save_steps"):
        if getattr(grpo, name) < 1:
            raise ConfigError(f"{where}: grpo.{name} must be at least 1", field=f"grpo.{name}")
    if grpo.beta < 0:
        raise ConfigError(f"{where}: grpo.beta must be at least 0", field="grpo.beta")
    per_step = recipe.per_device_train_batch_size * recipe.gradient_accumulation_steps()
    if per_step % grpo.num_generations:
        raise ConfigError(f"{where}: the completions of a step ({per_step} = per_device_train_batch_size × gradient "
                          f"accumulation) must be whole groups of grpo.num_generations ({grpo.num_generations})",
                          field="grpo.num_generations")
    if grpo.reward_metrics is not None:
        check_metric_names(grpo.reward_metrics, "grpo.reward_metrics")
    if grpo.held_out_metrics:  # (an empty list holds nothing out)
        check_metric_names(grpo.held_out_metrics, "grpo.held_out_metrics")


# ---------------------------------------------------------------------------------- resources


def _looks_like_path(spec: str) -> bool:
    return spec.startswith((".", "/", "~")) or os.sep in spec.strip("/").split("/", 1)[-1] or Path(spec).exists()


def check_model(spec: str, field_name: str, revision: str | None = None, adapter: bool = False) -> str:
    """Check that ``spec`` (a folder or Hub id) exists, or raise ConfigError naming ``field_name``."""
    if spec.startswith(PROVISIONED_SCHEMES):
        raise ConfigError(f"{field_name}: {spec!r} must be built first (the simhub command line builds tiny:/demo: "
                          "models; in Python call simhub.provision.resolve_recipe)", field=field_name)
    resolved = spec
    marker = "adapter_config.json" if adapter else "config.json"
    path = Path(resolved).expanduser()
    if path.is_dir():
        if not (path / marker).is_file():
            raise ConfigError(f"{field_name}: folder {spec!r} has no {marker}")
        return str(path)
    if _looks_like_path(spec) or resolved.count("/") != 1:
        raise ConfigError(f"{field_name}: {spec!r} is neither a model folder nor a Hub id (ORG/NAME)")
    from huggingface_hub import file_exists, try_to_load_from_cache

    cached = try_to_load_from_cache(resolved, marker, revision=revision)
    if isinstance(cached, str):
        return resolved
    try:
        found = file_exists(resolved, marker, revision=revision)
    except Exception as exc:  # offline, DNS, gated: the run could not load it either
        raise ConfigError(
            f"{field_name}: {spec!r} is not in the local Hugging Face cache and the Hub could not confirm it "
            f"({type(exc).__name__}); download it first or pass a local folder"
        ) from None
    if not found:
        raise ConfigError(f"{field_name}: model {spec!r} does not exist on the Hub (no {marker})")
    return resolved


def check_resources(recipe: TrainRecipe) -> dict[str, str]:
    """Verify data files and models exist, before anything is loaded; returns resolved model paths."""
    check_data(recipe.data, [recipe.train_split, recipe.eval_split])
    resolved = {"base_model": check_model(recipe.base_model, "base_model", recipe.base_model_revision)}
    if recipe.kind == "student-dpo":
        resolved["sft_adapter"] = check_model(recipe.dpo.sft_adapter or "", "dpo.sft_adapter", adapter=True)
    if recipe.kind == "student-grpo":
        resolved["sft_adapter"] = check_model(recipe.grpo.sft_adapter or "", "grpo.sft_adapter", adapter=True)
    return resolved
