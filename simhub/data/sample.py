"""A seeded generator of a small sample corpus in the exact raw QATD-2k file format.

The sample is the default data of the demo and of the tests: it has the files and columns of
Eedi's Question-Anchored Tutoring Dialogues 2k (SPEC §2) and the released annotation CSVs
(see :mod:`simhub.data.eedi`), and it reproduces the shape of the real data — mostly
tutor-first dialogues of 4–40 messages, short student turns with a few long ones, runs of
same-role messages that the loader merges, multi-line and empty messages, interventions without
subjects, one unsolvable question and one dialogue whose annotation failed.

Everything is derived from one ``random.Random(seed)``; two runs with the same seed write
byte-identical files. ``python -m simhub.data.sample`` regenerates the copy shipped in
``simhub/resources/sample``.
"""

from __future__ import annotations

import argparse
import csv
import functools
import io
import json
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import simhub
from simhub.data.eedi import ANNOTATION_COLUMNS, SPLIT_SEED, EediCorpus, load_eedi
from simhub.schema import ACTS, OCEAN_TRAITS, OPTIONS, atomic_write_bytes

SAMPLE_DIR = Path(simhub.__file__).parent / "resources" / "sample"
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


def sample_raw_dir() -> Path:
    """The shipped raw QATD-2k-format files (pass to :func:`simhub.data.eedi.load_eedi`)."""
    return SAMPLE_DIR / "raw"


def sample_annotations_dir() -> Path:
    """The shipped annotation CSVs (``train.csv``, ``val.csv``, ``test.csv``) of the sample."""
    return SAMPLE_DIR / "annotations"


@functools.lru_cache(maxsize=1)
def load_sample_corpus() -> EediCorpus:
    """The shipped sample corpus with its annotations (an EediCorpus), loaded once per process.

    The result is shared: treat it as read-only.
    """
    return load_eedi(sample_raw_dir(), sample_annotations_dir())


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


def _q(key, l1, l2, l3, text, options, correct, reasons, solution, steps, hint, image=None, solvable=True):
    return _Question(
        key=key,
        l1=l1,
        l2=l2,
        l3=tuple(l3),
        text=text,
        options=tuple(options),
        correct="ABCD".index(correct),
        reasons=tuple(reasons),
        solution=solution,
        steps=tuple((p, a, tuple(w), k) for p, a, w, k in steps),
        hint=hint,
        image=image,
        solvable=solvable,
    )


NUM, ALG, GEO, RAT, STA = "Number", "Algebra", "Geometry and Measure", "Ratio and Proportion", "Statistics"

