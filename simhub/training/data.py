"""Training examples for each model kind, built with the same prompt code the metrics read.

* generators (student / tutor SFT): a whole dialogue as chat, labels only on ``assistant``
  messages (the student's turns for the student, the tutor's for the tutor);
* classifiers (acts / correctness): the classifier prompt plus the label as the assistant
  message, so only the label (and its end-of-turn token) carries loss;
* the local judge: the judge prompt (:func:`simhub.prompts.judge_messages`) for a real student
  turn and a candidate, with the verdict as the assistant message. The candidates and their
  verdicts come from the corpus's own correctness labels (:func:`judge_cases`);
* KT: packed LLMKT prompts (:func:`simhub.metrics.knowledge.build_kt_prompt`) with the KCs of a
  tutor turn and whether the next student turn is correct.

Label masks come from the chat template itself: the character span of assistant message ``i`` is
``len(render(messages[:i], generation prompt))`` to ``len(render(messages[:i+1]))``, and a token
carries a label when it starts inside such a span. This needs no ``{% generation %}`` markers, so
it works with the stock Llama 3 template as well as the tiny kit's.
"""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from simhub.errors import ConfigError
from simhub.metrics import ScoreItem
from simhub.metrics.judge import JUDGE_OPTIONS, item_messages
from simhub.prompts import act_messages, correctness_messages, student_messages, tutor_messages
from simhub.schema import ACTS, CORRECTNESS_LABELS, Dialogue, Turn, read_jsonl

IGNORE_INDEX = -100
#: Data spec meaning the sample corpus bundled with simhub.
SAMPLE_DATA = "sample:"
#: The labels a classifier kind generates, in a fixed order (the judge's are the local judge's options).
CLASS_LABELS: dict[str, tuple[str, ...]] = {"acts": ACTS, "correctness": CORRECTNESS_LABELS, "judge": JUDGE_OPTIONS}
#: Other student turns put to the judge as candidates per real turn, besides the real turn itself.
JUDGE_CANDIDATES = 2


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
    """Chat conversations (messages with the training target as ``assistant``) of one dialogue
    (the judge draws candidates from a whole split: see :func:`judge_cases`)."""
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


def too_long(kind: str, chars: int, max_prompt_chars: int) -> bool:
    """The reference's length filter (FIDELITY.md, §2 rule 8): the classifiers (acts, correctness, and
    simhub's judge with them) leave out prompts *longer* than the limit, the generators, KT and DPO
    prompts *of* the limit or longer."""
    return chars > max_prompt_chars if kind in CLASS_LABELS else chars >= max_prompt_chars


def prompt_chars(tokenizer, kind: str, messages: list[dict]) -> int:
    """Length of the chat-templated prompt string, as the reference measures it (docs/protocol.md §2 rule 8, §8):
    a generator's prompt is the whole templated dialogue; a classifier's, the messages before the
    label with the generation prompt."""
    if kind in ("student-sft", "tutor-sft"):
        return len(_render(tokenizer, messages))
    return len(_render(tokenizer, messages[:-1], generation_prompt=True))


def build_chat_examples(tokenizer, kind: str, dialogues: Sequence[Dialogue], max_prompt_chars: int,
                        persona: str = "none", *, judge_candidates: int = JUDGE_CANDIDATES,
                        judge_tutor_candidates: int = 0, seed: int = 0) -> Examples:
    """Tokenised chat examples; chat-templated prompts over the length limit are left out
    (:func:`too_long`). ``judge_candidates``, ``judge_tutor_candidates`` and ``seed`` choose the judge's
    candidates (kind ``judge``, :func:`judge_cases`); judge examples carry their case's ``source``."""
    out = Examples(items=[])
    sources: list[str | None]
    if kind == "judge":
        cases = judge_cases(dialogues, judge_candidates, seed, judge_tutor_candidates)
        conversations, sources = [case.messages() for case in cases], [case.source for case in cases]
    else:
        conversations = [m for dialogue in dialogues for m in chat_conversations(kind, dialogue, persona)]
        sources = [None] * len(conversations)
    for messages, source in zip(conversations, sources, strict=True):
        if too_long(kind, prompt_chars(tokenizer, kind, messages), max_prompt_chars):
            out.excluded_long += 1
            continue
        example = chat_example(tokenizer, messages)
        if kind in CLASS_LABELS:
            example["class_index"] = CLASS_LABELS[kind].index(messages[-1]["content"])
        if source is not None:
            example["source"] = source
        out.items.append(example)
    return out


