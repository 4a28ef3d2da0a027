"""Profiles: named YAML files saying which model backs each metric and simulator.

``demo`` runs on a CPU with the tiny model kit and needs no network; ``paper-8b`` uses the
published 8B checkpoints. A profile is given by name (shipped in ``simhub/resources/profiles``)
or by path. Model references may be a folder, a Hub id, ``tiny:NAME`` for a model of the
tiny kit (built on first use under ``$SIMHUB_HOME/tiny``), or ``demo:NAME`` for a LoRA adapter
trained once on the sample corpus by the ``tiny-NAME`` recipe (under ``$SIMHUB_HOME/demo``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from simhub.backends.hf import ModelRef
from simhub.errors import ConfigError
from simhub.yamlio import load_yaml_mapping

PROFILE_DIR = Path(__file__).parent / "resources" / "profiles"
_TOP_KEYS = {"name", "description", "scoring", "simulators", "serving"}
_SCORING_KEYS = {"device", "backend", "batch_size", "chunk_size", "max_candidate_chars", "metrics"}
_METRIC_KEYS = {"acts", "judge", "knowledge", "cosine", "tutor_response"}


def simhub_home() -> Path:
    """Where simhub keeps built models and caches (``$SIMHUB_HOME``, default ``~/.cache/simhub``)."""
    return Path(os.environ.get("SIMHUB_HOME") or Path.home() / ".cache" / "simhub")


def available_profiles() -> list[str]:
    return sorted(p.stem for p in PROFILE_DIR.glob("*.yaml"))


def load_profile(name_or_path: str | os.PathLike[str]) -> dict[str, Any]:
    path = Path(name_or_path)
    if not path.is_file():
        path = PROFILE_DIR / f"{name_or_path}.yaml"
    if not path.is_file():
        raise ConfigError(f"--profile {name_or_path}: no such profile file; shipped profiles: {', '.join(available_profiles())}")
    data = load_yaml_mapping(path, "profile")
    unknown = set(data) - _TOP_KEYS
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) {', '.join(sorted(unknown))}; allowed: {', '.join(sorted(_TOP_KEYS))}")
    data.setdefault("name", path.stem)
    return data


#: Demo models: ``demo:NAME`` is trained once from ``training/recipes/tiny-NAME.yaml``.
DEMO_MODELS = ("student-sft", "tutor", "acts", "correctness", "kt")


def recipes_dir() -> Path:
    return Path(__file__).resolve().parents[1] / "training" / "recipes"


def build_demo_model(name: str) -> Path:
    """Train demo model ``name`` from its tiny recipe under ``$SIMHUB_HOME/demo`` unless it exists.

    Training writes to a temporary folder that is renamed when complete, so an interrupted build
    is redone rather than half-used.
    """
    target = simhub_home() / "demo" / name
    if (target / "adapter_config.json").is_file():
        return target
    if name not in DEMO_MODELS:
        raise ConfigError(f"demo:{name}: unknown demo model; known: {', '.join(DEMO_MODELS)}")
    recipe_path = recipes_dir() / f"tiny-{name}.yaml"
    if not recipe_path.is_file():
        raise ConfigError(f"demo:{name}: recipe {recipe_path.name} not found; run from a simhub checkout")
    import shutil
    import sys

    from simhub.training.config import load_recipe
    from simhub.training.train import train

    print(f"simhub: training demo model {name!r} from {recipe_path.name} (first use only)...", file=sys.stderr, flush=True)
    partial = target.with_name(f".{name}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    train(load_recipe(recipe_path), partial)
    for checkpoint in partial.glob("checkpoint-*"):
        shutil.rmtree(checkpoint, ignore_errors=True)
    partial.rename(target)
    return target


def resolve_model(spec: str) -> str:
    """Turn ``tiny:NAME`` into a folder of the tiny kit and ``demo:NAME`` into a trained demo model."""
    if spec.startswith("demo:"):
        return str(build_demo_model(spec.removeprefix("demo:")))
    if spec.startswith("tiny:"):
        from simhub.testing.tiny import build_kit

        paths = build_kit(simhub_home() / "tiny")
        name = spec.removeprefix("tiny:")
        if name not in paths:
            raise ConfigError(f"{spec}: the tiny kit has {', '.join(paths)}")
        return str(paths[name])
    return spec


def resolve_ref(ref: ModelRef) -> ModelRef:
    """``ref`` with ``tiny:``/``demo:`` model and adapter references turned into folders (built if
    missing). Called when a model is loaded, so a profile can be read without building anything."""
    return ModelRef(resolve_model(ref.model), resolve_model(ref.adapter) if ref.adapter else None,
                    ref.revision, ref.adapter_revision)


def model_ref(spec: Any, field: str) -> ModelRef:
    """The (unresolved) model reference of a profile entry; see :func:`resolve_ref`."""
    if isinstance(spec, str):
        return ModelRef(spec)
    if isinstance(spec, dict) and isinstance(spec.get("model"), str):
        allowed = {"model", "adapter", "revision", "adapter_revision", "cutoffs"}
        unknown = set(spec) - allowed
        if unknown:
            raise ConfigError(f"{field}: unknown key(s) {', '.join(sorted(unknown))}")
        return ModelRef(spec["model"], spec.get("adapter"), spec.get("revision"), spec.get("adapter_revision"))
    raise ConfigError(f"{field}: expected a model id/folder or a mapping with 'model'")


def scorer_config(profile: dict[str, Any]):
    """Build a :class:`~simhub.scoring.ScorerConfig` from a profile's ``scoring`` section."""
    from simhub.scoring import ScorerConfig

    scoring = profile.get("scoring") or {}
    unknown = set(scoring) - _SCORING_KEYS
    if unknown:
        raise ConfigError(f"scoring: unknown key(s) {', '.join(sorted(unknown))}")
    metrics = scoring.get("metrics") or {}
    unknown = set(metrics) - _METRIC_KEYS
    if unknown:
        raise ConfigError(f"scoring.metrics: unknown key(s) {', '.join(sorted(unknown))}; allowed: {', '.join(sorted(_METRIC_KEYS))}")
    config = ScorerConfig(cosine=None)
    for key in ("device", "backend", "batch_size", "chunk_size", "max_candidate_chars"):
        if key in scoring:
            setattr(config, key, scoring[key])
    if "acts" in metrics:
        config.acts = model_ref(metrics["acts"], "scoring.metrics.acts")
    if "tutor_response" in metrics:
        config.tutor_response = model_ref(metrics["tutor_response"], "scoring.metrics.tutor_response")
    if "knowledge" in metrics:
        spec = metrics["knowledge"]
        config.knowledge = model_ref(spec, "scoring.metrics.knowledge")
        if isinstance(spec, dict) and "cutoffs" in spec:
            config.knowledge_cutoffs = str(spec["cutoffs"])
    if "cosine" in metrics:
        spec = metrics["cosine"]
        config.cosine = spec["model"] if isinstance(spec, dict) else str(spec)
    if "judge" in metrics:
        config.judge = dict(metrics["judge"])
    return config