QUESTION_BANK: tuple[_Question, ...] = (
    # ------------------------------------------------------------------ fractions
    _q(
        "frac_add", NUM, "Fractions",
        ["Add fractions with different denominators", "Find the lowest common denominator"],
        "Calculate:\n1/3 + 1/4",
        ["2/7", "7/12", "1/12", "2/12"], "B",
        ["added the numerators and added the denominators",
         "changed both fractions into twelfths, so 4/12 + 3/12 = 7/12",
         "multiplied the two fractions instead of adding them",
         "added the numerators but multiplied the denominators"],
        "Use the common denominator 12: 1/3 = 4/12 and 1/4 = 3/12, so 1/3 + 1/4 = 7/12.",
        [("What is the lowest common denominator of 3 and 4?", "12", ["7", "4"], 1),
         ("What is 1/3 written as twelfths?", "4/12", ["1/12", "3/12"], 0)],
        "Let's look at the denominators. Can we add fractions when the denominators are different?",
    ),
    _q(
        "frac_of_amount", NUM, "Fractions",
        ["Calculate a fraction of an amount"],
        "What is 3/4 of 20?",
        ["5", "26.67", "15", "60"], "C",
        ["only found one quarter of 20",
         "divided 20 by 3 and multiplied by 4",
         "divided 20 by 4 to get 5 and then multiplied by 3",
         "multiplied 20 by 3 and forgot to divide by 4"],
        "Divide by the denominator and multiply by the numerator: 20 ÷ 4 = 5, 5 × 3 = 15.",
        [("What is 1/4 of 20?", "5", ["4", "80"], 0),
         ("So if 1/4 of 20 is 5, what is 3/4 of 20?", "15", ["8", "60"], 0)],
        "Start by finding one quarter. What do we divide by?",
    ),
    _q(
        "frac_mult", NUM, "Fractions",
        ["Multiply proper fractions", "Simplify fractions"],
        "Calculate 2/3 × 3/5 and give your answer in its simplest form.",
        ["2/5", "5/8", "10/9", "6/8"], "A",
        ["multiplied the numerators and the denominators to get 6/15 and then simplified it to 2/5",
         "added the numerators and added the denominators",
         "flipped the second fraction as if it was a division",
         "multiplied the numerators but added the denominators"],
        "Multiply the numerators and the denominators: 2 × 3 = 6 and 3 × 5 = 15, so 6/15 = 2/5.",
        [("What do you get when you multiply the numerators 2 and 3?", "6", ["5", "23"], 0),
         ("How can we simplify 6/15?", "2/5", ["1/3", "3/5"], 1)],
        "When we multiply fractions we multiply the tops together and the bottoms together.",
    ),
    _q(
        "frac_div", NUM, "Fractions",
        ["Divide proper fractions", "Find the reciprocal of a fraction"],
        "Calculate 5/8 ÷ 1/6",
        ["5/48", "15/4", "4/15", "48/5"], "B",
        ["multiplied the fractions instead of dividing",
         "kept the first fraction, flipped the second and multiplied, so 5/8 × 6 = 30/8 = 15/4",
         "flipped the first fraction instead of the second",
         "flipped both fractions before multiplying"],
        "Dividing by 1/6 is the same as multiplying by 6: 5/8 × 6/1 = 30/8 = 15/4.",
        [("What is the reciprocal of 1/6?", "6", ["1/6", "-6"], 1),
         ("So what is 5/8 × 6?", "30/8", ["5/48", "11/8"], 0)],
        "Remember keep, change, flip: keep the first fraction, change ÷ to ×, flip the second one.",
    ),
    _q(
        "frac_simplify", NUM, "Fractions",
        ["Simplify fractions", "Identify the highest common factor"],
        "Write 12/18 in its simplest form.",
        ["6/9", "2/6", "3/2", "2/3"], "D",
        ["divided the top and the bottom by 2 and stopped there",
         "divided the numerator by 6 but the denominator by 3",
         "turned the fraction upside down while simplifying",
         "divided the top and the bottom by the highest common factor 6"],
        "The highest common factor of 12 and 18 is 6; 12 ÷ 6 = 2 and 18 ÷ 6 = 3, so 12/18 = 2/3.",
        [("What is the highest common factor of 12 and 18?", "6", ["2", "3"], 1)],
        "Is there a bigger number that goes into both 12 and 18?",
    ),
    _q(
        "frac_to_dec", NUM, "Fractions, Decimals and Percentage Equivalence",
        ["Convert fractions to terminating decimals"],
        "Write 3/8 as a decimal.",
        ["3.8", "0.38", "0.375", "2.67"], "C",
        ["put a decimal point between the numerator and the denominator",
         "wrote the numerator and the denominator after the decimal point",
         "divided 3 by 8 with short division",
         "divided the denominator by the numerator"],
        "3/8 means 3 ÷ 8 = 0.375.",
        [("What division does 3/8 stand for?", "3 ÷ 8", ["8 ÷ 3", "3 × 8"], 0),
         ("What is 1/8 as a decimal?", "0.125", ["0.18", "1.8"], 0)],
        "A fraction is a division. What is the numerator divided by the denominator?",
    ),
    _q(
        "frac_compare", NUM, "Fractions",
        ["Order fractions with different denominators"],
        "Which fraction is the largest?",
        ["3/5", "2/3", "5/8", "7/12"], "B",
        ["picked the fraction with the smallest denominator that was not 3",
         "changed them all to decimals and 2/3 = 0.666... was the biggest",
         "thought 5/8 was biggest because 5 and 8 are big numbers",
         "picked the fraction with the biggest numerator and denominator"],
        "As decimals: 3/5 = 0.6, 2/3 ≈ 0.667, 5/8 = 0.625, 7/12 ≈ 0.583, so 2/3 is the largest.",
        [("What is 3/5 as a decimal?", "0.6", ["0.35", "3.5"], 0),
         ("Which is bigger, 2/3 or 5/8?", "2/3", ["5/8", "they are the same"], 0)],
        "A bigger denominator does not mean a bigger fraction. Try writing them as decimals.",
    ),
    # ------------------------------------------------------------------ negative numbers
    _q(
        "neg_add", NUM, "Negative Numbers",
        ["Add and subtract with negative numbers"],
        "Calculate -7 + 3",
        ["-10", "4", "-4", "10"], "C",
        ["added 7 and 3 and kept the negative sign",
         "ignored the negative sign and did 7 - 3",
         "started at -7 on the number line and counted 3 to the right",
         "added 7 and 3 and ignored the sign"],
        "Start at -7 on a number line and move 3 to the right: -7 + 3 = -4.",
        [("If you start at -7 on a number line, which way do you move to add 3?", "right",
          ["left", "down"], 0)],
        "Let's use a number line. Where is -7?",
    ),
    _q(
        "neg_mult", NUM, "Negative Numbers",
        ["Multiply and divide with negative numbers"],
        "Calculate -3 × -4",
        ["-12", "12", "-7", "1"], "B",
        ["thought that a negative times a negative is negative",
         "used the rule that two negatives multiply to give a positive",
         "added the two numbers instead of multiplying",
         "subtracted -4 from -3"],
        "3 × 4 = 12 and a negative multiplied by a negative is positive, so -3 × -4 = 12.",
        [("What is 3 × 4?", "12", ["7", "34"], 0),
         ("What sign do you get when you multiply two negative numbers?", "positive",
          ["negative", "it depends"], 0)],
        "Think about the signs separately. What happens when we multiply two negatives?",
    ),
    _q(
        "neg_sub", NUM, "Negative Numbers",
        ["Add and subtract with negative numbers"],
        "Calculate 5 - (-2)",
        ["3", "7", "-7", "-3"], "B",
        ["treated subtracting a negative as subtracting a positive",
         "changed subtracting -2 into adding 2",
         "added the numbers and made the answer negative",
         "did 2 - 5 instead of 5 - 2"],
        "Subtracting a negative is the same as adding: 5 - (-2) = 5 + 2 = 7.",
        [("What is subtracting -2 the same as?", "adding 2", ["subtracting 2", "times by -2"], 0)],
        "Two minus signs next to each other. What does that turn into?",
    ),
    _q(
        "neg_order", NUM, "Negative Numbers",
        ["Order negative numbers"],
        "Which of these numbers is the smallest?",
        ["-3", "-8", "0", "2"], "B",
        ["thought -3 is smaller than -8 because 3 is smaller than 8",
         "used a number line and -8 is furthest to the left",
         "thought 0 is the smallest because it is nothing",
         "picked the smallest digit without looking at the signs"],
        "On a number line -8 is furthest to the left, so it is the smallest.",
        [("Which is further left on a number line, -3 or -8?", "-8", ["-3", "both the same"], 0)],
        "Picture a number line. Numbers get smaller as you go left.",
    ),
    _q(
        "neg_temp", NUM, "Negative Numbers",
        ["Add and subtract with negative numbers", "Solve problems involving temperature"],
        "The temperature is -4°C. It rises by 9 degrees.\nWhat is the new temperature?",
        ["5°C", "-13°C", "13°C", "-5°C"], "A",
        ["counted up 9 from -4 on a thermometer",
         "subtracted 9 from -4 instead of adding",
         "added 4 and 9 and ignored the negative sign",
         "got the right size of answer but kept the negative sign"],
        "Rising 9 degrees from -4°C: -4 + 9 = 5°C.",
        [("If the temperature rises, do we add or subtract?", "add", ["subtract", "multiply"], 1),
         ("How many degrees is it from -4 to 0?", "4", ["-4", "0"], 0)],
        "Imagine a thermometer. How many degrees to get from -4 up to 0?",
    ),
    # ------------------------------------------------------------------ order of operations
    _q(
        "bidmas_mult", NUM, "BIDMAS",
        ["Use the order of operations with the four operations"],
        "Calculate 3 + 4 × 2",
        ["14", "11", "9", "24"], "B",
        ["worked from left to right, adding before multiplying",
         "did the multiplication first, 4 × 2 = 8, then added 3",
         "added all the numbers together",
         "multiplied all the numbers together"],
        "Multiplication comes before addition: 4 × 2 = 8, then 3 + 8 = 11.",
        [("Which operation do we do first in 3 + 4 × 2?", "multiplication", ["addition", "left to right"], 0),
         ("What is 4 × 2?", "8", ["6", "42"], 0)],
        "Remember BIDMAS. Which comes first, the addition or the multiplication?",
    ),
    _q(
        "bidmas_div", NUM, "BIDMAS",
        ["Use the order of operations with the four operations"],
        "Calculate 20 - 6 ÷ 2",
        ["7", "17", "12", "14"], "B",
        ["worked from left to right so did 20 - 6 first",
         "divided first, 6 ÷ 2 = 3, then 20 - 3",
         "subtracted the 2 instead of dividing by it",
         "ignored the ÷ 2"],
        "Division comes before subtraction: 6 ÷ 2 = 3, then 20 - 3 = 17.",
        [("What is 6 ÷ 2?", "3", ["4", "12"], 0)],
        "Which part of the calculation do we do first according to BIDMAS?",
    ),
    _q(
        "bidmas_power", NUM, "BIDMAS",
        ["Use the order of operations with brackets and powers"],
        "Calculate (2 + 3)²",
        ["13", "25", "10", "11"], "B",
        ["squared each number in the bracket separately",
         "worked out the bracket first to get 5 and then squared it",
         "doubled 5 instead of squaring it",
         "only squared the 3"],
        "Brackets first: 2 + 3 = 5, then 5² = 25.",
        [("What is inside the bracket?", "5", ["6", "23"], 0),
         ("What is 5 squared?", "25", ["10", "52"], 0)],
        "Brackets come first. What is 2 + 3?",
    ),
    _q(
        "bidmas_brackets", NUM, "BIDMAS",
        ["Use the order of operations with brackets and powers", "Insert brackets to make a calculation correct"],
        "Which calculation gives an answer of 18?",
        ["2 + 4 × 3", "(2 + 4) × 3", "2 × 4 + 3", "2 × (4 + 3)"], "B",
        ["worked 2 + 4 × 3 out from left to right",
         "worked out the bracket first, 6 × 3 = 18",
         "did 2 × 4 + 3 as 2 × 7",
         "thought 2 × 7 was 18"],
        "(2 + 4) × 3 = 6 × 3 = 18; the others give 14, 11 and 14.",
        [("What is 2 + 4 × 3 when you use BIDMAS?", "14", ["18", "24"], 0),
         ("What is (2 + 4) × 3?", "18", ["14", "10"], 1)],
        "Work out each option carefully using BIDMAS. Brackets first, then multiplication.",
    ),
    # ------------------------------------------------------------------ rounding
    _q(
        "round_dp", NUM, "Rounding and Estimating",
        ["Round numbers to one decimal place"],
        "Round 3.476 to 1 decimal place.",
        ["3.4", "3.5", "3.48", "3"], "B",
        ["cut the number off after the first decimal place without rounding",
         "looked at the 7 in the second decimal place and rounded the 4 up",
         "rounded to 2 decimal places instead of 1",
         "rounded to the nearest whole number"],
        "The digit after the first decimal place is 7, which is 5 or more, so 3.476 rounds up to 3.5.",
        [("Which digit do we look at to decide whether to round up?", "7", ["4", "6"], 0)],
        "Look at the digit straight after the first decimal place. Is it 5 or more?",
    ),
    _q(
        "round_sf", NUM, "Rounding and Estimating",
        ["Round numbers to significant figures"],
        "Round 0.04567 to 2 significant figures.",
        ["0.04", "0.046", "0.045", "0.05"], "B",
        ["rounded to 2 decimal places instead",
         "started counting from the 4, the first non-zero digit, and rounded the 5 up",
         "cut the number off after two significant figures without rounding",
         "rounded to 1 significant figure"],
        "The first significant figure is the 4; 0.04567 to 2 s.f. is 0.046 because the next digit is 6.",
        [("What is the first significant figure of 0.04567?", "4", ["0", "5"], 0)],
        "Zeros at the start of a decimal are not significant. Where do we start counting?",
    ),
    _q(
        "round_hundred", NUM, "Rounding and Estimating",
        ["Round integers to the nearest 10, 100 or 1000"],
        "Round 6849 to the nearest hundred.",
        ["6800", "6900", "7000", "6850"], "A",
        ["looked at the tens digit, 4, and rounded down",
         "rounded to 6850 first and then rounded that up again",
         "rounded to the nearest thousand",
         "rounded to the nearest ten"],
        "6849 is between 6800 and 6900; the tens digit is 4, so it rounds down to 6800.",
        [("Which two hundreds is 6849 between?", "6800 and 6900", ["6000 and 7000", "6840 and 6850"], 0),
         ("Which digit tells us whether to round up or down?", "4", ["9", "8"], 0)],
        "Which hundreds is it between, and is it closer to one of them?",
    ),
    _q(
        "estimate", NUM, "Rounding and Estimating",
        ["Estimate a calculation by rounding to one significant figure"],
        "Estimate the value of 49.8 × 3.1 by rounding each number to 1 significant figure.",
        ["150", "154.38", "120", "200"], "A",
        ["rounded 49.8 to 50 and 3.1 to 3 and did 50 × 3",
         "worked out the exact answer instead of estimating",
         "rounded 49.8 down to 40",
         "rounded 49.8 to 50 and 3.1 up to 4"],
        "49.8 ≈ 50 and 3.1 ≈ 3, so 49.8 × 3.1 ≈ 50 × 3 = 150.",
        [("What is 49.8 rounded to 1 significant figure?", "50", ["40", "49"], 0),
         ("What is 50 × 3?", "150", ["153", "200"], 0)],
        "Round each number first, then do the easier calculation.",
    ),
    # ------------------------------------------------------------------ percentages
    _q(
        "pct_of", NUM, "Percentages",
        ["Calculate a percentage of an amount"],
        "What is 15% of 80?",
        ["12", "15", "5.33", "65"], "A",
        ["found 10% = 8 and 5% = 4 and added them",
         "thought 15% of a number is just 15",
         "divided 80 by 15",
         "subtracted 15 from 80"],
        "10% of 80 is 8 and 5% is 4, so 15% of 80 is 8 + 4 = 12.",
        [("What is 10% of 80?", "8", ["10", "0.8"], 0),
         ("What is 5% of 80?", "4", ["5", "16"], 0)],
        "Can you find 10% first? Then how would you find 5%?",
    ),
    _q(
        "pct_decrease", NUM, "Percentages",
        ["Decrease an amount by a percentage"],
        "A coat costs £60. In a sale the price is reduced by 20%.\nWhat is the sale price?",
        ["£40", "£12", "£48", "£72"], "C",
        ["subtracted 20 pounds instead of 20%",
         "found 20% of the price but did not take it away",
         "found 20% of £60, which is £12, and took it away",
         "increased the price by 20% instead of reducing it"],
        "20% of £60 is £12, so the sale price is £60 - £12 = £48.",
        [("What is 20% of £60?", "£12", ["£20", "£3"], 0),
         ("So what is £60 - £12?", "£48", ["£52", "£42"], 0)],
        "First find 20% of £60. Then what do we do with it?",
    ),
    _q(
        "dec_to_pct", NUM, "Fractions, Decimals and Percentage Equivalence",
        ["Convert decimals to percentages"],
        "Write 0.3 as a percentage.",
        ["3%", "0.3%", "30%", "300%"], "C",
        ["thought 0.3 means 3 so wrote 3%",
         "just put a percent sign after the decimal",
         "multiplied 0.3 by 100",
         "multiplied by 1000 instead of 100"],
        "To change a decimal to a percentage multiply by 100: 0.3 × 100 = 30%.",
        [("What do we multiply a decimal by to make it a percentage?", "100", ["10", "1000"], 0)],
        "Percent means out of 100. What is 0.3 × 100?",
    ),
    _q(
        "pct_increase", NUM, "Percentages",
        ["Increase an amount by a percentage"],
        "Increase £250 by 8%.",
        ["£258", "£270", "£20", "£2000"], "B",
        ["added 8 pounds instead of 8%",
         "found 8% of £250, which is £20, and added it on",
         "found 8% but did not add it to the original amount",
         "multiplied £250 by 8"],
        "1% of £250 is £2.50, so 8% is £20 and the new amount is £250 + £20 = £270.",
        [("What is 1% of £250?", "£2.50", ["£25", "£0.25"], 0),
         ("What is 8% of £250?", "£20", ["£8", "£200"], 0)],
        "Find 1% of £250 first. How do we get from 1% to 8%?",
    ),
    _q(
        "pct_change", NUM, "Percentages",
        ["Calculate a percentage change"],
        "The price of a ticket rises from £40 to £50.\nWhat is the percentage increase?",
        ["10%", "20%", "25%", "80%"], "C",
        ["used the difference of £10 as the percentage",
         "divided the increase by the new price instead of the original",
         "divided the increase of £10 by the original £40 and multiplied by 100",
         "divided 40 by 50"],
        "Increase = £10; 10 ÷ 40 = 0.25, so the percentage increase is 25%.",
        [("How much did the price go up by?", "£10", ["£50", "£90"], 0),
         ("What do we divide the increase by?", "the original price", ["the new price", "100"], 0)],
        "Percentage change is the change divided by the original amount.",
    ),
    # ------------------------------------------------------------------ area and perimeter
    _q(
        "area_rect", GEO, "Area and Perimeter",
        ["Calculate the area of a rectangle"],
        "A rectangle is 8 cm long and 5 cm wide.\nWhat is its area?",
        ["13 cm²", "26 cm²", "40 cm²", "80 cm²"], "C",
        ["added the length and the width",
         "worked out the perimeter instead of the area",
         "multiplied the length by the width",
         "multiplied the length by the width and then doubled it"],
        "Area of a rectangle = length × width = 8 × 5 = 40 cm².",
        [("What do we do with the length and the width to find the area?", "multiply them",
          ["add them", "add them and double"], 0)],
        "Area is the space inside. How many 1 cm squares would fit?",
        image="A rectangle with the bottom side labelled 8 cm and the right side labelled 5 cm.",
    ),
    _q(
        "area_tri", GEO, "Area and Perimeter",
        ["Calculate the area of a triangle", "Identify the perpendicular height"],
        "A triangle has a base of 10 cm and a perpendicular height of 6 cm.\nWhat is its area?",
        ["60 cm²", "30 cm²", "16 cm²", "32 cm²"], "B",
        ["multiplied the base by the height and forgot to halve it",
         "multiplied the base by the height and divided by 2",
         "added the base and the height",
         "added the base and the height and doubled it"],
        "Area of a triangle = 1/2 × base × height = 1/2 × 10 × 6 = 30 cm².",
        [("What is the formula for the area of a triangle?", "half base times height",
          ["base times height", "base plus height"], 0),
         ("What is 10 × 6 ÷ 2?", "30", ["60", "8"], 0)],
        "A triangle is half of a rectangle. What would the rectangle's area be?",
        image="A triangle with a base of 10 cm and a dashed perpendicular height of 6 cm.",
    ),
    _q(
        "area_circle", GEO, "Area and Perimeter",
        ["Calculate the area of a circle", "Give answers in terms of pi"],
        "What is the area of a circle with radius 3 cm?\nGive your answer in terms of π.",
        ["6π cm²", "9π cm²", "3π cm²", "36π cm²"], "B",
        ["used the formula for the circumference",
         "squared the radius and multiplied by π",
         "multiplied the radius by π without squaring it",
         "squared the diameter instead of the radius"],
        "Area = πr² = π × 3² = 9π cm².",
        [("What is the formula for the area of a circle?", "πr²", ["2πr", "πd"], 0),
         ("What is 3 squared?", "9", ["6", "33"], 0)],
        "Area of a circle is π times the radius squared. What is the radius here?",
        image="A circle with a line from the centre to the edge labelled 3 cm.",
    ),
    _q(
        "area_para", GEO, "Area and Perimeter",
        ["Calculate the area of a parallelogram", "Identify the perpendicular height"],
        "A parallelogram has a base of 7 cm, a slant side of 5 cm and a perpendicular height of 4 cm.\n"
        "What is its area?",
        ["35 cm²", "28 cm²", "14 cm²", "24 cm²"], "B",
        ["used the slant side instead of the perpendicular height",
         "multiplied the base by the perpendicular height",
         "halved the answer as if it was a triangle",
         "worked out the perimeter"],
        "Area of a parallelogram = base × perpendicular height = 7 × 4 = 28 cm².",
        [("Which length is the perpendicular height?", "4 cm", ["5 cm", "7 cm"], 1)],
        "The height has to be at right angles to the base. Which length is that?",
        image="A parallelogram with base 7 cm, slanted side 5 cm and a dashed vertical height of 4 cm.",
    ),
    _q(
        "perim_square", GEO, "Area and Perimeter",
        ["Calculate the perimeter of a square", "Find the side length of a square from its area"],
        "A square has an area of 36 cm².\nWhat is its perimeter?",
        ["24 cm", "36 cm", "144 cm", "9 cm"], "A",
        ["found the side length of 6 cm and multiplied it by 4",
         "thought the perimeter is the same as the area",
         "multiplied the area by 4",
         "divided the area by 4"],
        "The side length is √36 = 6 cm, so the perimeter is 4 × 6 = 24 cm.",
        [("What is the side length of a square with area 36 cm²?", "6 cm", ["9 cm", "18 cm"], 1),
         ("So what is the perimeter?", "24 cm", ["36 cm", "12 cm"], 0)],
        "First work out how long one side of the square is.",
    ),
    # ------------------------------------------------------------------ angles
    _q(
        "angle_line", GEO, "Angles",
        ["Calculate angles on a straight line"],
        "Two angles lie on a straight line. One of them is 65°.\nWhat is the size of the other angle?",
        ["25°", "115°", "295°", "65°"], "B",
        ["thought angles on a straight line add up to 90°",
         "subtracted 65 from 180",
         "thought angles on a straight line add up to 360°",
         "thought the two angles must be equal"],
        "Angles on a straight line add up to 180°, so the other angle is 180 - 65 = 115°.",
        [("What do angles on a straight line add up to?", "180", ["90", "360"], 0)],
        "What do the angles on a straight line add up to?",
        image="A straight line with a line coming off it; one angle is marked 65° and the other x.",
    ),
    _q(
        "angle_triangle", GEO, "Angles",
        ["Calculate missing angles in a triangle"],
        "A triangle has angles of 50° and 70°.\nWhat is the size of the third angle?",
        ["60°", "240°", "120°", "20°"], "A",
        ["subtracted 50 and 70 from 180",
         "thought the angles in a triangle add up to 360°",
         "added the two angles together",
         "subtracted 50 from 70"],
        "Angles in a triangle add up to 180°: 180 - 50 - 70 = 60°.",
        [("What do the angles in a triangle add up to?", "180", ["360", "90"], 0),
         ("What is 50 + 70?", "120", ["110", "20"], 0)],
        "What do all three angles inside a triangle add up to?",
    ),
    _q(
        "angle_hexagon", GEO, "Angles",
        ["Calculate interior angles of regular polygons", "Calculate exterior angles of regular polygons"],
        "What is the size of each interior angle of a regular hexagon?",
        ["60°", "120°", "720°", "108°"], "B",
        ["found the exterior angle, 360 ÷ 6, instead of the interior angle",
         "found the exterior angle of 60° and took it from 180°",
         "found the sum of all the interior angles",
         "used the interior angle of a regular pentagon"],
        "Each exterior angle is 360 ÷ 6 = 60°, so each interior angle is 180 - 60 = 120°.",
        [("What is each exterior angle of a regular hexagon?", "60", ["120", "36"], 1),
         ("How many sides does a hexagon have?", "6", ["5", "8"], 0)],
        "Start with the exterior angles. What do they add up to?",
    ),
    _q(
        "angle_vert", GEO, "Angles",
        ["Identify vertically opposite angles"],
        "Two straight lines cross. One of the angles is 48°.\nWhat is the angle vertically opposite it?",
        ["48°", "132°", "312°", "42°"], "A",
        ["used the rule that vertically opposite angles are equal",
         "found the angle next to it on the straight line",
         "took 48 away from 360",
         "took 48 away from 90"],
        "Vertically opposite angles are equal, so the angle is 48°.",
        [("Are vertically opposite angles equal or do they add to 180?", "equal",
          ["add to 180", "add to 360"], 0)],
        "Look at the shape the two lines make. Which angle is directly across from the 48°?",
        image="Two straight lines crossing to make an X; one angle is labelled 48° and the opposite angle y.",
    ),
    # ------------------------------------------------------------------ algebra
    _q(
        "simul_add", ALG, "Simultaneous Equations",
        ["Solve linear simultaneous equations by elimination"],
        "Solve the simultaneous equations:\nx + y = 10\nx - y = 4",
        ["x = 7, y = 3", "x = 3, y = 7", "x = 6, y = 4", "x = 5, y = 5"], "A",
        ["added the equations to get 2x = 14 so x = 7 and then y = 3",
         "solved it but swapped the values of x and y",
         "took y = 4 straight from the second equation",
         "split 10 equally between x and y"],
        "Adding the equations gives 2x = 14, so x = 7, and then 7 + y = 10 gives y = 3.",
        [("What do you get if you add the two equations?", "2x = 14", ["2y = 14", "2x = 6"], 0),
         ("So what is x?", "7", ["14", "3"], 0)],
        "If we add the two equations together, what happens to the y terms?",
    ),
    _q(
        "simul_sub", ALG, "Simultaneous Equations",
        ["Solve linear simultaneous equations by elimination", "Substitute a value to find the other unknown"],
        "Solve the simultaneous equations:\n2x + y = 11\nx + y = 7",
        ["x = 4, y = 3", "x = 3, y = 4", "x = 2, y = 5", "x = 5.5, y = 0"], "A",
        ["subtracted the second equation from the first to get x = 4 and then y = 3",
         "solved it but swapped the values of x and y",
         "subtracted the equations but wrote 2x = 4",
         "ignored the y in the first equation"],
        "Subtracting the second equation from the first gives x = 4; then 4 + y = 7 gives y = 3.",
        [("What do you get if you subtract the second equation from the first?", "x = 4",
          ["2x = 4", "x = 18"], 0),
         ("If x = 4, what is y?", "3", ["7", "11"], 1)],
        "Both equations have one y. What happens if we take one equation away from the other?",
    ),
    _q(
        "collect_terms", ALG, "Expressions and Simplifying",
        ["Simplify expressions by collecting like terms"],
        "Simplify 3a + 2b - a + 4b",
        ["2a + 6b", "4a + 6b", "8ab", "3a + 6b"], "A",
        ["collected the a terms to get 2a and the b terms to get 6b",
         "added the a instead of subtracting it",
         "added all the numbers and put the letters together",
         "ignored the - a"],
        "3a - a = 2a and 2b + 4b = 6b, so the expression simplifies to 2a + 6b.",
        [("What is 3a - a?", "2a", ["3", "4a"], 0),
         ("What is 2b + 4b?", "6b", ["8b", "6b²"], 0)],
        "Let's collect the a terms first. Be careful with the sign in front of each term.",
    ),
    _q(
        "expand", ALG, "Expressions and Simplifying",
        ["Expand a single bracket"],
        "Expand 3(x + 4)",
        ["3x + 4", "3x + 12", "x + 12", "3x + 7"], "B",
        ["only multiplied the first term in the bracket by 3",
         "multiplied both terms in the bracket by 3",
         "only multiplied the second term by 3",
         "added 3 to the 4 instead of multiplying"],
        "Multiply each term in the bracket by 3: 3 × x = 3x and 3 × 4 = 12, so 3x + 12.",
        [("What is 3 × 4?", "12", ["7", "34"], 0)],
        "The 3 multiplies everything inside the bracket.",
    ),
    _q(
        "solve_linear", ALG, "Solving Equations",
        ["Solve two-step linear equations"],
        "Solve 2x + 5 = 17",
        ["x = 6", "x = 11", "x = 12", "x = 7.5"], "A",
        ["subtracted 5 from both sides to get 2x = 12 and then divided by 2",
         "added 5 to 17 and then divided by 2",
         "subtracted 5 but forgot to divide by 2",
         "subtracted 2 instead of 5 and then divided by 2"],
        "2x + 5 = 17, so 2x = 12 and x = 6.",
        [("What do we do first to both sides?", "subtract 5", ["divide by 2", "add 5"], 0),
         ("If 2x = 12, what is x?", "6", ["24", "10"], 0)],
        "What is the inverse of adding 5?",
    ),
    _q(
        "nth_term", ALG, "Sequences",
        ["Find the nth term of a linear sequence"],
        "What is the nth term of the sequence 3, 7, 11, 15, ...?",
        ["n + 4", "4n - 1", "4n + 3", "3n + 4"], "B",
        ["added the common difference to n",
         "used the difference of 4 to get 4n and then took off 1",
         "used the first term as the number added on",
         "swapped the first term and the common difference"],
        "The common difference is 4, so the nth term is 4n + c; when n = 1, 4 + c = 3, so c = -1: 4n - 1.",
        [("What is the common difference?", "4", ["3", "7"], 0),
         ("What is 4n when n = 1?", "4", ["5", "1"], 0)],
        "How much does the sequence go up by each time?",
    ),
    _q(
        "substitute", ALG, "Substitution",
        ["Substitute positive integers into expressions with powers"],
        "If a = 3, what is the value of 2a²?",
        ["36", "18", "12", "9"], "B",
        ["worked out (2a)² instead of 2 × a²",
         "squared 3 to get 9 and then doubled it",
         "multiplied 3 by 2 twice",
         "forgot to multiply by 2"],
        "2a² means 2 × a², so 2 × 3² = 2 × 9 = 18.",
        [("What is a² when a = 3?", "9", ["6", "32"], 0),
         ("So what is 2 × 9?", "18", ["11", "81"], 0)],
        "The power only belongs to the a. Work out a² first.",
    ),
    # ------------------------------------------------------------------ ratio and statistics
    _q(
        "ratio_share", RAT, "Ratio",
        ["Share an amount in a given ratio"],
        "Share £40 in the ratio 3 : 5",
        ["£15 and £25", "£3 and £5", "£25 and £15", "£20 and £20"], "A",
        ["divided £40 by 8 parts to get £5 a part and then did 3 × 5 and 5 × 5",
         "wrote the ratio numbers as the amounts",
         "shared it correctly but in the wrong order",
         "split the money equally"],
        "There are 3 + 5 = 8 parts; £40 ÷ 8 = £5 per part, so £15 and £25.",
        [("How many parts are there altogether?", "8", ["2", "15"], 0),
         ("How much is one part worth?", "£5", ["£8", "£13.33"], 0)],
        "How many parts are there in total?",
    ),
    _q(
        "ratio_simplify", RAT, "Ratio",
        ["Simplify ratios"],
        "Write the ratio 12 : 18 in its simplest form.",
        ["2 : 3", "6 : 9", "3 : 2", "4 : 6"], "A",
        ["divided both parts by the highest common factor 6",
         "divided both parts by 2 and stopped",
         "simplified it but swapped the order",
         "divided both parts by 3 and stopped"],
        "The highest common factor of 12 and 18 is 6, so 12 : 18 = 2 : 3.",
        [("What is the highest common factor of 12 and 18?", "6", ["3", "2"], 0)],
        "Can you find a number that divides both 12 and 18 exactly?",
    ),
    _q(
        "mean", STA, "Averages and Range",
        ["Calculate the mean from a list of data"],
        "Find the mean of these numbers:\n2, 5, 5, 8, 10",
        ["5", "6", "8", "30"], "B",
        ["gave the mode instead of the mean",
         "added the numbers to get 30 and divided by 5",
         "worked out the range",
         "added the numbers and forgot to divide"],
        "The total is 2 + 5 + 5 + 8 + 10 = 30 and there are 5 numbers, so the mean is 30 ÷ 5 = 6.",
        [("What is the total of the numbers?", "30", ["25", "10"], 0),
         ("How many numbers are there?", "5", ["4", "10"], 0)],
        "To find the mean we add them all up and then divide. What do we divide by?",
    ),
    _q(
        "median", STA, "Averages and Range",
        ["Find the median from a list of data"],
        "Find the median of these numbers:\n9, 3, 7, 1, 4",
        ["7", "4", "5", "8"], "B",
        ["took the middle number without putting them in order first",
         "put them in order, 1, 3, 4, 7, 9, and took the middle one",
         "found the mean instead of the median",
         "found the range instead of the median"],
        "In order the numbers are 1, 3, 4, 7, 9, so the median is the middle value, 4.",
        [("What do we do first to find the median?", "put them in order", ["add them up", "find the biggest"], 0)],
        "What do we need to do to the numbers before we find the middle one?",
    ),
    # ------------------------------------------------------------------ unsolvable (no diagram data)
    _q(
        "angle_missing", GEO, "Angles",
        ["Calculate angles on a straight line", "Identify vertically opposite angles"],
        "Calculate the size of angle x.",
        ["35°", "55°", "125°", "145°"], "C",
        ["used an angle from the diagram that is not given here",
         "took the given angle away from 90°",
         "took the given angle away from 180°",
         "added the given angle to 90°"],
        "The angle given in the diagram is not included in the question, so x cannot be worked out.",
        [("What do angles on a straight line add up to?", "180", ["90", "360"], 0)],
        "Look carefully at the diagram. Which angles are on a straight line?",
        image="A diagram of two intersecting lines with one angle marked x.",
        solvable=False,
    ),
)

