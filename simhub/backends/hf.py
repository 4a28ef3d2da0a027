"""transformers backend for the metric models: load once per process, score in length-sorted batches.

A model reference is a local folder or a Hub id, optionally pinned to a revision. A folder (or
Hub repo) holding a PEFT adapter is loaded onto its base model and merged, so scoring runs at
the speed of a plain model.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from simhub.errors import ConfigError, require


@dataclass(frozen=True)
class ModelRef:
    """Where a model comes from: a folder or Hub id, an optional adapter, and pinned revisions."""

    model: str
    adapter: str | None = None
    revision: str | None = None
    adapter_revision: str | None = None

    def describe(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if v is not None}


def _device(device: str | None) -> str:
    if device:
        return device
    torch = require("torch", "metrics")
    return "cuda" if torch.cuda.is_available() else "cpu"


def _is_adapter(ref: str, revision: str | None) -> bool:
    if Path(ref).is_dir():
        return (Path(ref) / "adapter_config.json").is_file()
    from huggingface_hub import file_exists

    try:
        return file_exists(ref, "adapter_config.json", revision=revision)
    except Exception:  # offline or unknown: let from_pretrained report the real problem
        return False


class LogprobModel:
    """What the metrics need from a scoring backend: tokenisation and continuation log-probs."""

    tokenizer: object

    def chat_ids(self, messages: list[dict], add_generation_prompt: bool = True) -> list[int]:
        ids = self.tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=add_generation_prompt)
        if isinstance(ids, dict) or hasattr(ids, "keys"):
            ids = ids["input_ids"]
        return list(ids)

    def text_ids(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False)

    @property
    def eot_id(self) -> int:
        return int(self.tokenizer.eos_token_id)

    def continuation_logprobs(self, pairs: Sequence[tuple[Sequence[int], Sequence[int]]]) -> list[np.ndarray]:
        raise NotImplementedError

    def choose(self, prompts: Sequence[Sequence[int]], options: Sequence[Sequence[int]]) -> tuple[list[int], np.ndarray]:
        """For each prompt, the index of the most likely option (summed log-prob) and all scores."""
        pairs = [(p, o) for p in prompts for o in options]
        scores = np.array([lp.sum() for lp in self.continuation_logprobs(pairs)]).reshape(len(prompts), len(options))
        return [int(i) for i in scores.argmax(axis=1)], scores


def resolve_adapter(ref: ModelRef) -> tuple[str, str | None, str | None, str | None]:
    """(base, base revision, adapter, adapter revision), reading a PEFT folder's base model."""
    base, adapter, revision, adapter_revision = ref.model, ref.adapter, ref.revision, ref.adapter_revision
    if adapter is None and _is_adapter(base, revision):
        peft = require("peft", "train")
        cfg = peft.PeftConfig.from_pretrained(base, revision=revision)
        adapter, adapter_revision = base, revision
        base, revision = cfg.base_model_name_or_path, None
    return base, revision, adapter, adapter_revision


