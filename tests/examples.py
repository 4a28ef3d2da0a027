"""Example dialogues shared by the tests (one copy)."""

from __future__ import annotations

from simhub.schema import Dialogue, Question, Turn

#: The paper's running example: a real student dividing 5/8 by 1/6, with act and correctness labels.
DIVIDING_FRACTIONS = Dialogue(
    id="q1-i1",
    question=Question(text="Question Text: What is 5/8 divided by 1/6?", correct_option="A", solution="15/4"),
    kcs=["Dividing fractions"],
    turns=[
        Turn(role="tutor", content="What is 5/8 divided by 1/6?", kcs=["Dividing fractions"]),
        Turn(role="student", content="5/8 divided by 1/6?", act="Seek Information", correctness="na"),
        Turn(role="tutor", content="Yes. Flip the second fraction and multiply."),
        Turn(role="student", content="8/5", act="Math Answer", correctness="incorrect"),
        Turn(role="tutor", content="Not quite. Try again."),
        Turn(role="student", content="15/4", act="Math Answer", correctness="correct"),
    ],
)
