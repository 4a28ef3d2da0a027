"""The knowledge-state learner's prompts: its role-play turns and the per-IU signal extraction.

The structure follows KnowSim (a learner conditioned on its knowledge state and an articulation mode,
answering JSON; an analyst labelling every IU of the latest turn); the wording is simhub's own.
The functions take plain data (IU tuples, state names) so this layer needs nothing from the learner's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

#: Part of every cache key of these prompts: bump it when the wording changes.
PROMPT_VERSION = "learners-v1"

IU = tuple[str, str, str]  # (id, concept, description)

_MODES = {
    "explicit": "You can say clearly what you know and name what you do not get yet.",
    "vague": "Your words are fuzzy: you sense what you are missing but cannot name it precisely.",
    "deferential": "You have little to hold on to: you mostly follow the tutor's lead and ask for help.",
}


def _lines(items: Sequence[str]) -> str:
    return "\n".join(f"- {x}" for x in items) if items else "- (none)"


def _transcript(history: Sequence[tuple[str, str]]) -> str:
    if not history:
        return "(nothing yet)"
    names = {"learner": "Learner", "tutor": "Tutor"}
    return "\n".join(f"{names.get(role, role)}: {text}" for role, text in history)


def learner_messages(question: str, history: Sequence[tuple[str, str]], *, known: Sequence[str],
                     struggling: Sequence[str], unaware: Sequence[str], connectable: Sequence[str], mode: str,
                     turn: int) -> list[dict[str, str]]:
    """The chat prompt of the learner's next message (``turn`` 1 is the opening query)."""
    system = (
        "You are playing a student who is chatting with a tutor about one problem. Stay in character: your "
        "knowledge is exactly what is listed below, no more.\n"
        "- Use what you know well correctly.\n"
        "- On the ideas you are shaky on, make the kind of mistakes a real student makes.\n"
        "- Never use or mention an idea you are unaware of, even if you can guess it; the tutor has to bring it up.\n"
        "- The ideas within reach make you curious: you may ask about them, but you cannot yet use them.\n"
        "- When you try a step, show your thinking and ask whether it is right.\n"
        "- Answer the tutor's questions honestly, including checks of what you understood.\n"
        f"- How you talk: {_MODES.get(mode, _MODES['vague'])}\n"
        "Write one or two sentences, as a student types in a chat. Answer only with a JSON object: "
        '{"thought": "what goes through your head (hidden from the tutor)", "message": "what you type", '
        '"attempt_verify": true if you try a step and ask to check it, else false}.')
    state = (f"Ideas you know well:\n{_lines(known)}\n\nIdeas you are shaky on:\n{_lines(struggling)}\n\n"
             f"Ideas within reach, not yet learned:\n{_lines(connectable)}\n\n"
             f"Ideas you are unaware of (never mention them):\n{_lines(unaware)}")
    if turn <= 1:
        task = "Write your first message to the tutor: say what you need help with, as this student would."
    else:
        task = "Write your next message to the tutor, reacting to what they just said."
    user = f"The problem:\n{question}\n\n{state}\n\nThe conversation so far:\n{_transcript(history)}\n\n{task}"
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def extractor_messages(question: str, ius: Sequence[IU], states: Mapping[str, str],
                       history: Sequence[tuple[str, str]], learner_message: str, tutor_message: str
                       ) -> list[dict[str, str]]:
    """The chat prompt that labels every IU of the latest turn (answer: ``{"ius": [...]}``)."""
    system = (
        "You are an analyst of tutoring conversations. For one turn (the learner's message and the tutor's reply) "
        "you label every information unit (IU) of the problem with two labels.\n\n"
        "teaching_quality, judged from the tutor's reply only:\n"
        "- well_explained: the reply really teaches this IU: it states it and backs it with a derivation, a "
        "reason, a worked example or a step-by-step use, or it asks guiding questions aimed at exactly this gap.\n"
        "- shallow: the IU is named or touched in passing, in about one sentence, echoed from the learner, "
        "promised for later, or explained with a factual error.\n"
        "- not_mentioned: the reply does not address it.\n"
        "When unsure between well_explained and shallow, choose shallow.\n\n"
        "user_attempt_type, judged from the learner's message only:\n"
        "- reasoning: the learner works with the IU in their own words, adding something new (even if wrong).\n"
        "- articulation: the learner restates what the tutor already said about it.\n"
        "- none: the learner does not engage with it.\n\n"
        'Answer only with JSON: {"ius": [{"id": "IU1", "teaching_quality": "...", "user_attempt_type": "..."}, ...]} '
        "with every IU listed exactly once, using the ids given.")
    units = "\n".join(f"- {i} ({states.get(i, '?')}): {c}. {d}" for i, c, d in ius)
    user = (f"The problem:\n{question}\n\nThe IUs, with the learner's state before this turn:\n{units}\n\n"
            f"The conversation before this turn:\n{_transcript(history)}\n\n"
            f"The learner's message:\n{learner_message}\n\nThe tutor's reply:\n{tutor_message}\n\nLabel every IU.")
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


