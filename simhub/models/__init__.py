"""The language-model layer: one interface (:class:`LanguageModel`) over transformers, vLLM,
OpenAI-compatible endpoints and a dummy model for tests, and the process-wide model cache."""

from simhub.models.base import (
    DEFAULT_MAX_TOKENS,
    Generation,
    GenerationResult,
    LanguageModel,
    Prompt,
    Sampling,
    TokenLogprob,
)
from simhub.models.loader import LoadOptions, load_lm, loaded_models, unload_models

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "Generation",
    "GenerationResult",
    "LanguageModel",
    "LoadOptions",
    "Prompt",
    "Sampling",
    "TokenLogprob",
    "load_lm",
    "loaded_models",
    "unload_models",
]
