"""``tutor_response``: how likely is the real next tutor turn after the simulated student turn?

Score = exp(-mean token NLL) of the real tutor turn's tokens plus its end-of-turn token, given the
history with the simulated turn in place of the real one, under the tutor model (docs/protocol.md §3). Prompt
tokens carry no loss. Null for the last turn (no tutor turn follows).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import msgspec

from simhub.config import ModelRef
from simhub.metrics.base import Metric, MetricResult, Output, ScoreItem
from simhub.models import LanguageModel, load_lm
from simhub.prompts import tutor_messages
from simhub.schema import Dialogue

LAST_TURN = "no tutor turn follows this student turn"


def substitute(dialogue: Dialogue, index: int, text: str) -> Dialogue:
    """A copy of ``dialogue`` with turn ``index``'s content replaced by ``text``."""
    turns = list(dialogue.turns)
    turns[index] = msgspec.structs.replace(turns[index], content=text)
    return msgspec.structs.replace(dialogue, turns=turns)


class TutorResponse(Metric):
    """``tutor_response``: exp(-mean NLL) of the real next tutor turn, under the tutor model, after
    the simulated student turn put in place of the real one (:func:`substitute`). Null for a
    student turn that no tutor turn follows, before any model runs:

    >>> from simhub.metrics import MetricContext, ScoreItem
    >>> from simhub.schema import Dialogue, Question, Turn
    >>> dialogue = Dialogue(id="d1", question=Question(text="2/5 + 6/5 = ?"), turns=[
    ...     Turn(role="tutor", content="What is 2/5 + 6/5?"), Turn(role="student", content="8/5")])
    >>> substitute(dialogue, 1, "eight fifths").turns[1].content
    'eight fifths'
    >>> TutorResponse(None, MetricContext()).skip(ScoreItem(dialogue, 1, "eight fifths"))
    {'tutor_response': 'no tutor turn follows this student turn'}
    """

    outputs = (Output("tutor_response", "exp(-mean NLL) of the real next tutor turn given the simulated turn", LAST_TURN,
                      label="Tutor resp."),)
    config_key = "tutor_response"
    config: ModelRef

    def load(self) -> LanguageModel:
        return load_lm(self.config.plain(), self.context.load)

    def skip(self, item: ScoreItem) -> dict[str, str]:
        turns = item.dialogue.turns
        follows = item.turn_index + 1 < len(turns) and turns[item.turn_index + 1].role == "tutor"
        return {} if follows else {"tutor_response": LAST_TURN}

    def pair(self, lm: LanguageModel, item: ScoreItem) -> tuple[list[int], list[int]]:
        simulated = substitute(item.dialogue, item.turn_index, item.candidate)
        prompt = lm.chat_ids(tutor_messages(simulated, upto=item.turn_index + 1))
        target = [*lm.text_ids(item.dialogue.turns[item.turn_index + 1].content.strip()), lm.eot_id]
        return prompt, target

    def score(self, items: Sequence[ScoreItem]) -> list[MetricResult]:
        lm = self.load()
        logps = lm.continuation_logprobs([self.pair(lm, it) for it in items])
        out = []
        for lp in logps:
            value = math.exp(float(lp.mean()))
            out.append(MetricResult({"tutor_response": value}) if math.isfinite(value)
                       else MetricResult.null(["tutor_response"], "non-finite likelihood"))
        return out

    def prompt(self, item: ScoreItem) -> str:
        simulated = substitute(item.dialogue, item.turn_index, item.candidate)
        return self.load().chat_text(tutor_messages(simulated, upto=item.turn_index + 1))