#: What a stateless baseline is told about its level (simhub's wording; KnowSim gives a rough share).
LEVEL_DESCRIPTORS = {
    "novice": "You are new to this topic: you know roughly a fifth of the ideas the problem needs, mostly the basics.",
    "intermediate": "You know about half to two thirds of the ideas the problem needs, with some gaps and shaky spots.",
    "advanced": "You know most of the ideas the problem needs; only one or two details may be missing.",
}
END_PHRASE = "terminate conversation"
#: Profiles a ZS-CoT-Prof learner draws from by its seed (simhub's own, deliberately plain).
LEARNER_PROFILES = (
    "a secondary-school student who likes concrete examples and gets impatient with long explanations",
    "an adult returning to maths after many years, careful and a little anxious about mistakes",
    "a quick student who often guesses before thinking the steps through",
    "a quiet student who rarely asks questions and tends to agree with the tutor",
)


def baseline_learner_messages(question: str, history: Sequence[tuple[str, str]], *, level: str, style: str,
                              turn: int, profile: str | None = None, known: Sequence[str] = (),
                              shaky: Sequence[str] = (), unknown: Sequence[str] = ()) -> list[dict[str, str]]:
    """A stateless baseline learner's prompt: ``zs`` (the level only), ``zs-cot`` (plus a hidden thought),
    ``zs-cot-prof`` (plus a profile and the initial knowledge, never updated)."""
    lines = [
        "You are playing a student who is chatting with a tutor about one problem.",
        LEVEL_DESCRIPTORS.get(level, LEVEL_DESCRIPTORS["novice"]),
        "Write one or two sentences, as a student types in a chat.",
        f"When you feel you are done with the problem, end your message with the words \"{END_PHRASE}\".",
    ]
    if style == "zs-cot-prof" and profile:
        lines.insert(1, f"Who you are: {profile}")
    if style in ("zs-cot", "zs-cot-prof"):
        lines.append('Think first, then answer only with a JSON object: {"thought": "what goes through your head '
                     '(hidden from the tutor)", "message": "what you type"}.')
    else:
        lines.append("Answer with your message only.")
    user = f"The problem:\n{question}\n\n"
    if style == "zs-cot-prof":
        user += (f"What you knew when you started:\nKnown well:\n{_lines(known)}\n\nShaky:\n{_lines(shaky)}\n\n"
                 f"Not known:\n{_lines(unknown)}\n\n")
    user += f"The conversation so far:\n{_transcript(history)}\n\n"
    user += ("Write your first message to the tutor." if turn <= 1 else "Write your next message to the tutor.")
    return [{"role": "system", "content": "\n".join(lines)}, {"role": "user", "content": user}]


GRAPH_SYSTEM = (
    "You break a problem's worked solution into Information Units (IUs) for a model of what a learner "
    "knows. An IU is one self-contained idea a learner needs for this solution. Answer with one JSON "
    "object and nothing else."
)


