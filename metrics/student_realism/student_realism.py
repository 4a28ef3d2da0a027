"""Student realism: the seven reference-based realism metrics of simhub as an ``evaluate`` module.

A thin adapter over :class:`simhub.scoring.Scorer`; the metric logic lives in the library.
"""

import datasets
import evaluate

from simhub.metrics import ScoreItem, check_metric_names, metric_names, outputs
from simhub.schema import Dialogue, Question, Turn, dialogue_from_dict
from simhub.scoring import Scorer

_CITATION = """\
@article{scarlatos2025simulated,
  title={Simulated Students in Tutoring Dialogues: Substance or Illusion?},
  author={Scarlatos, Alexander and Lee, Jaewook and Woodhead, Simon and Lan, Andrew},
  year={2025}
}
"""

_DESCRIPTION = """\
How realistic is a simulated student turn? Each prediction (simulated turn) is compared with the
reference (the real student turn at the same point of a real dialogue). From text alone the module
gives ROUGE-L and embedding cosine similarity; with the dialogues and the index of the real turn
and a profile with metric models it gives all seven metrics: acts, correctness, errors, knowledge,
cosine, rouge_l and tutor_response.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (list of str): simulated student turns.
    references (list of str): the real student turns.
    dialogues (list of dict, optional): the real dialogues in simhub's canonical JSON format.
    turn_indices (list of int, optional): index of the real student turn in each dialogue.
    metrics (list of str, optional): metric names (default: rouge_l and cosine from text alone,
        all configured ones with dialogues).
    profile (str, optional): simhub profile with the metric models (default: none, text metrics only).
    return_items (bool, optional): also return the per-item scores (default False).
Returns:
    For each metric, the mean over non-null items (None when all are null), plus
    ``{metric}_std`` and ``{metric}_count``.
Examples:
    >>> realism = evaluate.load("metrics/student_realism")
    >>> out = realism.compute(predictions=["8/5"], references=["5/8 divided by 1/6?"], metrics=["rouge_l"])
    >>> round(out["rouge_l"], 4)
    0.25
"""

#: One Scorer per profile per process: it loads its models lazily and keeps no per-call state.
_SCORERS: dict = {}


def _scorer(profile):
    # Keyed on the registered metrics too: a plugin registered later gets a scorer that knows it.
    key = (profile, metric_names())
    if key not in _SCORERS:
        if profile is None:
            from simhub.config import EmbedderConfig, MetricModels, ScoringConfig

            _SCORERS[key] = Scorer(ScoringConfig(metrics=MetricModels(cosine=EmbedderConfig())))
        else:
            # An entry point of its own: it builds the profile's demo models like the CLI does.
            from simhub.config import load_profile
            from simhub.provision import provision_profile, restrict

            built = provision_profile(restrict(load_profile(profile), simulators=[], tutors=[]), on_step=None)
            _SCORERS[key] = Scorer.from_profile(built, mode="benchmark")
    return _SCORERS[key]


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class StudentRealism(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({"predictions": datasets.Value("string"), "references": datasets.Value("string")}),
            reference_urls=["https://huggingface.co/datasets/Eedi/Question-Anchored-Tutoring-Dialogues-2k"],
        )

    def _compute(self, predictions, references, dialogues=None, turn_indices=None, metrics=None, profile=None, return_items=False):
        scorer = _scorer(profile)
        if dialogues is None:
            names = check_metric_names(metrics or ["rouge_l", "cosine"])
            table = outputs()
            needs_dialogue = [m for m in names if table[m][0].needs_dialogue]
            if needs_dialogue:
                raise ValueError(f"metrics {', '.join(needs_dialogue)} need dialogues= and turn_indices=")
            items = [
                ScoreItem(Dialogue(id=str(i), question=Question(text=""), turns=[Turn(role="student", content=ref)]), 0, pred)
                for i, (pred, ref) in enumerate(zip(predictions, references, strict=False))
            ]
        else:
            if turn_indices is None or len(dialogues) != len(predictions) or len(turn_indices) != len(predictions):
                raise ValueError("dialogues and turn_indices must be given together, one per prediction")
            names = check_metric_names(metrics) if metrics else None
            items = []
            for i, (pred, ref, d, t) in enumerate(zip(predictions, references, dialogues, turn_indices, strict=False)):
                dialogue = dialogue_from_dict(d, f"dialogues[{i}]")
                # A bad index is the caller's error here, not a silently null item.
                if dialogue.check_student_turn(t, f"turn_indices[{i}]").content != ref:
                    raise ValueError(f"references[{i}] differs from turn {t} of dialogues[{i}]")
                items.append(ScoreItem(dialogue, t, pred))
        result = scorer.score(items, names)
        out = {}
        # The Scorer's summary, flattened: the same numbers simhub score and POST /score report.
        for name, s in result.summary.items():
            out[name] = s["mean"]
            for key, value in s.items():
                if key != "mean" and isinstance(value, int | float | type(None)):
                    out[f"{name}_{key}"] = value
        if return_items:
            out["items"] = [item.to_dict() for item in result.items]
        return out
