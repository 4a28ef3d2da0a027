"""Reading the YAML files users write (profiles, recipes), with errors that name the file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from simhub.errors import ConfigError


def load_yaml_mapping(path: Path, kind: str) -> dict[str, Any]:
    """The mapping in ``path``; invalid YAML or a non-mapping raises ConfigError naming the file."""
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML ({exc})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a {kind} must be a mapping")
    return data
