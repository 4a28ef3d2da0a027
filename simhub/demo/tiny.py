"""Tiny Llama model kit: a real tokenizer and real Llama checkpoints small enough for a CPU.

Every test and the demo use these folders exactly as they would use Llama-3.1-8B-Instruct:
``AutoTokenizer.from_pretrained(folder)``, ``AutoModelForCausalLM.from_pretrained(folder)``,
LoRA adapters on top, vLLM serving. The tokenizer is a byte-level BPE trained on the sample
corpus with Llama-3's special tokens and a Llama-3-style chat template that marks assistant
content with ``{% generation %}`` (so trl's assistant-only loss works). ``head_dim`` is 64
because vLLM's CPU attention rejects smaller heads.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterable
from pathlib import Path

BOS = "<|begin_of_text|>"
EOS = "<|end_of_text|>"
START_HEADER = "<|start_header_id|>"
END_HEADER = "<|end_header_id|>"
EOT = "<|eot_id|>"
PAD = "<|finetune_right_pad_id|>"
SPECIAL_TOKENS = [BOS, EOS, START_HEADER, END_HEADER, EOT, PAD]

CHAT_TEMPLATE = (
    "{{- bos_token }}"
    "{%- for message in messages %}"
    "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' }}"
    "{%- if message['role'] == 'assistant' %}"
    "{%- generation %}{{- message['content'] | trim + '<|eot_id|>' }}{%- endgeneration %}"
    "{%- else %}"
    "{{- message['content'] | trim + '<|eot_id|>' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}"
)

DEFAULT_VOCAB_SIZE = 2048
#: Architecture of every tiny checkpoint (vLLM-compatible: head_dim 64).
TINY_LLAMA = {
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 3,
    "num_attention_heads": 2,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "max_position_embeddings": 8192,
    "rms_norm_eps": 1e-5,
    "rope_theta": 500000.0,
    "tie_word_embeddings": False,
}

#: The prompt texts the tiny tokenizer is trained on, frozen (``resources/tiny/prompt_texts.json``):
#: simhub's prompts as they were when the kit's format was fixed. A later change to a prompt's
#: wording must not change the kit, or every fresh install would get another tokenizer, and with
#: it other demo models than an existing ``$SIMHUB_HOME`` holds and than the documented demo numbers were
#: measured with; words a newer prompt adds are split into known pieces instead.
PROMPT_TEXTS_FILE = Path(__file__).resolve().parent.parent / "resources" / "tiny" / "prompt_texts.json"


def prompt_texts() -> list[str]:
    """The frozen prompt texts the tiny tokenizer learns as words, not bytes (:data:`PROMPT_TEXTS_FILE`)."""
    return list(json.loads(PROMPT_TEXTS_FILE.read_text(encoding="utf-8")))


def corpus_texts() -> list[str]:
    """Texts of the bundled sample corpus (questions and messages), in a fixed order."""
    from simhub.data.eedi import load_eedi
    from simhub.data.sample import sample_raw_dir

    corpus = load_eedi(sample_raw_dir())
    texts: list[str] = prompt_texts()
    for split in ("train", "val", "test"):
        for dialogue in corpus[split]:
            texts.append(dialogue.question.text)
            texts.extend(turn.content for turn in dialogue.turns)
    return texts


def build_tokenizer(texts: Iterable[str] | None = None, vocab_size: int = DEFAULT_VOCAB_SIZE):
    """Train a byte-level BPE tokenizer and wrap it as a transformers fast tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    texts = list(corpus_texts() if texts is None else texts)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=BOS,
        eos_token=EOT,
        pad_token=PAD,
        clean_up_tokenization_spaces=False,
        model_max_length=TINY_LLAMA["max_position_embeddings"],
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def _config(tokenizer, **overrides):
    from transformers import LlamaConfig

    params = {
        **TINY_LLAMA,
        "vocab_size": len(tokenizer),
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": [tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids(EOS)],
        "pad_token_id": tokenizer.pad_token_id,
        **overrides,
    }
    return LlamaConfig(**params)


def pretraining_ids(tokenizer) -> list[int]:
    """The sample corpus's training dialogues rendered as student and tutor chats, as one token stream."""
    from simhub.data.eedi import load_eedi
    from simhub.data.sample import sample_raw_dir
    from simhub.prompts import student_messages, tutor_messages

    ids: list[int] = []
    for dialogue in load_eedi(sample_raw_dir())["train"]:
        for messages in (student_messages(dialogue, end_marker=True), tutor_messages(dialogue, end_marker=True)):
            ids.extend(tokenizer.encode(tokenizer.apply_chat_template(messages, tokenize=False), add_special_tokens=False))
    return ids


def pretrain(model, ids: list[int], steps: int, seed: int = 0, batch: int = 8, length: int = 256, lr: float = 3e-3) -> list[float]:
    """A short full-parameter LM pre-training on ``ids`` so the base model speaks the corpus's
    language and chat format (a random base makes greedy simulators answer with nothing).
    Deterministic for a given seed and thread count; returns the loss curve."""
    import torch

    if steps <= 0:
        return []
    data = torch.tensor(ids, dtype=torch.long)
    generator = torch.Generator().manual_seed(seed)
    optim = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    model.train()
    losses = []
    for _ in range(steps):
        starts = torch.randint(0, len(data) - length - 1, (batch,), generator=generator)
        x = torch.stack([data[s : s + length] for s in starts])
        loss = model(input_ids=x, labels=x).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optim.step()
        optim.zero_grad()
        losses.append(loss.item())
    model.eval()
    return losses


