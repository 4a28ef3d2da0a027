"""The learner and extractor a tutor bench names on the command line, built from the profile.

* learner ``knowsim``: the knowledge-state learner speaking through the scripted stand-in;
  ``knowsim:MODEL``: the same learner role-played by ``MODEL``;
* extractor ``offline`` (MiniLM similarity), ``offline:lexical`` (word overlap), or ``MODEL``;
* IQ rater (``--iq-rater``) ``MODEL``;
* termination judge (``--termination-judge``, stateless learners only) ``MODEL``.

``MODEL`` is an entry of the profile's ``simulators:`` or ``tutors:`` section: an OpenAI-compatible
endpoint (``kind: openai``, asked for JSON) or a local model.
"""

from __future__ import annotations

from simhub.config import Profile
from simhub.errors import ConfigError, UnknownNameError
from simhub.learners.chat import chat_model
from simhub.learners.extract import Extractor, LLMExtractor, OfflineExtractor
from simhub.learners.roleplay import BASELINE_STYLES, Learner, RolePlayLearner, ScriptedLearner, StatelessLearner
from simhub.models import LoadOptions
from simhub.tutoring.knowsim.iq import IQRater
from simhub.tutoring.knowsim.termination import TerminationJudge

LEARNERS = ("knowsim", "knowsim:MODEL", "zs:MODEL", "zs-cot:MODEL", "zs-cot-prof:MODEL")
EXTRACTORS = ("offline", "offline:lexical", "MODEL")
OFFLINE = ("offline", "offline:lexical")


def needed_models(learner: str, extractor: str, iq_rater: str | None = None,
                  termination_judge: str | None = None) -> list[str]:
    """The profile entries the learner, extractor, IQ rater and termination judge names refer to (to
    provision only those)."""
    out = [m for m in (iq_rater, termination_judge) if m]
    head = learner.split(":", 1)[0]
    if ":" in learner and (head == "knowsim" or head in BASELINE_STYLES):
        out.append(learner.split(":", 1)[1])
    if extractor not in OFFLINE:
        out.append(extractor)
    return out


def build_learner(name: str, profile: Profile | None, options: LoadOptions | None = None, *,
                  max_tokens: int = 400) -> Learner:
    if name == "knowsim":
        return ScriptedLearner()
    if name.startswith("knowsim:"):
        model = name.split(":", 1)[1]
        if not model:
            raise ConfigError("--learner knowsim:MODEL: name a model of the profile", field="learner")
        return RolePlayLearner(chat_model(model, profile, options, field="learner"), name=name, max_tokens=max_tokens)
    head, _, model = name.partition(":")
    if head in BASELINE_STYLES and model:
        return StatelessLearner(chat_model(model, profile, options, field="learner"), head, name=name,
                                max_tokens=max_tokens)
    raise UnknownNameError("learner", name, LEARNERS, field="learner")


def build_extractor(name: str, profile: Profile | None, options: LoadOptions | None = None) -> Extractor:
    if name == "offline":
        return OfflineExtractor("embedding", device=options.device if options else None)
    if name == "offline:lexical":
        return OfflineExtractor("lexical")
    return LLMExtractor(chat_model(name, profile, options, field="extractor"), name=name)


def build_iq_rater(name: str, profile: Profile | None, options: LoadOptions | None = None) -> IQRater:
    """The IQ rater of ``--iq-rater``: a profile model asked once per conversation (JSON mode on an endpoint)."""
    return IQRater(chat_model(name, profile, options, field="iq_rater"), name=name)


def is_stateless(learner: str) -> bool:
    """Whether ``learner`` names a stateless baseline (``zs:MODEL``, ``zs-cot:MODEL``, ``zs-cot-prof:MODEL``)."""
    return learner.partition(":")[0] in BASELINE_STYLES


def check_judged_learner(learner: str) -> None:
    """A termination judge sets a stateless learner's end turn; the knowledge-state learner is stopped by
    its preset's rules instead, so naming one for it is refused."""
    if not is_stateless(learner):
        raise ConfigError(f"--termination-judge: the learner {learner!r} is stopped by its preset's rules (its "
                          f"virtual early stop is recorded); a termination judge is for the stateless baselines "
                          f"zs:MODEL, zs-cot:MODEL and zs-cot-prof:MODEL", field="termination_judge")


def build_termination_judge(name: str, profile: Profile | None, options: LoadOptions | None = None) -> TerminationJudge:
    """The termination judge of ``--termination-judge``: a profile model that sets a stateless learner's
    end turn after the fact (see :func:`check_judged_learner`)."""
    return TerminationJudge(chat_model(name, profile, options, field="termination_judge"), name=name)