# Topic help: what a student asks for and how the tutor answers (Seek Information turns).
_TOPIC_HELP: dict[str, tuple[tuple[str, str], ...]] = {
    "Fractions": (
        ("what is the denominator?", "The denominator is the bottom number of a fraction."),
        ("do i add the bottoms as well?", "No, we only add the numerators once the denominators are the same."),
        ("what does simplest form mean?", "It means the numerator and denominator have no common factor except 1."),
    ),
    "Fractions, Decimals and Percentage Equivalence": (
        ("is a fraction the same as dividing?", "Yes! 3/8 means 3 divided by 8."),
        ("what does percent mean?", "Percent means out of 100."),
    ),
    "Negative Numbers": (
        ("does the minus go with the number?", "Yes, the minus sign belongs to the number after it."),
        ("is -8 bigger than -3?", "No, -8 is further below zero, so it is smaller."),
    ),
    "BIDMAS": (
        ("what does bidmas stand for?", "Brackets, Indices, Division, Multiplication, Addition, Subtraction."),
        ("do i go left to right?", "Only for operations of the same priority, like + and -."),
    ),
    "Rounding and Estimating": (
        ("what is a significant figure?", "The first significant figure is the first digit that is not zero."),
        ("do i round up if its 5?", "Yes, if the next digit is 5 or more we round up."),
    ),
    "Percentages": (
        ("how do i find 10%?", "To find 10% you divide by 10."),
        ("can i use a calculator?", "Let's try without a calculator first, using 10% and 5%."),
    ),
    "Area and Perimeter": (
        ("what's the difference between area and perimeter?",
         "Perimeter is the distance around the outside, area is the space inside."),
        ("what is perpendicular?", "Perpendicular means at right angles, like the corner of a square."),
    ),
    "Angles": (
        ("what do angles in a triangle add up to?", "The angles in a triangle add up to 180°."),
        ("what does vertically opposite mean?", "It means the angle directly across where two lines cross."),
    ),
    "Simultaneous Equations": (
        ("what does simultaneous mean?", "It means both equations are true at the same time."),
        ("do i add or subtract them?", "If the signs of a letter are the same we subtract, if different we add."),
    ),
    "Expressions and Simplifying": (
        ("what are like terms?", "Like terms have exactly the same letters, like 3a and a."),
        ("what does expand mean?", "Expand means multiply out the brackets."),
    ),
    "Solving Equations": (("what is the inverse?", "The inverse is the opposite operation, like - for +."),),
    "Sequences": (("what is the nth term?", "It is a rule that gives any term in the sequence from its position n."),),
    "Substitution": (("what does substitute mean?", "It means replace the letter with its value."),),
    "Ratio": (("what does the : mean?", "The : separates the parts of the ratio, here 3 parts to 5 parts."),),
    "Averages and Range": (("which one is the median?", "The median is the middle value once they are in order."),),
}
_GENERIC_HELP: tuple[tuple[str, str], ...] = (
    ("what do i have to do?", "We need to work out the answer to the question step by step."),
    ("how do i do that?", "Let me show you the first step."),
    ("can you explain it again?", "Of course. Let's go through it one more time."),
    ("is that the answer?", "Not yet, there is one more step."),
)

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
    explanations = {}
    for i in range(4):
        if i == q.correct:
            explanations[i + 1] = f"Correct. A student choosing this {q.reasons[i]}."
        else:
            explanations[i + 1] = f"Incorrect. This answer comes from a student who {q.reasons[i]}."
    return {
        "correct_option": q.correct + 1,
        "solution": q.solution,
        "option_explanations": explanations,
        "solvable": q.solvable,
    }


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


