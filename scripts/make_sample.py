#!/usr/bin/env python
"""Generate the synthetic sample corpus shipped in ``simhub/resources/sample``.

    python scripts/make_sample.py --output simhub/resources/sample [--seed 221]

The sample is the default data of the demo and the tests. It has the files and columns of Eedi's
Question-Anchored Tutoring Dialogues 2k (SPEC §2) under ``raw/`` and annotations in the layout the
paper's authors released (SPEC §8) under ``annotations/{split}_gpt-4.1.csv``, and it reproduces the
shape of the real data: mostly tutor-first dialogues of 4-40 messages, short student turns with a
few long ones, runs of same-role messages that the loader merges, multi-line and empty messages,
interventions without subjects, one unsolvable question and one dialogue whose dialogue-level
annotations failed (an unparseable acts cell, an ``{"error"}`` correctness cell, empty others).

Everything comes from one ``random.Random(seed)`` and the question bank in
``sample_questions.json`` beside this script, so two runs with the same seed write byte-identical
files. The generator lives outside the package because only its output is needed at run time; it
imports simhub (run it in a checkout) so that it can check its dialogues against the real loader.
The annotations are synthetic: they are the generator's own gold labels, written in GPT-4.1's file
layout, not the output of any model.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from simhub.data.annotations import (
    LABEL_COLUMNS,
    LABEL_PREFIXES,
    LABELS,
    RELEASED_COLUMNS,
    annotation_file_name,
)
from simhub.data.eedi import SPLIT_SEED, SPLITS, load_eedi
from simhub.data.sample import SAMPLE_ANNOTATOR
from simhub.schema import ACTS, OCEAN_TRAITS, OPTIONS, atomic_write_bytes

QUESTIONS_FILE = Path(__file__).with_name("sample_questions.json")
DEFAULT_SEED = SPLIT_SEED

MESSAGE_HEADER = (
    "InterventionId",
    "TutorId",
    "QuestionId_DQ",
    "MessageSequence",
    "IsTutor",
    "MessageString",
    "TalkMovePrediction",
)
METADATA_HEADER = ("QuestionId_DQ", "InterventionId", "MetaDataId", "Text", "Sequence", "MetaDataTagId", "Label")
SUBJECT_HEADER = ("InterventionId", "SubjectId", "ParentSubjectId", "SubjectName", "SubjectLevel", "SubjectType")

N_DIALOGUES = 240
TEST_FRACTION = 0.2
TUTOR_FIRST_SHARE = 0.83
MIN_MESSAGES, MAX_MESSAGES = 4, 40
METADATA_TAGS = {
    "Question Text": 53,
    "Question Image Description": 58,
    "Answer A Text": 54,
    "Answer B Text": 55,
    "Answer C Text": 56,
    "Answer D Text": 57,
}
ROOT_SUBJECT_ID = 3  # "Maths", the parent of every level-1 subject (not itself listed)

# Acts of a merged student turn: the most informative part wins.
_ACT_PRIORITY = ("Math Answer", "Seek Information", "Not Understanding", "Off-Topic", "Acknowledge")


# =========================================================================== question bank


@dataclass(frozen=True)
class _Question:
    key: str
    l1: str
    l2: str
    l3: tuple[str, ...]
    text: str
    options: tuple[str, str, str, str]
    correct: int  # 0-3
    # Per option, in the simple past, readable after "I ", "they " and "a student who ":
    # the correct working for the correct option, the misconception for the others.
    reasons: tuple[str, str, str, str]
    solution: str
    # (prompt, correct answer, wrong answers, index of the level-3 subject it exercises)
    steps: tuple[tuple[str, str, tuple[str, ...], int], ...]
    hint: str
    image: str | None = None
    solvable: bool = True


def _read_bank(path: Path = QUESTIONS_FILE) -> tuple[tuple[_Question, ...], dict, tuple]:
    """The question bank, the topic help per level-2 subject and the generic help, as tuples."""
    data = json.loads(path.read_text(encoding="utf-8"))
    bank = tuple(
        _Question(
            key=q["key"],
            l1=q["level1"],
            l2=q["level2"],
            l3=tuple(q["level3"]),
            text=q["text"],
            options=tuple(q["options"]),
            correct="ABCD".index(q["correct"]),
            reasons=tuple(q["reasons"]),
            solution=q["solution"],
            steps=tuple((p, a, tuple(w), k) for p, a, w, k in q["steps"]),
            hint=q["hint"],
            image=q.get("image"),
            solvable=q.get("solvable", True),
        )
        for q in data["questions"]
    )
    topic_help = {name: tuple(tuple(pair) for pair in pairs) for name, pairs in data["topic_help"].items()}
    generic_help = tuple(tuple(pair) for pair in data["generic_help"])
    return bank, topic_help, generic_help


QUESTION_BANK, _TOPIC_HELP, _GENERIC_HELP = _read_bank()

_STUDENT_NAMES = (
    "Amelia", "Oliver", "Isla", "Jayden", "Aisha", "Harry", "Mia", "Noah", "Zara", "Leo",
    "Chloe", "Mohammed", "Ruby", "Jack", "Sofia", "Ethan", "Grace", "Kai", "Lily", "Ibrahim",
)
_TUTOR_NAMES = ("Sarah", "James", "Priya", "Tom", "Hannah", "Daniel", "Fatima", "Mark", "Emma", "Chris")

# =========================================================================== dialogue model


@dataclass
class _Message:
    role: str  # "tutor" | "student"
    text: str
    act: str | None = None  # student messages
    correctness: str = "na"  # student messages
    kcs: list[str] | None = None  # tutor messages that pose a task
    talk_move: str = "None"  # tutor messages


@dataclass
class _Task:
    prompt: str
    kcs: list[str]
    correct: list[str]  # answer forms
    wrong: list[tuple[list[str], str | None]]  # (answer forms, misconception reason)
    reason_correct: str | None = None
    hint: str = ""
    plain: list[str] = field(default_factory=list)  # forms that read well inside a sentence


@dataclass
class _Persona:
    traits: dict[str, str]
    ability: float
    p_offtopic: float
    p_notund: float
    p_seek: float
    p_ack: float
    p_long: float
    p_split: float
    casual: bool


@dataclass
class _Intervention:
    iid: int
    tutor_id: int
    question: _Question
    qid: int
    split_file: str = "train"  # "train" | "test"
    subjects: list[tuple[int, int | None, str, int]] = field(default_factory=list)
    kcs: list[str] = field(default_factory=list)
    messages: list[_Message] = field(default_factory=list)
    file_order: list[int] = field(default_factory=list)  # indices into messages, as written
    persona: _Persona | None = None
    profile: str = ""
    failed_annotation: bool = False


def _level(rng: random.Random) -> str:
    return rng.choices(("low", "neutral", "high"), weights=(0.25, 0.45, 0.30))[0]


def _make_persona(rng: random.Random) -> _Persona:
    traits = {t: _level(rng) for t in OCEAN_TRAITS}

    def hi(t):
        return traits[t] == "high"

    def lo(t):
        return traits[t] == "low"

    ability = 0.55 + 0.15 * hi("conscientiousness") - 0.15 * lo("conscientiousness")
    ability += 0.1 * hi("openness") - 0.1 * hi("neuroticism") + rng.uniform(-0.12, 0.12)
    return _Persona(
        traits=traits,
        ability=min(0.9, max(0.15, ability)),
        p_offtopic=0.03 + 0.06 * lo("conscientiousness") + 0.03 * hi("extraversion"),
        p_notund=0.07 + 0.08 * hi("neuroticism"),
        p_seek=0.06 + 0.05 * hi("openness"),
        p_ack=0.05 + 0.04 * hi("agreeableness"),
        p_long=0.07 + 0.15 * hi("extraversion") + 0.05 * hi("openness") - 0.05 * lo("extraversion"),
        p_split=0.12 + 0.04 * hi("extraversion"),
        casual=rng.random() < 0.6,
    )


def _casual(text: str, on: bool) -> str:
    """A student's informal spelling: lower case, dropped apostrophes and final full stop."""
    if not on:
        return text
    out = text.replace("I'm", "im").replace("don't", "dont").replace("it's", "its").replace("I ", "i ")
    out = out.replace("I've", "ive").replace("can't", "cant")
    if out.endswith(".") and not out.endswith(".."):
        out = out[:-1]
    return out[:1].lower() + out[1:] if out[:1].isalpha() else out


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


