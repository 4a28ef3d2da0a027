"""The one metric interface.

A metric is one module holding one :class:`Metric` subclass that says:

* which outputs it gives (``outputs``: names, descriptions, null rules, ranges; the judge gives
  ``correctness`` and ``errors`` from one call);
* which model it needs (``config_key``: its entry under ``scoring.metrics`` in a profile, or None
  for none) and how to load it (:meth:`Metric.load`);
* when it does not apply, and why (:meth:`Metric.skip`, before any model runs);
* how it scores a batch (:meth:`Metric.score`, called chunk by chunk);
* what it needs from the whole scored set (:meth:`Metric.finalize`; the knowledge metric bins its
  deltas with cutoffs of the set) and how it summarises (:meth:`Metric.summary`).

Registering it is one line in :mod:`simhub.metrics.registry`; the Scorer, ``simhub score``,
``POST /score``, the DPO reward and the ``evaluate`` module all go through the registry.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar

import msgspec
import numpy as np

from simhub.config import ScoringConfig
from simhub.models import LoadOptions
from simhub.schema import Dialogue, Turn


class ScoreItem(msgspec.Struct, forbid_unknown_fields=True):
    """A real dialogue, the index of a real student turn in it, and the simulated text for that
    turn; also one line of a ``simhub score`` input file."""

    dialogue: Dialogue
    turn_index: int
    candidate: str

    @property
    def real(self) -> Turn:
        return self.dialogue.turns[self.turn_index]

    @property
    def history(self) -> list[Turn]:
        return self.dialogue.turns[: self.turn_index]


@dataclass(frozen=True)
class Output:
    """One number a metric reports per item, with its metadata.

    Everything downstream reads it from here: the leaderboard ranks by ``higher_is_better``, the
    report and ``GET /models`` show ``label``, the range and the null rule, and the summary
    statistics a metric adds (``summary``) are labelled with their declared names.

    >>> out = Output("verbosity", "extra words", "never", high=float("inf"), higher_is_better=False,
    ...              summary={"longest": "longest"})
    >>> out.heading, out.arrow, out.summary_label("longest"), out.summary_label("other")
    ('verbosity', '↓', 'longest', 'other')
    """

    name: str
    description: str
    #: When the value is null, in words (also the reasons used in ``details.null_reasons``).
    null_rule: str
    low: float = 0.0
    high: float = 1.0
    higher_is_better: bool = True
    #: 0/1 values (paired comparisons use McNemar's test for these).
    binary: bool = False
    #: The column heading (the paper's wording for its seven); None: the name.
    label: str | None = None
    #: The summary statistics the metric adds for this output beside mean, std and count (what
    #: :meth:`Metric.summary` or :meth:`Metric.finalize` return), key -> the label a report shows.
    #: A key not declared here still reaches ``simhub score``, ``POST /score`` and the report,
    #: under its own name.
    summary: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "summary", MappingProxyType(dict(self.summary)))

    @property
    def heading(self) -> str:
        """The label, or the name when none is declared."""
        return self.label or self.name

    @property
    def arrow(self) -> str:
        """``↑`` when higher is better, ``↓`` when lower is."""
        return "↑" if self.higher_is_better else "↓"

    def summary_label(self, key: str) -> str:
        """How a report labels summary statistic ``key`` (its declared label, or the key itself)."""
        return self.summary.get(key, key)


@dataclass
class MetricResult:
    """One item's outputs from one metric: values (None = null), the reason of each null, details."""

    values: dict[str, float | None] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
    #: A failure that a rerun may not repeat (an endpoint down, a model error): never cached.
    transient: bool = False

    @classmethod
    def null(cls, outputs: Sequence[str], reason: str, *, transient: bool = False) -> MetricResult:
        return cls(dict.fromkeys(outputs), dict.fromkeys(outputs, reason), transient=transient)

    def to_json(self) -> dict[str, Any]:
        return {"values": self.values, "reasons": self.reasons, "details": self.details}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> MetricResult:
        return cls(dict(data["values"]), dict(data["reasons"]), dict(data["details"]))


@dataclass(frozen=True)
class MetricContext:
    """What a metric needs besides its own configuration: how to load models and where to cache."""

    load: LoadOptions = field(default_factory=LoadOptions)
    #: Which knowledge cutoffs apply: ``service`` (one turn at a time: ``cutoffs``) or ``benchmark``
    #: (a whole split: ``eval_cutoffs``).
    mode: str = "service"


