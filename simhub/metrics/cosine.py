"""``cosine``: cosine similarity of sentence embeddings of the real and simulated turns.

Both sides are encoded the same way (no query/document prompt) and normalised, so the score is a
dot product. The default model is the packaged all-MiniLM-L6-v2, which works offline; the paper's
profile uses Qwen3-Embedding-8B.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from simhub.config import EmbedderConfig
from simhub.metrics.base import Metric, MetricResult, Output, ScoreItem
from simhub.models.embeddings import Embedder, load_embedder


def cosine_similarities(references: np.ndarray, candidates: np.ndarray) -> list[float]:
    """Row by row, the dot product of two arrays of normalised embeddings, clipped to [-1, 1].

    >>> cosine_similarities(np.array([[1.0, 0.0], [0.6, 0.8]]), np.array([[0.0, 1.0], [0.6, 0.8]]))
    [0.0, 1.0]
    """
    return [float(v) for v in np.clip(np.einsum("ij,ij->i", references, candidates), -1.0, 1.0)]


class Cosine(Metric):
    """``cosine``: cosine similarity of the embeddings of the real and the simulated turn, never null.

    The embedder normalises its vectors, so the similarity is a dot product
    (:func:`cosine_similarities`):

    >>> cosine_similarities(np.array([[0.8, 0.6]]), np.array([[0.6, 0.8]]))
    [0.96]
    """

    outputs = (Output("cosine", "cosine similarity of sentence embeddings", "never", low=-1.0, label="Cosine"),)
    config_key = "cosine"
    needs_dialogue = False
    config: EmbedderConfig

    def describe(self) -> dict[str, Any]:
        return {"base_model": self.config.model}

    def load(self) -> Embedder:
        return load_embedder(self.config.model, self.context.load.device, self.config.batch_size)

    def similarities(self, references: Sequence[str], candidates: Sequence[str]) -> list[float]:
        embedder = self.load()
        vectors = embedder.encode([*references, *candidates])
        return cosine_similarities(vectors[: len(references)], vectors[len(references) :])

    def score(self, items: Sequence[ScoreItem]) -> list[MetricResult]:
        values = self.similarities([it.real.content for it in items], [it.candidate for it in items])
        return [MetricResult({"cosine": v}) for v in values]
