"""The dialogue-level metric registry: one line per metric, ``name -> "module:Class"``, imported when
first needed (the same shape as :mod:`simhub.metrics.registry`).

``simhub eval-dialogues`` runs every registered metric, in registration order, and the report reads
their declared metadata. A plugin adds one with :func:`register_dialogue_metric` (or the
``simhub.dialogue_metrics`` entry-point group).
"""

from __future__ import annotations

from simhub.evaluation.dialogue_level.base import DialogueMetric, DialogueOutput
from simhub.registry import LazyRegistry

_PACKAGE = "simhub.evaluation.dialogue_level"

#: The built-in statistics, in the order the results list them (docs/guides/dialogue-realism.md).
_REGISTRY: dict[str, str] = {
    "acts_jsd": f"{_PACKAGE}.distributions:ActsJSD",
    "correctness_rate_diff": f"{_PACKAGE}.distributions:CorrectnessRateDiff",
    "length_w1": f"{_PACKAGE}.distributions:LengthW1",
    "question_rate_w1": f"{_PACKAGE}.distributions:QuestionRateW1",
    "turns_w1": f"{_PACKAGE}.distributions:TurnsW1",
    "lexical": f"{_PACKAGE}.lexical:LexicalDiversity",
    "detect_auroc": f"{_PACKAGE}.detect:Detectability",
    "pi_calibrated": f"{_PACKAGE}.pairwise:PairwiseIndistinguishability",
    "kt_gain_diff": f"{_PACKAGE}.learning:KTGain",
    "tutor_sensitivity": f"{_PACKAGE}.sensitivity:TutorSensitivityMetric",
}

#: The built-in dialogue metrics' names (their cards are generated: ``docs/reference/dialogue-metrics.md``).
BUILTIN_DIALOGUE_METRICS: tuple[str, ...] = tuple(_REGISTRY)

_METRICS: LazyRegistry[type[DialogueMetric]] = LazyRegistry("dialogue metric", _REGISTRY,
                                                             group="simhub.dialogue_metrics")


def register_dialogue_metric(name: str, target: str | type[DialogueMetric]) -> None:
    """Add (or replace) dialogue metric ``name``: a ``"module:Class"`` string or the class itself."""
    _METRICS.register(name, target)


def unregister_dialogue_metric(name: str) -> None:
    _METRICS.unregister(name)


def dialogue_metric_class(name: str) -> type[DialogueMetric]:
    """The class registered as ``name``."""
    return _METRICS.get(name)


def dialogue_metric_classes() -> dict[str, type[DialogueMetric]]:
    """Every registered dialogue metric class, in registration order."""
    return {name: _METRICS.get(name) for name in _METRICS.names()}


def dialogue_outputs() -> dict[str, tuple[type[DialogueMetric], DialogueOutput]]:
    """Every output name (``acts_jsd``, ``mattr_z``, ...) with its class and metadata, in order."""
    out: dict[str, tuple[type[DialogueMetric], DialogueOutput]] = {}
    for cls in dialogue_metric_classes().values():
        for o in cls.outputs:
            out[o.name] = (cls, o)
    return out


def dialogue_output_metadata(name: str) -> DialogueOutput:
    """The declared metadata of output ``name``. An output no registered metric gives (an old file's,
    or a plug-in's that is not installed) gets a stand-in: labelled by its name, no direction.

    >>> dialogue_output_metadata("detect_auroc").arrow, dialogue_output_metadata("yule_z").direction
    ('→0.5', 'closer to 0 is more realistic')
    >>> dialogue_output_metadata("helpfulness_gap").heading, dialogue_output_metadata("helpfulness_gap").arrow
    ('helpfulness_gap', '')
    """
    found = dialogue_outputs().get(name)
    return found[1] if found is not None else DialogueOutput(name, "not a registered dialogue metric", "unknown",
                                                             better=None)


def dialogue_output_names() -> tuple[str, ...]:
    return tuple(dialogue_outputs())
