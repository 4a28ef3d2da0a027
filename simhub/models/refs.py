"""Turning a concrete :class:`~simhub.config.ModelRef` into what a backend loads.

A reference is a folder or a Hub id, optionally with a LoRA adapter. A PEFT folder (or Hub repo)
given as ``model`` is an adapter too: its base is read from ``adapter_config.json``. References
still carrying ``tiny:``/``demo:``/``random-lora:`` must have gone through :mod:`simhub.provision`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from simhub.config import ModelRef
from simhub.errors import ConfigError, require


@dataclass(frozen=True)
class ResolvedRef:
    """A base model and an optional adapter, each with its revision."""

    base: str
    base_revision: str | None = None
    adapter: str | None = None
    adapter_revision: str | None = None
    #: The adapter trains whole modules (peft's ``modules_to_save``, e.g. a tiny classifier's
    #: ``lm_head``): it needs its own merged copy of the base, and vLLM's LoRA cannot serve it.
    full_modules: bool = False


def check_concrete(ref: ModelRef, field: str = "model") -> None:
    if ref.provisioned:
        raise ConfigError(f"{field}: {ref.model!r}{' + ' + ref.adapter if ref.adapter else ''} must be built first "
                          "(tiny:/demo:/random-lora: references are resolved by simhub.provision)", field=field)


def is_adapter(ref: str, revision: str | None = None) -> bool:
    if Path(ref).is_dir():
        return (Path(ref) / "adapter_config.json").is_file()
    from huggingface_hub import file_exists

    try:
        return file_exists(ref, "adapter_config.json", revision=revision)
    except Exception:  # offline or unknown: loading will report the real problem
        return False


def _peft_config(adapter: str, revision: str | None):
    """The adapter's peft config, or None when it cannot be read (loading it will say why)."""
    peft = require("peft")
    try:
        return peft.PeftConfig.from_pretrained(adapter, revision=revision)
    except Exception:
        return None


def _base_beside(adapter: str, base: str) -> str:
    """The base an adapter folder names: a relative path that is a folder from the adapter's own
    (as a demo build records its base, so that a copied ``$SIMHUB_HOME`` works from anywhere) is
    taken from there; anything else (a Hub id, an absolute path) as it is."""
    if base and not os.path.isabs(base) and os.path.isdir(adapter):
        beside = os.path.normpath(os.path.join(adapter, base))
        if os.path.isdir(beside):
            return beside
    return base


def resolve_peft(ref: ModelRef) -> ResolvedRef:
    """The base and adapter of ``ref``; an adapter-only ``model`` is served on the base it names.
    The adapter's config is read once, here."""
    check_concrete(ref)
    base, adapter, revision, adapter_revision = ref.model, ref.adapter, ref.revision, ref.adapter_revision
    cfg = None
    if adapter is None and is_adapter(base, revision):
        cfg = require("peft").PeftConfig.from_pretrained(base, revision=revision)
        adapter, adapter_revision = base, revision
        base, revision = _base_beside(adapter, cfg.base_model_name_or_path), None
    elif adapter is not None:
        cfg = _peft_config(adapter, adapter_revision)
    return ResolvedRef(base, revision, adapter, adapter_revision,
                       full_modules=bool(getattr(cfg, "modules_to_save", None)))


def local_path(repo: str, revision: str | None = None) -> str:
    """A folder holding ``repo``: itself if it is one, else a snapshot of the Hub repo at ``revision``
    (vLLM's LoRA requests take folders, not pinned Hub ids)."""
    if os.path.isdir(repo):
        return repo
    from huggingface_hub import snapshot_download

    try:
        return snapshot_download(repo, revision=revision)
    except Exception as exc:  # not found, offline: the user's to fix
        raise ConfigError(f"model {repo!r} could not be fetched ({type(exc).__name__})", field="model") from None


def load_tokenizer(path: str, revision: str | None = None, *, fallback: str | None = None,
                   fallback_revision: str | None = None):
    """The one tokenizer loader: ``path`` (an adapter folder may carry its own), else ``fallback``
    (its base). A tokenizer without a padding token pads with Llama 3's reserved pad token when it
    has one (keeping EOS a trained target), else with EOS."""
    transformers = require("transformers")
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(path, revision=revision)
    except (OSError, ValueError):
        if fallback is None:
            raise ConfigError(f"no tokenizer found for {path!r}", field="model") from None
        tokenizer = transformers.AutoTokenizer.from_pretrained(fallback, revision=fallback_revision)
    if tokenizer.pad_token_id is None:
        pad = "<|finetune_right_pad_id|>"
        tokenizer.pad_token = pad if pad in tokenizer.get_vocab() else tokenizer.eos_token
    return tokenizer
