"""Prompt builders: one place for every text a model sees, in training and at inference.

The wording is simhub's own; the structure follows the paper (SPEC §4):

* student simulator: system prompt, then a first user message with the optional persona, the
  question (plus correct answer, solution and option explanations when known) and the first tutor
  turn (or a marker), then the remaining turns as chat (student = ``assistant``, tutor = ``user``);
* tutor model: the mirror image (tutor = ``assistant``);
* classifiers, judge and knowledge tracing read the dialogue as numbered ``Turn i (Role): ...`` lines.
"""

from __future__ import annotations

from simhub.schema import ACTS, OCEAN_TRAITS, OPTIONS, Dialogue, Turn

END_OF_DIALOGUE = "[end of dialogue]"
NO_TUTOR_TURN = "[The student spoke first; there was no tutor turn yet.]"
NO_STUDENT_TURN = "[The tutor speaks first.]"
#: Prompts of this length or more are left out of training (SPEC §2 rule 8).
MAX_PROMPT_CHARS = 6000

STUDENT_SYSTEM = (
    "You are a student working on a math problem with a tutor in an online chat. "
    "Reply as that student would: in their words, at their level, with their mistakes."
)
TUTOR_SYSTEM = (
    "You are a math tutor helping a student with a multiple-choice question in an online chat. "
    "Reply as the tutor."
)
ACTS_SYSTEM = (
    "You label student turns in math tutoring dialogues with one dialogue act: "
    + ", ".join(ACTS)
    + ". Answer with the act only."
)
CORRECTNESS_SYSTEM = (
    "You judge whether a student turn in a math tutoring dialogue answers the tutor's last "
    "question correctly. Answer with one word: correct, incorrect, or na (no answer given)."
)
KT_SYSTEM = (
    "You trace a student's knowledge during a math tutoring dialogue. For each knowledge "
    "component, answer True if the student has mastered it at this point, otherwise False."
)


def format_persona(dialogue: Dialogue) -> str | None:
    if dialogue.persona is None:
        return None
    traits = ", ".join(f"{t}: {getattr(dialogue.persona, t)}" for t in OCEAN_TRAITS)
    return f"Student personality (OCEAN): {traits}."


def format_question(dialogue: Dialogue, with_answer: bool = True) -> str:
    """The question text, plus the annotated answer, solution and explanations when known."""
    q = dialogue.question
    parts = [f"Question:\n{q.text}"]
    if with_answer:
        if q.correct_option:
            parts.append(f"Correct answer: {q.correct_option}")
        if q.solution:
            parts.append(f"Solution: {q.solution}")
        if q.option_explanations:
            lines = [f"{o}: {q.option_explanations[o]}" for o in OPTIONS if o in q.option_explanations]
            parts.append("Option explanations:\n" + "\n".join(lines))
    return "\n".join(parts)


def format_turn(index: int, turn: Turn | tuple[str, str]) -> str:
    role, content = (turn.role, turn.content) if isinstance(turn, Turn) else turn
    return f"Turn {index + 1} ({role.capitalize()}): {content}"


def format_history(turns: list[Turn]) -> str:
    return "\n".join(format_turn(i, t) for i, t in enumerate(turns)) if turns else "(no turns yet)"


def _context(dialogue: Dialogue, persona: bool) -> str:
    parts = []
    if persona and (p := format_persona(dialogue)):
        parts.append(p)
    if persona and dialogue.profile:
        parts.append(f"Student profile: {dialogue.profile}")
    parts.append(format_question(dialogue))
    return "\n\n".join(parts)


def _chat(dialogue: Dialogue, turns: list[Turn], me: str, system: str, persona: bool, end_marker: bool) -> list[dict]:
    """Chat messages where ``me`` speaks as ``assistant`` and the other role as ``user``."""
    other_marker = NO_TUTOR_TURN if me == "student" else NO_STUDENT_TURN
    messages = [{"role": "system", "content": system}]
    rest = list(turns)
    if rest and rest[0].role != me:
        opening, rest = rest[0].content, rest[1:]
        opening_label = "The tutor says" if me == "student" else "The student says"
        first = f"{_context(dialogue, persona)}\n\n{opening_label}: {opening}"
    else:
        first = f"{_context(dialogue, persona)}\n\n{other_marker}"
    messages.append({"role": "user", "content": first})
    for i, turn in enumerate(rest):
        content = turn.content
        if end_marker and i == len(rest) - 1:
            content = f"{content} {END_OF_DIALOGUE}"
        messages.append({"role": "assistant" if turn.role == me else "user", "content": content})
    return messages


