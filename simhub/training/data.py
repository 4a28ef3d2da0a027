"""Training examples for each model kind, built with the same prompt code the metrics read.

* generators (student / tutor SFT): a whole dialogue as chat, labels only on ``assistant``
  messages (the student's turns for the student, the tutor's for the tutor);
* classifiers (acts / correctness): the classifier prompt plus the label as the assistant
  message, so only the label (and its end-of-turn token) carries loss;
* KT: packed LLMKT prompts (:func:`simhub.metrics.knowledge.build_kt_prompt`) with the KCs of a
  tutor turn and whether the next student turn is correct.

Label masks come from the chat template itself: the character span of assistant message ``i`` is
``len(render(messages[:i], generation prompt))`` to ``len(render(messages[:i+1]))``, and a token
carries a label when it starts inside such a span. This needs no ``{% generation %}`` markers, so
it works with the stock Llama 3 template as well as the tiny kit's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from simhub.errors import ConfigError
from simhub.prompts import act_messages, correctness_messages, student_messages, tutor_messages
from simhub.schema import ACTS, CORRECTNESS_LABELS, Dialogue, read_jsonl

IGNORE_INDEX = -100
#: Data spec meaning the sample corpus bundled with simhub.
SAMPLE_DATA = "sample:"
#: The labels a classifier kind generates, in a fixed order.
CLASS_LABELS: dict[str, tuple[str, ...]] = {"acts": ACTS, "correctness": CORRECTNESS_LABELS}


# ---------------------------------------------------------------------------------- data specs


def check_data(spec: str, splits: Sequence[str]) -> None:
    """Raise ConfigError if ``spec`` is not ``sample:`` or a folder with ``{split}.jsonl`` for each split."""
    if spec == SAMPLE_DATA:
        return
    root = Path(spec).expanduser()
    if not root.is_dir():
        raise ConfigError(f"data: {spec!r} is not a folder (nor 'sample:' for the bundled sample corpus)")
    missing = [f"{s}.jsonl" for s in splits if not (root / f"{s}.jsonl").is_file()]
    if missing:
        raise ConfigError(f"data: {spec!r} has no {', '.join(missing)}; create them with `simhub data convert-eedi`")


def _sample_corpus():
    from simhub.data.sample import load_sample_corpus

    return load_sample_corpus()


def load_split(spec: str, split: str, limit: int | None = None) -> list[Dialogue]:
    check_data(spec, [split])
    dialogues = list(_sample_corpus()[split]) if spec == SAMPLE_DATA else read_jsonl(Path(spec) / f"{split}.jsonl")
    return dialogues[:limit] if limit else dialogues


# ---------------------------------------------------------------------------------- masks


def _render(tokenizer, messages: list[dict], generation_prompt: bool = False) -> str:
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation_prompt)


def chat_example(tokenizer, messages: list[dict]) -> dict[str, list[int]]:
    """``input_ids`` of the rendered chat and ``labels`` equal to them on assistant tokens only."""
    text = _render(tokenizer, messages)
    spans = []
    for i, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        start = len(_render(tokenizer, messages[:i], generation_prompt=True))
        end_text = _render(tokenizer, messages[: i + 1])
        if not text.startswith(end_text) or start > len(end_text):
            raise ConfigError("the chat template does not render a conversation as the concatenation of its "
                              "prefixes, so assistant tokens cannot be located")
        spans.append((start, len(end_text)))
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ids = list(enc["input_ids"])
    labels = [IGNORE_INDEX] * len(ids)
    j = 0
    for t, (s, _) in enumerate(enc["offset_mapping"]):
        while j < len(spans) and s >= spans[j][1]:
            j += 1
        if j < len(spans) and spans[j][0] <= s < spans[j][1]:
            labels[t] = ids[t]
    return {"input_ids": ids, "labels": labels}


# ---------------------------------------------------------------------------------- examples


@dataclass
class Examples:
    """Tokenised examples of one split and how many were left out, and why."""

    items: list[dict]
    excluded_long: int = 0
    skipped: dict[str, int] = field(default_factory=dict)

    def summary(self) -> dict:
        return {"examples": len(self.items), "excluded_long_prompts": self.excluded_long, **self.skipped}


def chat_conversations(kind: str, dialogue: Dialogue, persona: str = "none") -> list[list[dict]]:
    """Chat conversations (messages with the training target as ``assistant``) of one dialogue."""
    if kind == "student-sft":
        messages = student_messages(dialogue, persona=persona, end_marker=True)
        return [messages] if any(m["role"] == "assistant" for m in messages) else []
    if kind == "tutor-sft":
        messages = tutor_messages(dialogue, end_marker=True)
        return [messages] if any(m["role"] == "assistant" for m in messages) else []
    if kind in CLASS_LABELS:
        build = act_messages if kind == "acts" else correctness_messages
        out = []
        for i in dialogue.student_turn_indices():
            turn = dialogue.turns[i]
            label = turn.act if kind == "acts" else turn.correctness
            if label is None:
                continue
            prompt = build(dialogue.turns[:i], turn.content, dialogue)
            out.append([*prompt, {"role": "assistant", "content": label}])
        return out
    raise ConfigError(f"kind {kind!r} has no chat examples")


def prompt_chars(tokenizer, kind: str, messages: list[dict]) -> int:
    """Length of the chat-templated prompt string, as the reference measures it (SPEC §2 rule 8, §8):
    a generator's prompt is the whole templated dialogue; a classifier's, the messages before the
    label with the generation prompt."""
    if kind in ("student-sft", "tutor-sft"):
        return len(_render(tokenizer, messages))
    return len(_render(tokenizer, messages[:-1], generation_prompt=True))


def build_chat_examples(tokenizer, kind: str, dialogues: Sequence[Dialogue], max_prompt_chars: int,
                        persona: str = "none") -> Examples:
    """Tokenised chat examples; prompts of ``max_prompt_chars`` characters or more (chat-templated)
    are left out."""
    out = Examples(items=[])
    for dialogue in dialogues:
        for messages in chat_conversations(kind, dialogue, persona):
            if prompt_chars(tokenizer, kind, messages) >= max_prompt_chars:
                out.excluded_long += 1
                continue
            example = chat_example(tokenizer, messages)
            if kind in CLASS_LABELS:
                example["class_index"] = CLASS_LABELS[kind].index(messages[-1]["content"])
            out.items.append(example)
    return out


def kt_samples(dialogue: Dialogue) -> list[tuple[list, list[str], float]]:
    """``(history, kcs, label)`` per tutor turn with KCs followed by a student turn judged correct/incorrect.

    The history stops before the tutor turn, i.e. at the previous student turn (SPEC §3); the KCs
    are those labelled on the tutor turn; the label is 1.0 when the next student turn is correct.
    """
    out = []
    turns = dialogue.turns
    for j in range(len(turns) - 1):
        tutor, student = turns[j], turns[j + 1]
        if tutor.role != "tutor" or student.role != "student" or not tutor.kcs:
            continue
        if student.correctness not in ("correct", "incorrect"):
            continue
        out.append((turns[:j], list(tutor.kcs), 1.0 if student.correctness == "correct" else 0.0))
    return out


def build_kt_examples(tokenizer, dialogues: Sequence[Dialogue], max_prompt_chars: int, persona: str = "ocean") -> Examples:
    """Packed KT examples: the context lists all of the dialogue's KCs (as at evaluation); the
    questions ask about the tutor turn's labelled KCs."""
    from simhub.metrics.knowledge import build_kt_prompt
    from simhub.prompts import kt_context, kt_question

    out = Examples(items=[])
    for dialogue in dialogues:
        for history, kcs, label in kt_samples(dialogue):
            chars = len(kt_context(dialogue, history, persona=persona)) + sum(len(kt_question(k)) for k in kcs)
            if chars >= max_prompt_chars:
                out.excluded_long += 1
                continue
            prompt = build_kt_prompt(tokenizer, dialogue, history, kcs, persona=persona)
            out.items.append({"input_ids": prompt.input_ids, "context_len": prompt.context_len,
                              "segments": prompt.segments, "labels": label})
    return out


def head_fraction(dialogues: Sequence[Dialogue], fraction: float) -> list[Dialogue]:
    """The first ``int(fraction · n)`` dialogues (the splits are already shuffled): the reference's
    DPO data, ``data[:int(len(data) * subsample)]``."""
    return list(dialogues[: int(len(dialogues) * fraction)])
