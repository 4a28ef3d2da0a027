"""The realism metrics as one reward per simulated turn, for online RL (``simhub grpo``, a user's own
trainer) and the service's ``POST /v1/reward``.

A reward is a weighted mean of metric values of the completion against the real turn it replaces:
``sum(w[m] * v[m]) / sum(w[m])`` over the metrics whose value is not null (a lower-is-better output
counts negated); None when every value is null. With equal weights and the default metrics it is the
paper's DPO reward (every configured metric but ROUGE-L, averaged; ``simhub.training.dpo``). The
scorer runs in the service's mode (stored knowledge cutoffs), so a turn's reward never depends on the
other turns scored with it.

:class:`RealismReward` is callable the way trl's ``GRPOTrainer`` calls its ``reward_funcs``:
``reward(prompts=..., completions=..., **columns)``, where the columns say which real turn each
completion replaces, one of:

* ``dialogue`` (the canonical dialogue, a dict or a :class:`~simhub.schema.Dialogue`) and
  ``turn_index``;
* ``dialogue_id`` and ``turn_index``, with the dialogues given to the reward when it was made;
* ``real`` (the real turn's text) alone, for metrics that read no dialogue (cosine, ROUGE-L).

A completion is a string, or a list of chat messages (trl's conversational format: the last one's
``content``). ``docs/guides/rewards.md`` shows it in a user's own ``GRPOTrainer``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from simhub.errors import ConfigError, DataError, SchemaError
from simhub.metrics import ScoreItem
from simhub.schema import Dialogue, Question, Turn, dialogue_from_dict
from simhub.scoring.scorer import Scorer

__all__ = ["RealismReward", "combine", "default_reward_metrics"]


def default_reward_metrics(configured: Sequence[str]) -> list[str]:
    """The paper's reward metrics among ``configured``: all but ROUGE-L (its DPO step's default)."""
    return [m for m in configured if m != "rouge_l"]


def combine(values: Mapping[str, float | None], weights: Mapping[str, float],
            higher_is_better: Mapping[str, bool] | None = None) -> float | None:
    """The weighted mean of the non-null ``values`` (see the module docstring); None if all are null."""
    total = weight = 0.0
    for m, w in weights.items():
        v = values.get(m)
        if v is None or (isinstance(v, float) and math.isnan(v)):
            continue
        sign = 1.0 if higher_is_better is None or higher_is_better.get(m, True) else -1.0
        total += w * sign * v
        weight += w
    return total / weight if weight else None


class RealismReward:
    """A reward over ``scorer``'s ``metrics`` with ``weights`` (default equal); see the module docstring.

    ``dialogues``: the dialogues a ``dialogue_id`` column names. :meth:`score` gives every metric's
    value with the reward; calling the object gives the rewards alone, as trl expects.
    """

    def __init__(self, scorer: Scorer, metrics: Sequence[str] | None = None, weights: Mapping[str, float] | None = None,
                 dialogues: Sequence[Dialogue] | Mapping[str, Dialogue] | None = None):
        self.scorer = scorer
        configured = scorer.metrics
        chosen = list(metrics) if metrics is not None else (
            [m for m in weights if weights[m]] if weights else default_reward_metrics(configured))
        self.metrics = scorer.resolve_metrics(chosen)
        if not self.metrics:
            raise ConfigError("metrics: no reward metric (name at least one)", field="metrics")
        weights = dict(weights) if weights else dict.fromkeys(self.metrics, 1.0)
        unknown = [m for m in weights if m not in self.metrics]
        if unknown:
            raise ConfigError(f"weights: {', '.join(unknown)} not among the reward metrics "
                              f"({', '.join(self.metrics)})", field="weights")
        bad = [m for m, w in weights.items() if not isinstance(w, int | float) or isinstance(w, bool) or w < 0
               or not math.isfinite(w)]
        if bad:
            raise ConfigError(f"weights: {', '.join(bad)} must be a finite number of at least 0", field="weights")
        if not any(weights.get(m, 0.0) for m in self.metrics):
            raise ConfigError("weights: every weight is 0", field="weights")
        self.weights = {m: float(weights.get(m, 0.0)) for m in self.metrics}
        self.higher_is_better = {o.name: o.higher_is_better for metric in scorer.instances.values()
                                 for o in metric.outputs}
        if dialogues is None:
            self.dialogues: dict[str, Dialogue] = {}
        elif isinstance(dialogues, Mapping):
            self.dialogues = dict(dialogues)
        else:
            self.dialogues = {d.id: d for d in dialogues}
        #: trl logs each reward function under its ``__name__``.
        self.__name__ = "realism"

    def describe(self) -> dict[str, Any]:
        """What the reward is (a model card and a run log record it)."""
        return {"metrics": list(self.metrics), "weights": dict(self.weights)}

    # ------------------------------------------------------------------ trl's call

    def __call__(self, prompts: Sequence[Any] | None = None, completions: Sequence[Any] | None = None,
                 **columns: Any) -> list[float | None]:
        if completions is None:
            raise DataError("completions: required", field="completions")
        rewards, _ = self.score(self.items([completion_text(c) for c in completions], columns))
        return rewards

    def items(self, completions: Sequence[str], columns: Mapping[str, Any]) -> list[ScoreItem]:
        """The scored item of each completion, from the columns that name its real turn."""
        n = len(completions)

        def column(name: str) -> list[Any] | None:
            values = columns.get(name)
            if values is None:
                return None
            if len(values) != n:
                raise DataError(f"{name}: {len(values)} values for {n} completions", field=name)
            return list(values)

        turns, dialogues, ids, real = column("turn_index"), column("dialogue"), column("dialogue_id"), column("real")
        out = []
        for i, text in enumerate(completions):
            if dialogues is not None or ids is not None:
                if turns is None:
                    raise DataError("turn_index: required with dialogue or dialogue_id", field="turn_index")
                dialogue = self._dialogue(dialogues[i] if dialogues is not None else None,
                                          ids[i] if ids is not None else None, i)
                out.append(ScoreItem(dialogue, _index(turns[i], i), text))
            elif real is not None:
                out.append(ScoreItem(self.text_only(real[i], i), 0, text))
            else:
                raise DataError("the real turn of each completion: give dialogue and turn_index, dialogue_id and "
                                "turn_index, or real (the real turn's text)", field="dialogue")
        return out

    def _dialogue(self, given: Any, did: Any, i: int) -> Dialogue:
        if given is not None:
            if isinstance(given, Dialogue):
                return given
            return dialogue_from_dict(given, where=f"dialogue[{i}]")
        if not self.dialogues:
            raise DataError("dialogue_id: this reward was given no dialogues to find it in (realism_reward(data=...))",
                            field="dialogue_id")
        found = self.dialogues.get(str(did))
        if found is None:
            raise DataError(f"dialogue_id[{i}]: {did!r} is not among the reward's {len(self.dialogues)} dialogues",
                            field=f"dialogue_id[{i}]")
        return found

    def text_only(self, real: Any, i: int) -> Dialogue:
        """A dialogue of the real turn alone (index 0), for metrics that read no dialogue."""
        if not isinstance(real, str):
            raise DataError(f"real[{i}]: expected the real turn's text, got {type(real).__name__}", field=f"real[{i}]")
        reads = [m for m in self.metrics if self.scorer.instances[self.scorer.owner(m)].needs_dialogue]
        if reads:
            raise DataError(f"real: {', '.join(reads)} read the dialogue; give dialogue (or dialogue_id) and "
                            "turn_index, or leave those metrics out of the reward", field="real")
        return Dialogue(id=f"reward-{i}", question=Question(text=""), turns=[Turn(role="student", content=real)])

    # ------------------------------------------------------------------ scoring

    def score(self, items: Sequence[ScoreItem]) -> tuple[list[float | None], list[dict[str, float | None]]]:
        """Each item's reward and its metric values (an item that cannot be scored: None and all null)."""
        result = self.scorer.score(list(items), list(self.metrics))
        values = [dict(r.scores) for r in result.items]
        return [combine(v, self.weights, self.higher_is_better) for v in values], values


def completion_text(completion: Any) -> str:
    """A completion's text: a string as it is; a chat completion (a list of messages) its last content."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Sequence) and completion and isinstance(completion[-1], Mapping):
        content = completion[-1].get("content")
        if isinstance(content, str):
            return content
    raise SchemaError(f"completions: expected a string or a list of chat messages, got {type(completion).__name__}",
                      field="completions")


def _index(value: Any, i: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise DataError(f"turn_index[{i}]: expected an integer, got {type(value).__name__}", field=f"turn_index[{i}]")
    return value