def student_messages(dialogue: Dialogue, upto: int | None = None, *, persona: bool = True, end_marker: bool = False) -> list[dict]:
    """Messages for the student simulator.

    With ``upto`` the history is ``turns[:upto]`` (the prompt to predict turn ``upto``, followed
    by a generation prompt); without it, the whole dialogue (training), where ``end_marker``
    appends the end-of-dialogue marker to the last turn.
    """
    turns = dialogue.turns if upto is None else dialogue.turns[:upto]
    return _chat(dialogue, turns, "student", STUDENT_SYSTEM, persona, end_marker and upto is None)


def tutor_messages(dialogue: Dialogue, upto: int | None = None, *, end_marker: bool = False) -> list[dict]:
    """Messages for the tutor model: the mirror image of :func:`student_messages`."""
    turns = dialogue.turns if upto is None else dialogue.turns[:upto]
    return _chat(dialogue, turns, "tutor", TUTOR_SYSTEM, False, end_marker and upto is None)


def strip_end_marker(text: str) -> tuple[str, bool]:
    """Cut generated text at the end-of-dialogue marker; returns (text, marker_seen)."""
    cut = text.find(END_OF_DIALOGUE)
    if cut < 0:
        return text.strip(), False
    return text[:cut].strip(), True


def act_messages(history: list[Turn], student_turn: str, dialogue: Dialogue) -> list[dict]:
    """Act classifier prompt: the dialogue so far and the student turn to label."""
    user = (
        f"{format_question(dialogue, with_answer=False)}\n\nDialogue so far:\n{format_history(history)}\n\n"
        f"Student turn to label: {student_turn}"
    )
    return [{"role": "system", "content": ACTS_SYSTEM}, {"role": "user", "content": user}]


def correctness_messages(history: list[Turn], student_turn: str, dialogue: Dialogue) -> list[dict]:
    user = (
        f"{format_question(dialogue)}\n\nDialogue so far:\n{format_history(history)}\n\n"
        f"Student turn to judge: {student_turn}"
    )
    return [{"role": "system", "content": CORRECTNESS_SYSTEM}, {"role": "user", "content": user}]


def kt_context(dialogue: Dialogue, history: list[Turn], kcs: list[str], persona: bool = True) -> str:
    """The shared LLMKT context: persona, question with solution, KC list, numbered history."""
    parts = []
    if persona and (p := format_persona(dialogue)):
        parts.append(p)
    parts.append(format_question(dialogue))
    parts.append("Knowledge components:\n" + "\n".join(f"- {kc}" for kc in kcs))
    parts.append(f"Dialogue so far:\n{format_history(history)}")
    return f"{KT_SYSTEM}\n\n" + "\n\n".join(parts) + "\n\n"


def kt_question(kc: str) -> str:
    """The per-KC segment; the model's next token after it is read as True or False."""
    return f"Has the student mastered '{kc}'? Answer:"


JUDGE_SYSTEM = (
    "You compare a simulated student turn with the real student turn at the same point of a math "
    "tutoring dialogue. Decide whether the simulated turn is correct, incorrect, or na (it gives "
    "no answer to the tutor's question). Reply with exactly one of: correct, incorrect, na. "
    "If both the real turn and the simulated turn are incorrect, reply 'incorrect, same error' when "
    "they make the same (mathematically equivalent) mistake, otherwise 'incorrect, different error'."
)


def judge_messages(dialogue: Dialogue, history: list[Turn], real_text: str, real_label: str, candidate: str) -> list[dict]:
    """The correctness/errors judge prompt: history, real turn with its label, candidate."""
    user = (
        f"{format_question(dialogue)}\n\nDialogue so far:\n{format_history(history)}\n\n"
        f"Real student turn ({real_label}): {real_text}\n\nSimulated student turn: {candidate}\n\nVerdict:"
    )
    return [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": user}]
