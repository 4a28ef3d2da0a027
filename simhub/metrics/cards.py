"""One card per metric output, generated from what each metric declares (``docs/reference/metrics.md``).

A card gives what the output measures (the metric class's own description), its range and direction,
when it is null, whether it is binary, the summary statistics it adds, the model it needs (the profile
key) and a command that computes it. Only the built-in metrics are carded: a plug-in's card comes with
its own package. ``python scripts/gen_reference.py`` writes the page; a test checks it is current.
"""

from __future__ import annotations

from simhub.metrics.base import Output
from simhub.metrics.registry import BUILTIN_METRICS, metric_class
from simhub.structdoc import bound_text, cards_page, first_paragraph

#: Where the page lives in the repository.
METRICS_PAGE = "docs/reference/metrics.md"

def card(output: Output, metric: str) -> str:
    """The card of one output of the registered metric ``metric``.

    >>> lines = card(metric_class("rouge_l").outputs[0], "rouge_l").splitlines()
    >>> lines[0], lines[-1]
    ('## ROUGE-L (`rouge_l`)', '```')
    """
    cls = metric_class(metric)
    model = (f"a model: the profile's `scoring.metrics.{cls.config_key}`" if cls.config_key
             else "no model (text only)")
    lines = [f"## {output.heading} (`{output.name}`)", "", first_paragraph(cls.__doc__), "",
             f"- **Declared as:** {output.description}",
             f"- **Range:** [{bound_text(output.low)}, {bound_text(output.high)}]"
             + (", binary (0 or 1: paired comparisons use McNemar's test)" if output.binary else ""),
             f"- **Direction:** {'higher' if output.higher_is_better else 'lower'} is more realistic ({output.arrow})",
             f"- **Null when:** {output.null_rule}",
             f"- **Needs:** {model}; computed by `{cls.__module__}.{cls.__name__}`"]
    if output.summary:
        lines.append("- **Summary statistics it adds:** "
                     + ", ".join(f"`{k}` ({label})" for k, label in output.summary.items()))
    lines += ["", "```bash",
              f"simhub score --profile demo --metrics {output.name} --input items.jsonl --output scores.jsonl",
              "```", ""]
    return "\n".join(lines)


def metrics_markdown() -> str:
    """The whole page: every built-in metric's outputs, in the paper's order."""
    intro = ("Generated from each metric's declared metadata by `python scripts/gen_reference.py` (a test checks "
             "that this page matches the code). The same metadata reaches `GET /models`, the report and the "
             "leaderboard. `simhub data items test.jsonl --output items.jsonl` writes score items for every "
             "student turn of a dialogue file.")
    return cards_page("Metric cards", intro, (card(output, name) for name in BUILTIN_METRICS
                                              for output in metric_class(name).outputs))
