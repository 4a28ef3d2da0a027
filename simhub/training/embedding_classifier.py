"""``kind: acts-embedding`` and ``correctness-embedding``: classifiers as logistic regression on
sentence embeddings.

Every labelled student turn of the training split is embedded by the recipe's ``base_model`` (an
embedder: ``minilm`` is the packaged MiniLM): the act classifier reads the turn alone, the
correctness classifier the turn with the question's answer key and the turn before it
(:data:`simhub.models.embedding_classifier.INPUTS`). A multinomial logistic regression (scikit-learn,
L-BFGS) is fitted for each inverse regularisation strength of :data:`C_GRID`, and the one with the
best accuracy on the validation split's turns is kept (ties, and a recipe without validation turns,
go to the strongest regularisation). The
folder then holds ``classifier.json`` (:mod:`simhub.models.embedding_classifier`), the validation
results and the training record. It trains in seconds on a CPU, where a fine-tuned LM takes minutes.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from simhub.errors import DataError
from simhub.training.config import TrainRecipe

#: The inverse regularisation strengths tried (scikit-learn's ``C``), weakest last.
C_GRID: tuple[float, ...] = (0.5, 2.0, 8.0, 32.0)


#: Per kind: the turn label it learns and what it reads.
TASKS = {"acts-embedding": ("act", "turn"), "correctness-embedding": ("correctness", "turn+answer+previous")}


def _turns(dialogues, label: str) -> tuple[list[tuple], list[str]]:
    """``(history, text, dialogue)`` of every student turn with a ``label``, and the labels."""
    items, labels = [], []
    for d in dialogues:
        for i, t in enumerate(d.turns):
            value = getattr(t, label)
            if t.role == "student" and value is not None:
                items.append((d.turns[:i], t.content, d))
                labels.append(value)
    return items, labels


def train_acts_embedding(recipe: TrainRecipe, output_dir: str | os.PathLike[str], resume: bool = False) -> dict:
    """Fit the classifier of ``recipe`` (``acts-embedding`` or ``correctness-embedding``) into
    ``output_dir``; returns the validation results."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    from simhub.models.embedding_classifier import EmbeddingClassifier, answer_key_text, features
    from simhub.models.embeddings import load_embedder, resolve_embedding_model
    from simhub.schema import ACTS, CORRECTNESS_LABELS
    from simhub.training.classifiers import classifier_metrics
    from simhub.training.common import EVAL_RESULTS_FILE, TRAINING_CONFIG_FILE, versions, write_json
    from simhub.training.data import check_data, load_split

    check_data(recipe.data, [recipe.train_split, recipe.eval_split])
    resolve_embedding_model(recipe.base_model)  # the packaged MiniLM must be installed
    start = time.perf_counter()
    label, kind = TASKS[recipe.kind]
    names = ACTS if label == "act" else CORRECTNESS_LABELS
    train_items, train_labels = _turns(load_split(recipe.data, recipe.train_split, recipe.max_train_dialogues), label)
    val_items, val_labels = _turns(load_split(recipe.data, recipe.eval_split, recipe.max_eval_dialogues), label)
    if not train_items:
        raise DataError(f"{recipe.data}: no student turn of the training split has a {label} label", field="data")
    missing = sorted(set(names) - set(train_labels))
    if missing:
        raise DataError(f"{recipe.data}: the training split has no turn labelled {', '.join(missing)}; the "
                        f"classifier needs every {label} label", field="data")
    embedder = load_embedder(recipe.base_model)

    def x(items):
        return features(kind, embedder.encode, [text for _, text, _ in items],
                        [answer_key_text(d.question) for _, _, d in items],
                        [h[-1].content if h else "" for h, _, _ in items])

    train_texts, val_texts = train_items, val_items
    x_train = x(train_items)
    x_val = x(val_items) if val_items else None
    embedded_s = time.perf_counter() - start
    gold_val = [names.index(a) for a in val_labels]
    trials = []
    best = None
    for c in C_GRID:
        model = LogisticRegression(C=c, max_iter=5000, random_state=recipe.seed).fit(x_train, train_labels)
        order = [list(model.classes_).index(a) for a in names]
        clf = EmbeddingClassifier(embedder=recipe.base_model, labels=list(names), weights=model.coef_[order],
                                  bias=model.intercept_[order], input=kind)
        accuracy = None
        if x_val is not None:
            pred = [names.index(a) for a in clf.predict_vectors(x_val)]
            accuracy = float(np.mean([p == g for p, g in zip(pred, gold_val, strict=True)]))
        trials.append({"C": c, "val_accuracy": accuracy, "train_accuracy": float(model.score(x_train, train_labels))})
        if best is None or (accuracy is not None and best[1] is not None and accuracy > best[1]):
            best = (clf, accuracy, c)
    assert best is not None
    clf, _, chosen = best
    results = (classifier_metrics([names.index(a) for a in clf.predict_vectors(x_val)], gold_val, names)
               if x_val is not None else {"accuracy": None, "count": 0})
    results.update({"C": chosen, "grid": trials, "method": "argmax of the logistic regression on the turn's embedding"})
    output_dir = Path(output_dir)
    clf.info = {"C": chosen, "train_turns": len(train_texts), "val_turns": len(val_texts), "data": recipe.data}
    clf.save(output_dir)
    write_json(output_dir / EVAL_RESULTS_FILE, results)
    write_json(output_dir / TRAINING_CONFIG_FILE, {
        "recipe": recipe.to_dict(), "resolved": {"embedder": recipe.base_model},
        "data": {"train_turns": len(train_texts), "val_turns": len(val_texts)}, "versions": versions(),
        "seconds": {"embedding": round(embedded_s, 2), "total": round(time.perf_counter() - start, 2)}})
    return results
