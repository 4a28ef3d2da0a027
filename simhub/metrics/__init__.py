"""The realism metrics: one module per metric, one interface (:class:`Metric`), one registry."""

from simhub.metrics.base import Metric, MetricContext, MetricResult, Output, ScoreItem, summarize
from simhub.metrics.registry import (
    DEFAULT_REWARD_METRICS,
    PAPER_METRICS,
    check_metric_names,
    higher_is_better,
    label,
    metric_class,
    metric_classes,
    metric_names,
    output_metadata,
    outputs,
    register_metric,
    unregister_metric,
)

__all__ = [
    "DEFAULT_REWARD_METRICS",
    "PAPER_METRICS",
    "Metric",
    "MetricContext",
    "MetricResult",
    "Output",
    "ScoreItem",
    "check_metric_names",
    "higher_is_better",
    "label",
    "metric_class",
    "metric_classes",
    "metric_names",
    "output_metadata",
    "outputs",
    "register_metric",
    "summarize",
    "unregister_metric",
]