def build_causal_lm(output: str | os.PathLike[str], tokenizer=None, seed: int = 0, pretrain_steps: int = 0) -> Path:
    """Save a tiny ``LlamaForCausalLM`` (with its tokenizer) to ``output``: randomly initialised,
    then, with ``pretrain_steps``, briefly pre-trained on the sample corpus."""
    import torch
    from transformers import GenerationConfig, LlamaForCausalLM

    tokenizer = tokenizer or build_tokenizer()
    torch.manual_seed(seed)
    config = _config(tokenizer)
    config.dtype = "float32"
    model = LlamaForCausalLM(config)
    pretrain(model, pretraining_ids(tokenizer) if pretrain_steps else [], pretrain_steps, seed=seed)
    model.generation_config = GenerationConfig(
        bos_token_id=config.bos_token_id,
        eos_token_id=config.eos_token_id,
        pad_token_id=config.pad_token_id,
        do_sample=False,
    )
    out = Path(output)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def build_sequence_classifier(
    output: str | os.PathLike[str], labels: list[str], tokenizer=None, seed: int = 0
) -> Path:
    """Save a tiny ``LlamaForSequenceClassification`` with the given label names."""
    import torch
    from transformers import LlamaForSequenceClassification

    tokenizer = tokenizer or build_tokenizer()
    torch.manual_seed(seed)
    config = _config(
        tokenizer,
        num_labels=len(labels),
        id2label=dict(enumerate(labels)),
        label2id={label: i for i, label in enumerate(labels)},
    )
    model = LlamaForSequenceClassification(config)
    out = Path(output)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


#: Pre-training steps of the kit's causal LM (about 10 s on two cores).
KIT_PRETRAIN_STEPS = 60
#: Threads the kit's pre-training runs on, whatever the machine or the load: a reduction split over
#: another number of threads may round differently (measured on a two-core AMD EPYC: three threads give
#: a kit that differs from its first weight; one, two and four give the same bytes). Two, as the demo
#: models' builds (``simhub.provision.DEMO_BUILD_THREADS``).
KIT_BUILD_THREADS = 2


def build_kit(output: str | os.PathLike[str], seed: int = 0, pretrain_steps: int = KIT_PRETRAIN_STEPS, *,
              fresh_process: bool = True) -> dict[str, Path]:
    """Build the whole kit under ``output``: ``tokenizer/``, ``llama/`` (causal LM, briefly
    pre-trained on the sample corpus) and ``llama-cls/`` (sequence classifier).

    Building is deterministic and takes seconds; an existing complete kit is reused. The bytes depend
    on nothing but ``seed`` and ``pretrain_steps``: the build runs in a fresh Python process of its own
    (``fresh_process``), so nothing an earlier step left in the caller's process (a thread count, a
    library's global setting) reaches it, and its pre-training runs on :data:`KIT_BUILD_THREADS`
    threads whatever the load.
    """
    out = Path(output)
    names = ("tokenizer", "llama", "llama-cls")
    paths = {name: out / name for name in names}
    if (out / "kit.json").is_file() and all(p.is_dir() for p in paths.values()):
        return paths
    if fresh_process:
        from simhub.errors import require

        for module in ("torch", "transformers", "tokenizers"):  # a missing extra is named here, not in the child
            require(module, "metrics")
        _build_in_a_fresh_process(out, seed, pretrain_steps)
    else:
        _build_here(out, seed, pretrain_steps)
    return paths


def _build_in_a_fresh_process(out: Path, seed: int, pretrain_steps: int) -> None:
    import subprocess
    import sys

    import simhub
    from simhub.errors import SimhubError

    code = ("import sys; from simhub.demo.tiny import build_kit; "
            "build_kit(sys.argv[1], seed=int(sys.argv[2]), pretrain_steps=int(sys.argv[3]), fresh_process=False)")
    # The child imports this simhub (a source tree on sys.path included), not another install.
    root = str(Path(simhub.__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
    done = subprocess.run([sys.executable, "-c", code, str(out), str(seed), str(pretrain_steps)], env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False)
    if done.returncode != 0 or not (out / "kit.json").is_file():
        tail = "\n".join(done.stderr.strip().splitlines()[-8:])
        raise SimhubError(f"building the tiny model kit in {out} failed (exit {done.returncode}):\n{tail}")


def _build_here(out: Path, seed: int, pretrain_steps: int) -> None:
    import torch  # noqa: F401  (loaded before the threads are pinned: pinning sets a loaded torch's count)

    from simhub.models.cpu import pinned_threads
    from simhub.schema import ACTS

    # Built in a private folder and renamed into place, so an interrupted or concurrent build never
    # leaves a half-written kit behind.
    tmp = out.with_name(f".{out.name}.{os.getpid()}.partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tokenizer = build_tokenizer()
    tokenizer.save_pretrained(tmp / "tokenizer")
    with pinned_threads(KIT_BUILD_THREADS):
        build_causal_lm(tmp / "llama", tokenizer, seed=seed, pretrain_steps=pretrain_steps)
        build_sequence_classifier(tmp / "llama-cls", list(ACTS), tokenizer, seed=seed)
    (tmp / "kit.json").write_text(json.dumps({"seed": seed, "pretrain_steps": pretrain_steps,
                                              "vocab_size": len(tokenizer), **TINY_LLAMA}, indent=2))
    if (out / "kit.json").is_file():  # another process finished first: keep its kit
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        shutil.rmtree(out, ignore_errors=True)
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp.rename(out)