class _DialogueWriter:
    """Generates one dialogue as a list of messages with their gold labels."""

    def __init__(self, rng: random.Random, iv: _Intervention, target: int, tutor_first: bool, empty_turn: bool):
        self.rng = rng
        self.iv = iv
        self.q = iv.question
        self.p: _Persona = iv.persona  # type: ignore[assignment]
        self.target = target
        self.tutor_first = tutor_first
        self.empty_turn = empty_turn
        self.msgs: list[_Message] = []
        self.explained = False  # the last correct answer came with its reasoning
        self.student = rng.choice(_STUDENT_NAMES)
        self.tutor_name = _TUTOR_NAMES[iv.tutor_id % len(_TUTOR_NAMES)]
        # The answer the student first chose (drives the profile).
        if rng.random() < self.p.ability:
            self.first_choice = self.q.correct
        else:
            self.first_choice = rng.choice([i for i in range(4) if i != self.q.correct])

    # ----------------------------------------------------------------- helpers

    def budget(self) -> int:
        return self.target - len(self.msgs)

    def tutor(self, *parts: tuple[str, str] | tuple[str, str, list[str]]) -> None:
        """Append tutor messages: (text, talk move[, kcs when the message poses a task])."""
        for part in parts:
            text, move = part[0], part[1]
            kcs = list(part[2]) if len(part) > 2 else None  # type: ignore[misc]
            if text and self.rng.random() < 0.03:
                text = text.replace(". ", ".\n", 1)  # multi-line message
            self.msgs.append(_Message("tutor", text, kcs=kcs, talk_move=move))

    def student_msg(self, text: str, act: str, correctness: str = "na") -> None:
        if text and self.rng.random() < 0.015:
            text = text.replace(" ", "\n", 1)
        self.msgs.append(_Message("student", text, act=act, correctness=correctness))

    def pick(self, options: Sequence[str]) -> str:
        return self.rng.choice(list(options))

    def all_kcs(self) -> list[str]:
        return list(self.iv.kcs) or ["Default"]

    def step_kcs(self, index: int) -> list[str]:
        name = self.q.l3[index] if index < len(self.q.l3) else None
        return [name] if name in self.iv.kcs else ["Default"]

    # ----------------------------------------------------------------- tasks

    def choice_task(self) -> _Task:
        q = self.q

        def forms(i: int) -> list[str]:
            letter, value = OPTIONS[i], q.options[i]
            return [letter, letter, f"I put {letter}", f"its {letter}", value, f"{letter} {value}"]

        prompt = self.pick(
            (
                "Which answer did you choose?",
                "What answer did you go for?",
                "Which option do you think is correct?",
                "What do you think the answer is?",
                "Have a look at the question. Which answer would you pick?",
            )
        )
        return _Task(
            prompt=prompt,
            kcs=self.all_kcs(),
            correct=forms(q.correct),
            wrong=[([OPTIONS[i], q.options[i], *forms(i)], q.reasons[i]) for i in range(4) if i != q.correct],
            reason_correct=q.reasons[q.correct],
            hint=q.hint,
            plain=[OPTIONS[q.correct], q.options[q.correct]],
        )

    def step_task(self, step: tuple[str, str, tuple[str, ...], int]) -> _Task:
        prompt, answer, wrongs, kc = step
        forms = [answer, answer, f"{answer}?", f"is it {answer}?", f"I think it's {answer}"]
        return _Task(
            prompt=prompt,
            kcs=self.step_kcs(kc),
            correct=forms,
            wrong=[([w, w, w, f"{w}?", f"is it {w}?"], None) for w in wrongs],
            hint=self.q.hint,
            plain=[answer],
        )

    # ----------------------------------------------------------------- student replies

    def other_act(self) -> str | None:
        r = self.rng.random()
        p = self.p
        for act, prob in (
            ("Off-Topic", p.p_offtopic),
            ("Not Understanding", p.p_notund),
            ("Seek Information", p.p_seek),
            ("Acknowledge", p.p_ack),
        ):
            if r < prob:
                return act
            r -= prob
        return None

    def say_other(self, act: str) -> str:
        """A student turn that is not an answer; returns the help answer for Seek Information."""
        cas = self.p.casual
        if act == "Off-Topic":
            text = self.pick(
                ("brb", "lol", "can i go now", "my wifi is really slow", "sorry my brother was talking to me",
                 "what time does this finish", "hello?", "I have football after school", "my dog is barking",
                 "do you like maths", "sorry i was getting a drink")
            )
            self.student_msg(_casual(text, cas), "Off-Topic")
            return ""
        if act == "Not Understanding":
            text = self.pick(
                ("idk", "I don't know", "i dont get it", "I'm confused", "not sure", "no idea", "im stuck",
                 "I don't understand what to do", "??", "i still dont get it")
            )
            if self.rng.random() < self.p.p_long:
                text = self.pick(
                    ("I don't really get it. We did this in class but I forgot how to do it.",
                     "I'm not sure what to do. I always get confused with these questions.",
                     "I don't understand. Can you explain it in a different way?")
                )
            self.student_msg(_casual(text, cas), "Not Understanding")
            if self.rng.random() < self.p.p_split / 2:
                self.student_msg(_casual(self.pick(("can you help?", "what do I do?")), cas), "Seek Information")
            return ""
        if act == "Seek Information":
            pool = _TOPIC_HELP.get(self.q.l2, ()) + _GENERIC_HELP
            ask, answer = self.pick(pool)
            self.student_msg(ask if cas else _cap(ask), "Seek Information")
            if self.rng.random() < self.p.p_split:
                self.student_msg(_casual(self.pick(("I forgot", "sorry", "I can't remember")), cas),
                                 "Not Understanding")
            return answer
        text = self.pick(("ok", "okay", "yes", "yeah", "ok thanks", "yep", "alright", "ok i see", "sure"))
        self.student_msg(text if cas else _cap(text), "Acknowledge")
        return ""

    def say_answer(self, task: _Task, correct: bool) -> str | None:
        """A Math Answer turn; returns the misconception reason used (wrong) or None."""
        cas = self.p.casual
        if correct:
            forms, reason, plain = task.correct, task.reason_correct, task.plain
        else:
            forms, reason = self.rng.choice(task.wrong)
            plain = forms[:2]
        form = self.pick(forms)
        label = "correct" if correct else "incorrect"
        if reason and self.rng.random() < self.p.p_long:
            text = f"I think it's {self.pick(plain)} because I {reason}."
            self.explained = correct
            if self.rng.random() < 0.4:
                text += self.pick((" Is that right?", " I'm not 100% sure though.", " That's what we did in class."))
            self.student_msg(_casual(text, cas), "Math Answer", label)
            return None if correct else reason
        if self.rng.random() < self.p.p_split and self.budget() > 2:
            kind = self.rng.random()
            if kind < 0.4:
                self.student_msg(self.pick(("um", "wait", "hmm", "oh", "ok")), "Acknowledge")
                self.student_msg(_casual(form, cas), "Math Answer", label)
            elif kind < 0.7 and reason:
                self.student_msg(_casual(self.pick(plain), cas), "Math Answer", label)
                self.student_msg(_casual(f"because I {reason}", cas), "Math Answer", label)
            elif kind < 0.85:
                self.student_msg(_casual("oh I get it now!", cas), "Acknowledge")
                self.student_msg(_casual(form, cas), "Math Answer", label)
            else:
                self.student_msg(self.pick(("hang on", "wait", "erm")), "Acknowledge")
                self.student_msg(_casual("let me think", cas), "Acknowledge")
                self.student_msg(_casual(form, cas), "Math Answer", label)
        else:
            self.student_msg(_casual(form, cas), "Math Answer", label)
        return None if correct else reason

    # ----------------------------------------------------------------- exchanges

    def ask(self, task: _Task, *, lead: tuple[str, str] | None = None, first: bool = False,
            max_attempts: int = 3) -> bool:
        """Tutor poses ``task``; the student answers until right, out of attempts or out of budget."""
        parts: list[Any] = [lead] if lead else []
        parts.append((task.prompt, self.pick(("Pressing for accuracy", "Pressing for accuracy", "None")), task.kcs))
        if lead and self.rng.random() < 0.6:
            self.tutor(*parts)
        else:
            head = "" if not lead else lead[0] if lead[0].endswith((".", "!", "?")) else lead[0] + "!"
            self.tutor(((head + " " + task.prompt).strip(), parts[-1][1], task.kcs))
        attempt = 0
        while self.budget() > 0:
            if self.empty_turn:
                self.empty_turn = False
                self.student_msg("", "Off-Topic")
                self.tutor(("I think your message didn't send. Can you type it again?", "Keeping everyone together"))
                continue
            act = self.other_act()
            if act is not None:
                help_answer = self.say_other(act)
                if self.budget() <= 1:
                    return False
                if act == "Seek Information":
                    self.tutor((help_answer, "None"), (self.pick(("So, ", "Now, ")) + task.prompt[:1].lower() + task.prompt[1:],
                                                       "Pressing for accuracy", task.kcs))
                elif act == "Not Understanding":
                    self.tutor((self.pick(("That's ok!", "No problem.", "Don't worry.")) + " " + task.hint,
                                "Getting students to relate", task.kcs))
                elif act == "Off-Topic" and self.rng.random() < 0.5:
                    self.tutor(
                        (self.pick(("Let's stay focused on the question please.", "Are you still there?",
                                    "Let's get back to the maths")), "Keeping everyone together"),
                        (task.prompt, "Pressing for accuracy", task.kcs),
                    )
                elif act == "Off-Topic":
                    self.tutor(
                        (self.pick(("Let's focus on the question.", "Ok, back to the question:")) + " " + task.prompt,
                         "Keeping everyone together", task.kcs)
                    )
                else:
                    self.tutor((self.pick(("So what do you think?", "Go on, have a go!", "What would you say?")),
                                "Pressing for accuracy", task.kcs))
                continue
            if first and attempt == 0:
                correct = self.first_choice == self.q.correct
                if correct:
                    reason = self.say_answer(task, True)
                else:
                    wrong = [i for i in range(4) if i != self.q.correct].index(self.first_choice)
                    saved = task.wrong
                    task.wrong = [saved[wrong]]
                    reason = self.say_answer(task, False)
                    task.wrong = saved
            else:
                correct = self.rng.random() < min(0.95, self.p.ability + 0.15 * attempt)
                reason = self.say_answer(task, correct)
            attempt += 1
            if self.budget() <= 0:
                return correct
            if correct:
                self.praise(task)
                return True
            if attempt >= max_attempts or self.budget() <= 2:
                self.tutor((f"Not quite. The answer is {task.correct[0]}.", "None"))
                if self.budget() > 0 and self.rng.random() < 0.7:
                    self.say_other("Acknowledge")
                return False
            self.correct_it(task, reason)
        return False

    def praise(self, task: _Task) -> None:
        text = self.pick(("Well done!", "Great job!", "That's right!", "Brilliant!", "Yes, well done!", "Correct!",
                          f"Yes, {task.correct[0]} is right!", "Perfect"))
        if len(task.correct[0]) > 8:
            text = text.replace(f"Yes, {task.correct[0]} is right!", "Yes, that's right!")
        self.tutor((text, "Revoicing" if task.correct[0] in text else "None"))

    def correct_it(self, task: _Task, reason: str | None) -> None:
        """Tutor feedback on a wrong answer given for ``reason`` (its misconception, when known)."""
        r = self.rng.random()
        if r < 0.3:
            self.tutor((self.pick(("Not quite.", "Are you sure?", "Hmm, not quite", "Close!")), "Pressing for accuracy"),
                       (task.hint, "Getting students to relate", task.kcs))
        elif r < 0.5:
            self.tutor((self.pick(("Are you sure? Check your working again.", "Not quite. Try again.",
                                   "Have another look.")), "Pressing for accuracy", task.kcs))
        elif r < 0.75:
            self.tutor(("Can you explain how you got that?", "Pressing for reasoning", task.kcs))
            if self.budget() <= 0:
                return
            if reason and self.rng.random() < 0.7:
                self.student_msg(_casual(f"I {reason}", self.p.casual), "Math Answer", "incorrect")
            elif self.rng.random() < 0.7:
                self.student_msg(_casual(self.pick(("I just guessed", "idk")), self.p.casual), "Not Understanding")
            else:
                self.student_msg(_casual("I did it in my head", self.p.casual), "Math Answer")
            if self.budget() > 0:
                self.tutor((f"I see. {task.hint}", "Getting students to relate", task.kcs))
        else:
            self.tutor(("Not quite. " + task.hint, "Pressing for accuracy", task.kcs))

    def explain_exchange(self, whole: bool = False) -> None:
        if whole:
            prompt = self.pick(("Can you explain how you would solve the whole question?",
                                "Can you talk me through how to get the answer?",
                                "So how would you explain this question to a friend?"))
        else:
            prompt = self.pick(("Can you explain how you got that?", "How did you work that out?",
                                "Why do you think that's the answer?"))
        self.tutor((prompt, "Pressing for reasoning", self.all_kcs()))
        if self.budget() <= 0:
            return
        r = self.rng.random()
        if r < 0.75:
            text = f"I {self.q.reasons[self.q.correct]}"
            if self.rng.random() < self.p.p_long:
                text += self.pick((". We did this last week.", ". I checked it twice.", ". It made sense to me."))
            self.student_msg(_casual(text, self.p.casual), "Math Answer", "correct")
            reply = self.pick(("Excellent explanation!", "Good, that's exactly right.", "Nice, well explained."))
        elif r < 0.87:
            self.student_msg(_casual("I just guessed", self.p.casual), "Not Understanding")
            reply = f"That's ok. {self.q.solution}"
        else:
            self.student_msg(_casual(self.pick(("I did it in my head", "I just knew it")), self.p.casual),
                             "Math Answer")
            reply = f"Good. Remember to show your working: {self.q.solution}"
        if self.budget() > 0:
            self.tutor((reply, "Revoicing"))

    def why_wrong_exchange(self, i: int) -> None:
        self.tutor((f"Why do you think someone might choose {OPTIONS[i]}?", "Getting students to relate",
                    self.all_kcs()))
        if self.budget() <= 0:
            return
        if self.rng.random() < self.p.ability:
            self.student_msg(_casual(f"because they {self.q.reasons[i]}", self.p.casual), "Math Answer", "correct")
            if self.budget() > 0:
                self.tutor(("Yes, that's a really common mistake.", "Revoicing"))
        else:
            self.say_other(self.rng.choice(("Not Understanding", "Not Understanding", "Off-Topic")))
            if self.budget() > 0:
                self.tutor((f"Someone might choose {OPTIONS[i]} if they {self.q.reasons[i]}.", "None"))

    # ----------------------------------------------------------------- whole dialogue

    def write(self) -> list[_Message]:
        rng, q = self.rng, self.q
        hello = self.pick((f"Hi {self.student}", "Hello", f"Hello {self.student}", "Hi there"))
        intro = self.pick((f"I'm {self.tutor_name} and I'm going to help you with this question.",
                           "Let's look at this question together.", "Let's work through this question together.",
                           f"My name is {self.tutor_name}, I'll be your tutor today."))
        if not self.tutor_first:
            opener = rng.random()
            if opener < 0.35:
                self.student_msg(self.pick(("hi", "hello", "hey", "Hi miss", "hello?")), "Off-Topic")
            elif opener < 0.6:
                self.student_msg(_casual(self.pick(("I don't get this question", "help", "im stuck on this one")),
                                         self.p.casual), "Not Understanding")
            elif opener < 0.8:
                self.student_msg(_casual(self.pick(("how do i do this?", "what do i have to do?")), self.p.casual),
                                 "Seek Information")
            else:
                letter = OPTIONS[self.first_choice]
                self.student_msg(_casual(f"is it {letter}?", self.p.casual), "Math Answer",
                                 "correct" if self.first_choice == q.correct else "incorrect")
        greeting = (f"{hello}! {intro}", "None")
        if self.tutor_first and rng.random() < 0.35 and self.budget() > 4:
            # Greeting alone, the student greets back.
            split = rng.random() < 0.5
            self.tutor(*(((hello, "None"), (intro, "None")) if split else (greeting,)))
            if rng.random() < 0.75:
                self.student_msg(self.pick(("hi", "hello", "hey", "hi miss")), "Off-Topic")
            else:
                self.student_msg(self.pick(("ok", "yes", "ok")), "Acknowledge")
            right = self.ask(self.choice_task(), first=True)
        else:
            lead = (hello, "None") if rng.random() < 0.15 else greeting  # "Hi Sam" has no punctuation
            right = self.ask(self.choice_task(), lead=lead, first=True)
        if self.budget() > 2 and right and not self.explained and rng.random() < 0.7:
            self.explain_exchange()
        steps = list(q.steps)
        while self.budget() > 3 and steps:
            step = steps.pop(0)
            lead = None
            if rng.random() < 0.5:
                lead = (self.pick(("Let's check it step by step.", "Let's break it down.", "Ok.", "Now")), "None")
            self.ask(self.step_task(step), lead=lead)
        if self.budget() > 3 and not right:
            right = self.ask(self.choice_task(), lead=("So, looking at the question again.", "None"))
        wrong_left = [i for i in range(4) if i != q.correct]
        rng.shuffle(wrong_left)
        summed_up = False
        while self.budget() > 3 and (wrong_left or not summed_up):
            if wrong_left and (summed_up or rng.random() < 0.6):
                self.why_wrong_exchange(wrong_left.pop())
            else:
                summed_up = True
                self.explain_exchange(whole=True)
        if self.budget() > 0:
            self.tutor((self.pick(("Well done today!", "Great work, you can now try the next question.",
                                   "Thanks for working so hard on this one.", "Good job, see you next time!")), "None"))
            if self.budget() > 0 and rng.random() < 0.7:
                self.student_msg(_casual(self.pick(("thanks", "thank you", "bye", "ok thanks")), self.p.casual),
                                 "Acknowledge")
        return self.msgs[:MAX_MESSAGES]


