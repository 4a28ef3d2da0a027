"""A label classifier on sentence embeddings: multinomial logistic regression over an embedder's vectors.

The demo's act classifier is one (``kind: acts-embedding``): on the sample corpus a MiniLM
embedding of the student turn and a linear layer label the real test turns' acts better than the
fine-tuned tiny Llama, and train in seconds instead of minutes. Its correctness labeller for the
dialogue-level statistics is one too (``kind: correctness-embedding``). The folder holds one JSON
file, ``classifier.json``: the embedder's name, the labels, the weights and the bias, what the
classifier reads (``input``) and how it was trained. Prediction is ``argmax(W·x + b)`` over the
features ``x`` of :data:`INPUTS` (numpy only; scikit-learn is needed to train, not to predict):

* ``turn``: the normalised embedding of the student turn;
* ``turn+answer+previous``: the turn's embedding ``t``, its elementwise product with the embedding
  ``a`` of the question's answer key (the correct option's text and the start of the solution),
  the embedding of the turn before it, and ``t·a``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from simhub.errors import DataError

CLASSIFIER_FILE = "classifier.json"
CLASSIFIER_KIND = "simhub-embedding-classifier"
CLASSIFIER_VERSION = 1
#: What a classifier can read (its ``input``).
INPUTS = ("turn", "turn+answer+previous")


def answer_key_text(question) -> str:
    """A question's answer key as one text: the correct option's text, then the solution's start."""
    import re

    option = question.correct_option
    match = re.search(rf"Answer {option} Text:\s*(.*)", question.text) if option else None
    return ((match.group(1).strip() if match else "") + " " + (question.solution or "")[:200]).strip()


def features(kind: str, embed, turns: Sequence[str], answers: Sequence[str] = (), previous: Sequence[str] = ()
             ) -> np.ndarray:
    """The feature rows of ``kind`` (one of :data:`INPUTS`) for these turns; ``embed`` maps texts to
    normalised embedding rows."""
    t = np.asarray(embed(list(turns)), dtype=np.float64)
    if kind == "turn":
        return t
    a = np.asarray(embed(list(answers)), dtype=np.float64)
    p = np.asarray(embed(list(previous)), dtype=np.float64)
    return np.hstack([t, t * a, p, (t * a).sum(axis=1, keepdims=True)])


@dataclass
class EmbeddingClassifier:
    """Labels texts from their embeddings: ``labels[argmax(weights @ e + bias)]``.

    >>> clf = EmbeddingClassifier("minilm", ["Acknowledge", "Math Answer"], [[1.0, 0.0], [0.0, 1.0]], [0.0, 0.1])
    >>> clf.predict_vectors(np.array([[0.9, 0.2], [0.1, 0.1]]))
    ['Acknowledge', 'Math Answer']
    """

    embedder: str
    labels: list[str]
    weights: np.ndarray  # (labels, dim)
    bias: np.ndarray  # (labels,)
    #: What is embedded: ``turn`` (the student turn's text alone).
    input: str = "turn"
    info: dict[str, Any] = field(default_factory=dict)
    #: sha256 of the file it was read from ("" when built in memory): part of cache keys of its labels.
    digest: str = ""

    def __post_init__(self) -> None:
        if self.input not in INPUTS:
            raise DataError(f"embedding classifier: input {self.input!r} is not one of {', '.join(INPUTS)}",
                            field="input")
        self.weights = np.asarray(self.weights, dtype=np.float64)
        self.bias = np.asarray(self.bias, dtype=np.float64)
        if self.weights.shape != (len(self.labels), self.weights.shape[-1]) or self.bias.shape != (len(self.labels),):
            raise DataError(f"embedding classifier: weights {self.weights.shape} and bias {self.bias.shape} do not "
                            f"fit {len(self.labels)} labels", field="weights")

    def scores(self, vectors: np.ndarray) -> np.ndarray:
        """The logit of each label for each embedding row."""
        return np.asarray(vectors, dtype=np.float64) @ self.weights.T + self.bias

    def predict_vectors(self, vectors: np.ndarray) -> list[str]:
        if len(vectors) == 0:
            return []
        return [self.labels[i] for i in np.argmax(self.scores(vectors), axis=1)]

    def predict(self, texts: Sequence[str], *, device: str | None = None) -> list[str]:
        """The label of each text (``input: turn``), embedded by the classifier's own embedder (loaded
        once per process)."""
        if not texts:
            return []
        from simhub.models.embeddings import load_embedder

        return self.predict_vectors(load_embedder(self.embedder, device).encode(list(texts)))

    def predict_turns(self, items: Sequence[tuple[Sequence, str, Any]], *, device: str | None = None) -> list[str]:
        """The label of each ``(history, student text, dialogue)``, with the features of its ``input``."""
        if not items:
            return []
        if self.input == "turn":
            return self.predict([text for _, text, _ in items], device=device)
        from simhub.models.embeddings import load_embedder

        embed = load_embedder(self.embedder, device).encode
        x = features(self.input, embed, [text for _, text, _ in items],
                     [answer_key_text(d.question) for _, _, d in items],
                     [h[-1].content if h else "" for h, _, _ in items])
        return self.predict_vectors(x)

    def save(self, folder: str | os.PathLike[str]) -> Path:
        from simhub.schema import atomic_write_bytes

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        doc = {"kind": CLASSIFIER_KIND, "schema_version": CLASSIFIER_VERSION, "embedder": self.embedder,
               "input": self.input, "labels": list(self.labels), "weights": self.weights.tolist(),
               "bias": self.bias.tolist(), "info": self.info}
        path = folder / CLASSIFIER_FILE
        atomic_write_bytes(path, json.dumps(doc, indent=1).encode())
        return path


