"""The transformers backend: batched scoring with prefix-tree packing, and batched generation.

Models that share a base share one loaded base: each LoRA adapter is attached to it by name and
switched on for the duration of a call (``share_base``). With ``share_base`` off, an adapter is
merged into its own copy of the base, which is faster for tiny models and costs a base's memory
per adapter for large ones. An adapter with fully trained modules (``modules_to_save``, as the demo's
act classifier has) always gets its own merged copy.

Schema-guided generation (``Sampling.json_schema``) runs through xgrammar (``simhub[guided]``), the
grammar engine vLLM uses by default too: the schema becomes a grammar compiled against the model's
tokenizer, and at every step a logits processor masks the tokens that would leave it, before
temperature, top-k and top-p. After a complete JSON value only the end-of-turn tokens remain
allowed, so generation stops there. JSON is compact (no whitespace: ``{"a":1,"b":2}``), as the vLLM
engines simhub builds write it. The tokenizer's side (its decoded vocabulary) is built once per model
and compiled schemas are cached by xgrammar's compiler.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import re
import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from simhub.errors import ConfigError, require
from simhub.models.base import (
    Generation,
    GenerationResult,
    LanguageModel,
    Prompt,
    Sampling,
    TokenLogprob,
    cut_at_stop,
    json_schema_text,
)
from simhub.models.cpu import apply_thread_policy
from simhub.models.refs import ResolvedRef, load_tokenizer
from simhub.progress import tqdm

if TYPE_CHECKING:
    from simhub.models.loader import LoadOptions


def default_device(device: str | None) -> str:
    if device:
        return device
    torch = require("torch")
    return "cuda" if torch.cuda.is_available() else "cpu"


def _dtype(torch, dtype: str | None, device: str):
    if dtype and dtype != "auto":
        return getattr(torch, dtype)
    return torch.bfloat16 if device.startswith("cuda") else torch.float32


class LoadedBase:
    """One base model in memory with any number of named LoRA adapters attached."""

    def __init__(self, base: str, revision: str | None, device: str, dtype: str | None):
        torch = require("torch")
        transformers = require("transformers")
        self.name, self.device = base, device
        if device == "cpu":
            apply_thread_policy(f"loading {base}")
        try:
            model = transformers.AutoModelForCausalLM.from_pretrained(base, revision=revision, dtype=_dtype(torch, dtype, device))
        except OSError as exc:
            raise ConfigError(f"model {base!r} could not be loaded: {exc}", field="model") from None
        self.model = model.to(device).eval()
        self.peft = None
        self.adapters: dict[tuple[str, str | None], str] = {}
        self.lock = threading.RLock()

    def attach(self, adapter: str, revision: str | None) -> str:
        """Attach ``adapter`` (once) and return its name."""
        key = (adapter, revision)
        with self.lock:
            if key not in self.adapters:
                peft = require("peft")
                name = f"adapter{len(self.adapters)}"
                if self.peft is None:
                    self.peft = peft.PeftModel.from_pretrained(self.model, adapter, adapter_name=name, revision=revision)
                    self.peft.eval()
                else:
                    self.peft.load_adapter(adapter, adapter_name=name, revision=revision)
                self.adapters[key] = name
            return self.adapters[key]

    def merge(self, adapter: str, revision: str | None) -> None:
        """Merge ``adapter`` into this (private) copy of the base."""
        peft = require("peft")
        self.model = peft.PeftModel.from_pretrained(self.model, adapter, revision=revision).merge_and_unload().eval()

    @contextlib.contextmanager
    def use(self, adapter_name: str | None) -> Iterator:
        """The model with ``adapter_name`` active (None: the plain base), held under the lock."""
        with self.lock:
            if self.peft is None:
                yield self.model
            elif adapter_name is None:
                with self.peft.disable_adapter():
                    yield self.model
            else:
                self.peft.set_adapter(adapter_name)
                yield self.model


class TransformersLM(LanguageModel):
    """A view of a :class:`LoadedBase` with one adapter (or none) and that adapter's tokenizer."""

    #: Tokens per packed row (see :func:`simhub.models.packing.pack_prefix_trees`); 0 runs every
    #: sequence alone. Longer rows share more prefixes but pay attention cost quadratic in length.
    row_tokens: int = 1024

    def __init__(self, loaded: LoadedBase, adapter_name: str | None, ref: ResolvedRef, batch_size: int = 16):
        self.loaded, self.adapter_name, self.ref = loaded, adapter_name, ref
        self.name = ref.base + (f" + {ref.adapter}" if ref.adapter else "")
        self.device = loaded.device
        self.batch_size = batch_size
        self.tokenizer = load_tokenizer(ref.adapter or ref.base, ref.adapter_revision if ref.adapter else ref.base_revision,
                                        fallback=ref.base, fallback_revision=ref.base_revision)
        self.pad_id = self.tokenizer.pad_token_id
        config = loaded.model.config
        attn = getattr(config, "_attn_implementation", None) or ""
        #: Flash kernels take no arbitrary mask, so packed sequences would see each other.
        self.can_pack = not attn.startswith("flash")
        self._grammars: Any = None  # xgrammar's compiler for this tokenizer, built on first use
        self._grammars_lock = threading.Lock()

    @property
    def model(self):
        """The loaded (possibly shared) base. Calling it directly runs whatever adapter is active on it:
        run it through :meth:`active` instead."""
        return self.loaded.model

    def active(self):
        """``with lm.active() as model:`` the model with this view's adapter switched on (or off), locked."""
        return self.loaded.use(self.adapter_name)

    @property
    def stop_ids(self) -> list[int]:
        """Token ids that end a turn: the generation config's EOS ids plus the end-of-turn token."""
        if not hasattr(self, "_stop_ids"):
            eos = self.model.generation_config.eos_token_id
            ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
            ids.add(self.eot_id)
            self._stop_ids = sorted(ids)
        return self._stop_ids

    # ------------------------------------------------------------------ scoring

    def hidden_at(self, seqs: Sequence[Sequence[int]], readouts: Sequence[Sequence[int]]) -> list:
        """Final hidden states of each sequence at the given token indices.

        Sequences are packed as prefix trees (a prefix shared by several sequences is encoded once)
        into rows of about ``row_tokens`` tokens, run ``batch_size // 4`` rows at a time. The result
        equals running every sequence alone.
        """
        torch = require("torch")
        from simhub.models.packing import collate_rows, pack_prefix_trees

        out: list = [None] * len(seqs)
        if not seqs:
            return out
        packed = pack_prefix_trees(seqs, self.row_tokens if self.can_pack else 0)
        wanted: dict[int, list[tuple[int, list[int]]]] = {}
        for i, readout in enumerate(readouts):
            row, positions = packed.positions(i, readout)
            wanted.setdefault(row, []).append((i, positions))
        order = sorted(range(len(packed.rows)), key=lambda r: len(packed.rows[r]), reverse=True)
        per_batch = max(1, self.batch_size // 4)
        dtype = next(self.model.parameters()).dtype
        with self.loaded.use(self.adapter_name) as model, torch.inference_mode():
            for start in range(0, len(order), per_batch):
                rows = order[start : start + per_batch]
                inputs = collate_rows(packed, rows, self.pad_id, dtype, self.device)
                hidden = model.model(**inputs).last_hidden_state
                for b, row in enumerate(rows):
                    for i, positions in wanted.get(row, []):
                        out[i] = hidden[b, positions]
        return out

    def continuation_logprobs(self, pairs: Sequence[tuple[Sequence[int], Sequence[int]]]) -> list[np.ndarray]:
        """Per-token log-probabilities of each continuation given its prompt.

        Only the logits at continuation positions are computed and normalised (the full-vocabulary
        softmax over every prompt position is what makes naive scoring slow), and prompts that share
        a prefix (turns of one dialogue, the labels of one prompt) share its encoding.
        """
        torch = require("torch")
        for n, (prompt, _) in enumerate(pairs):
            if not prompt:
                raise ValueError(f"pair {n}: empty prompt")
        seqs = [[*p, *c] for p, c in pairs]
        readouts = [list(range(len(p) - 1, len(p) + len(c) - 1)) for p, c in pairs]
        hidden = self.hidden_at(seqs, readouts)
        out: list[np.ndarray] = []
        with self.loaded.use(self.adapter_name) as model, torch.inference_mode():
            for (_, continuation), h in zip(pairs, hidden, strict=True):
                if not continuation:
                    out.append(np.zeros(0, dtype=np.float64))
                    continue
                logp = torch.log_softmax(model.lm_head(h).float(), dim=-1)
                target = torch.tensor(list(continuation), device=logp.device)
                out.append(logp.gather(1, target[:, None])[:, 0].double().cpu().numpy())
        return out

    def next_token_logprobs(self, prompts: Sequence[Sequence[int]], tokens: Sequence[int]) -> np.ndarray:
        """Only the last position of each prompt goes through the LM head, restricted to ``tokens``
        after the full-vocabulary normalisation."""
        torch = require("torch")
        if not prompts:
            return np.zeros((0, len(tokens)))
        hidden = self.hidden_at(prompts, [[len(p) - 1] for p in prompts])
        index = torch.tensor(list(tokens), device=self.device)
        with self.loaded.use(self.adapter_name) as model, torch.inference_mode():
            stacked = torch.cat(hidden, dim=0)
            logp = torch.log_softmax(model.lm_head(stacked).float(), dim=-1)[:, index]
        return logp.double().cpu().numpy()

    # ------------------------------------------------------------------ generation

    def json_grammar(self, schema: Any):
        """``schema`` compiled for this model's tokenizer (an xgrammar ``CompiledGrammar``); a schema
        xgrammar cannot turn into a grammar is a :class:`~simhub.errors.ConfigError` naming ``json_schema``."""
        text = json_schema_text(schema)
        xgr = require("xgrammar", "guided")
        with self._grammars_lock:
            if self._grammars is None:
                head = self.model.get_output_embeddings()
                vocab = int(head.weight.shape[0]) if head is not None else len(self.tokenizer)
                info = xgr.TokenizerInfo.from_huggingface(self.tokenizer, vocab_size=vocab, stop_token_ids=self.stop_ids)
                self._grammars = xgr.GrammarCompiler(info)
        try:
            return self._grammars.compile_json_schema(text, any_whitespace=False, separators=(",", ":"))
        except (RuntimeError, ValueError) as exc:
            # xgrammar's messages start with a timestamp and its C++ source location.
            reason = re.sub(r"^\[[^\]]*\]\s*\S+:\d+:\s*", "", str(exc).strip()) or type(exc).__name__
            raise ConfigError(f"json_schema: not a schema guided decoding can follow: {reason}",
                              field="json_schema") from None

    def _prompt_ids(self, prompt: Prompt) -> list[int]:
        if prompt and isinstance(prompt[0], dict):
            return self.chat_ids(prompt)  # type: ignore[arg-type]
        return [int(t) for t in prompt]  # type: ignore[union-attr]

    def generate_ids(self, prompts: Sequence[Sequence[int]], sampling: Sampling) -> list[list[list[int]]]:
        """New token ids, ``n`` per prompt, each cut after its first stop token. Greedy decodes once
        per prompt and repeats; sampling is reproducible when ``seed`` is given. Left-padded batches."""
        return [[seq for seq, _ in row] for row in self._generate_ids(prompts, sampling)]

    def _generate_ids(self, prompts: Sequence[Sequence[int]], sampling: Sampling
                      ) -> list[list[tuple[list[int], list[TokenLogprob] | None]]]:
        """:meth:`generate_ids`, each sequence with its tokens' log-probabilities when
        ``sampling.logprobs`` asks for them (None otherwise)."""
        torch = require("torch")
        stop = set(self.stop_ids)
        n = sampling.n
        grammar = self.json_grammar(sampling.json_schema) if sampling.json_schema is not None else None
        out: list[list[tuple[list[int], list[TokenLogprob] | None]]] = []
        for start in range(0, len(prompts), self.batch_size):
            chunk = [list(p) for p in prompts[start : start + self.batch_size]]
            ids, mask = left_pad(chunk, self.pad_id)
            width = ids.shape[1]
            options = {"do_sample": False} if sampling.greedy else {
                "do_sample": True, "temperature": sampling.temperature, "top_p": sampling.top_p, "top_k": sampling.top_k,
                "num_return_sequences": n}
            recorder = _LogprobRecorder(sampling.logprobs) if sampling.logprobs is not None else None
            processors: list = [_JsonGuide(grammar)] if grammar is not None else []
            if recorder is not None:
                processors.append(recorder)
            if processors:
                options["logits_processor"] = processors
            with self.loaded.use(self.adapter_name) as model, torch.inference_mode(), torch.random.fork_rng(devices=[]):
                if sampling.seed is not None:
                    torch.manual_seed(sampling.seed + start)
                ids, mask = ids.to(self.device), mask.to(self.device)
                if not sampling.greedy and n > 1 and width > 1:
                    options.update(num_return_sequences=1, past_key_values=_shared_prefill(model, ids, mask, n))
                    ids, mask = ids.repeat_interleave(n, dim=0), mask.repeat_interleave(n, dim=0)
                gen = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=sampling.max_tokens,
                                     pad_token_id=self.pad_id, eos_token_id=self.stop_ids, **options)
                tables = recorder.finish(gen) if recorder is not None else None
            per_prompt = 1 if sampling.greedy else n
            for row in range(len(chunk)):
                seqs = []
                for k in range(per_prompt):
                    seq = through_first_stop(gen[row * per_prompt + k, width:].tolist(), stop)
                    logprobs = self._token_logprobs(seq, row * per_prompt + k, tables) if tables is not None else None
                    seqs.append((seq, logprobs))
                out.append(seqs * n if sampling.greedy else seqs)
        return out

    def _token_logprobs(self, seq: list[int], row: int, tables: dict) -> list[TokenLogprob]:
        """The entries of one generated sequence: its tokens' log-probabilities and the top k."""
        decoded = tables.setdefault("decoded", {})

        def text(token: int) -> str:
            if token not in decoded:
                decoded[token] = self.tokenizer.decode([token], skip_special_tokens=False)
            return decoded[token]

        chosen, top_values, top_ids = tables["chosen"], tables["top_values"], tables["top_ids"]
        return [TokenLogprob(token=text(token), logprob=chosen[step][row],
                             top=[(text(t), v) for t, v in zip(top_ids[step][row], top_values[step][row], strict=True)]
                             if top_ids else [])
                for step, token in enumerate(seq)]

    def generate(self, prompts: Sequence[Prompt], sampling: Sampling, *, progress: bool = False) -> list[GenerationResult]:
        ids = [self._prompt_ids(p) for p in prompts]
        stop = set(self.stop_ids)
        results: list[GenerationResult] = []
        step = self.batch_size
        bar = tqdm(total=len(ids), desc="generate", unit="prompt", disable=not progress or len(ids) <= step)
        for start in range(0, len(ids), step):
            chunk = ids[start : start + step]
            # The seed of a chunk is seed + its offset, as if generate_ids had run over all prompts at once.
            seeded = sampling if sampling.seed is None else dataclasses.replace(sampling, seed=sampling.seed + start)
            for prompt, seqs in zip(chunk, self._generate_ids(chunk, seeded), strict=True):
                gens = []
                for seq, logprobs in seqs:
                    stopped = bool(seq) and seq[-1] in stop
                    text, hit = cut_at_stop(self.tokenizer.decode(seq, skip_special_tokens=True), sampling.stop)
                    # The end-of-turn token that stopped it is not in the text: neither counted nor listed.
                    kept = len(seq) - stopped
                    gens.append(Generation(text=text, finish_reason="stop" if (stopped or hit) else "length",
                                           tokens=kept, stop_string=hit,
                                           logprobs=logprobs[:kept] if logprobs is not None else None))
                results.append(GenerationResult(gens, prompt_tokens=len(prompt)))
            bar.update(len(chunk))
        bar.close()
        return results


