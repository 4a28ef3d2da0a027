"""``correctness`` and ``errors``: one judge call per turn gives both (SPEC §3).

The judge answers ``correct``, ``incorrect`` or ``na``, adding ``same error`` or
``different error`` when both turns are incorrect. Scoring follows the reference exactly:

* real ``correct``: correctness 1 iff the answer is exactly ``correct``; errors null;
* real ``incorrect``: correctness 1 iff the answer contains ``incorrect``; errors 1 iff it
  contains ``same error``;
* real ``na`` (or missing): both null.

Two judges: :class:`OpenAIJudge` for any OpenAI-compatible endpoint (retries, concurrency
limit, on-disk cache) and :class:`LocalJudge`, a local causal LM that picks the most likely
of the allowed answers (so its output always parses).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from simhub.backends.hf import ModelRef, load_causal_lm
from simhub.errors import ConfigError, SimhubError, require
from simhub.prompts import judge_messages
from simhub.schema import Dialogue, Turn, atomic_write_bytes

#: Answers a local judge chooses between.
JUDGE_OPTIONS: tuple[str, ...] = ("correct", "incorrect, same error", "incorrect, different error", "na")


@dataclass
class JudgeRequest:
    dialogue: Dialogue
    history: list[Turn]
    real_text: str
    real_label: str
    candidate: str

    def messages(self) -> list[dict]:
        return judge_messages(self.dialogue, self.history, self.real_text, self.real_label, self.candidate)


@dataclass
class Verdict:
    correctness: float | None
    errors: float | None
    raw: str | None
    reasons: dict[str, str] = field(default_factory=dict)


def parse_verdict(answer: str | None, real_label: str | None) -> Verdict:
    """Apply the reference scoring rules to a judge answer."""
    if real_label not in ("correct", "incorrect"):
        reason = "real turn has no correctness label" if real_label is None else "real turn is na"
        return Verdict(None, None, answer, {"correctness": reason, "errors": reason})
    if answer is None:
        return Verdict(None, None, None, {"correctness": "judge gave no answer", "errors": "judge gave no answer"})
    text = answer.strip().lower()
    if not any(word in text for word in ("correct", "na")):
        reason = "judge answer unparseable"
        return Verdict(None, None, answer, {"correctness": reason, "errors": reason})
    if real_label == "correct":
        return Verdict(float(text == "correct"), None, answer, {"errors": "real turn is not incorrect"})
    return Verdict(float("incorrect" in text), float("same error" in text), answer)


class Judge(Protocol):
    def answer(self, requests: Sequence[JudgeRequest]) -> list[str | None]:
        """Raw judge answers, one per request (None when the judge could not answer)."""
        ...


class LocalJudge:
    """A local causal LM as judge: scores each allowed answer and returns the most likely."""

    def __init__(self, ref: ModelRef | str, device: str | None = None, batch_size: int = 16, backend: str = "transformers"):
        self.lm = load_causal_lm(ref, device=device, batch_size=batch_size, backend=backend)
        self.option_ids = [[*self.lm.text_ids(o), self.lm.eot_id] for o in JUDGE_OPTIONS]

    def answer(self, requests: Sequence[JudgeRequest]) -> list[str | None]:
        if not requests:
            return []
        prompts = [self.lm.chat_ids(r.messages()) for r in requests]
        best, _ = self.lm.choose(prompts, self.option_ids)
        return [JUDGE_OPTIONS[i] for i in best]


# --------------------------------------------------------------------------- OpenAI-compatible


def build_chat_payload(model: str, messages: list[dict], temperature: float = 0.0, max_tokens: int = 4000) -> dict:
    """The JSON body of a chat-completions request (pure, so tests check it exactly)."""
    return {"model": model, "messages": messages, "temperature": temperature, "max_tokens": max_tokens}


def parse_chat_completion(body: dict) -> str:
    """The assistant text of a chat-completions response; raises ValueError on an unexpected shape."""
    try:
        content = body["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise ValueError("response has no choices[0].message.content") from None
    if not isinstance(content, str):
        raise ValueError("choices[0].message.content is not a string")
    return content


class JudgeAPIError(SimhubError):
    """The judge endpoint failed after all retries (the message never includes the API key)."""


class OpenAIJudge:
    """Any OpenAI-compatible chat endpoint as judge.

    The key is read from the environment variable ``api_key_env`` and is never logged or cached.
    Responses are cached on disk by a hash of the request body, so a rerun costs nothing.
    """

    RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key_env: str = "SIMHUB_JUDGE_API_KEY",
        *,
        temperature: float = 0.0,
        max_tokens: int = 4000,
        timeout: float = 60.0,
        max_retries: int = 5,
        backoff: float = 1.0,
        concurrency: int = 8,
        cache_dir: str | os.PathLike[str] | None = None,
    ):
        self.httpx = require("httpx", "metrics")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key_env = api_key_env
        self.temperature, self.max_tokens = temperature, max_tokens
        self.timeout, self.max_retries, self.backoff = timeout, max_retries, backoff
        self.concurrency = max(1, concurrency)
        self.cache_dir = Path(cache_dir) if cache_dir else None
        self._client = self.httpx.Client(timeout=timeout)
        self._lock = threading.Lock()

    def _headers(self) -> dict[str, str]:
        key = os.environ.get(self.api_key_env) or os.environ.get("OPENAI_API_KEY")
        return {"Authorization": f"Bearer {key}"} if key else {}

    def _cache_path(self, payload: dict) -> Path | None:
        if self.cache_dir is None:
            return None
        digest = hashlib.sha256(json.dumps({"url": self.base_url, **payload}, sort_keys=True).encode()).hexdigest()
        return self.cache_dir / digest[:2] / f"{digest}.json"

    def _post(self, payload: dict) -> str:
        cache = self._cache_path(payload)
        if cache is not None and cache.is_file():
            return json.loads(cache.read_text())["answer"]
        url = f"{self.base_url}/chat/completions"
        last = "no attempt"
        for attempt in range(self.max_retries + 1):
            try:
                resp = self._client.post(url, json=payload, headers=self._headers())
            except self.httpx.HTTPError as exc:
                last = type(exc).__name__
            else:
                if resp.status_code == 200:
                    answer = parse_chat_completion(resp.json())
                    if cache is not None:
                        atomic_write_bytes(cache, json.dumps({"answer": answer}).encode())
                    return answer
                last = f"HTTP {resp.status_code}"
                if resp.status_code not in self.RETRY_STATUS:
                    break
            if attempt < self.max_retries:
                time.sleep(self.backoff * (2**attempt) * (0.5 + random.random() / 2))
        raise JudgeAPIError(f"judge endpoint {self.base_url} failed after {attempt + 1} attempt(s): {last}")

    def answer(self, requests: Sequence[JudgeRequest]) -> list[str | None]:
        payloads = [build_chat_payload(self.model, r.messages(), self.temperature, self.max_tokens) for r in requests]

        def one(payload: dict) -> str | None:
            try:
                return self._post(payload)
            except (JudgeAPIError, ValueError):
                return None

        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            return list(pool.map(one, payloads))


def make_judge(config: dict, device: str | None = None, batch_size: int = 16, backend: str = "transformers") -> Judge:
    """Build a judge from a profile section: ``{kind: local, model: ...}`` or ``{kind: openai, ...}``."""
    kind = config.get("kind", "local")
    if kind == "local":
        if "model" not in config:
            raise ConfigError("judge.model: required for a local judge")
        return LocalJudge(ModelRef(config["model"], config.get("adapter"), config.get("revision")), device, batch_size, backend)
    if kind == "openai":
        missing = [k for k in ("base_url", "model") if k not in config]
        if missing:
            raise ConfigError(f"judge.{missing[0]}: required for an openai judge")
        options = {k: v for k, v in config.items() if k not in ("kind", "base_url", "model")}
        return OpenAIJudge(config["base_url"], config["model"], **options)
    raise ConfigError(f"judge.kind: unknown judge kind {kind!r}; use 'local' or 'openai'")
