"""``tutor_response``: how likely is the real next tutor turn after the simulated student turn?

Score = exp(-mean token NLL) of the real tutor turn's tokens plus its end-of-turn token, given
the dialogue history with the simulated turn in place of the real one, under the tutor model.
Prompt tokens carry no loss. Null for the last turn (no tutor turn follows).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from simhub.backends.hf import LogprobModel, ModelRef, load_causal_lm
from simhub.prompts import tutor_messages
from simhub.schema import Dialogue, Turn


def substitute(dialogue: Dialogue, index: int, text: str) -> Dialogue:
    """A copy of ``dialogue`` with turn ``index``'s content replaced by ``text``."""
    turns = [Turn(role=t.role, content=t.content) for t in dialogue.turns]
    turns[index] = Turn(role=turns[index].role, content=text)
    return Dialogue(id=dialogue.id, question=dialogue.question, kcs=dialogue.kcs, persona=dialogue.persona,
                    profile=dialogue.profile, turns=turns)


def tutor_response_pair(lm: LogprobModel, dialogue: Dialogue, index: int, candidate: str) -> tuple[list[int], list[int]] | None:
    """(prompt ids, continuation ids) for student turn ``index``; None when no tutor turn follows."""
    if index + 1 >= len(dialogue.turns) or dialogue.turns[index + 1].role != "tutor":
        return None
    simulated = substitute(dialogue, index, candidate)
    prompt = lm.chat_ids(tutor_messages(simulated, upto=index + 1))
    target = [*lm.text_ids(dialogue.turns[index + 1].content.strip()), lm.eot_id]
    return prompt, target


class TutorResponseScorer:
    def __init__(self, ref: ModelRef | str, device: str | None = None, batch_size: int = 16, backend: str = "transformers"):
        self.lm = load_causal_lm(ref, device=device, batch_size=batch_size, backend=backend)

    def score(self, items: Sequence[tuple[Dialogue, int, str]]) -> list[float | None]:
        pairs = [tutor_response_pair(self.lm, d, i, c) for d, i, c in items]
        todo = [p for p in pairs if p is not None]
        logps = iter(self.lm.continuation_logprobs(todo))
        return [None if p is None else math.exp(float(next(logps).mean())) for p in pairs]