class _JsonGuide:
    """A logits processor that holds every row of one ``generate`` call to a compiled JSON schema:
    one xgrammar matcher per row (prompts × samples, known at the first step), fed the token each
    row sampled last, and the logits of the tokens the grammar does not allow set to -inf.

    A row whose matcher has ended (it accepted an end-of-turn token) is left alone: transformers
    pads it until the other rows end. A row whose token the matcher refuses (which the mask rules
    out) goes on unguided rather than failing the batch. One call only: the matchers keep its state.
    """

    def __init__(self, grammar):
        self.xgr = require("xgrammar", "guided")
        self.grammar = grammar
        self.matchers: list = []
        self.lost: set[int] = set()
        self.bitmask = None

    def __call__(self, input_ids, scores):
        xgr = self.xgr
        if not self.matchers:
            self.matchers = [xgr.GrammarMatcher(self.grammar) for _ in range(input_ids.shape[0])]
            self.bitmask = xgr.allocate_token_bitmask(len(self.matchers), self.grammar.tokenizer_info.vocab_size)
        else:
            for row, token in enumerate(input_ids[:, -1].tolist()):
                matcher = self.matchers[row]
                if row not in self.lost and not matcher.is_terminated() and not matcher.accept_token(int(token)):
                    self.lost.add(row)
        active = [row for row, m in enumerate(self.matchers) if row not in self.lost and not m.is_terminated()]
        if not active:
            return scores
        for row in active:
            self.matchers[row].fill_next_token_bitmask(self.bitmask, row)
        # xgrammar masks float32 logits on the CPU or a CUDA device; others go through the CPU.
        target = scores if scores.device.type == "cuda" else scores.float().cpu()
        xgr.apply_token_bitmask_inplace(target, self.bitmask.to(target.device), indices=active)
        return target if target is scores else target.to(device=scores.device, dtype=scores.dtype)


