"""The instructed tutors' prompts: their exact text, built from dialogues, and only in ``simhub.prompts``."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import typing
from pathlib import Path

import msgspec
import pytest

import simhub.prompts as prompts
from simhub.prompts import INSTRUCTED_TUTOR_SYSTEM, MIRROR_SYSTEM, instructed_tutor_messages, mirror_tutor_messages
from simhub.schema import Dialogue, Question
from tests.examples import DIVIDING_FRACTIONS

PACKAGE = Path(__file__).resolve().parents[2] / "simhub"
SO_FAR = msgspec.structs.replace(DIVIDING_FRACTIONS, turns=DIVIDING_FRACTIONS.turns[:2])
QUESTION = "Question Text: What is 5/8 divided by 1/6?\nCorrect option: A\nWorked solution: 15/4"
HISTORY = "Turn 1 (Tutor): What is 5/8 divided by 1/6?\nTurn 2 (Student): 5/8 divided by 1/6?"


def test_the_instructed_tutor_prompt_word_for_word():
    assert instructed_tutor_messages(SO_FAR) == [
        {"role": "system", "content": (
            "You are a math tutor in an online chat with a student working on a multiple-choice problem. Guide the "
            "student towards understanding without simply giving the answer. When the student has understood and "
            "the dialogue should end, end your message with [end of dialogue].")},
        {"role": "user",
         "content": f"Problem:\n{QUESTION}\n\nThe dialogue so far:\n{HISTORY}\n\nYour next turn as the tutor:"},
    ]
    opening = instructed_tutor_messages(msgspec.structs.replace(DIVIDING_FRACTIONS, turns=[]))
    assert "\n\nThe dialogue so far:\n(nothing has been said yet)\n\n" in opening[1]["content"]


def test_the_mirror_prompt_word_for_word_with_the_problem_as_the_real_dialogue_states_it():
    rollout = msgspec.structs.replace(SO_FAR, question=Question(text="(a copy that lost its answer key)"))
    real = "\n".join(f"Turn {i + 1} ({t.role.capitalize()}): {t.content}"
                     for i, t in enumerate(DIVIDING_FRACTIONS.turns))
    assert mirror_tutor_messages(rollout, DIVIDING_FRACTIONS) == [
        {"role": "system", "content": (
            "You play the tutor of a real tutoring dialogue whose transcript you are given. The student in front of "
            "you is a simulation of the real student. Reply with what the real tutor said at this point, word for "
            "word, as long as the student has said what the real student said; when the student says something "
            "different, reply as that tutor would to what this student actually said, in the same style. End your "
            "message with [end of dialogue] when the real dialogue ends here.")},
        {"role": "user", "content": (f"Problem:\n{QUESTION}\n\nThe real dialogue:\n{real}\n\n"
                                     f"The dialogue so far, with the simulated student:\n{HISTORY}\n\n"
                                     "The tutor's next turn:")},
    ]


@pytest.mark.parametrize("mode", ["free", "mirror"])
def test_the_endpoint_tutor_sends_the_prompts_of_simhub_prompts(tmp_path, mode):
    from simhub.config import load_profile
    from simhub.models import LoadOptions
    from simhub.simulation.tutor import EndpointTutor, TutorRequest, build_tutor

    path = tmp_path / "tutor.yaml"
    path.write_text("name: t\ntutors:\n  hosted: {kind: openai, model: m, "
                    "endpoint: {base_url: 'http://127.0.0.1:9/v1', cache: false}}\n")
    tutor = build_tutor("hosted", load_profile(path), LoadOptions(), mode=mode)
    assert isinstance(tutor, EndpointTutor)
    sent = tutor.prompt(TutorRequest(SO_FAR, real=DIVIDING_FRACTIONS))
    if mode == "mirror":
        assert sent == mirror_tutor_messages(SO_FAR, DIVIDING_FRACTIONS) and sent[0]["content"] == MIRROR_SYSTEM
    else:
        assert sent == instructed_tutor_messages(SO_FAR) and sent[0]["content"] == INSTRUCTED_TUTOR_SYSTEM
    # Without the real dialogue there is nothing to mirror: the plain instruction.
    assert tutor.prompt(TutorRequest(SO_FAR)) == instructed_tutor_messages(SO_FAR)


def _classes(hint: object) -> list[type]:
    """The classes a type hint names, through generics and unions."""
    found = [hint] if isinstance(hint, type) else []
    for arg in typing.get_args(hint):
        found.extend(_classes(arg))
    return found


def test_prompt_builders_take_dialogues_not_a_callers_request_types():
    hints = typing.get_type_hints(mirror_tutor_messages)
    assert (hints["dialogue"], hints["real"]) == (Dialogue, Dialogue)
    assert typing.get_type_hints(instructed_tutor_messages)["dialogue"] is Dialogue
    # Every public function of every module of simhub.prompts, exported or not.
    modules = [importlib.import_module(f"simhub.prompts.{m.name}") for m in pkgutil.iter_modules(prompts.__path__)]
    builders = [f for module in modules for name, f in vars(module).items()
                if inspect.isfunction(f) and f.__module__ == module.__name__ and not name.startswith("_")]
    assert instructed_tutor_messages in builders and mirror_tutor_messages in builders and len(builders) > 20
    for builder in builders:
        for name, hint in typing.get_type_hints(builder).items():
            for cls in _classes(hint):
                module = cls.__module__
                assert not module.startswith("simhub.") or module == "simhub.schema", (builder.__name__, name, cls)


def _prompt_text(node: ast.AST) -> bool:
    return ((isinstance(node, ast.Constant) and isinstance(node.value, str))
            or isinstance(node, ast.JoinedStr | ast.BinOp))


def test_no_system_prompt_is_written_outside_simhub_prompts():
    """A module-level ``*_SYSTEM`` text, or a text opening like an instruction, belongs in ``simhub/prompts/``."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.parent.name == "prompts" and path.parent.parent == PACKAGE:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.Assign) and _prompt_text(node.value):
                found += [f"{path.relative_to(PACKAGE)}: {t.id}" for t in node.targets
                          if isinstance(t, ast.Name) and t.id.endswith("_SYSTEM")]
        for node in ast.walk(tree):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                    and node.value.startswith(("You are ", "You play "))):
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {node.value[:40]!r}")
    assert not found, found
