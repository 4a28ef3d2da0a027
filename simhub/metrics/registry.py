"""The metric registry: one line per metric, ``name -> "module:Class"``, imported when first needed.

The CLI, the service, the DPO reward and the ``evaluate`` module all read it. A plugin adds a
metric with :func:`register_metric` (or the ``simhub.metrics`` entry-point group) and it shows up
in ``simhub score``, ``POST /score`` and ``evaluate`` like the built-in ones.
"""

from __future__ import annotations

from simhub.errors import ConfigError, UnknownNameError
from simhub.metrics.base import Metric, Output
from simhub.registry import LazyRegistry

#: The seven metrics of the paper, in the paper's order (docs/protocol.md §3). ``judge`` gives two outputs.
_REGISTRY: dict[str, str] = {
    "acts": "simhub.metrics.acts:Acts",
    "judge": "simhub.metrics.judge:Judge",
    "knowledge": "simhub.metrics.knowledge:Knowledge",
    "cosine": "simhub.metrics.cosine:Cosine",
    "rouge_l": "simhub.metrics.rouge_l:RougeL",
    "tutor_response": "simhub.metrics.tutor_response:TutorResponse",
}

#: The built-in metrics, in the paper's order (plug-ins come after them in the registry).
BUILTIN_METRICS: tuple[str, ...] = tuple(_REGISTRY)

_METRICS: LazyRegistry[type[Metric]] = LazyRegistry(
    "metric", _REGISTRY, group="simhub.metrics",
    unknown=lambda name, known: UnknownNameError("metric", name, known, field="metrics"))


def register_metric(name: str, target: str | type[Metric]) -> None:
    """Add (or replace) metric ``name``: a ``"module:Class"`` string or the class itself."""
    _METRICS.register(name, target)


def unregister_metric(name: str) -> None:
    _METRICS.unregister(name)


def metric_class(name: str) -> type[Metric]:
    """The class registered as ``name``."""
    return _METRICS.get(name)


def metric_classes() -> dict[str, type[Metric]]:
    """Every registered metric class, in registration order."""
    return {name: _METRICS.get(name) for name in _METRICS.names()}


def outputs() -> dict[str, tuple[type[Metric], Output]]:
    """Every output name (what users call a metric: ``acts``, ``correctness``, ...) and its class."""
    out: dict[str, tuple[type[Metric], Output]] = {}
    for cls in metric_classes().values():
        for o in cls.outputs:
            out[o.name] = (cls, o)
    return out


def output_metadata(name: str) -> Output:
    """The declared metadata of output ``name``. An output no registered metric gives (an old run's,
    or a plug-in's that is not installed) gets a stand-in: labelled by its name, higher is better.

    >>> output_metadata("rouge_l").heading, output_metadata("rouge_l").higher_is_better
    ('ROUGE-L', True)
    >>> output_metadata("helpfulness").heading, output_metadata("helpfulness").arrow
    ('helpfulness', '↑')
    """
    found = outputs().get(name)
    return found[1] if found is not None else Output(name, "not a registered metric", "unknown")


def higher_is_better(name: str) -> bool:
    """Whether a larger value of output ``name`` is better, from its metric's declared metadata
    (an output no registered metric gives, such as an old run's, is taken as higher is better)."""
    return output_metadata(name).higher_is_better


def label(name: str) -> str:
    """The heading of output ``name``: its declared label, or the name itself."""
    return output_metadata(name).heading


def metric_names() -> tuple[str, ...]:
    return tuple(outputs())


def check_metric_names(names, field: str = "metrics") -> list[str]:
    """Validate output names (duplicates dropped), with a did-you-mean hint for typos."""
    known = metric_names()
    out: list[str] = []
    for name in names:
        if not isinstance(name, str) or name not in known:
            raise UnknownNameError("metric", str(name), known, field=field)
        if name not in out:
            out.append(name)
    if not out:
        raise ConfigError(f"{field}: no metric named", field=field)
    return out


#: The seven names of the paper, for code that needs them without importing the modules.
PAPER_METRICS: tuple[str, ...] = ("acts", "correctness", "errors", "knowledge", "cosine", "rouge_l", "tutor_response")
#: Metrics averaged into the DPO reward by default (the reference leaves ROUGE-L out).
DEFAULT_REWARD_METRICS: tuple[str, ...] = tuple(m for m in PAPER_METRICS if m != "rouge_l")