class _LogprobRecorder:
    """A logits processor that changes nothing and records, at each step, the log-probabilities of
    the model's distribution (before temperature and top-p, as vLLM reports them by default; under a
    JSON schema, after its mask, as vLLM's structured outputs report them): the chosen token's, read
    one step later once it is known, and the ``k`` most likely tokens.

    Only a step's full distribution is kept until the next step, so memory stays at one
    ``(rows, vocabulary)`` tensor however long the generation.
    """

    def __init__(self, k: int):
        self.k = k
        self.previous = None
        self.chosen: list = []
        self.top: list = []

    def __call__(self, input_ids, scores):
        torch = require("torch")
        logp = torch.log_softmax(scores.float(), dim=-1)
        if self.previous is not None:
            self.chosen.append(self.previous.gather(1, input_ids[:, -1:])[:, 0])
        self.previous = logp
        if self.k:
            self.top.append(logp.topk(min(self.k, logp.shape[-1]), dim=-1))
        return scores

    def finish(self, sequences) -> dict:
        """Per step and row: the chosen token's log-probability and the top k (values and ids), as lists."""
        torch = require("torch")
        if self.previous is not None:
            self.chosen.append(self.previous.gather(1, sequences[:, -1:])[:, 0])
            self.previous = None
        chosen = torch.stack(self.chosen).double().cpu().tolist() if self.chosen else []
        top_values = torch.stack([v for v, _ in self.top]).double().cpu().tolist() if self.top else []
        top_ids = torch.stack([i for _, i in self.top]).cpu().tolist() if self.top else []
        return {"chosen": chosen, "top_values": top_values, "top_ids": top_ids}