class Metric(ABC):
    """Base class of the realism metrics; see the module docstring.

    A metric without a model is a few lines (:func:`simhub.metrics.register_metric` then makes it
    one of ``simhub score``'s metrics):

    >>> class Length(Metric):
    ...     outputs = (Output("length", "words in the simulated turn", "never", high=float("inf")),)
    ...     def score(self, items):
    ...         return [MetricResult({"length": float(len(i.candidate.split()))}) for i in items]
    >>> Length.output_names(), Length.from_scoring(ScoringConfig(), MetricContext()).describe()
    (('length',), {})
    """

    outputs: ClassVar[tuple[Output, ...]]
    #: The key of the metric's model under ``scoring.metrics`` (None: the metric needs no model).
    config_key: ClassVar[str | None] = None
    #: Whether the metric reads the dialogue, not just the real and simulated texts.
    needs_dialogue: ClassVar[bool] = True

    def __init__(self, config: Any, context: MetricContext):
        self.config, self.context = config, context

    @classmethod
    def from_scoring(cls, scoring: ScoringConfig, context: MetricContext) -> Metric | None:
        """The metric configured by ``scoring``, or None when its model is not configured."""
        if cls.config_key is None:
            return cls(None, context)
        config = getattr(scoring.metrics, cls.config_key, None)
        return None if config is None else cls(config, context)

    @classmethod
    def output_names(cls) -> tuple[str, ...]:
        return tuple(o.name for o in cls.outputs)

    @property
    def set_dependent(self) -> bool:
        """Whether an item's value depends on the other items scored with it (so requests must not be
        merged, and bootstrap resamples must recompute it)."""
        return False

    def load(self) -> None:
        """Load the model now (the service does this before it is ready); scoring loads lazily too."""
        return None

    def unavailable(self) -> str | None:
        """Why it cannot score in this environment (an endpoint whose API key is not set, naming the
        variable to set), or None."""
        return None

    def skip(self, item: ScoreItem) -> dict[str, str]:
        """Null reasons of outputs that do not apply to ``item`` (decided without a model)."""
        return {}

    @abstractmethod
    def score(self, items: Sequence[ScoreItem]) -> list[MetricResult]:
        """Score a chunk of items; every item is one the metric applies to (per :meth:`skip`)."""

    def finalize(self, items: Sequence[ScoreItem], results: list[MetricResult]) -> dict[str, dict[str, Any]]:
        """Set-level work after every chunk is scored; may fill ``results`` in place. Returns summary
        extras per output name."""
        return {}

    def summary(self, values: Sequence[float | None]) -> dict[str, Any]:
        """Mean, population std and count over the non-null values."""
        return summarize(values)

    def describe(self) -> dict[str, Any]:
        """The metric's model as ``GET /models`` lists it, from the configuration as written (Hub ids
        and references, never server paths): model, revisions, adapter and backend; empty without a
        model."""
        config = self.config
        if config is None:
            return {}
        return {"base_model": getattr(config, "model", None), "revision": getattr(config, "revision", None),
                "adapter": getattr(config, "adapter", None),
                "adapter_revision": getattr(config, "adapter_revision", None),
                "backend": getattr(config, "kind", None)}

    def prompt(self, item: ScoreItem) -> str | None:
        """The text the metric's model receives for ``item`` (``simhub prompt show``), if any."""
        return None

    def resample_statistic(self, output: str, details: Sequence[dict | None]):
        """For a set-dependent metric: a function of resampled item indices (with repetition) giving
        the output's mean on that resample, recomputing what the set determines; None otherwise.
        ``details`` are the items' details of this metric, in item order."""
        return None

    def cache_key(self) -> str:
        """What determines this metric's per-item results besides the item: its class, configuration,
        the files of its local models, the backend and simhub's version."""
        from simhub import __version__
        from simhub.cache import fingerprint, folder_fingerprint

        config = msgspec.to_builtins(self.config) if self.config is not None else None
        folders = [folder_fingerprint(getattr(self.config, k, None)) for k in ("model", "adapter")]
        return fingerprint([type(self).__module__, type(self).__qualname__, config, folders,
                            self.context.load.backend, __version__])


def summarize(values: Sequence[float | None]) -> dict[str, float | int | None]:
    """Mean, (population) std and count over the non-null values.

    >>> summarize([1.0, None, 0.0])
    {'mean': 0.5, 'std': 0.5, 'count': 2}
    >>> summarize([None])
    {'mean': None, 'std': None, 'count': 0}
    """
    xs = np.array([v for v in values if v is not None], dtype=np.float64)
    if xs.size == 0:
        return {"mean": None, "std": None, "count": 0}
    return {"mean": float(xs.mean()), "std": float(xs.std()), "count": int(xs.size)}