# =========================================================================== corpus


def _profile(rng: random.Random, persona: _Persona, q: _Question, first_choice: int) -> str:
    t = persona.traits
    if t["extraversion"] == "low":
        first = "A quiet student who mostly replies in one or two words"
    elif t["extraversion"] == "high":
        first = "A chatty, confident student who likes to explain their thinking"
    else:
        first = "A fairly engaged student who answers the tutor's questions briefly"
    if t["neuroticism"] == "high":
        first += " and gets anxious when they are unsure"
    elif t["conscientiousness"] == "low":
        first += " and is easily distracted"
    elif t["agreeableness"] == "high":
        first += " and responds well to encouragement"
    if first_choice == q.correct:
        second = rng.choice(
            (f"They chose the correct answer, {OPTIONS[q.correct]}, because they {q.reasons[q.correct]}.",
             f"They got {OPTIONS[q.correct]} straight away and can explain their method.")
        )
    else:
        second = (f"They first chose {OPTIONS[first_choice]} ({q.options[first_choice]}) because they "
                  f"{q.reasons[first_choice]}.")
    return f"{first}. {second}"


def _question_annotation(q: _Question) -> dict[str, Any]:
    """The question label as the released files hold it: no correct option for an unsolvable question."""
    out: dict[str, Any] = {
        "solution": q.solution,
        "solvable": q.solvable,
        "correct_option": q.correct + 1 if q.solvable else None,
    }
    for i in range(4):
        if i == q.correct:
            out[f"option_{i + 1}_explanation"] = f"Correct. A student choosing this {q.reasons[i]}."
        else:
            out[f"option_{i + 1}_explanation"] = f"Incorrect. This answer comes from a student who {q.reasons[i]}."
    return out