def _shared_prefill(model, ids, mask, n: int):
    """The key/value cache of every prompt but its last token, encoded once and repeated for its
    ``n`` samples (rows in the order ``num_return_sequences`` gives them: each prompt's samples side
    by side). ``generate`` then encodes only the last token of each row: the samples of one prompt
    share their history's encoding instead of encoding it ``n`` times, and sample the same tokens
    (the same rows, logits and random draws; ``tests/integration/test_models.py``)."""
    kwargs: dict[str, Any] = {}
    forward = getattr(model, "get_base_model", lambda: model)().forward
    if "position_ids" in inspect.signature(forward).parameters:  # left padding: positions count real tokens, as generate's
        kwargs["position_ids"] = (mask.cumsum(-1) - 1).masked_fill(mask == 0, 0)[:, :-1]
    cache = model(input_ids=ids[:, :-1], attention_mask=mask[:, :-1], use_cache=True, **kwargs).past_key_values
    cache.batch_repeat_interleave(n)
    return cache


def through_first_stop(new: list[int], stop: set[int]) -> list[int]:
    """Generated ids up to and including the first stop token (all of them when none stops)."""
    cut = next((j for j, t in enumerate(new) if t in stop), None)
    return new if cut is None else new[: cut + 1]


def left_pad(seqs: Sequence[Sequence[int]], pad_id: int):
    """Left-padded ``input_ids`` and ``attention_mask`` tensors for generation (new tokens line up)."""
    torch = require("torch")
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for row, seq in enumerate(seqs):
        ids[row, width - len(seq) :] = torch.tensor(list(seq), dtype=torch.long)
        mask[row, width - len(seq) :] = 1
    return ids, mask