class CausalLM(LogprobModel):
    """A causal LM with its tokenizer and batched log-probability scoring (transformers)."""

    def __init__(self, ref: ModelRef, device: str | None = None, dtype: str | None = None, batch_size: int = 16):
        torch = require("torch", "metrics")
        transformers = require("transformers", "metrics")
        self.ref = ref
        self.device = _device(device)
        self.batch_size = batch_size
        torch_dtype = getattr(torch, dtype) if dtype else (torch.bfloat16 if self.device.startswith("cuda") else torch.float32)
        base, revision, adapter, adapter_revision = resolve_adapter(ref)
        try:
            self.tokenizer = transformers.AutoTokenizer.from_pretrained(adapter or base, revision=adapter_revision if adapter else revision)
        except (OSError, ValueError):
            self.tokenizer = transformers.AutoTokenizer.from_pretrained(base, revision=revision)
        try:
            model = transformers.AutoModelForCausalLM.from_pretrained(base, revision=revision, dtype=torch_dtype)
        except OSError as exc:
            raise ConfigError(f"model {base!r} could not be loaded: {exc}") from None
        if adapter:
            peft = require("peft", "train")
            model = peft.PeftModel.from_pretrained(model, adapter, revision=adapter_revision).merge_and_unload()
        self.model = model.to(self.device).eval()
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.pad_id = self.tokenizer.pad_token_id
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ scoring

    #: Tokens per packed row (see :func:`simhub.backends.packing.pack_prefix_trees`); 0 runs every
    #: sequence alone. Longer rows share more prefixes but pay attention cost quadratic in length.
    row_tokens: int = 1024

    def hidden_at(self, seqs: Sequence[Sequence[int]], readouts: Sequence[Sequence[int]]) -> list:
        """Final hidden states of each sequence at the given token indices.

        Sequences are packed as prefix trees (a prefix shared by several sequences is encoded
        once) into rows of about ``row_tokens`` tokens, run ``batch_size // 4`` rows at a time.
        The result equals running every sequence alone.
        """
        torch = require("torch", "metrics")
        from simhub.backends.packing import collate_rows, pack_prefix_trees

        out: list = [None] * len(seqs)
        if not seqs:
            return out
        packed = pack_prefix_trees(seqs, self.row_tokens)
        wanted: dict[int, list[tuple[int, list[int]]]] = {}
        for i, readout in enumerate(readouts):
            row, positions = packed.positions(i, readout)
            wanted.setdefault(row, []).append((i, positions))
        order = sorted(range(len(packed.rows)), key=lambda r: len(packed.rows[r]), reverse=True)
        per_batch = max(1, self.batch_size // 4)
        dtype = next(self.model.parameters()).dtype
        for start in range(0, len(order), per_batch):
            rows = order[start : start + per_batch]
            inputs = collate_rows(packed, rows, self.pad_id, dtype, self.device)
            with self._lock, torch.inference_mode():
                hidden = self.model.model(**inputs).last_hidden_state
            for b, row in enumerate(rows):
                for i, positions in wanted.get(row, []):
                    out[i] = hidden[b, positions]
        return out

    def continuation_logprobs(self, pairs: Sequence[tuple[Sequence[int], Sequence[int]]]) -> list[np.ndarray]:
        """Per-token log-probabilities of each continuation given its prompt.

        Only the logits at continuation positions are computed and normalised (the
        full-vocabulary softmax over every prompt position is what makes naive scoring slow), and
        prompts that share a prefix (turns of one dialogue, the labels of one prompt) share its
        encoding.
        """
        torch = require("torch", "metrics")
        for n, (prompt, _) in enumerate(pairs):
            if not prompt:
                raise ValueError(f"pair {n}: empty prompt")
        seqs = [[*p, *c] for p, c in pairs]
        readouts = [list(range(len(p) - 1, len(p) + len(c) - 1)) for p, c in pairs]
        hidden = self.hidden_at(seqs, readouts)
        out: list[np.ndarray] = []
        for (_, continuation), h in zip(pairs, hidden, strict=True):
            if not continuation:
                out.append(np.zeros(0, dtype=np.float64))
                continue
            with torch.inference_mode():
                logp = torch.log_softmax(self.model.lm_head(h).float(), dim=-1)
                target = torch.tensor(list(continuation), device=logp.device)
                out.append(logp.gather(1, target[:, None])[:, 0].double().cpu().numpy())
        return out

    @property
    def stop_ids(self) -> list[int]:
        """Token ids that end a turn: the generation config's EOS ids plus the end-of-turn token."""
        if not hasattr(self, "_stop_ids"):
            eos = self.model.generation_config.eos_token_id
            ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
            ids.add(self.eot_id)
            self._stop_ids = sorted(ids)
        return self._stop_ids

    def generate_ids(
        self,
        prompts: Sequence[Sequence[int]],
        max_new_tokens: int = 400,
        *,
        temperature: float = 0.0,
        top_p: float = 1.0,
        n: int = 1,
        seed: int | None = None,
    ) -> list[list[list[int]]]:
        """New token ids, ``n`` per prompt, each cut after its first stop token.

        Greedy when ``temperature`` is 0 (then one sequence is decoded and repeated ``n`` times);
        otherwise sampled, reproducibly when ``seed`` is given. Prompts run in left-padded
        batches of ``batch_size``.
        """
        torch = require("torch", "metrics")
        greedy = temperature == 0.0
        stop = set(self.stop_ids)
        out: list[list[list[int]]] = []
        for start in range(0, len(prompts), self.batch_size):
            chunk = [list(p) for p in prompts[start : start + self.batch_size]]
            ids, mask = left_pad(chunk, self.pad_id)
            width = ids.shape[1]
            options = {"do_sample": False} if greedy else {
                "do_sample": True, "temperature": temperature, "top_p": top_p, "num_return_sequences": n}
            with self._lock, torch.inference_mode(), torch.random.fork_rng(devices=[]):
                if seed is not None:
                    torch.manual_seed(seed + start)
                gen = self.model.generate(
                    input_ids=ids.to(self.device), attention_mask=mask.to(self.device), max_new_tokens=max_new_tokens,
                    pad_token_id=self.pad_id, eos_token_id=self.stop_ids, **options,
                )
            per_prompt = 1 if greedy else n
            for row in range(len(chunk)):
                seqs = []
                for k in range(per_prompt):
                    new = [int(t) for t in gen[row * per_prompt + k, width:]]
                    cut = next((j for j, t in enumerate(new) if t in stop), None)
                    seqs.append(new if cut is None else new[: cut + 1])
                out.append(seqs * n if greedy else seqs)
        return out

    def generate(self, prompts: Sequence[Sequence[int]], max_new_tokens: int = 400, **sampling) -> list[list[str]]:
        """Decoded text (special tokens dropped) of :meth:`generate_ids`: ``n`` texts per prompt."""
        return [
            [self.tokenizer.decode(seq, skip_special_tokens=True) for seq in seqs]
            for seqs in self.generate_ids(prompts, max_new_tokens, **sampling)
        ]


def left_pad(seqs: Sequence[Sequence[int]], pad_id: int):
    """Left-padded ``input_ids`` and ``attention_mask`` tensors for generation (new tokens line up)."""
    torch = require("torch", "metrics")
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for row, seq in enumerate(seqs):
        ids[row, width - len(seq) :] = torch.tensor(list(seq), dtype=torch.long)
        mask[row, width - len(seq) :] = 1
    return ids, mask


_CACHE: dict[tuple, LogprobModel] = {}
_CACHE_LOCK = threading.Lock()


def unload_models() -> None:
    """Forget every cached model (closing vLLM engines), e.g. between tests or profiles."""
    with _CACHE_LOCK:
        models = list(_CACHE.values())
        _CACHE.clear()
    for model in models:
        close = getattr(model, "close", None)
        if close is not None:
            close()


def load_causal_lm(
    ref: ModelRef | str, device: str | None = None, dtype: str | None = None, batch_size: int = 16, backend: str = "transformers"
) -> LogprobModel:
    """Load a model once per process; later calls with the same arguments return the same object
    (with the batch size of the first caller: the model is shared, its settings are not per caller).

    ``backend`` is ``transformers`` (any device) or ``vllm`` (prompt log-probs from a vLLM engine).
    """
    ref = ModelRef(ref) if isinstance(ref, str) else ref
    key = (ref, device, dtype, backend)
    with _CACHE_LOCK:
        if key not in _CACHE:
            if backend == "transformers":
                _CACHE[key] = CausalLM(ref, device=device, dtype=dtype, batch_size=batch_size)
            elif backend == "vllm":
                from simhub.backends.vllm_scoring import VLLMCausalLM

                _CACHE[key] = VLLMCausalLM(ref, dtype=dtype)
            else:
                raise ConfigError(f"backend: unknown scoring backend {backend!r}; use 'transformers' or 'vllm'")
        return _CACHE[key]