def _subject_ids(bank: Sequence[_Question]) -> dict[tuple[int, str], int]:
    ids: dict[tuple[int, str], int] = {}
    base = {1: 30, 2: 200, 3: 1000}
    for q in bank:
        for level, name in [(1, q.l1), (2, q.l2), *((3, n) for n in q.l3)]:
            if (level, name) not in ids:
                ids[(level, name)] = base[level] + sum(1 for k in ids if k[0] == level) * (7 if level == 3 else 3)
    return ids


def _merge_labels(messages: Sequence[_Message]) -> list[dict[str, Any]]:
    """Merge file-ordered messages into turns as the loader does, combining their labels."""
    turns: list[dict[str, Any]] = []
    for m in messages:
        text = m.text.replace("\n", " ").strip() or "nan"
        if turns and turns[-1]["role"] == m.role:
            turns[-1]["parts"].append(m)
            so_far = turns[-1]["content"]
            if not so_far.endswith((".", "!", "?")):
                so_far += "."
            turns[-1]["content"] = f"{so_far} {text}"
        else:
            turns.append({"role": m.role, "parts": [m], "content": text})
    for turn in turns:
        parts = turn["parts"]
        if turn["role"] == "student":
            spoken = [p for p in parts if p.text.strip()] or parts
            acts = [p.act for p in spoken]
            turn["act"] = next(a for a in _ACT_PRIORITY if a in acts)
            graded = [p.correctness for p in spoken if p.correctness != "na"]
            turn["correctness"] = graded[-1] if graded else "na"
        else:
            kcs: list[str] = []
            for p in parts:
                for k in p.kcs or []:
                    if k not in kcs:
                        kcs.append(k)
            turn["kcs"] = kcs or None
    return turns


