"""``correctness`` and ``errors``: one judge call per turn gives both (docs/protocol.md §3).

The judge answers ``correct``, ``incorrect`` or ``na``, adding ``same error`` or
``different error`` when both turns are incorrect. Scoring follows the reference's table:

* real ``correct``: correctness 1 iff the answer is exactly ``correct``; errors null;
* real ``incorrect``: correctness 1 iff the answer contains ``incorrect``; errors 1 iff it
  contains ``same error``;
* real ``na`` (or no label, a failed annotation): both null.

Answers are lower-cased and stripped first (after any ``</think>`` block of a reasoning model); an
answer that matches nothing scores 0, with the raw answer kept in the details. A request that
fails after its retries is null, with its cause.

Two judges: an OpenAI-compatible chat model (the paper: GPT-5 mini at low reasoning effort) and a
local causal LM that picks the most likely of the allowed answers (so its output always parses).
The judge's endpoint is built in one place, :func:`judge_endpoint`, and asked through the models'
one path for answers, :func:`simhub.models.endpoint_lm.endpoint_answers`: the judge metric and the
dialogue-level statistics' labels and realness verdicts (:mod:`simhub.evaluation.dialogue_eval`)
share its client, cache and key rule.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from simhub.config import JudgeConfig, cache_dir
from simhub.metrics.base import Metric, MetricResult, Output, ScoreItem
from simhub.models import LanguageModel, Sampling, load_lm
from simhub.models.endpoint_lm import Answer, EndpointLM, endpoint_answers
from simhub.prompts import judge_messages

#: Answers a local judge chooses between.
JUDGE_OPTIONS: tuple[str, ...] = ("correct", "incorrect, same error", "incorrect, different error", "na")
#: The paper's judge: GPT-5 mini at low reasoning effort, up to 15,000 completion tokens.
PAPER_JUDGE_MODEL = "gpt-5-mini-2025-08-07"
REAL_NA = "real turn is na"
NO_LABEL = "real turn has no correctness label (a failed annotation)"
NOT_INCORRECT = "real turn is not incorrect"


@dataclass
class Verdict:
    correctness: float | None
    errors: float | None
    #: The candidate's correctness as the judge sees it: correct / incorrect / na, or None when the
    #: answer matches none of them.
    label: str | None
    reasons: dict[str, str] = field(default_factory=dict)


def final_answer(raw: str) -> str:
    """The verdict part of a judge answer: after a reasoning block, stripped and lower-cased."""
    text = raw
    for marker in ("</think>", "assistantfinal"):
        if marker in text:
            text = text.split(marker)[-1]
            break
    return text.strip().lower()


def parse_verdict(answer: str, real_label: str) -> Verdict:
    """Apply the reference's scoring table to a judge answer for a real ``correct``/``incorrect`` turn."""
    text = final_answer(answer)
    label = "correct" if text == "correct" else "incorrect" if "incorrect" in text else "na" if text == "na" else None
    if real_label == "correct":
        return Verdict(float(text == "correct"), None, label, {"errors": NOT_INCORRECT})
    return Verdict(float("incorrect" in text), float("same error" in text), label)


def item_messages(item: ScoreItem) -> list[dict]:
    """The judge prompt for one item: the real turn, its label and the candidate (also what a
    local judge is trained on, :func:`simhub.training.data.judge_cases`)."""
    real = item.real
    return judge_messages(item.dialogue, item.history, real.content, real.correctness or "na", item.candidate)


def skip_reasons(real_label: str | None) -> dict[str, str]:
    if real_label is None:
        return {"correctness": NO_LABEL, "errors": NO_LABEL}
    if real_label == "na":
        return {"correctness": REAL_NA, "errors": REAL_NA}
    return {}


#: Where the judge's endpoint sits in a profile (named in key errors).
JUDGE_FIELD = "scoring.metrics.judge.endpoint"


def judge_endpoint(config: JudgeConfig, *, reasoning_effort: str | None, batch: bool | None = None) -> EndpointLM:
    """The judge's OpenAI-compatible endpoint as an :class:`~simhub.models.endpoint_lm.EndpointLM`
    over its shared client (judge keys, answers cached under the ``judge`` cache). ``batch`` defaults
    to the endpoint's ``batch_api``; each caller says which ``reasoning_effort`` its requests carry."""
    from simhub.models.endpoints import endpoint_lm

    return endpoint_lm(config.endpoint, config.model, kind="judge", field=JUDGE_FIELD, default_cache=cache_dir("judge"),
                       reasoning_effort=reasoning_effort, batch=batch, name="judge")


