"""Every simulator a profile offers, by name: its own ``simulators:``, the paper's five prompted
baselines (``baseline:STYLE``), the two reference simulators (``reference:...``) and the learners of
learner families that can play a student (:data:`LEARNER_SIMULATORS`: ``knowsim[:LEVEL]``)."""

from __future__ import annotations

from typing import Any

from simhub.config import Profile
from simhub.errors import ConfigError, UnknownNameError
from simhub.models import LoadOptions
from simhub.prompts import BASELINE_STYLES
from simhub.registry import LazyRegistry
from simhub.schema import Dialogue
from simhub.simulation.base import Simulator
from simhub.simulation.endpoint import BASELINE_PREFIX, EndpointSimulator, IclRetriever, baseline_config
from simhub.simulation.model import ModelSimulator
from simhub.simulation.reference import REFERENCE_SIMULATORS, ReferenceSimulator

BUILTIN_BASELINES = tuple(f"{BASELINE_PREFIX}{s}" for s in BASELINE_STYLES)

#: Simulated students that are a learner family's learner rather than a profile entry, by the head of
#: their name (``knowsim`` for ``knowsim`` and ``knowsim:LEVEL``): each entry has ``check(name)`` (its
#: name's rest, checked before anything is read or built) and ``build(name, profile, options)``. They
#: need no model of the profile. Plugins add theirs through the ``simhub.learner_simulators`` group.
LEARNER_SIMULATORS: LazyRegistry[Any] = LazyRegistry(
    "learner simulator", {"knowsim": "simhub.tutoring.knowsim.simulator:KNOWSIM_STUDENT"},
    group="simhub.learner_simulators")


def learner_simulator(name: str | None) -> Any | None:
    """The :data:`LEARNER_SIMULATORS` entry ``name`` belongs to, or None (a profile's simulator)."""
    if not name:
        return None
    head = name.partition(":")[0]
    return LEARNER_SIMULATORS.get(head) if head in LEARNER_SIMULATORS else None


def simulator_names(profile: Profile, *, http: bool = False) -> list[str]:
    """The names ``profile`` offers; ``http`` leaves out the reference simulators (they need the real turn)."""
    names = [*profile.simulators, *(b for b in BUILTIN_BASELINES if b not in profile.simulators)]
    return names if http else [*names, *REFERENCE_SIMULATORS]


def load_options(profile: Profile, *, asynchronous: bool = False, backend: str | None = None) -> LoadOptions:
    """How the profile's local simulators load (``serving.backend``, overridable)."""
    s = profile.scoring
    # With vLLM all simulators on one base share an engine: enable LoRA if any of them has an adapter.
    lora = any(c.kind == "model" and c.adapter for c in profile.simulators.values())
    return LoadOptions(backend=backend or profile.serving.backend, device=s.device, batch_size=s.batch_size,
                       share_base=s.share_base, vllm=profile.serving.vllm, asynchronous=asynchronous,
                       enable_lora=lora or None)


def icl_pool(profile: Profile) -> list[Dialogue]:
    """The dialogues the ICL baseline retrieves examples from: ``baselines.icl_pool``, which the
    commands that read ``--data`` default to that data's training split
    (:func:`~simhub.simulation.endpoint.with_icl_pool`). No pool is a ConfigError, never a silent
    stand-in: examples from other dialogues would change the baseline's numbers."""
    if not profile.baselines.icl_pool:
        raise ConfigError("baseline:icl: no training dialogues to retrieve examples from: evaluate a split file "
                          "with train.jsonl beside it (as `simhub data convert-eedi` writes them), or set "
                          "baselines.icl_pool to the training split (JSONL)", field="baselines.icl_pool")
    from simhub.schema import read_jsonl

    return read_jsonl(profile.baselines.icl_pool)


def build_simulator(name: str, profile: Profile, options: LoadOptions | None = None, *,
                    force_backend: str | None = None) -> Simulator:
    """The simulator called ``name`` (an UnknownNameError lists the known ones).

    ``force_backend`` replaces the backend of every local simulator (``simhub serve --backend``).
    """
    learner = learner_simulator(name)
    if learner is not None:
        learner.check(name)
        return learner.build(name, profile, options)
    options = options or load_options(profile)
    if force_backend:
        import dataclasses

        options = dataclasses.replace(options, backend=force_backend)
    if name in REFERENCE_SIMULATORS:
        return ReferenceSimulator(name)
    config = profile.simulators.get(name)
    if config is None and name in BUILTIN_BASELINES:
        config = baseline_config(name.removeprefix(BASELINE_PREFIX), profile.baselines)
    if config is None:
        raise UnknownNameError("simulator", name, simulator_names(profile), field="simulator")
    retriever = IclRetriever(lambda: icl_pool(profile), profile.baselines.embedder) if config.baseline == "icl" else None
    if config.kind == "model":
        if force_backend:
            import msgspec

            config = msgspec.structs.replace(config, backend=force_backend)  # type: ignore[arg-type]
        return ModelSimulator(name, config, options, retriever=retriever)
    return EndpointSimulator(name, config, retriever=retriever)
