"""A dummy language model for unit tests: deterministic, numpy only, no weights.

It has a byte-level tokenizer with a tiny chat template and a next-token distribution that is a
fixed pseudo-random function of the last few tokens, so log-probabilities are real (normalised
over the vocabulary), repeatable across processes, and differ between contexts. Scorers and
simulators run on it without torch, which keeps the pure-Python tests alive on a core install.
It has no guided decoding: a ``Sampling.json_schema`` is a NotSupportedError naming ``json_schema``
(its random bytes would never match the schema, and silently ignoring one would hide that).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from simhub.errors import NotSupportedError
from simhub.models.base import Generation, GenerationResult, LanguageModel, Prompt, Sampling, cut_at_stop

_SPECIALS = ("<bos>", "<eot>", "<pad>", "<|user|>", "<|assistant|>", "<|system|>")


class DummyTokenizer:
    """Bytes 0-255 plus a few special tokens; chat messages become ``<|role|>content<eot>``."""

    def __init__(self) -> None:
        self.vocab_size = 256 + len(_SPECIALS)
        self.special = {name: 256 + i for i, name in enumerate(_SPECIALS)}
        self.bos_token_id = self.special["<bos>"]
        self.eos_token_id = self.special["<eot>"]
        self.pad_token_id = self.special["<pad>"]
        self.eos_token = "<eot>"

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        ids = list(text.encode("utf-8"))
        return [self.bos_token_id, *ids] if add_special_tokens else ids

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        names = {v: k for k, v in self.special.items()}
        data = bytearray()
        out = []
        for t in ids:
            if t < 256:
                data.append(int(t))
            else:
                if data:
                    out.append(data.decode("utf-8", errors="replace"))
                    data = bytearray()
                if not skip_special_tokens:
                    out.append(names[int(t)])
        if data:
            out.append(data.decode("utf-8", errors="replace"))
        return "".join(out)

    def apply_chat_template(self, messages, tokenize: bool = True, add_generation_prompt: bool = False):
        text = "".join(f"<|{m['role']}|>{m['content']}<eot>" for m in messages)
        if add_generation_prompt:
            text += "<|assistant|>"
        if not tokenize:
            return text
        ids: list[int] = [self.bos_token_id]
        for m in messages:
            ids += [self.special.get(f"<|{m['role']}|>", self.special["<|user|>"]), *self.encode(m["content"]),
                    self.eos_token_id]
        if add_generation_prompt:
            ids.append(self.special["<|assistant|>"])
        return ids


class DummyLM(LanguageModel):
    """Next-token log-probabilities from a hash of the last ``context`` tokens (and ``seed``)."""

    def __init__(self, seed: int = 0, context: int = 3, name: str = "dummy"):
        self.tokenizer = DummyTokenizer()
        self.seed, self.context, self.name = seed, context, name
        self.calls = 0

    def _logprobs(self, prefix: Sequence[int]) -> np.ndarray:
        key = f"{self.seed}:{','.join(map(str, prefix[-self.context:]))}".encode()
        rng = np.random.default_rng(int.from_bytes(hashlib.sha256(key).digest()[:8], "little"))
        logits = rng.normal(0.0, 2.0, self.tokenizer.vocab_size)
        logits[self.tokenizer.pad_token_id] = -1e9
        return logits - np.logaddexp.reduce(logits)

    def continuation_logprobs(self, pairs: Sequence[tuple[Sequence[int], Sequence[int]]]) -> list[np.ndarray]:
        self.calls += 1
        out = []
        for prompt, continuation in pairs:
            seq = list(prompt)
            values = []
            for token in continuation:
                values.append(float(self._logprobs(seq)[int(token)]))
                seq.append(int(token))
            out.append(np.asarray(values, dtype=np.float64))
        return out

    def generate(self, prompts: Sequence[Prompt], sampling: Sampling, *, progress: bool = False) -> list[GenerationResult]:
        if sampling.json_schema is not None:
            raise NotSupportedError(f"{self.name}: the dummy model cannot follow a json_schema; schema-guided "
                                    "decoding needs the transformers or vllm backend", field="json_schema")
        self.calls += 1
        results = []
        for i, prompt in enumerate(prompts):
            ids = self.chat_ids(prompt) if prompt and isinstance(prompt[0], dict) else [int(t) for t in prompt]  # type: ignore[arg-type, union-attr]
            gens = []
            for k in range(sampling.n):
                rng = np.random.default_rng((sampling.seed or 0) * 1_000_003 + i * 101 + (0 if sampling.greedy else k))
                seq, new = list(ids), []
                finish = "length"
                for _ in range(sampling.max_tokens):
                    logp = self._logprobs(seq)
                    if sampling.greedy:
                        token = int(np.argmax(logp))
                    else:
                        p = np.exp(logp / max(sampling.temperature, 1e-6) - np.max(logp / max(sampling.temperature, 1e-6)))
                        token = int(rng.choice(len(p), p=p / p.sum()))
                    seq.append(token)
                    new.append(token)
                    if token == self.tokenizer.eos_token_id:
                        finish = "stop"
                        break
                text, hit = cut_at_stop(self.tokenizer.decode(new), sampling.stop)
                gens.append(Generation(text=text, finish_reason="stop" if hit else finish, tokens=len(new), stop_string=hit))
            results.append(GenerationResult(gens, prompt_tokens=len(ids)))
        return results