def is_embedding_classifier(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a folder holding an embedding classifier (rather than a language model)."""
    return (Path(path) / CLASSIFIER_FILE).is_file()


def classifier_at(ref) -> EmbeddingClassifier | None:
    """The embedding classifier a model reference (:class:`simhub.config.ModelRef`) names, or None
    when it names a language model: a folder holding ``classifier.json``, without an adapter. Read
    once per process and file version."""
    if ref.adapter is not None or not is_embedding_classifier(ref.model):
        return None
    file = Path(ref.model) / CLASSIFIER_FILE
    return _read_cached(str(file.parent), file.stat().st_mtime_ns)


@functools.lru_cache(maxsize=8)
def _read_cached(folder: str, mtime_ns: int) -> EmbeddingClassifier:
    return load_embedding_classifier(folder)


def load_embedding_classifier(path: str | os.PathLike[str]) -> EmbeddingClassifier:
    """The classifier in folder ``path``; a DataError naming the file and the field when it is not one."""
    file = Path(path) / CLASSIFIER_FILE
    try:
        raw = file.read_bytes()
        doc = json.loads(raw)
    except OSError as exc:
        raise DataError(f"{file}: cannot read ({exc.strerror})", file=str(file)) from None
    except ValueError as exc:
        raise DataError(f"{file}: not JSON ({exc})", file=str(file)) from None
    if not isinstance(doc, dict) or doc.get("kind") != CLASSIFIER_KIND:
        raise DataError(f"{file}: not an embedding classifier (kind {CLASSIFIER_KIND!r} expected)", file=str(file),
                        field="kind")
    if doc.get("schema_version") != CLASSIFIER_VERSION:
        raise DataError(f"{file}: schema_version {doc.get('schema_version')!r} is not one this simhub reads "
                        f"({CLASSIFIER_VERSION})", file=str(file), field="schema_version")
    for key in ("embedder", "labels", "weights", "bias"):
        if key not in doc:
            raise DataError(f"{file}: no {key!r}", file=str(file), field=key)
    try:
        return EmbeddingClassifier(embedder=doc["embedder"], labels=list(doc["labels"]), weights=np.array(doc["weights"]),
                                   bias=np.array(doc["bias"]), input=doc.get("input", "turn"), info=doc.get("info", {}),
                                   digest=hashlib.sha256(raw).hexdigest())
    except DataError as exc:
        raise DataError(f"{file}: {exc}", file=str(file), field=exc.field) from None
