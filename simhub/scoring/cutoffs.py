"""Knowledge cutoffs computed once on a reference split, for scoring one turn at a time (docs/protocol.md §3).

The paper bins knowledge deltas with cutoffs from the evaluated set itself; a service scoring one
turn cannot, so ``simhub kt-cutoffs`` pools the real deltas of every student turn of a reference
split (e.g. validation) and stores ``kt_cutoffs.json`` beside the KT model.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from simhub.config import Profile
from simhub.errors import ConfigError
from simhub.metrics.base import MetricContext
from simhub.metrics.knowledge import (
    KT_CUTOFFS_FILE,
    Knowledge,
    KnowledgeTracer,
    knowledge_deltas,
    paper_cutoffs,
    pooled_real_deltas,
    save_cutoffs,
)
from simhub.models import LoadOptions
from simhub.progress import tqdm
from simhub.schema import Dialogue


def reference_cutoffs(tracer: KnowledgeTracer, dialogues: Sequence[Dialogue], target: str | Path, meta: dict,
                      chunk_size: int = 128, where: str = "data") -> tuple[np.ndarray, int]:
    """Cutoffs from the real deltas of every student turn of ``dialogues``, saved to ``target``.

    ``meta`` (e.g. ``source``, ``model``) is stored next to ``n_deltas``. Returns (cutoffs, number
    of real deltas pooled).
    """
    items = [(d, i, d.turns[i].content) for d in dialogues for i in d.student_turn_indices()]
    if not items:
        raise ConfigError(f"{where}: no student turns to compute cutoffs from", field="data")
    deltas = []
    size = max(1, chunk_size)
    for start in tqdm(range(0, len(items), size), desc="kt-cutoffs", unit="chunk"):
        deltas.extend(knowledge_deltas(tracer, items[start : start + size]))
    cutoffs = paper_cutoffs(deltas)
    count = int(pooled_real_deltas(deltas).size)
    save_cutoffs(target, cutoffs, {"n_deltas": count, **meta})
    return cutoffs, count


def compute_reference_cutoffs(profile: Profile, dialogues: Sequence[Dialogue], output: str | Path | None = None,
                              source: str = "data") -> tuple[Path, np.ndarray, int]:
    """Cutoffs of ``profile``'s KT model on ``dialogues``; written to ``output`` (default: beside the
    KT model). Returns (path written, cutoffs, number of real deltas pooled)."""
    config = profile.scoring.metrics.knowledge
    if config is None:
        raise ConfigError(f"profile {profile.name!r} has no knowledge model (scoring.metrics.knowledge)",
                          field="scoring.metrics.knowledge")
    s = profile.scoring
    metric = Knowledge(config, MetricContext(load=LoadOptions(backend="transformers", device=s.device,
                                                              batch_size=s.batch_size, share_base=s.share_base)))
    target = Path(output) if output else Path(config.adapter or config.model) / KT_CUTOFFS_FILE
    cutoffs, count = reference_cutoffs(metric.load(), dialogues, target,
                                       {"source": source, "model": config.plain().describe()},
                                       chunk_size=s.chunk_size, where=source)
    return target, cutoffs, count