# ---------------------------------------------------------------------------------- judge

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def same_answer(a: str, b: str) -> bool:
    """Whether two student turns give the same answer, as far as text can tell.

    Two turns agree when their texts match once case, runs of whitespace and surrounding
    punctuation are ignored (``"idk"`` and ``"IDK."``), or when both state numbers and the
    numbers are the same, signs included, in the same order (``"25°"``, ``"it's 25"`` and ``"25"``;
    but not ``"3/8"`` and ``"8/3"``, or ``"5"`` and ``"-5"``). This stands in for the paper's "mathematically equivalent": the
    sample corpus has no richer notion, and numbers are what its answers turn on.
    """
    def norm(text: str) -> str:
        return " ".join(text.casefold().split()).strip(" .,;:!?")

    if norm(a) == norm(b):
        return True
    numbers = _NUMBER.findall(a)
    return bool(numbers) and numbers == _NUMBER.findall(b)


def judge_verdict(real_label: str, real_text: str, candidate_label: str, candidate_text: str) -> str:
    """The verdict (one of the local judge's options) for a candidate whose own correctness label is
    ``candidate_label``, put in place of a real turn labelled ``real_label``.

    * A candidate giving the same answer as the real turn (:func:`same_answer`; the real turn itself
      above all) takes the real turn's label: it is that answer, at that moment.
    * Otherwise the candidate's own label is its correctness here.
    * Incorrect candidates say whether the error is the real turn's: ``same error`` only for the
      same answer to a real incorrect turn, ``different error`` otherwise. When the real turn is not
      incorrect there is no real error to share, and the local judge (which has no bare
      ``incorrect`` option) says ``different error``; the metric scores that as plain incorrect.
    """
    same = same_answer(real_text, candidate_text)
    label = real_label if same else candidate_label
    if label == "incorrect":
        return "incorrect, same error" if same and real_label == "incorrect" else "incorrect, different error"
    if label not in ("correct", "na"):
        raise ValueError(f"correctness label {label!r} is not correct, incorrect or na")
    return label


@dataclass(frozen=True)
class JudgeCase:
    """One judge training example before templating: the real turn, a candidate and the verdict."""

    dialogue: Dialogue
    index: int
    candidate: str
    verdict: str
    #: ``real`` (the real turn itself), ``dialogue`` (another turn of the same dialogue),
    #: ``question`` (a turn of another dialogue on the same question), ``corpus`` (any other student
    #: turn) or ``tutor`` (a tutor's turn of another question).
    source: str

    @property
    def real(self) -> Turn:
        return self.dialogue.turns[self.index]

    def messages(self) -> list[dict]:
        """The judge prompt the metric sends for this real turn and candidate, plus the verdict."""
        prompt = item_messages(ScoreItem(self.dialogue, self.index, self.candidate))
        return [*prompt, {"role": "assistant", "content": self.verdict}]


def _alternate(first: Iterator[int], second: Iterator[int]) -> Iterator[int]:
    """``first[0], second[0], first[1], second[1], ...``, then the rest of the longer one."""
    sentinel = object()
    for a, b in itertools.zip_longest(first, second, fillvalue=sentinel):
        if a is not sentinel:
            yield a
        if b is not sentinel:
            yield b


