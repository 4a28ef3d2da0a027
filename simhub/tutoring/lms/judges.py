"""The KT-learner bench's judge panel: up to three chat models rating every session day.

Each judge (a profile entry; an OpenAI-compatible endpoint in JSON mode, temperature 0.3 as in
EduClaw-Bench) reads one day's log (help requests, the tutor's messages, content, assignments and
the learner's replies; :mod:`simhub.prompts.kt_judge`) and answers helpfulness (1–10), Gagné and
Rosenshine (1–5) and hand-over (yes/no). The panel takes the mean of the scores and the majority of
the hand-over votes (a tie is not a hand-over). An unusable answer is flagged and left out of the
panel's mean; a judge that fails is flagged ``judge: ...`` and asked again on the next run.

Per run (EduClaw-Bench's formulas): Help = the mean over judged days of the panel's helpfulness;
Gagné and Rosenshine = the mean over judged days *after the first*; the hand-over rate = the share of
help-request days the panel calls a hand-over.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from simhub.cache import ContentCache, cached_answers, fingerprint
from simhub.learners.chat import ChatModel, ask_json, find_json_object
from simhub.learners.kt.lms import DayRecord

AXES = {"helpfulness": (1, 10), "gagne": (1, 5), "rosenshine": (1, 5)}
JUDGE_FAILED = "judge: "
TEMPERATURE = 0.3


def _action_text(name: str, args: dict[str, Any]) -> str:
    if name == "assign_items":
        return f"assigned items {', '.join(args.get('item_ids', []))}"
    if name == "adjust_level":
        return f"adjusted level {args.get('delta')} on {', '.join(args.get('kcs', []))}"
    if name == "provide_content":
        return f"pushed {args.get('kind')} on {args.get('kc')}: {str(args.get('text', ''))[:400]}"
    return "stayed silent" if name == "stay_silent" else name


def day_events(day: DayRecord) -> list[str]:
    """One day's log as the judge reads it (turn order; queries left out)."""
    lines = [f"(pre-session probe: {sum(a.correct for a in day.pre)}/{len(day.pre)} correct)"]
    by_turn: dict[int, list[str]] = {}
    for m in day.messages:
        by_turn.setdefault(m.turn, []).append(f"{'Student' if m.role == 'learner' else 'Tutor'}: {m.text}")
    for a in day.actions:
        if a.error is not None or a.name.startswith("get_") or a.name == "send_message":
            continue
        by_turn.setdefault(a.turn, []).append(f"[tutor action] {_action_text(a.name, a.args)}")
    for turn in sorted(by_turn):
        lines.extend(by_turn[turn])
    if day.practice:
        lines.append(f"(practice: {sum(a.correct for a in day.practice)}/{len(day.practice)} correct)")
    return lines


def parse_judgement(text: str | dict[str, Any]) -> dict[str, Any]:
    """The four axes of a judge's answer (its text, or the JSON object found in it), or ``{"flagged": why}``."""
    data, flag = find_json_object(text) if isinstance(text, str) else (text, None)
    if data is None:
        return {"flagged": flag}
    out: dict[str, Any] = {}
    for axis, (low, high) in AXES.items():
        v = data.get(axis)
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        if isinstance(v, bool) or not isinstance(v, int) or not low <= v <= high:
            return {"flagged": f"{axis}: {v!r} is not an integer in {low}..{high}"}
        out[axis] = v
    h = data.get("handover")
    if not isinstance(h, bool):
        return {"flagged": f"handover: {h!r} is not true or false"}
    out["handover"] = h
    return out


