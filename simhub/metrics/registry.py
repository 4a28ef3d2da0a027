"""The seven realism metrics and their metadata (SPEC §3): one registry the CLI, the service,
the DPO reward and the evaluate module all read."""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from simhub.errors import ConfigError


@dataclass(frozen=True)
class MetricInfo:
    name: str
    description: str
    null_rule: str
    model: str | None
    #: Whether the metric needs the dialogue (not just the real and simulated texts).
    needs_dialogue: bool = True
    low: float = 0.0
    high: float = 1.0
    higher_is_better: bool = True


METRICS: dict[str, MetricInfo] = {
    m.name: m
    for m in [
        MetricInfo("acts", "1 if the simulated turn's dialogue act equals the real turn's act", "real act label missing", "act classifier"),
        MetricInfo("correctness", "agreement of the simulated turn's correctness with the real label", "real label is na or missing; judge answer unparseable", "LLM judge"),
        MetricInfo("errors", "1 if both turns are incorrect with the same error", "real turn not incorrect; judge answer unparseable", "LLM judge"),
        MetricInfo("knowledge", "similarity of knowledge-acquisition quantiles from a KT model", "first student turn of the dialogue", "knowledge-tracing LLM"),
        MetricInfo("cosine", "cosine similarity of sentence embeddings", "never", "sentence embedding model", needs_dialogue=False),
        MetricInfo("rouge_l", "ROUGE-L F-measure (rouge_score tokenisation, no stemming)", "never", None, needs_dialogue=False),
        MetricInfo("tutor_response", "exp(-mean NLL) of the real next tutor turn given the simulated turn", "last turn of the dialogue", "tutor LM"),
    ]
}
METRIC_NAMES: tuple[str, ...] = tuple(METRICS)
#: Metrics averaged into the DPO reward by default (the reference leaves ROUGE-L out).
DEFAULT_REWARD_METRICS: tuple[str, ...] = tuple(m for m in METRIC_NAMES if m != "rouge_l")


def check_metric_names(names, field: str = "metrics") -> list[str]:
    """Validate metric names, with a did-you-mean hint for typos."""
    out = []
    for name in names:
        if name not in METRICS:
            close = difflib.get_close_matches(str(name), METRIC_NAMES, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"{field}: unknown metric {name!r}{hint}; known: {', '.join(METRIC_NAMES)}")
        if name not in out:
            out.append(name)
    return out
