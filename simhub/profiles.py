"""Profiles: named YAML files saying which model backs each metric and simulator.

``demo`` runs on a CPU with the tiny model kit and needs no network; ``paper-8b`` uses the
published 8B checkpoints. A profile is given by name (shipped in ``simhub/resources/profiles``)
or by path. Model references may be a folder, a Hub id, or ``tiny:NAME`` for a model of the
tiny kit, which is built on first use under ``$SIMHUB_HOME/tiny``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from simhub.backends.hf import ModelRef
from simhub.errors import ConfigError

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
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML ({exc})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a profile must be a mapping")
    unknown = set(data) - _TOP_KEYS
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) {', '.join(sorted(unknown))}; allowed: {', '.join(sorted(_TOP_KEYS))}")
    data.setdefault("name", path.stem)
    return data


def resolve_model(spec: str) -> str:
    """Turn ``tiny:NAME`` into a folder of the tiny kit (building the kit if needed)."""
    if spec.startswith("tiny:"):
        from simhub.testing.tiny import build_kit

        paths = build_kit(simhub_home() / "tiny")
        name = spec.removeprefix("tiny:")
        if name not in paths:
            raise ConfigError(f"{spec}: the tiny kit has {', '.join(paths)}")
        return str(paths[name])
    return spec


def model_ref(spec: Any, field: str) -> ModelRef:
    if isinstance(spec, str):
        return ModelRef(resolve_model(spec))
    if isinstance(spec, dict) and isinstance(spec.get("model"), str):
        allowed = {"model", "adapter", "revision", "adapter_revision", "cutoffs"}
        unknown = set(spec) - allowed
        if unknown:
            raise ConfigError(f"{field}: unknown key(s) {', '.join(sorted(unknown))}")
        adapter = spec.get("adapter")
        return ModelRef(resolve_model(spec["model"]), resolve_model(adapter) if adapter else None,
                        spec.get("revision"), spec.get("adapter_revision"))
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
        judge = dict(metrics["judge"])
        if judge.get("kind", "local") == "local" and "model" in judge:
            judge["model"] = resolve_model(judge["model"])
        config.judge = judge
    return config
