"""The examples in the docstrings of ``simhub.metrics``, ``simhub.stats`` and the dialogue-level
metric interface run, and give what they show. They are offline and need no model: examples of the
model-backed metrics use the pure functions their scores come from. Every built-in metric's
docstring has one."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import simhub.metrics
from simhub.metrics import metric_classes

MODULES = sorted({"simhub.stats", "simhub.scoring.scorer", "simhub.evaluation.dialogue_level.base",
                  "simhub.evaluation.dialogue_level.registry", "simhub.evaluation.dialogue_level.cards",
                  "simhub.structdoc", "simhub.registry", "simhub.versions", "simhub.provision",
                  "simhub.tutoring.knowsim.termination", "simhub.models.embedding_classifier",
                  *(f"simhub.metrics.{m.name}" for m in pkgutil.iter_modules(simhub.metrics.__path__))})


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name, capsys):
    module = importlib.import_module(name)
    failed, attempted = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    report = capsys.readouterr().out
    assert failed == 0, report
    assert attempted > 0, f"{name} has no docstring example"


def test_every_builtin_metric_docstring_has_an_example():
    finder = doctest.DocTestFinder(recurse=False)
    builtin = {n: cls for n, cls in metric_classes().items() if cls.__module__.startswith("simhub.metrics.")}
    assert set(builtin) >= {"acts", "judge", "knowledge", "cosine", "rouge_l", "tutor_response"}
    for name, cls in builtin.items():
        (test,) = finder.find(cls, module=importlib.import_module(cls.__module__))
        assert test.examples, f"the docstring of {name} ({cls.__qualname__}) has no example"