def _annotation_row(iv: _Intervention, turns: list[dict[str, Any]]) -> dict[str, str]:
    if iv.failed_annotation:
        return dict.fromkeys(ANNOTATION_COLUMNS, "")
    acts = {f"turn {i + 1}": t["act"] for i, t in enumerate(turns) if t["role"] == "student"}
    corr = {f"turn {i + 1}": t["correctness"] for i, t in enumerate(turns) if t["role"] == "student"}
    kcs = {f"turn {i + 1}": t["kcs"] for i, t in enumerate(turns) if t["role"] == "tutor" and t["kcs"]}
    assert iv.persona is not None
    return {
        "acts": repr(acts),
        "correctness": repr(corr),
        "eedi_kcs": repr(kcs),
        "ocean_persona": repr(dict(iv.persona.traits)),
        "freeform_persona": repr(iv.profile),
        "question_annotation": repr(_question_annotation(iv.question)),
    }


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
    # One dialogue of the test split has failed annotations (all cells empty).
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
    for split in ("train", "val", "test"):
        rows = []
        for d in corpus[split]:
            iv = by_id[d.id]
            turns = _merge_labels([iv.messages[k] for k in iv.file_order])
            got = [(t.role, t.content) for t in d.turns]
            want = [(t["role"], t["content"]) for t in turns]
            if got != want:
                raise RuntimeError(f"sample dialogue {d.id}: generated turns do not match the loaded ones")
            rows.append(_annotation_row(iv, turns))
            tutor_first += d.turns[0].role == "tutor"
            merged_turns += sum(len(t["parts"]) > 1 for t in turns)
            if not iv.failed_annotation:
                for t in turns:
                    if t["role"] == "student":
                        acts[t["act"]] += 1
                        correctness[t["correctness"]] += 1
        path = out_dir / "annotations" / f"{split}.csv"
        atomic_write_bytes(path, _csv_bytes(ANNOTATION_COLUMNS, [[r[c] for c in ANNOTATION_COLUMNS] for r in rows]))

    n_dialogues = len(ivs)
    return {
        "seed": seed,
        "out_dir": str(out_dir),
        "questions": len({iv.qid for iv in ivs}),
        "unsolvable_questions": sorted({iv.qid for iv in ivs if not iv.question.solvable}),
        "dialogues": {s: len(corpus[s]) for s in ("train", "val", "test")},
        "unsolvable_dialogues": {
            s: sum(not by_id[d.id].question.solvable for d in corpus[s]) for s in ("train", "val", "test")
        },
        "failed_annotations": [f"{iv.qid}-{iv.iid}" for iv in ivs if iv.failed_annotation],
        "messages": {"train": len(train_rows), "test": len(test_rows)},
        "tutor_first_share": round(tutor_first / n_dialogues, 4),
        "merged_turns": merged_turns,
        "acts": {a: acts[a] for a in ACTS},
        "correctness": {c: correctness[c] for c in ("correct", "incorrect", "na")},
    }


def main(argv: Sequence[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        prog="python -m simhub.data.sample",
        description="Generate the sample corpus in the raw QATD-2k format plus its annotations.",
    )
    parser.add_argument("--output", type=Path, default=SAMPLE_DIR, help=f"output folder (default: {SAMPLE_DIR})")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"random seed (default: {DEFAULT_SEED})")
    args = parser.parse_args(argv)
    summary = generate_sample(args.output, seed=args.seed)
    print(json.dumps(summary, indent=2))
    return summary


if __name__ == "__main__":
    main()
