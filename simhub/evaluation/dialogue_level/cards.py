"""One card per dialogue-level output, generated from what each dialogue metric declares
(``docs/reference/dialogue-metrics.md``): what it measures, its range and which way is more realistic,
when it is null, what it needs besides the dialogues, and the command that computes it.
``python scripts/gen_reference.py`` writes the page; a test checks it is current.
"""

from __future__ import annotations

from simhub.evaluation.dialogue_level.base import DialogueMetric, DialogueOutput
from simhub.evaluation.dialogue_level.registry import BUILTIN_DIALOGUE_METRICS, dialogue_metric_class
from simhub.structdoc import bound_text, cards_page, first_paragraph

#: Where the page lives in the repository.
DIALOGUE_METRICS_PAGE = "docs/reference/dialogue-metrics.md"

#: What each shared input (``DialogueMetric.requires``) is, in words.
_INPUTS = {
    "embed": "a sentence embedder (`scoring.metrics.cosine`)",
    "trajectories": "the knowledge tracer's mastery trajectories (`scoring.metrics.knowledge`)",
    "verdicts": "a judge behind an endpoint (`scoring.metrics.judge`, `kind: openai`)",
    "sensitivity": "the simulator run again after helpful and unhelpful tutor turns (`--simulator`)",
}
_LABELS = {"acts": "act labels from the act classifier (`scoring.metrics.acts`)",
           "correctness": "correctness labels (`scoring.metrics.correctness_classifier`, else the judge)"}


def card(output: DialogueOutput, cls: type[DialogueMetric]) -> str:
    """The card of one output of dialogue metric ``cls``.

    >>> from simhub.evaluation.dialogue_level.registry import dialogue_metric_class
    >>> cls = dialogue_metric_class("length_w1")
    >>> card(cls.outputs[0], cls).splitlines()[0]
    '## Turn length (W1) (`length_w1`)'
    """
    needs = [_INPUTS.get(r, r) for r in cls.requires] + [_LABELS.get(label, label) for label in cls.labels]
    about = first_paragraph(cls.__doc__)
    lines = [f"## {output.heading} (`{output.name}`)", "", *([about, ""] if about else []),
             f"- **Measures:** {output.description}",
             f"- **Range:** [{bound_text(output.low)}, {bound_text(output.high)}]",
             f"- **Direction:** {output.direction or 'not declared'} ({output.arrow or '–'})",
             f"- **Null when:** {output.null_rule}",
             "- **Needs:** " + ("; ".join(needs) if needs else "the dialogues alone")
             + f"; computed by `{cls.__module__}.{cls.__name__}`",
             "", "```bash",
             "simhub eval-dialogues --profile demo --real test.jsonl --sim runs/roll --output runs/sft",
             "```", ""]
    return "\n".join(lines)


def dialogue_metrics_markdown() -> str:
    """The whole page: every built-in dialogue-level output, in the order results list them."""
    intro = ("Generated from each dialogue metric's declared metadata by `python scripts/gen_reference.py` (a test "
             "checks that this page matches the code). Every value comes with a dialogue-bootstrap 95% CI in "
             "`dialogue_results.json`; the guide is [Dialogue-level realism](../guides/dialogue-realism.md).")
    classes = [dialogue_metric_class(name) for name in BUILTIN_DIALOGUE_METRICS]
    return cards_page("Dialogue-level metric cards", intro, (card(output, cls) for cls in classes for output in cls.outputs))
