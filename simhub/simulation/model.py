"""Simulators backed by our own models: a base plus an optional LoRA adapter, on transformers or vLLM.

Prompts are the student chat format the SFT/DPO students are trained on (docs/protocol.md §4), with no
persona unless the simulator's ``persona`` says otherwise (docs/protocol.md §8). Generation stops at the
end-of-dialogue marker, which sets ``end_of_dialogue``.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from simhub.config import SimulatorConfig
from simhub.models import LanguageModel, LoadOptions, Sampling, load_lm
from simhub.prompts import END_OF_DIALOGUE
from simhub.simulation.base import LMSimulator, Simulator, Target

if TYPE_CHECKING:
    from simhub.simulation.endpoint import IclRetriever


class ModelSimulator(LMSimulator):
    """One of our models (:func:`~simhub.models.load_lm`), stopped at the end-of-dialogue marker; a
    target that carries its own chat prompt (the service's ``/v1``) is run as it is."""

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

    def model(self) -> LanguageModel:
        if self.lm is None:
            self.lm = load_lm(self.config.ref(), self.options)
        return self.lm

    def messages(self, target: Target) -> list[dict[str, str]]:
        if target.messages is not None:
            return [dict(m) for m in target.messages]
        return super().messages(target)

    def tokenizer(self):
        """The simulator's tokenizer alone, never its weights: the adapter's own when it carries one,
        else the base model's."""
        from simhub.models.refs import load_tokenizer

        c = self.config
        if c.adapter:
            return load_tokenizer(c.adapter, c.adapter_revision, fallback=c.model, fallback_revision=c.revision)
        return load_tokenizer(c.model, c.revision)

    def prompt_text(self, target: Target) -> str:
        """The chat-templated prompt, from the tokenizer alone (``simhub prompt show`` loads no weights).
        Without the tokenizer (a Hub model not downloaded, offline), the messages, with a note saying so."""
        messages = self.messages(target)
        if self.lm is not None:
            return self.lm.chat_text(messages)
        try:
            tokenizer = self.tokenizer()
        except Exception as exc:  # offline: any loader failure means the same thing here
            reason = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
            return (Simulator.prompt_text(self, target)
                    + f"\n\n(note: these are the messages; the text after {self.config.model}'s chat template needs "
                      f"its tokenizer, which could not be loaded here: {reason})")
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    def sampling_for(self, sampling: Sampling | None) -> Sampling:
        s = super().sampling_for(sampling)
        return dataclasses.replace(s, stop=tuple(dict.fromkeys((*s.stop, END_OF_DIALOGUE))))
