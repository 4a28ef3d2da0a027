"""The embedding classifier's file and its prediction: argmax of a linear layer, as scikit-learn's."""

from __future__ import annotations

import json

import numpy as np
import pytest

from simhub.errors import DataError
from simhub.models.embedding_classifier import (
    CLASSIFIER_FILE,
    EmbeddingClassifier,
    is_embedding_classifier,
    load_embedding_classifier,
)


def _blobs(seed: int = 0, n: int = 60, dim: int = 8):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(3, dim)) * 3
    y = np.repeat(["b", "c", "a"], n // 3)  # scikit-learn sorts its classes: a, b, c
    x = centres[np.repeat([0, 1, 2], n // 3)] + rng.normal(size=(n, dim))
    return x, y


def test_prediction_is_scikit_learns_in_any_label_order(tmp_path):
    from sklearn.linear_model import LogisticRegression

    x, y = _blobs()
    model = LogisticRegression(C=0.1, max_iter=2000).fit(x, y)
    labels = ["c", "a", "b"]  # the classifier's own order, not scikit-learn's
    order = [list(model.classes_).index(label) for label in labels]
    clf = EmbeddingClassifier(embedder="minilm", labels=labels, weights=model.coef_[order], bias=model.intercept_[order])
    probe = np.random.default_rng(1).normal(size=(200, 8)) * 3
    assert clf.predict_vectors(probe) == list(model.predict(probe))
    assert clf.predict_vectors(np.zeros((0, 8))) == []

    clf.info = {"C": 0.1}
    path = clf.save(tmp_path / "acts")
    assert path.name == CLASSIFIER_FILE and is_embedding_classifier(tmp_path / "acts")
    assert not is_embedding_classifier(tmp_path)
    back = load_embedding_classifier(tmp_path / "acts")
    assert back.labels == labels and back.info == {"C": 0.1} and back.embedder == "minilm" and back.input == "turn"
    assert back.predict_vectors(probe) == clf.predict_vectors(probe)
    import hashlib

    from simhub.config import ModelRef
    from simhub.models.embedding_classifier import classifier_at

    assert back.digest == hashlib.sha256(path.read_bytes()).hexdigest() and clf.digest == ""
    assert classifier_at(ModelRef(model=str(tmp_path / "acts"))).digest == back.digest
    assert classifier_at(ModelRef(model=str(tmp_path))) is None  # a folder without classifier.json: a language model


def _write(folder, doc):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / CLASSIFIER_FILE).write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return folder


GOOD = {"kind": "simhub-embedding-classifier", "schema_version": 1, "embedder": "minilm", "labels": ["a", "b"],
        "weights": [[1.0, 0.0], [0.0, 1.0]], "bias": [0.0, 0.0]}


@pytest.mark.parametrize(("doc", "message", "field"), [
    ("{not json", "not JSON", None),
    ({**GOOD, "kind": "something-else"}, "not an embedding classifier", "kind"),
    ({**GOOD, "schema_version": 7}, "schema_version 7 is not one this simhub reads", "schema_version"),
    ({k: v for k, v in GOOD.items() if k != "bias"}, "no 'bias'", "bias"),
    ({**GOOD, "bias": [0.0]}, "do not fit 2 labels", "weights"),
])
def test_a_bad_classifier_file_is_a_data_error_naming_the_file(tmp_path, doc, message, field):
    folder = _write(tmp_path / "c", doc)
    with pytest.raises(DataError, match=message) as info:
        load_embedding_classifier(folder)
    assert str(folder / CLASSIFIER_FILE) in str(info.value) and info.value.field == field