# What each label's (synthetic) prompt asks for; the prompts only document the layout.
_TASKS = {
    "question": "Solve the question, say whether it can be solved as written, and explain each option.",
    "correctness": "For each student turn, summarise it and say whether its answer is correct.",
    "kcs": "For each tutor turn that poses a task, list the knowledge components it exercises.",
    "acts": "For each student turn, reason about it and name its dialogue act.",
    "ocean": "Rate the student on each OCEAN trait as low, neutral or high, reasoning first.",
    "freeform": "Describe the student in one paragraph.",
}


def _numbered(turns: Sequence[dict[str, Any]]) -> str:
    """The numbered dialogue the annotator reads, ``Turn N (Tutor): …``, cut to its first and last
    turns with the texts elided: the turns are in the ``turns`` column already, and five copies per
    row would only make the shipped sample big."""
    lines = [f"Turn {n} ({t['role'].capitalize()}): …" for n, t in enumerate(turns, start=1)]
    return "\n".join([lines[0], "…", lines[-1]] if len(lines) > 2 else lines)


def _labels(iv: _Intervention, turns: list[dict[str, Any]]) -> dict[str, Any]:
    """The parsed cell of every label, from the generator's own gold labels."""
    student = [(f"turn {n}", t) for n, t in enumerate(turns, start=1) if t["role"] == "student"]
    verdict = {"correct": True, "incorrect": False, "na": None}
    assert iv.persona is not None
    return {
        "question": _question_annotation(iv.question),
        "correctness": {
            key: {"summary": "Answers." if t["correctness"] != "na" else "No answer.", "correct": verdict[t["correctness"]]}
            for key, t in student
        },
        "kcs": {
            f"turn {n}": {"summary": "Sets a task.", "kcs": t["kcs"]}
            for n, t in enumerate(turns, start=1)
            if t["role"] == "tutor" and t["kcs"]
        },
        "acts": {key: {"reasoning": "-", "act": t["act"]} for key, t in student},
        "ocean": {
            "reasoning": "Judged from how the student writes.",
            **{trait.capitalize(): level for trait, level in iv.persona.traits.items()},
        },
        "freeform": iv.profile,
    }