def graph_messages(question: str, reference: str | None, *, min_size: int = 10, max_size: int = 30,
                   max_step: float = 0.35) -> list[dict[str, str]]:
    """The chat prompt that asks a model for the IU graph of ``question`` (with its reference solution
    or answer, when there is one), as JSON: ``knowledge_areas``, ``nodes`` and ``edges``
    (simhub.learners.graphgen)."""
    solution = f"\n\nReference solution:\n{reference.strip()}" if reference and reference.strip() else ""
    user = (
        f"Problem:\n{question.strip()}{solution}\n\n"
        f"Write between {min_size} and {max_size} IUs, from general principles down to the facts of this "
        "problem, and the prerequisite links between them.\n"
        "- Each node: \"id\" (IU1, IU2, ...), \"concept\" (a short name), \"abstraction_level\" (a number from "
        "0, specific to this problem, to 1, a general principle) and \"description\" (two to four sentences).\n"
        "- Each edge: \"from\" (the prerequisite's id), \"to\" (the id that needs it) and \"reason\" (one sentence). "
        f"The links must not form a cycle, every IU but the most general ones needs an incoming link, and no "
        f"link should jump more than {max_step} in abstraction level: add a bridging IU instead.\n"
        "- \"knowledge_areas\": the few topics the IUs belong to.\n"
        "Reply with {\"knowledge_areas\": [...], \"nodes\": [...], \"edges\": [...]}."
    )
    return [{"role": "system", "content": GRAPH_SYSTEM}, {"role": "user", "content": user}]


IQ_PROMPT_VERSION = "iq-v1"

#: The 1–10 scale of the interaction-quality rating, in bands of two (the survey item's five grades).
IQ_BANDS = ((1, 2, "very poor"), (3, 4, "poor"), (5, 6, "average"), (7, 8, "good"), (9, 10, "excellent"))


def _numbered(turns: Sequence[tuple[str, str]]) -> str:
    """(learner, tutor) pairs as numbered lines, ``[k] Student: ...`` then ``[k] Tutor: ...``."""
    lines = [line for k, (learner, tutor) in enumerate(turns, 1)
             for line in (f"[{k}] Student: {learner}", f"[{k}] Tutor: {tutor}")]
    return "\n".join(lines) if lines else "(no turns)"


def iq_messages(question: str, turns: Sequence[tuple[str, str]]) -> list[dict[str, str]]:
    """The chat prompt that rates one whole tutoring conversation's interaction quality (IQ) on 1–10.

    ``turns`` are (learner message, tutor reply) pairs in order. Answer: ``{"score": 1..10, "reason": "..."}``.
    """
    bands = "\n".join(f"- {lo}-{hi}: {name}" for lo, hi, name in IQ_BANDS)
    system = (
        "You review a finished chat between a tutor and a student working on one problem, and give the "
        "interaction one overall grade: how good the exchange was as tutoring, taken as a whole (clear, "
        "responsive to what the student said, correct, moving the student forward).\n"
        f"Grade on a scale of 1 to 10:\n{bands}\n"
        'Reply with one JSON object and nothing else: {"score": a whole number from 1 to 10, '
        '"reason": "one or two sentences on why"}.')
    user = f"The problem:\n{question}\n\nThe conversation:\n{_numbered(turns)}\n\nGrade the interaction."
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


STOP_PROMPT_VERSION = "stop-v1"


def stop_messages(question: str, turns: Sequence[tuple[str, str]]) -> list[dict[str, str]]:
    """The chat prompt that decides, after the fact, where a stateless learner's conversation ended.

    ``turns`` are (learner message, tutor reply) pairs in order, numbered from 1. A stateless learner
    has no knowledge state whose rules could stop it, so a judge reads the whole exchange and names
    the last turn a real student would have stayed for. Answer:
    ``{"end_turn": 1..len(turns), "reason": "..."}``.
    """
    system = (
        "You read a chat between a tutor and a student about one problem, and decide where a real student "
        "would have left it. A student leaves once the problem is solved or understood to their "
        "satisfaction, once they say they are done, or once the chat stops giving them anything new "
        "(the tutor repeats itself, or the two talk in circles).\n"
        "The turns are numbered; a turn is one student message and the tutor's reply to it. Name the last "
        "turn the student would still have taken part in: the last turn, if the chat was worth following "
        "to the end.\n"
        'Reply with one JSON object and nothing else: {"end_turn": the turn number, '
        '"reason": "one sentence on why"}.')
    user = (f"The problem:\n{question}\n\nThe conversation ({len(turns)} turns):\n{_numbered(turns)}\n\n"
            f"Which turn, from 1 to {max(1, len(turns))}, is the last one the student would have stayed for?")
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]
