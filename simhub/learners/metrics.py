"""What a tutor achieved with a knowledge-state learner, per conversation (KnowSim's §2.3, App. G).

* **KG**, knowledge gain: ``Σ_v max(0, s_T(v) - s_0(v))`` in ordinal steps (a raw sum, 0 … 3|V|);
  normalised twice as the released code does: by the headroom ``Σ_v (3 - s_0(v))`` (``nkg``) and by
  ``3|V|`` (``nkg_3n``).
* **DC**, delivery calibration: the F1 of ``P = Σ|A_t| / Σ|E_t|`` and ``R = Σ|A_t| / Σ|Z_t|``
  (micro-averaged over turns); P = 0 when nothing was explained, R = 1 when nothing was teachable.
* **CO**, cognitive overload: the mean over turns of ``min(1, L_t / τ)`` (lower is better).
* The released code's *information calibration* beside DC: the same P/R/F1 with ``|E_t ∩ Z_t|``
  (explained and teachable, whether absorbed or not) as numerator; and its legacy per-turn overload
  ``max(0, L - τ) / L``, averaged.
* The **failure modes**: every IU explained in a turn gets one label of an ordered tree.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Literal

import msgspec

from simhub.learners.graph import ValidatedGraph
from simhub.learners.state import KNOWS_WELL, ORDINAL, KnowledgeState
from simhub.learners.update import TurnRecord

FailureMode = Literal["REDUNDANT", "PREREQ-BLOCKED", "EFFECTIVE", "OVERLOAD-WASTED", "UNDER-ABSORBED"]
#: The decision tree's order: the first that applies is the label.
FAILURE_MODES: tuple[str, ...] = ("REDUNDANT", "PREREQ-BLOCKED", "EFFECTIVE", "OVERLOAD-WASTED", "UNDER-ABSORBED")


class ConversationMetrics(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    turns: int
    kg: int
    nkg: float
    nkg_3n: float
    dc: float
    dc_precision: float
    dc_recall: float
    co: float
    ic_precision: float
    ic_recall: float
    ic_f1: float
    po_legacy: float
    explained_total: int
    teachable_total: int
    absorbed_total: int
    failure_modes: dict[str, int]


def f1(precision: float, recall: float) -> float:
    return 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0


def knowledge_gain(initial: KnowledgeState, final: KnowledgeState) -> int:
    return sum(max(0, ORDINAL[final.states[iu]] - ORDINAL[s]) for iu, s in initial.states.items())


def failure_mode(iu: str, before: KnowledgeState, record: TurnRecord) -> FailureMode:
    """The label of an IU explained in ``record``'s turn; ``before`` is the state entering the turn."""
    if ORDINAL[before.states[iu]] == KNOWS_WELL:
        return "REDUNDANT"
    advanced = iu in record.advanced
    # Not knows_well and not teachable means the pre-turn ceiling was below partial.
    if iu not in record.teachable and not advanced:
        return "PREREQ-BLOCKED"
    if advanced:
        return "EFFECTIVE"
    return "OVERLOAD-WASTED" if record.overloaded else "UNDER-ABSORBED"


def failure_modes(initial: KnowledgeState, records: Sequence[TurnRecord]) -> list[dict[str, FailureMode]]:
    """Per turn, the label of every explained IU (graph order)."""
    out = []
    before = initial
    for record in records:
        out.append({iu: failure_mode(iu, before, record) for iu in record.explained})
        before = record.state
    return out


def conversation_metrics(graph: ValidatedGraph, initial: KnowledgeState,
                         records: Sequence[TurnRecord]) -> ConversationMetrics:
    """KG, DC, CO and the rest over ``records`` (a whole run, or a prefix of it)."""
    final = records[-1].state if records else initial
    kg = knowledge_gain(initial, final)
    headroom = sum(KNOWS_WELL - ORDINAL[s] for s in initial.states.values())
    explained = sum(len(r.explained) for r in records)
    teachable = sum(len(r.teachable) for r in records)
    absorbed = sum(len(r.absorbed) for r in records)
    in_reach = sum(len(set(r.explained).intersection(r.teachable)) for r in records)
    dc_p = absorbed / explained if explained else 0.0
    dc_r = absorbed / teachable if teachable else 1.0
    ic_p = in_reach / explained if explained else 0.0
    ic_r = in_reach / teachable if teachable else 1.0
    n = len(records)
    co = sum(min(1.0, r.effective_load / r.threshold) if r.effective_load > 0 else 0.0 for r in records) / n if n else 0.0
    po = sum(max(0.0, r.effective_load - r.threshold) / r.effective_load if r.effective_load > 0 else 0.0
             for r in records) / n if n else 0.0
    modes = Counter(m for turn in failure_modes(initial, records) for m in turn.values())
    return ConversationMetrics(
        turns=n, kg=kg, nkg=kg / headroom if headroom else 0.0, nkg_3n=kg / (3 * graph.size),
        dc=f1(dc_p, dc_r), dc_precision=dc_p, dc_recall=dc_r, co=co,
        ic_precision=ic_p, ic_recall=ic_r, ic_f1=f1(ic_p, ic_r), po_legacy=po,
        explained_total=explained, teachable_total=teachable, absorbed_total=absorbed,
        failure_modes={m: modes.get(m, 0) for m in FAILURE_MODES},
    )