class DayJudge:
    def __init__(self, chat: ChatModel, name: str, *, max_tokens: int = 300):
        self.chat, self.name, self.max_tokens = chat, name, max_tokens

    def describe(self) -> dict[str, Any]:
        from simhub.prompts.kt_judge import PROMPT_VERSION

        return {"name": self.name, "model": self.chat.describe(), "prompts": PROMPT_VERSION,
                "temperature": TEMPERATURE}

    def judge(self, prompts: Sequence[list[dict[str, str]]]) -> list[dict[str, Any]]:
        answers = ask_json(self.chat, prompts, temperature=TEMPERATURE, max_tokens=self.max_tokens)
        return [{"flagged": f"{JUDGE_FAILED}{a.error}"[:300]} if a.error is not None
                else {"flagged": a.flag} if a.value is None else parse_judgement(a.value) for a in answers]


def panel(votes: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """The panel's view of one day: axis means and the hand-over majority over the usable votes."""
    ok = [v for v in votes.values() if "flagged" not in v]
    if not ok:
        return None
    out: dict[str, Any] = {axis: sum(v[axis] for v in ok) / len(ok) for axis in AXES}
    out["handover"] = sum(v["handover"] for v in ok) * 2 > len(ok)
    out["judges"] = len(ok)
    return out


def _ask_in_batches(judge: DayJudge, prompts: Sequence[list[dict[str, str]]], missing: list[int]
                    ) -> list[dict[str, Any]]:
    """The judge's votes on ``prompts[missing]``, sixteen days to a request batch."""
    asked = [prompts[j] for j in missing]
    return [v for k in range(0, len(asked), 16) for v in judge.judge(asked[k:k + 16])]


def judge_runs(judges: Sequence[DayJudge], traces: Sequence[Any], cache: ContentCache | None = None
               ) -> tuple[int, int]:
    """Judge every ok day of ``traces`` that a judge has not rated yet (or whose rating failed), in
    place (``trace.judgments[str(day)][judge] = vote``); returns (asked, answered from the cache)."""
    asked = hits = 0
    for judge in judges:
        me = judge.describe()
        from simhub.prompts.kt_judge import day_judge_messages

        todo: list[tuple[Any, DayRecord, list[dict[str, str]]]] = []
        for t in traces:
            for d in t.days:
                old = t.judgments.get(str(d.day), {}).get(judge.name)
                if d.failed is None and (old is None or str(old.get("flagged", "")).startswith(JUDGE_FAILED)):
                    todo.append((t, d, day_judge_messages(day=d.day, unit=t.unit, events=day_events(d))))

        prompts = [p for _, _, p in todo]
        votes, got, made = cached_answers(
            cache, [fingerprint(["kt-judge", me, p]) for p in prompts],
            functools.partial(_ask_in_batches, judge, prompts),
            ok=lambda v: not str(v.get("flagged", "")).startswith(JUDGE_FAILED), encode=dict, decode=dict)
        hits, asked = hits + got, asked + made
        for (t, d, _), vote in zip(todo, votes, strict=True):
            t.judgments.setdefault(str(d.day), {})[judge.name] = vote
    return asked, hits


def run_axes(trace: Any, *, first_days: int | None = None) -> dict[str, float | None]:
    """Help, Gagné, Rosenshine and the hand-over rate of one run from its judgments (None: not judged)."""
    days = [d for d in trace.days if d.failed is None and (first_days is None or d.day <= first_days)]
    views = {d.day: panel(trace.judgments.get(str(d.day), {})) for d in days}
    judged = [d for d in days if views[d.day] is not None]
    if not judged:
        return {"helpfulness": None, "gagne": None, "rosenshine": None, "handover_rate": None}
    first = min(d.day for d in days)
    later = [d for d in judged if d.day != first]
    help_days = {h.day for h in trace.help}
    asked = [d for d in judged if d.day in help_days]
    return {"helpfulness": sum(views[d.day]["helpfulness"] for d in judged) / len(judged),
            "gagne": sum(views[d.day]["gagne"] for d in later) / len(later) if later else None,
            "rosenshine": sum(views[d.day]["rosenshine"] for d in later) / len(later) if later else None,
            "handover_rate": sum(views[d.day]["handover"] for d in asked) / len(asked) if asked else None}
