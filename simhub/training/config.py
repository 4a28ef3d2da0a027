"""Training recipes: one typed, documented dataclass read from YAML, with ``--set key=value`` overrides.

A recipe says *what* to train (``kind``, ``base_model``, ``data``) and *how* (the paper's
hyperparameters, docs/protocol.md §4). Every field carries its help text in ``metadata``; this docstring
groups them by concern.

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

Loading is two steps: :func:`load_recipe` parses and type-checks (no I/O beyond the YAML file,
so every shipped recipe parses in CI), :func:`check_resources` verifies that the data files and
the base model exist, and is called before any model is loaded.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from simhub.config import PROVISIONED_SCHEMES, RECIPE_DIR, load_yaml_mapping
from simhub.errors import ConfigError, UnknownNameError
from simhub.prompts import MAX_PROMPT_CHARS
from simhub.training.data import JUDGE_CANDIDATES, SAMPLE_DATA, check_data

#: The model kinds a recipe can train.
KINDS: tuple[str, ...] = ("student-sft", "tutor-sft", "acts", "correctness", "judge", "kt", "student-dpo",
                         "acts-embedding")


def _f(default: Any, help: str, **kw) -> Any:
    if isinstance(default, list | dict):
        return field(default_factory=lambda d=default: type(d)(d), metadata={"help": help}, **kw)
    return field(default=default, metadata={"help": help}, **kw)


@dataclass
class DPOSettings:
    """The offline RL (DPO) pipeline: generate → score → pairs → train (docs/protocol.md §4)."""

    sft_adapter: str | None = _f(None, "folder (or Hub id) of the SFT student adapter: sampling policy, "
                                       "initial policy and frozen reference")
    subsample: float = _f(0.2, "candidates are sampled on the first int(subsample·n) dialogues of the shuffled "
                               "training split, and validation pairs come from the first int(subsample·n) of "
                               "the validation split (the reference's data)")
    num_candidates: int = _f(4, "candidates sampled per student turn (before deduplication)")
    temperature: float = _f(1.0, "sampling temperature")
    top_p: float = _f(0.95, "nucleus sampling top-p")
    top_k: int = _f(0, "top-k sampling cut (0: none, as the reference's vLLM sampling)")
    max_new_tokens: int = _f(400, "maximum new tokens per candidate")
    generation_batch_size: int = _f(8, "prompts per generation batch")
    backend: str = _f("transformers", "generation backend: transformers or vllm")
    scoring_profile: str = _f("paper-8b", "simhub profile (name or path) whose metric models give the rewards")
    reward_metrics: list[str] | None = _f(None, "metrics averaged into the reward (default: every configured "  # noqa: RUF009
                                                "metric except rouge_l, as in the paper)")
    reward_norm_level: Literal["none", "group", "dataset"] = _f(
        "none", "normalise each reward metric before averaging: none (the paper), group (z-score over a turn's "
                "candidates; all equal: 0) or dataset (z-score over the split's candidates), as the reference's option")
    square_rewards: bool = _f(False, "square each (normalised) reward metric before averaging (the reference's "
                                     "option; a null stays null)")
    pair_strategy: Literal["max_delta", "each_wins"] = _f(
        "max_delta", "max_delta: every pair with a gap above epsilon, the widest max_pairs_per_turn kept (the paper); "
                     "each_wins: each candidate is chosen once, against a random one it beats by more than epsilon")
    epsilon: float = _f(0.1, "minimum reward gap for a preference pair")
    max_pairs_per_turn: int = _f(6, "keep at most this many widest-gap pairs per turn (max_delta)")
    skip_turns: int = _f(5, "turns with an index below this are not paired (first turns of each dialogue)")
    beta: float = _f(0.1, "DPO beta")
    max_prompt_length: int | None = _f(512, "keep the last this many prompt tokens (trl's truncation in the paper)")
    max_length: int | None = _f(1024, "prompt + completion at most this many tokens (trl's truncation in the paper)")


@dataclass
class TrainRecipe:
    """One training run: model, data and hyperparameters. See the module docstring for the groups."""

    kind: str = _f("student-sft", f"what to train: {', '.join(KINDS)}")
    base_model: str = _f("meta-llama/Llama-3.1-8B-Instruct", "base model: folder, Hub id, or tiny:NAME (built "
                                                                 "by the command line before training)")
    base_model_revision: str | None = _f(None, "Hub revision of the base model")
    base_model_hub_id: str | None = _f(None, "Hub id of the base model written into a published adapter "
                                             "(default: base_model when it is a Hub id)")
    data: str = _f(SAMPLE_DATA, "'sample:' (bundled sample corpus) or a folder with train/val/test .jsonl")
    train_split: str = _f("train", "split used for training")
    eval_split: str = _f("val", "split used for validation loss, checkpoint selection and evaluation")
    persona: Literal["none", "ocean", "profile"] = _f(
        "none", "what student prompts say about the student: none (the paper's fine-tuned students), the OCEAN "
                "persona, or the free-text profile (the Oracle's leak); the KT model reads the OCEAN persona")
    max_prompt_chars: int = _f(MAX_PROMPT_CHARS, "examples whose chat-templated prompt has this many "
                                                 "characters or more are left out; the classifiers leave out "
                                                 "only longer ones (FIDELITY.md, §2 rule 8)")
    max_train_dialogues: int | None = _f(None, "use at most this many training dialogues (smoke runs)")
    max_eval_dialogues: int | None = _f(None, "use at most this many validation dialogues (smoke runs)")
    # optimisation
    epochs: float = _f(3.0, "training epochs")
    max_steps: int = _f(-1, "stop after this many optimiser steps (-1: run all epochs)")
    learning_rate: float = _f(5e-5, "AdamW peak learning rate")
    lr_scheduler_type: str = _f("linear", "learning-rate schedule")
    warmup_ratio: float = _f(0.1, "fraction of steps used for linear warm-up")
    per_device_train_batch_size: int = _f(4, "examples per device per forward pass")
    per_device_eval_batch_size: int = _f(4, "evaluation examples per device per forward pass")
    effective_batch_size: int = _f(64, "examples per optimiser step over all devices; gradient "
                                       "accumulation = effective / (per-device batch × processes)")
    weight_decay: float = _f(0.01, "AdamW weight decay")
    max_grad_norm: float = _f(1.0, "gradient clipping norm")
    bf16: bool = _f(True, "bf16 weights and autocast (needs a GPU); false trains in fp32")
    gradient_checkpointing: bool = _f(True, "recompute activations to save memory")
    attn_implementation: str = _f("sdpa", "attention kernel; KT needs sdpa or eager (4-D masks)")
    eval_strategy: str = _f("epoch", "when to evaluate and save: epoch or steps")
    eval_steps: int | None = _f(None, "evaluate/save every N steps when eval_strategy is steps")
    logging_steps: int = _f(10, "log the training loss every N steps")
    save_total_limit: int | None = _f(2, "keep at most this many checkpoints (the best is always kept)")
    group_by_length: bool = _f(True, "batch examples of similar length (less padding)")
    dataloader_num_workers: int = _f(0, "data loader worker processes")
    seed: int = _f(42, "random seed (model init of LoRA, data order, subsampling)")
    report_to: list[str] = _f(["none"], "trackers for transformers (none, tensorboard, wandb, ...)")  # noqa: RUF009
    # LoRA
    lora_r: int = _f(32, "LoRA rank")
    lora_alpha: int = _f(64, "LoRA alpha")
    lora_dropout: float = _f(0.05, "LoRA dropout")
    use_rslora: bool = _f(True, "rank-stabilised LoRA scaling (alpha / sqrt(r))")
    lora_target_modules: str = _f("all-linear", "modules that get LoRA (peft syntax)")
    lora_modules_to_save: list[str] = _f([], "modules trained in full and saved with the adapter (peft's "  # noqa: RUF009
                                             "modules_to_save), e.g. [lm_head] for a tiny classifier; "
                                             "vLLM cannot serve such adapters")
    judge_candidates: int = _f(JUDGE_CANDIDATES, "judge only: other student turns put to the judge per real turn, "
                                  "besides the real turn itself")
    judge_tutor_candidates: int = _f(0, "judge only: tutor turns of other questions put to the judge per real turn "
                                        "as candidates, verdict na")
    judge_real_weight: float = _f(1.0, "judge only: how much more often a real turn is drawn as its own candidate "
                                       "than another turn's candidate (not 1: examples are drawn with replacement, "
                                       "weighted)")
    # evaluation extras
    kt_cutoffs: bool = _f(True, "KT only: write kt_cutoffs.json from the validation split after training")
    dpo: DPOSettings = field(default_factory=DPOSettings, metadata={"help": "offline RL settings (student-dpo)"})

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
        return dataclasses.asdict(self)


# ---------------------------------------------------------------------------------- parsing


def _hints(cls) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _fields(cls) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]


def _unknown(key: str, known: list[str], where: str) -> ConfigError:
    close = difflib.get_close_matches(key.rsplit(".", 1)[-1], known, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else f"; known keys: {', '.join(known)}"
    return ConfigError(f"{where}: unknown key {key!r}{hint}", field=key)


def _coerce(value: Any, tp: Any, key: str) -> Any:
    """Check (and widen int→float) ``value`` against the annotation ``tp``; errors name ``key``."""
    origin = typing.get_origin(tp)
    if origin is Literal:
        allowed = typing.get_args(tp)
        if value in allowed:
            return value
        hint = " (persona is no longer a boolean: none, ocean or profile)" if isinstance(value, bool) else ""
        raise ConfigError(f"{key}: {value!r} is not one of {', '.join(map(str, allowed))}{hint}")
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(value, arg, key)
            except ConfigError as exc:
                errors.append(str(exc))
        raise ConfigError(errors[0] if errors else f"{key}: invalid value {value!r}")
    if origin is list:
        (inner,) = typing.get_args(tp)
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if not isinstance(value, list):
            raise ConfigError(f"{key}: expected a list, got {value!r}")
        return [_coerce(v, inner, f"{key}[{i}]") for i, v in enumerate(value)]
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{key}: expected true or false, got {value!r}")
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise ConfigError(f"{key}: expected an integer, got {value!r}")
    if tp is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            # YAML 1.1 reads "3e-3" (no dot) as a string; Python's float() is what users expect.
            try:
                return float(value)
            except ValueError:
                pass
        raise ConfigError(f"{key}: expected a number, got {value!r}")
    if tp is str:
        if isinstance(value, str):
            return value
        raise ConfigError(f"{key}: expected a string, got {value!r}")
    raise ConfigError(f"{key}: unsupported type {tp}")


def _build(cls, data: dict[str, Any], where: str, prefix: str = ""):
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: {prefix.rstrip('.') or 'recipe'} must be a mapping")
    hints = _hints(cls)
    known = _fields(cls)
    kwargs = {}
    for key, value in data.items():
        if key not in hints:
            raise _unknown(prefix + str(key), known, where)
        tp = hints[key]
        if dataclasses.is_dataclass(tp):
            kwargs[key] = _build(tp, value or {}, where, f"{prefix}{key}.")
        else:
            kwargs[key] = _coerce(value, tp, f"{where}: {prefix}{key}")
    return cls(**kwargs)


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
    cls: Any = TrainRecipe
    target = data
    for i, part in enumerate(parts):
        hints = _hints(cls)
        if part not in hints:
            raise _unknown(key, _fields(cls), "--set")
        if i == len(parts) - 1:
            tp = hints[part]
            if dataclasses.is_dataclass(tp):
                raise ConfigError(f"--set {key}: is a section; set one of its keys ({', '.join(_fields(tp))})")
            # Strings stay strings even when YAML would read them as numbers (e.g. a revision "1234").
            if tp is str:
                value = raw
            elif tp == (str | None):
                value = None if raw.strip().lower() in ("null", "none", "~", "") else raw
            target[part] = value
        else:
            cls = hints[part]
            if not dataclasses.is_dataclass(cls):
                raise ConfigError(f"--set {key}: {part!r} is not a section")
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
    data = load_yaml_mapping(path, "recipe")
    for assignment in overrides:
        _set(data, assignment)
    recipe = _build(TrainRecipe, data, str(path))
    check_values(recipe, str(path))
    return recipe


def check_values(recipe: TrainRecipe, where: str = "recipe") -> None:
    """Value rules that need no I/O."""
    if recipe.kind not in KINDS:
        close = difflib.get_close_matches(recipe.kind, KINDS, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ConfigError(f"{where}: kind {recipe.kind!r} is not one of {', '.join(KINDS)}{hint}", field="kind")
    if recipe.eval_strategy not in ("epoch", "steps"):
        raise ConfigError(f"{where}: eval_strategy must be 'epoch' or 'steps', got {recipe.eval_strategy!r}", field="eval_strategy")
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
        if dpo.backend not in ("transformers", "vllm"):
            raise ConfigError(f"{where}: dpo.backend must be transformers or vllm, got {dpo.backend!r}", field="dpo.backend")
        if dpo.reward_metrics is not None:
            from simhub.metrics.registry import check_metric_names

            check_metric_names(dpo.reward_metrics, "dpo.reward_metrics")


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
    return resolved
