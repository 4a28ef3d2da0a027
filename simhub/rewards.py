"""simhub's realism metrics as a reward for any RL trainer.

    from simhub.rewards import realism_reward

    reward = realism_reward("demo", metrics=["acts", "cosine"], weights={"acts": 2, "cosine": 1})
    trainer = trl.GRPOTrainer(model=..., reward_funcs=[reward], train_dataset=dataset, ...)

The dataset's extra columns say which real turn each completion replaces (``dialogue`` and
``turn_index``; or ``dialogue_id`` and ``turn_index`` with ``data=``; or ``real`` alone for the
metrics that read no dialogue): :mod:`simhub.scoring.rewards` has the rules, and
``docs/guides/rewards.md`` a whole example. Over HTTP the same reward is ``POST /v1/reward`` of
``simhub serve`` (the remote reward-model protocol OpenRLHF uses).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from simhub.config import Profile
from simhub.scoring.rewards import RealismReward, combine, default_reward_metrics

__all__ = ["RealismReward", "combine", "default_reward_metrics", "realism_reward"]


def realism_reward(profile: str | os.PathLike[str] | Profile = "demo", *, metrics: Sequence[str] | None = None,
                   weights: Mapping[str, float] | None = None, data: str | os.PathLike[str] | None = None,
                   on_step=None) -> RealismReward:
    """A :class:`~simhub.scoring.rewards.RealismReward` over ``profile``'s metric models (built on
    first use, as every command builds them; ``on_step(k, n, what)`` hears of each build).

    ``metrics`` (default: the paper's DPO reward metrics, every configured one but ROUGE-L; with
    ``weights`` alone, the weighted ones) and ``weights`` (default equal) make the reward; ``data``
    (a JSONL file of canonical dialogues) is where a ``dialogue_id`` column looks. Unknown or
    unconfigured metrics, and weights of other metrics, are a :class:`~simhub.errors.ConfigError`
    naming the field, before any model is built.
    """
    from simhub.config import load_profile
    from simhub.provision import metric_models, provision_profile, restrict
    from simhub.schema import read_jsonl
    from simhub.scoring import Scorer

    loaded = profile if isinstance(profile, Profile) else load_profile(profile)
    # names, weights and the default metrics are settled on the unbuilt profile (a scorer loads no model
    # until it scores); only the chosen metrics' models are built
    chosen = RealismReward(Scorer.from_profile(loaded, mode="service"), metrics, weights).metrics
    built = provision_profile(restrict(loaded, metrics=metric_models(chosen), simulators=[], tutors=[]), on_step=on_step)
    dialogues = read_jsonl(data) if data is not None else None
    return RealismReward(Scorer.from_profile(built, mode="service"), chosen, weights, dialogues)
