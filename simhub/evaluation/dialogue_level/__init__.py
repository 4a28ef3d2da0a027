"""Dialogue-level metrics: one interface (:class:`DialogueMetric`), one registry, one module per metric
or small family (the same shape as the turn-level :mod:`simhub.metrics`)."""

from simhub.evaluation.dialogue_level.base import DialogueData, DialogueMetric, DialogueOutput
from simhub.evaluation.dialogue_level.registry import (
    dialogue_metric_class,
    dialogue_metric_classes,
    dialogue_output_metadata,
    dialogue_output_names,
    dialogue_outputs,
    register_dialogue_metric,
    unregister_dialogue_metric,
)

__all__ = [
    "DialogueData",
    "DialogueMetric",
    "DialogueOutput",
    "dialogue_metric_class",
    "dialogue_metric_classes",
    "dialogue_output_metadata",
    "dialogue_output_names",
    "dialogue_outputs",
    "register_dialogue_metric",
    "unregister_dialogue_metric",
]
