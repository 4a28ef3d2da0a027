"""Simulators backed by our own models: a base plus an optional LoRA adapter, on transformers or vLLM.

Prompts are the student chat format the SFT/DPO students are trained on (docs/protocol.md §4), with no
persona unless the simulator's ``persona`` says otherwise (docs/protocol.md §8). Generation stops at the
end-of-dialogue marker, which sets ``end_of_dialogue``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from simhub.config import SimulatorConfig
from simhub.models import LanguageModel, LoadOptions, Sampling, load_lm
from simhub.prompts import END_OF_DIALOGUE, baseline_messages, student_messages
from simhub.simulation.base import SimulationResult, Simulator, Target, candidate_from_text

if TYPE_CHECKING:
    from simhub.simulation.endpoint import IclRetriever


class ModelSimulator(Simulator):
    kind = "model"

    def __init__(self, sid: str, config: SimulatorConfig, load: LoadOptions, *, retriever: IclRetriever | None = None):
        self.id, self.config, self.retriever = sid, config, retriever
        if config.baseline is not None:
            self.kind = "baseline"
        self.options = dataclasses.replace(load, backend=config.backend or load.backend)
        self.lm: LanguageModel | None = None
        self.default_sampling = Sampling(temperature=config.temperature or 0.0,
                                         max_tokens=config.max_tokens or Sampling().max_tokens)

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "kind": self.kind, "backend": self.options.backend,
                               "base_model": self.config.model, "revision": self.config.revision,
                               "persona": self.config.persona}
        if self.config.baseline:
            out["baseline"] = self.config.baseline
        if self.config.adapter:
            out.update(adapter=self.config.adapter, adapter_revision=self.config.adapter_revision)
        if self.config.description:
            out["description"] = self.config.description
        return out

    def load(self) -> LanguageModel:
        if self.lm is None:
            self.lm = load_lm(self.config.ref(), self.options)
        return self.lm

    def messages(self, target: Target) -> list[dict[str, str]]:
        if target.messages is not None:
            return [dict(m) for m in target.messages]
        if self.config.baseline:  # one of the paper's prompted baselines, on a local model
            example = self.retriever.example(target.dialogue) if self.config.baseline == "icl" and self.retriever else None
            return baseline_messages(self.config.baseline, target.dialogue, target.turn_index, example)
        return student_messages(target.dialogue, upto=target.turn_index, persona=self.config.persona)

    def prompt_text(self, target: Target) -> str:
        return self.load().chat_text(self.messages(target))

    def _sampling(self, sampling: Sampling | None) -> Sampling:
        s = sampling or self.default_sampling
        return dataclasses.replace(s, stop=tuple(dict.fromkeys((*s.stop, END_OF_DIALOGUE))))

    def _results(self, generated) -> list[SimulationResult]:
        return [SimulationResult([candidate_from_text(g.text, g.finish_reason, tokens=g.tokens, stop_string=g.stop_string,
                                                      logprobs=g.logprobs) for g in r.generations],
                                 prompt_tokens=r.prompt_tokens) for r in generated]

    def simulate(self, targets: Sequence[Target], sampling: Sampling | None = None, *,
                 progress: bool = False) -> list[SimulationResult]:
        lm = self.load()
        return self._results(lm.generate([self.messages(t) for t in targets], self._sampling(sampling), progress=progress))

    async def asimulate(self, targets: Sequence[Target], sampling: Sampling | None = None) -> list[SimulationResult]:
        lm = self.load()
        return self._results(await lm.agenerate([self.messages(t) for t in targets], self._sampling(sampling)))
