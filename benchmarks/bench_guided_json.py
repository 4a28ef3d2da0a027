"""Benchmark schema-guided JSON: the KT role-player's answer prompt on a local model, guided vs not.

Each call is one :class:`~simhub.learners.kt.student.LLMRolePlayer` answer call through
:class:`~simhub.learners.chat.LocalChat` (transformers backend): the persona system prompt
(:func:`simhub.prompts.kt_learner.persona_system`) and ``--items`` items of the sample bank
(``learner_parts()[3]``, drawn per seed), sampled at ``--temperature`` with the seed. The same seeds,
items and personas run with ``LearnerSettings(guided=True)`` (the reply held to
:func:`~simhub.learners.kt.student.answers_schema` by xgrammar) and ``guided=False`` (free text).

Reported per mode: the valid-JSON rate (the whole reply is one JSON object: ``json.loads``), the
valid-answer rate (calls whose every item got one of its own option letters from the role-player's
parser, which also digs a JSON object out of surrounding text) and the same per item, the accuracy
and letters of the validly answered items (valid is not the same as sensible), seconds per call,
and reply tokens per call. The first guided call's one-off cost (xgrammar's tables for the
tokenizer) is timed apart, in ``guide_setup_seconds``, and left out of seconds per call.

Usage::

    SIMHUB_HOME=... python benchmarks/bench_guided_json.py [--model smol:135m-instruct] [--seeds 20]
        [--items 5] [--temperature 0.7] [--output benchmarks/results/guided_json.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from simhub.config import ModelRef
from simhub.learners.chat import ChatModel, ChatOutcome, LocalChat
from simhub.learners.kt.student import ABILITIES, DayContext, LearnerSettings, LLMRolePlayer, answers_schema

DEFAULT_OUTPUT = Path(__file__).resolve().parent / "results" / "guided_json.json"
PERSONALITY = "Chatty and easily distracted; guesses rather than leaves a question blank."


class Recording(ChatModel):
    """A chat model that keeps every reply and how long each call took."""

    def __init__(self, inner: ChatModel):
        self.inner = inner
        self.calls: list[tuple[str, float]] = []

    def describe(self) -> dict[str, Any]:
        return self.inner.describe()

    def chat(self, prompts, *, json_mode, temperature, max_tokens, seeds, schemas=None) -> list[ChatOutcome]:
        start = time.perf_counter()
        out = self.inner.chat(prompts, json_mode=json_mode, temperature=temperature, max_tokens=max_tokens,
                              seeds=seeds, schemas=schemas)
        elapsed = time.perf_counter() - start
        for o in out:
            if o.error is not None:
                raise RuntimeError(o.error)
            self.calls.append((o.text, elapsed / len(out)))
        return out


def _is_json_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False


def run(model: str, n_seeds: int, n_items: int, temperature: float, max_tokens: int, output: Path) -> dict[str, Any]:
    from simhub.models import load_lm
    from simhub.provision import resolve_model
    from simhub.tutoring.lms.bench import learner_parts

    ref = ModelRef(model=resolve_model(model))
    bank = learner_parts()[3]
    pool = sorted(bank.items.values(), key=lambda it: it.id)
    draws = [random.Random(seed).sample(pool, n_items) for seed in range(n_seeds)]
    contexts = [DayContext(day=1, ability=ABILITIES[seed % len(ABILITIES)], personality=PERSONALITY, adversarial=False,
                           weakest=(items[0].kc,), strongest=(items[-1].kc,)) for seed, items in enumerate(draws)]
    lm = load_lm(ref)
    start = time.perf_counter()
    lm.json_grammar(answers_schema(draws[0]))  # xgrammar's tokenizer tables, built once per model
    setup = time.perf_counter() - start

    modes: dict[str, Any] = {}
    for guided in (True, False):
        chat = Recording(LocalChat(ref))
        player = LLMRolePlayer(chat, name=model, settings=LearnerSettings(temperature=temperature,
                                                                           max_tokens=max_tokens, guided=guided))
        all_valid, item_valid, correct, letters = [], [], [], Counter()
        for seed, (items, ctx) in enumerate(zip(draws, contexts, strict=True)):
            answers = player.answer(ctx, items, [0.5] * len(items), seed)
            ok = [a.flag is None and a.letter in it.options for it, a in zip(items, answers, strict=True)]
            all_valid.append(all(ok))
            item_valid.extend(ok)
            for it, a, good in zip(items, answers, ok, strict=True):
                if good:
                    correct.append(a.letter == it.answer)
                    letters[a.letter] += 1
        texts = [t for t, _ in chat.calls]
        seconds = [s for _, s in chat.calls]
        tokens = [len(lm.text_ids(t)) for t in texts]
        modes["guided" if guided else "unguided"] = {
            "calls": len(texts),
            "valid_json_rate": sum(map(_is_json_object, texts)) / len(texts),
            "valid_answer_rate": sum(all_valid) / len(all_valid),
            "valid_item_rate": sum(item_valid) / len(item_valid),
            # Of the validly answered items: how many were right, and which letters were given.
            "accuracy": sum(correct) / len(correct) if correct else None,
            "letters": dict(sorted(letters.items())),
            "seconds_per_call": statistics.mean(seconds),
            "seconds_per_call_max": max(seconds),
            "reply_tokens_per_call": statistics.mean(tokens),
            "replies_at_token_limit": sum(t >= max_tokens for t in tokens),
            "example": texts[0][:300],
        }
    import torch

    result: dict[str, Any] = {
        "benchmark": "KT role-player answer prompt, schema-guided (xgrammar) vs free text, transformers backend",
        "model": model,
        "seeds": n_seeds,
        "items_per_call": n_items,
        "temperature": temperature,
        "max_tokens": max_tokens,
        "guide_setup_seconds": setup,
        "modes": modes,
        "torch_threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    return result


def table(result: dict[str, Any]) -> str:
    rows = [("mode", "valid JSON", "valid answers", "valid items", "accuracy", "s/call", "tokens/call")]
    for name, m in result["modes"].items():
        accuracy = f"{m['accuracy']:.2f}" if m["accuracy"] is not None else "-"
        rows.append((name, f"{m['valid_json_rate']:.2f}", f"{m['valid_answer_rate']:.2f}", f"{m['valid_item_rate']:.2f}",
                     accuracy, f"{m['seconds_per_call']:.2f}", f"{m['reply_tokens_per_call']:.0f}"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join([f"{result['model']}: {result['seeds']} seeds x {result['items_per_call']} items, "
                      f"temperature {result['temperature']}", *lines])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smol:135m-instruct")
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--items", type=int, default=5)
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--max-tokens", type=int, default=LearnerSettings().max_tokens)
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="JSON report path")
    args = parser.parse_args(argv)
    result = run(args.model, args.seeds, args.items, args.temperature, args.max_tokens, args.output)
    print(table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