def _annotation_row(iv: _Intervention, question: str, turns: list[dict[str, Any]]) -> dict[str, Any]:
    """One row of the released layout; cells hold Python objects, as in the authors' DataFrame."""
    row: dict[str, Any] = {
        "key": (iv.qid, iv.iid),
        "question": question,
        "subjects": [(name, level) for _, _, name, level in iv.subjects],
        "turns": [{"role": t["role"], "content": t["content"]} for t in turns],
    }
    labels = _labels(iv, turns)
    raw = {label: value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
           for label, value in labels.items()}
    if iv.failed_annotation:
        # The acts answer was cut off, the correctness answer labelled the wrong turns, and the
        # remaining dialogue-level calls returned nothing; the question label is shared and fine.
        cut = raw["acts"][: len(raw["acts"]) // 2]
        raw["acts"], labels["acts"] = cut, cut.replace("null", "None").replace("true", "True")
        shifted = {f"turn {int(k.split()[1]) - 1}": v for k, v in labels["correctness"].items()}
        raw["correctness"] = json.dumps(shifted, ensure_ascii=False)
        labels["correctness"] = {
            "error": f"turn keys {sorted(shifted)} do not match the student turns {sorted(labels['correctness'])}"
        }
        for label in ("kcs", "ocean", "freeform"):
            raw[label], labels[label] = "", ""
    for label in LABELS:
        prefix = LABEL_PREFIXES[label]
        context = question if label == "question" else _numbered(turns)
        row[f"{prefix}_prompt"] = f"{_TASKS[label]}\n\n{context}"
        row[f"{prefix}_annotation_raw"] = raw[label]
        row[LABEL_COLUMNS[label]] = labels[label]
    return row


def _annotation_bytes(rows: list[dict[str, Any]]) -> bytes:
    """The rows written as the authors wrote theirs: pandas ``to_csv`` of a DataFrame of Python objects."""
    buf = io.StringIO()
    pd.DataFrame(rows, columns=list(RELEASED_COLUMNS)).to_csv(buf, index=False, lineterminator="\n")
    return buf.getvalue().encode("utf-8")


def _csv_bytes(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> bytes:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buf.getvalue().encode("utf-8")


def _build_interventions(rng: random.Random) -> list[_Intervention]:
    bank = QUESTION_BANK
    qids = rng.sample(range(1200, 9800), len(bank))
    # Every question is used at least three times; the rest are drawn at random.
    unsolvable = [i for i, q in enumerate(bank) if not q.solvable]
    assign = [i for i in range(len(bank)) for _ in range(3)] + unsolvable * 2
    while len(assign) < N_DIALOGUES:
        assign.append(rng.choice([i for i, q in enumerate(bank) if q.solvable]))
    rng.shuffle(assign)
    tutors = rng.sample(range(1000, 9999), 12)
    ivs = []
    iid = rng.randint(48000, 52000)
    for qi in assign:
        iid += rng.randint(3, 400)
        ivs.append(_Intervention(iid=iid, tutor_id=rng.choice(tutors), question=bank[qi], qid=qids[qi]))
    return ivs


def _assign_splits(rng: random.Random, ivs: list[_Intervention]) -> None:
    n_test = round(TEST_FRACTION * len(ivs))
    unsolvable = [iv for iv in ivs if not iv.question.solvable]
    solvable = [iv for iv in ivs if iv.question.solvable]
    test = rng.sample(unsolvable, 1) + rng.sample(solvable, n_test - 1)
    test_ids = {iv.iid for iv in test}
    for iv in ivs:
        iv.split_file = "test" if iv.iid in test_ids else "train"
    # One dialogue of the test split has failed dialogue-level annotations (see _annotation_row).
    rng.choice([iv for iv in test if iv.question.solvable]).failed_annotation = True


def _assign_subjects(rng: random.Random, ivs: list[_Intervention], ids: dict[tuple[int, str], int]) -> None:
    for n, iv in enumerate(ivs):
        q = iv.question
        r = rng.random()
        if n == 5 or r < 0.07:
            continue  # no subject rows at all
        l1, l2 = ids[(1, q.l1)], ids[(2, q.l2)]
        rows: list[tuple[int, int | None, str, int]] = [(l1, ROOT_SUBJECT_ID, q.l1, 1), (l2, l1, q.l2, 2)]
        if r < 0.10:
            iv.subjects = rows  # levels 1-2 only: no KC either
            continue
        names = list(q.l3) if rng.random() < 0.8 else [q.l3[0]]
        rows += [(ids[(3, name)], l2, name, 3) for name in names]
        if rng.random() < 0.2:
            rows = rows[2:] + rows[:2]  # level 3 listed first
        iv.subjects = rows
        iv.kcs = names


def _dialogue_length(rng: random.Random) -> int:
    if rng.random() < 0.05:
        return rng.randint(MIN_MESSAGES, 7)  # a short exchange, the student leaves early
    n = int(rng.triangular(MIN_MESSAGES, MAX_MESSAGES + 1, 16))
    return max(MIN_MESSAGES, min(MAX_MESSAGES, n))


def _write_dialogues(rng: random.Random, ivs: list[_Intervention]) -> None:
    candidates = [iv for iv in ivs if iv.question.solvable and not iv.failed_annotation]
    empty_ids = {iv.iid for iv in rng.sample(candidates, 3)}
    tutor_first_ids = {iv.iid for iv in rng.sample(ivs, round(TUTOR_FIRST_SHARE * len(ivs)))}
    for iv in ivs:
        iv.persona = _make_persona(rng)
        tutor_first = iv.iid in tutor_first_ids
        empty = iv.iid in empty_ids or rng.random() < 0.01
        writer = _DialogueWriter(rng, iv, _dialogue_length(rng), tutor_first, empty)
        msgs = writer.write()
        # A few tutor messages are empty (an image was sent): an empty message before a tutor text.
        if rng.random() < 0.02:
            spots = [k for k, m in enumerate(msgs) if m.role == "tutor" and m.text]
            if spots:
                msgs.insert(rng.choice(spots), _Message("tutor", "", talk_move="None"))
                msgs = msgs[:MAX_MESSAGES]
        iv.messages = msgs
        iv.file_order = list(range(len(msgs)))
        iv.profile = _profile(rng, iv.persona, iv.question, writer.first_choice)


def _file_rows(rng: random.Random, ivs: list[_Intervention], split_file: str) -> list[list[Any]]:
    """The message rows of one file: dialogues in intervention order, some interleaved, some swapped."""
    group = [iv for iv in ivs if iv.split_file == split_file]
    blocks: list[list[tuple[_Intervention, int]]] = [[(iv, k) for k in iv.file_order] for iv in group]
    if split_file == "train":
        # Two dialogues whose file order differs from MessageSequence: two adjacent rows swapped.
        for iv in rng.sample([iv for iv in group if len(iv.messages) >= 6 and not iv.failed_annotation], 2):
            k = rng.randrange(2, len(iv.messages) - 2)
            iv.file_order[k], iv.file_order[k + 1] = iv.file_order[k + 1], iv.file_order[k]
        blocks = [[(iv, k) for k in iv.file_order] for iv in group]
    # Interleave the rows of a few neighbouring dialogues (grouping must not care).
    for _ in range(2 if split_file == "train" else 1):
        j = rng.randrange(0, len(blocks) - 1)
        a, b = blocks[j], blocks[j + 1]
        mixed: list[tuple[_Intervention, int]] = []
        ia = ib = 0
        while ia < len(a) or ib < len(b):
            take = rng.randint(1, 4)
            mixed += a[ia:ia + take]
            ia += take
            take = rng.randint(1, 4)
            mixed += b[ib:ib + take]
            ib += take
        blocks[j:j + 2] = [mixed]
    # Put a later dialogue first.
    k = rng.randrange(len(blocks) // 2, len(blocks))
    blocks.insert(0, blocks.pop(k))
    rows = []
    for block in blocks:
        for iv, k in block:
            m = iv.messages[k]
            tutor = m.role == "tutor"
            rows.append([iv.iid, iv.tutor_id, iv.qid, k + 1, 1 if tutor else 0, m.text, m.talk_move if tutor else ""])
    return rows


def _metadata_rows(rng: random.Random, ivs: list[_Intervention]) -> list[list[Any]]:
    rows = []
    meta_id = rng.randint(200000, 300000)
    for iv in ivs:
        q = iv.question
        labelled = [("Question Text", q.text)]
        if q.image:
            labelled.append(("Question Image Description", q.image))
        labelled += [(f"Answer {OPTIONS[i]} Text", q.options[i]) for i in range(4)]
        for seq, (label, text) in enumerate(labelled, start=1):
            meta_id += rng.randint(1, 5)
            rows.append([iv.qid, iv.iid, meta_id, text, seq, METADATA_TAGS[label], label])
    return rows


def _subject_rows(ivs: list[_Intervention]) -> list[list[Any]]:
    return [
        [iv.iid, sid, "" if parent is None else parent, name, level, "Subject"]
        for iv in ivs
        for sid, parent, name, level in iv.subjects
    ]


def generate_sample(out_dir: str | Path, seed: int = DEFAULT_SEED) -> dict:
    """Write the sample corpus (``raw/`` and ``annotations/``) under ``out_dir``; return a summary."""
    out_dir = Path(out_dir)
    rng = random.Random(seed)
    ivs = _build_interventions(rng)
    _assign_splits(rng, ivs)
    _assign_subjects(rng, ivs, _subject_ids(QUESTION_BANK))
    _write_dialogues(rng, ivs)

    raw = out_dir / "raw"
    train_rows = _file_rows(rng, ivs, "train")
    test_rows = _file_rows(rng, ivs, "test")
    atomic_write_bytes(raw / "anchored-dialogues" / "train.csv", _csv_bytes(MESSAGE_HEADER, train_rows))
    atomic_write_bytes(raw / "anchored-dialogues" / "test.csv", _csv_bytes(MESSAGE_HEADER, test_rows))
    atomic_write_bytes(raw / "dq-question-metadata.csv", _csv_bytes(METADATA_HEADER, _metadata_rows(rng, ivs)))
    atomic_write_bytes(raw / "dialogue-subjects.csv", _csv_bytes(SUBJECT_HEADER, _subject_rows(ivs)))

    corpus = load_eedi(raw)
    by_id = {f"{iv.qid}-{iv.iid}": iv for iv in ivs}
    acts: Counter[str] = Counter()
    correctness: Counter[str] = Counter()
    merged_turns = 0
    tutor_first = 0
    sizes = {}
    for split in SPLITS:
        rows = []
        for d in corpus[split]:
            iv = by_id[d.id]
            turns = _merge_labels([iv.messages[k] for k in iv.file_order])
            got = [(t.role, t.content) for t in d.turns]
            want = [(t["role"], t["content"]) for t in turns]
            if got != want:
                raise RuntimeError(f"sample dialogue {d.id}: generated turns do not match the loaded ones")
            rows.append(_annotation_row(iv, d.question.text, turns))
            tutor_first += d.turns[0].role == "tutor"
            merged_turns += sum(len(t["parts"]) > 1 for t in turns)
            if not iv.failed_annotation:
                for t in turns:
                    if t["role"] == "student":
                        acts[t["act"]] += 1
                        correctness[t["correctness"]] += 1
        # Rows in split order, so that the files alone give the same splits as the raw files.
        path = out_dir / "annotations" / annotation_file_name(split, SAMPLE_ANNOTATOR)
        atomic_write_bytes(path, _annotation_bytes(rows))
        sizes[split] = len(rows)

    n_dialogues = len(ivs)
    return {
        "seed": seed,
        "out_dir": str(out_dir),
        "questions": len({iv.qid for iv in ivs}),
        "unsolvable_questions": sorted({iv.qid for iv in ivs if not iv.question.solvable}),
        "annotated_dialogues": sizes,
        "unsolvable_dialogues": {
            s: sum(not by_id[d.id].question.solvable for d in corpus[s]) for s in SPLITS
        },
        "failed_annotations": [f"{iv.qid}-{iv.iid}" for iv in ivs if iv.failed_annotation],
        "messages": {"train": len(train_rows), "test": len(test_rows)},
        "tutor_first_share": round(tutor_first / n_dialogues, 4),
        "merged_turns": merged_turns,
        "acts": {a: acts[a] for a in ACTS},
        "correctness": {c: correctness[c] for c in ("correct", "incorrect", "na")},
    }


def main(argv: Sequence[str] | None = None) -> dict:
    """Command line: write the sample where told and print its summary as JSON."""
    parser = argparse.ArgumentParser(
        prog="python scripts/make_sample.py",
        description="Generate the synthetic sample corpus: raw QATD-2k-format files plus released-layout annotations.",
    )
    parser.add_argument("--output", type=Path, required=True,
                        help="output folder (the shipped copy is simhub/resources/sample)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"random seed (default: {DEFAULT_SEED})")
    args = parser.parse_args(argv)
    summary = generate_sample(args.output, seed=args.seed)
    print(json.dumps(summary, indent=2))
    return summary


if __name__ == "__main__":
    main()