def judge_cases(dialogues: Sequence[Dialogue], candidates: int = JUDGE_CANDIDATES, seed: int = 0,
                tutor_candidates: int = 0) -> list[JudgeCase]:
    """Judge examples built from the corpus's correctness labels, for every real student turn
    labelled correct or incorrect (the metric never asks the judge about a real ``na`` turn: both
    scores are null).

    Each real turn is its own first candidate (verdict: its label, ``same error`` when incorrect),
    so the judge learns to agree with the annotation when the candidate is the real answer. Then up
    to ``candidates`` other student turns with a correctness label, taken in turn from two pools:
    near (the same dialogue and other dialogues on the same question: answers to the same task,
    where a turn's label is most likely to carry over) and far (drawn at random from the rest of
    the split: turns unlike the real one, so the judge does not take any candidate for the real
    answer). With two candidates a turn gets one of each; when a pool runs dry the other goes on.
    Their verdicts follow :func:`judge_verdict`; a turn with the real turn's answer is not drawn
    (it would repeat the first example). Then ``tutor_candidates`` tutor turns of other questions,
    verdict ``na``: a tutor's turn in the student's place takes up no task the tutor set (the
    paper's definition of na), and it teaches the judge that text unlike the real answer is not
    graded by the real turn's label. The draw depends on ``seed``, the dialogue id, the turn index
    and the split's turns, not on the order of the dialogues.
    """
    ordered = sorted(((d.id, i, d) for d in dialogues for i in d.student_turn_indices()
                      if d.turns[i].correctness is not None), key=lambda x: x[:2])
    pool: list[tuple[Dialogue, Turn]] = [(d, d.turns[i]) for _, i, d in ordered]
    by_question: dict[str, list[int]] = {}
    for n, (dialogue, _) in enumerate(pool):
        by_question.setdefault(dialogue.question.text, []).append(n)
    tutor_pool = sorted(((d.id, i, d) for d in dialogues for i, t in enumerate(d.turns)
                         if t.role == "tutor" and t.content.strip()), key=lambda x: x[:2])
    cases = []
    for dialogue in dialogues:
        question = dialogue.question.text
        for index in dialogue.student_turn_indices():
            real = dialogue.turns[index]
            if real.correctness not in ("correct", "incorrect"):
                continue
            cases.append(JudgeCase(dialogue, index, real.content, judge_verdict(
                real.correctness, real.content, real.correctness, real.content), "real"))
            rng = random.Random(f"{seed}:{dialogue.id}:{index}")
            for _ in range(tutor_candidates if tutor_pool else 0):
                _, at, other = tutor_pool[rng.randrange(len(tutor_pool))]
                text = other.turns[at].content
                if other.question.text != question and not same_answer(text, real.content):
                    cases.append(JudgeCase(dialogue, index, text, "na", "tutor"))
            if candidates <= 0:
                continue
            near = [n for n in by_question.get(question, []) if pool[n][1] is not real]
            rng.shuffle(near)
            # Then the rest of the split, drawn lazily (shuffling it for every turn would be quadratic).
            draws = (rng.randrange(len(pool)) for _ in range(20 * candidates))
            far = (n for n in draws if pool[n][0].question.text != question)
            seen = [real.content]
            for n in _alternate(iter(near), far):
                if len(seen) > candidates:
                    break
                other, turn = pool[n]
                if any(same_answer(text, turn.content) for text in seen):
                    continue
                seen.append(turn.content)
                source = "dialogue" if other is dialogue else "question" if other.question.text == question else "corpus"
                cases.append(JudgeCase(dialogue, index, turn.content, judge_verdict(
                    real.correctness, real.content, turn.correctness or "na", turn.content), source))
    return cases


def kt_samples(dialogue: Dialogue) -> list[tuple[list, list[str], float]]:
    """``(history, kcs, label)`` per tutor turn with KCs followed by a student turn judged correct/incorrect.

    The history stops before the tutor turn, i.e. at the previous student turn (docs/protocol.md §3); the KCs
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


def kt_prompt_chars(tokenizer, dialogue: Dialogue, history: list[Turn], kcs: Sequence[str],
                    persona: str = "ocean") -> int:
    """Length of a packed KT prompt laid out as the reference measures it (FIDELITY.md, §2 rule 8):
    the chat-templated instruction (system) and context (user), then per KC a space and the
    templated KC turn from its text on (the question, the end of the user turn and the empty
    assistant header that precedes the answer). simhub's model reads the same texts as plain text
    (FIDELITY.md, KT prompt layout); the filter still counts the template, so that it leaves out the
    examples the reference leaves out."""
    from simhub.prompts import kt_messages, kt_question

    head = _render(tokenizer, kt_messages(dialogue, history, persona))
    marker = "\x00"
    turn = _render(tokenizer, [{"role": "user", "content": marker}, {"role": "assistant", "content": "\n"}])
    tail = turn[turn.index(marker) + len(marker):]
    return len(head) + sum(1 + len(kt_question(kc)) + len(tail) for kc in kcs)


def build_kt_examples(tokenizer, dialogues: Sequence[Dialogue], max_prompt_chars: int, persona: str = "ocean") -> Examples:
    """Packed KT examples: the context lists all of the dialogue's KCs (as at evaluation); the
    questions ask about the tutor turn's labelled KCs. Prompts of ``max_prompt_chars`` characters
    or more, measured by :func:`kt_prompt_chars`, are left out."""
    from simhub.metrics.knowledge import build_kt_prompt

    out = Examples(items=[])
    for dialogue in dialogues:
        for history, kcs, label in kt_samples(dialogue):
            if too_long("kt", kt_prompt_chars(tokenizer, dialogue, history, kcs, persona), max_prompt_chars):
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