def load_transformers(ref: ResolvedRef, *, device: str | None, dtype: str | None, batch_size: int,
                      bases: dict, share_base: bool) -> TransformersLM:
    """A :class:`TransformersLM` for ``ref``; with ``share_base``, bases come from (and go into) ``bases``."""
    device = default_device(device)
    if ref.adapter and (not share_base or ref.full_modules):
        loaded = LoadedBase(ref.base, ref.base_revision, device, dtype)
        loaded.merge(ref.adapter, ref.adapter_revision)
        return TransformersLM(loaded, None, ref, batch_size)
    key = (ref.base, ref.base_revision, device, dtype)
    if key not in bases:
        bases[key] = LoadedBase(ref.base, ref.base_revision, device, dtype)
    loaded = bases[key]
    name = loaded.attach(ref.adapter, ref.adapter_revision) if ref.adapter else None
    return TransformersLM(loaded, name, ref, batch_size)


def load_backend(ref: ResolvedRef, options: LoadOptions, bases: dict) -> TransformersLM:
    """The loader's ``transformers`` backend (:mod:`simhub.models.loader`): bases shared through ``bases``."""
    return load_transformers(ref, device=options.device, dtype=options.dtype, batch_size=options.batch_size,
                             bases=bases, share_base=options.share_base)
