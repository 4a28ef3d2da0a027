"""Labelling tutoring dialogues through any OpenAI-compatible endpoint, in the released annotation layout.

``simhub annotate`` makes the labels the paper's metrics need (docs/protocol.md §2, §8) with an LLM: per
question a solution, its solvability, the correct option and an explanation per option; per
dialogue the act and correctness of every student turn, the KCs of every tutor turn that poses a
task, an OCEAN persona and a free-text profile. The output has the layout of the authors'
released files (``{split}_{annotator}.csv``), so ``simhub data convert-eedi --annotations`` reads it
like theirs, and :func:`compare_annotations` measures how far two annotators agree.

Modules: :mod:`~simhub.annotation.labels` (names and columns), :mod:`~simhub.annotation.parsing`
(answers to cells), :mod:`~simhub.annotation.layout` (keys and the CSV writer),
:mod:`~simhub.annotation.run` (the workflow) and :mod:`~simhub.annotation.agreement`.
"""

from simhub.annotation.agreement import (
    PAPER_HUMAN_AGREEMENT,
    cohen_kappa,
    compare_annotations,
    format_agreement,
    jaccard,
)
from simhub.annotation.labels import ANNOTATION_LABELS, parse_labels
from simhub.annotation.layout import dialogue_key, write_annotation_file
from simhub.annotation.parsing import InvalidAnnotation, extract_json, parse_answer
from simhub.annotation.run import (
    CHARS_PER_TOKEN,
    DEFAULT_BASE_URL,
    KEY_ENV,
    AnnotationPlan,
    AnnotationReport,
    AnnotationSettings,
    annotate_splits,
    annotator_endpoint,
    annotator_endpoint_settings,
    annotator_lm,
    load_inputs,
    plan_annotation,
)

__all__ = [
    "ANNOTATION_LABELS",
    "CHARS_PER_TOKEN",
    "DEFAULT_BASE_URL",
    "KEY_ENV",
    "PAPER_HUMAN_AGREEMENT",
    "AnnotationPlan",
    "AnnotationReport",
    "AnnotationSettings",
    "InvalidAnnotation",
    "annotate_splits",
    "annotator_endpoint",
    "annotator_endpoint_settings",
    "annotator_lm",
    "cohen_kappa",
    "compare_annotations",
    "dialogue_key",
    "extract_json",
    "format_agreement",
    "jaccard",
    "load_inputs",
    "parse_answer",
    "parse_labels",
    "plan_annotation",
    "write_annotation_file",
]
