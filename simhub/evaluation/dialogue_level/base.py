"""The dialogue-level metric interface, the same shape as the turn-level one (:mod:`simhub.metrics.base`).

A dialogue-level metric compares whole simulated dialogues with the real ones on the same
questions. It is one :class:`DialogueMetric` subclass (one module may hold a small family) that says:

* which numbers it gives (``outputs``: per number its name, description, null rule, range, which way
  is more realistic and a label; :class:`DialogueOutput`);
* which shared inputs it reads besides the labelled dialogues (``requires``: the embedder, the
  knowledge-tracing trajectories, the judge's verdicts, the tutor-sensitivity outcomes); a metric
  whose inputs a run does not have is left out of that run;
* which turn labels it reads (``labels``): when the labeller could give none, its reason is the
  null reason;
* what it does once on the whole sample (:meth:`DialogueMetric.prepare`; detectability fits its
  classifier there) and its value on a dialogue-bootstrap resample (:meth:`DialogueMetric.statistic`);
* what stands behind its whole-sample value (:meth:`DialogueMetric.details`) and how the report
  summarises that (:meth:`DialogueMetric.detail_lines`).

``simhub eval-dialogues`` prepares the shared inputs once (:class:`DialogueData`: labels from one
labeller on both sides, embeddings from one embedder, trajectories, verdicts) and runs every
registered metric (:mod:`simhub.evaluation.dialogue_level.registry`) through the dialogue bootstrap.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, ClassVar

import numpy as np

from simhub.errors import ConfigError
from simhub.evaluation import dialogue_metrics as dm
from simhub.schema import Dialogue

#: Which way an output is more realistic.
BETTER = ("higher", "lower", "closer")


@dataclass(frozen=True)
class DialogueOutput:
    """One number a dialogue-level metric reports, with its metadata (what the report shows).

    >>> z = DialogueOutput("mattr_z", "MATTR z-score", "too few tokens", low=-float("inf"), high=float("inf"),
    ...                    better="closer", target=0.0, label="MATTR z")
    >>> z.heading, z.arrow, z.direction
    ('MATTR z', '→0', 'closer to 0 is more realistic')
    >>> DialogueOutput("acts_jsd", "act mix distance", "no act labels").arrow
    '↓'
    """

    name: str
    description: str
    #: When the value is null, in words.
    null_rule: str
    low: float = 0.0
    high: float = 1.0
    #: ``higher``, ``lower`` or ``closer`` (to ``target``) is more realistic; None: not declared (a
    #: stand-in for an output no registered metric gives).
    better: str | None = "lower"
    target: float | None = None
    #: The row heading; None: the name.
    label: str | None = None

    def __post_init__(self) -> None:
        if self.better is not None and self.better not in BETTER:
            raise ConfigError(f"{self.name}: better must be one of {', '.join(BETTER)}, got {self.better!r}",
                              field="better")
        if (self.better == "closer") != (self.target is not None):
            raise ConfigError(f"{self.name}: a target goes with better='closer', and only with it", field="target")

    @property
    def heading(self) -> str:
        return self.label or self.name

    @property
    def arrow(self) -> str:
        """``↑`` (higher is more realistic), ``↓`` (lower), ``→t`` (closer to t); empty when undeclared."""
        if self.better == "closer":
            return f"→{self.target:g}"
        return {"higher": "↑", "lower": "↓"}.get(self.better or "", "")

    @property
    def direction(self) -> str:
        """Which way is more realistic, in words (empty when undeclared)."""
        if self.better == "closer":
            return f"closer to {self.target:g} is more realistic"
        return f"{self.better} is more realistic" if self.better else ""


@dataclass
class DialogueData:
    """What every dialogue-level metric reads, prepared once per run.

    ``real`` and ``sim`` carry the same labeller's act and correctness labels; ``real_ids[n]`` is the
    real dialogue ``sim[n]`` belongs to. The optional inputs are None when the run has none:
    ``embed`` (texts -> normalised embeddings), ``trajectories`` (mastery after each student turn, per
    real and per simulated dialogue), ``verdicts`` (``ps``/``hh``/``pp`` lists of (real id, verdict)),
    ``sensitivity`` (real and simulated outcomes, ``helpful``/``unhelpful`` lists of (real id,
    outcome)). ``unavailable`` says why a turn label is missing everywhere (``correctness``: no
    labelling model), for the null reasons.

    A resample is an array of positions in ``real`` (with repetition); each drawn real dialogue brings
    its simulated ones (:meth:`inputs`).
    """

    real: Sequence[Dialogue]
    sim: Sequence[Dialogue]
    real_ids: Sequence[str]
    seed: int = 0
    chunk_tokens: int = dm.DEFAULT_CHUNK_TOKENS
    embed: Callable[[list[str]], np.ndarray] | None = None
    trajectories: tuple[list[np.ndarray], list[np.ndarray]] | None = None
    verdicts: dict[str, list[tuple[str, str]]] | None = None
    sensitivity: tuple[dict[str, list[tuple[str, bool | None]]], dict[str, list[tuple[str, bool | None]]]] | None = None
    unavailable: dict[str, str] = field(default_factory=dict)

    @cached_property
    def ids(self) -> list[str]:
        """The real dialogues' ids, in order (the bootstrap's clusters)."""
        return [d.id for d in self.real]

    @cached_property
    def sims_of(self) -> dict[str, list[int]]:
        """Per real dialogue id, the positions of its simulated dialogues in ``sim``."""
        out: dict[str, list[int]] = defaultdict(list)
        for n, rid in enumerate(self.real_ids):
            out[rid].append(n)
        return out

    @cached_property
    def everything(self) -> np.ndarray:
        """The whole sample as a resample: every real dialogue once."""
        return np.arange(len(self.real))

    @cached_property
    def _parts(self) -> tuple[list[dm.DialogueInputs], list[dm.DialogueInputs]]:
        real = [dm.dialogue_inputs([d]) for d in self.real]
        sim = [dm.dialogue_inputs([self.sim[n] for n in self.sims_of[rid]]) for rid in self.ids]
        return real, sim

    def inputs(self, idx: np.ndarray) -> tuple[dm.DialogueInputs, dm.DialogueInputs]:
        """The student-side inputs (:func:`~simhub.evaluation.dialogue_metrics.dialogue_inputs`) of the
        real dialogues drawn in ``idx`` and of their simulated ones, in draw order."""
        real, sim = self._parts
        return _joined([real[i] for i in idx]), _joined([sim[i] for i in idx])

    @cached_property
    def whole(self) -> tuple[dm.DialogueInputs, dm.DialogueInputs]:
        """The inputs of ``real`` and ``sim`` as given (file order, not grouped by real dialogue)."""
        return dm.dialogue_inputs(self.real), dm.dialogue_inputs(self.sim)

    def draws(self, idx: np.ndarray) -> dict[str, int]:
        """How often each real dialogue id is drawn in ``idx``."""
        counts: dict[str, int] = defaultdict(int)
        for i in idx:
            counts[self.ids[i]] += 1
        return counts


def _joined(parts: Sequence[dm.DialogueInputs]) -> dm.DialogueInputs:
    """The inputs of consecutive dialogue lists, as :func:`dialogue_inputs` of their concatenation."""
    return dm.DialogueInputs(
        texts=[t for p in parts for t in p.texts],
        groups=[g for p in parts for g in p.groups],
        acts=[a for p in parts for a in p.acts],
        correctness=[c for p in parts for c in p.correctness],
        per_dialogue=[d for p in parts for d in p.per_dialogue],
        turn_counts=[c for p in parts for c in p.turn_counts],
        dialogue_ids=[i for p in parts for i in p.dialogue_ids],
    )


def number(details: Mapping[str, Any], key: str) -> float | None:
    """``details[key]`` when it is a number (not a bool), else None: for :meth:`DialogueMetric.detail_lines`."""
    value = details.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def fmt(value: float | None, digits: int = 3) -> str:
    """A detail number as the report prints it (``—`` for none).

    >>> fmt(0.12345), fmt(None)
    ('0.123', '—')
    """
    return "—" if value is None else f"{value:.{digits}f}"


class DialogueMetric(ABC):
    """Base class of the dialogue-level metrics; see the module docstring.

    A metric that needs only the labelled dialogues is a few lines
    (:func:`~simhub.evaluation.dialogue_level.register_dialogue_metric` then makes it one of
    ``simhub eval-dialogues``' statistics, with a bootstrap CI, in the report too):

    >>> class TurnsPerDialogue(DialogueMetric):
    ...     outputs = (DialogueOutput("turns_diff", "|real - simulated| mean student turns per dialogue",
    ...                               "never", high=float("inf")),)
    ...     def statistic(self, output, idx):
    ...         real, sim = self.data.inputs(idx)
    ...         return abs(float(np.mean(real.turn_counts)) - float(np.mean(sim.turn_counts)))
    >>> TurnsPerDialogue.output_names(), TurnsPerDialogue.applies(DialogueData([], [], []))
    (('turns_diff',), True)
    """

    outputs: ClassVar[tuple[DialogueOutput, ...]]
    #: The optional fields of :class:`DialogueData` the metric reads (``embed``, ``trajectories``,
    #: ``verdicts``, ``sensitivity``); without one of them the metric is left out of the run.
    requires: ClassVar[tuple[str, ...]] = ()
    #: The turn labels it reads (``acts``, ``correctness``): when the labeller could give none, its
    #: reason (``DialogueData.unavailable``) becomes the null reason.
    labels: ClassVar[tuple[str, ...]] = ()

    def __init__(self, data: DialogueData):
        self.data = data

    @classmethod
    def output_names(cls) -> tuple[str, ...]:
        return tuple(o.name for o in cls.outputs)

    @classmethod
    def applies(cls, data: DialogueData) -> bool:
        """Whether ``data`` has every input the metric requires."""
        return all(getattr(data, name) is not None for name in cls.requires)

    def prepare(self) -> None:
        """Work done once on the whole sample, before any resample (fit a model, group inputs). A
        :class:`~simhub.errors.DataError` makes every output null, with its message as the reason."""
        return None

    @abstractmethod
    def statistic(self, output: str, idx: np.ndarray) -> float | None:
        """``output`` on the resample ``idx`` (positions in ``data.real``, with repetition; each drawn
        real dialogue with its simulated ones). None, or a :class:`~simhub.errors.DataError`: undefined
        on this resample (on the whole sample, the error's message is the null reason)."""

    def estimate(self, output: str) -> float | None:
        """``output`` on the whole sample (by default the statistic of every real dialogue once)."""
        return self.statistic(output, self.data.everything)

    def details(self) -> dict[str, dict[str, Any]]:
        """What stands behind the whole-sample values, per output name (``details`` of the results)."""
        return {}

    @classmethod
    def detail_lines(cls, output: str, details: Mapping[str, Any]) -> list[str]:
        """How the report summarises ``details[output]`` under the value (plain text lines)."""
        return []