class Judge(Metric):
    """``correctness`` and ``errors`` from one judge answer per turn, scored by the reference's table
    (:func:`parse_verdict`; see the module docstring):

    >>> v = parse_verdict("Incorrect, same error", "incorrect")
    >>> v.correctness, v.errors, v.label
    (1.0, 1.0, 'incorrect')
    >>> v = parse_verdict("<think>8/5 is right</think> Correct", "correct")
    >>> v.correctness, v.errors, v.reasons
    (1.0, None, {'errors': 'real turn is not incorrect'})
    """

    outputs = (
        Output("correctness", "agreement of the simulated turn's correctness with the real label",
               f"{REAL_NA}; {NO_LABEL}; the judge request failed", binary=True, label="Correctness"),
        Output("errors", "1 if both turns are incorrect with the same error",
               f"{NOT_INCORRECT}; {NO_LABEL}; the judge request failed", binary=True, label="Errors"),
    )
    config_key = "judge"
    config: JudgeConfig

    def __init__(self, config: JudgeConfig, context):
        super().__init__(config, context)
        if config.kind == "openai" and config.endpoint.base_url:  # a bad key setting fails before any work
            from simhub.models.endpoints import key_names

            key_names(config.endpoint.base_url, config.endpoint.api_key_env, kind="judge", field=JUDGE_FIELD)
        self._endpoint: EndpointLM | None = None

    def unavailable(self) -> str | None:
        if self.config.kind != "openai" or not self.config.endpoint.base_url:
            return None
        from simhub.models.endpoints import missing_key

        return missing_key(self.config.endpoint.base_url, self.config.endpoint.api_key_env, kind="judge",
                           field=JUDGE_FIELD)

    def describe(self) -> dict[str, Any]:
        if self.config.kind == "openai":
            return {"base_model": self.config.model, "backend": "openai", "base_url": self.config.endpoint.base_url}
        return super().describe()

    # ------------------------------------------------------------------ backends

    @property
    def _reasoning(self) -> bool:
        from simhub.models.endpoints import is_reasoning_model

        return is_reasoning_model(self.config.model)

    def load(self) -> LanguageModel:
        if self.config.kind == "local":
            return load_lm(self.config.plain(), self.context.load)
        return self.endpoint()

    def endpoint(self) -> EndpointLM:
        """The endpoint judge (built on first use): the paper's low reasoning effort by default on a
        reasoning model."""
        if self._endpoint is None:
            self._endpoint = judge_endpoint(self.config,
                                            reasoning_effort=self.config.reasoning_effort or ("low" if self._reasoning else None))
        return self._endpoint

    def sampling(self) -> Sampling:
        """The endpoint judge's decoding: greedy unless the profile says otherwise (a reasoning model
        gets no temperature at all), 15,000 completion tokens for a reasoning model, 4,000 otherwise."""
        return Sampling(temperature=self.config.temperature if self.config.temperature is not None else 0.0,
                        max_tokens=self.config.max_completion_tokens or (15_000 if self._reasoning else 4_000))

    def payload(self, messages: list[dict]) -> dict:
        """The chat-completions body the endpoint judge sends for ``messages``."""
        return self.endpoint().request(messages, self.sampling())

    def answers(self, messages: list[list[dict]]) -> list[Answer]:
        """``(answer, None)`` or ``(None, failure cause)`` per prompt."""
        if self.config.kind == "local":
            lm = self.load()
            options = [[*lm.text_ids(o), lm.eot_id] for o in JUDGE_OPTIONS]
            best, _ = lm.choose([lm.chat_ids(m) for m in messages], options)
            return [Answer(JUDGE_OPTIONS[i], None) for i in best]
        return endpoint_answers(self.endpoint(), messages, self.sampling(), progress=len(messages) > 32)

    # ------------------------------------------------------------------ metric

    def skip(self, item: ScoreItem) -> dict[str, str]:
        return skip_reasons(item.real.correctness)

    def messages(self, item: ScoreItem) -> list[dict]:
        return item_messages(item)

    def score(self, items: Sequence[ScoreItem]) -> list[MetricResult]:
        out = []
        for item, (answer, cause, _) in zip(items, self.answers([self.messages(it) for it in items]), strict=True):
            if answer is None:
                result = MetricResult.null(["correctness", "errors"], f"judge request failed: {cause}", transient=True)
                result.details = {"error": cause, "real_label": item.real.correctness}
            else:
                v = parse_verdict(answer, item.real.correctness or "na")
                result = MetricResult({"correctness": v.correctness, "errors": v.errors}, v.reasons,
                                      {"answer": answer, "real_label": item.real.correctness, "verdict": v.label})
            out.append(result)
        return out

    def prompt(self, item: ScoreItem) -> str:
        messages = self.messages(item)
        if self.config.kind == "local":
            return self.load().chat_text(messages)
        return "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in messages)
