"""ROUGE-L must equal rouge_score's value exactly (==), not approximately."""

from __future__ import annotations

import random

import pytest

from simhub.metrics.rouge_l import lcs_length, rouge_l, rouge_l_batch, tokenize

rouge_scorer = pytest.importorskip("rouge_score.rouge_scorer")
rouge_tokenizers = pytest.importorskip("rouge_score.tokenizers")

_SCORER = rouge_scorer.RougeScorer(["rougeL"])
_REF_TOKENIZER = rouge_tokenizers.DefaultTokenizer(use_stemmer=False)


def _reference_f(reference: str, candidate: str) -> float:
    return _SCORER.score(target=reference, prediction=candidate)["rougeL"].fmeasure


def _dp_lcs(a: list[int], b: list[int]) -> int:
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


# fmt: off
_WORDS = [
    "the", "a", "is", "I", "think", "divide", "divided", "by", "fraction", "answer", "so",
    "would", "multiply", "flip", "it", "Yes", "no", "maybe", "because", "half", "x", "equals",
    "5/8", "1/6", "3.75", "15/4", "x=2", "don't", "can't", "it's", "(2+3)*4", "A", "THE",
    "café", "naïve", "Straße", "İstanbul", "\u212a", "ﬁne", "１２３", "٣", "数学", "😀", "--",
    "...", "?!", "e.g.", "O'Neil", "co-operate", "snake_case", "CamelCase", "x²", "1st",
]
# fmt: on
_SEPARATORS = [" ", " ", " ", ", ", ". ", "\n", "\t", "  ", "\u00a0", "/", "-", "", "?"]


def _random_text(rng: random.Random, max_words: int) -> str:
    n = rng.randint(0, max_words)
    # A small vocabulary on purpose: repeated tokens create many LCS ties and long matches.
    vocab = rng.sample(_WORDS, rng.randint(1, len(_WORDS)))
    parts: list[str] = []
    for _ in range(n):
        parts.append(rng.choice(vocab))
        parts.append(rng.choice(_SEPARATORS))
    return "".join(parts)


_ADVERSARIAL = [
    "",
    " ",
    "\n\t  \r\n",
    "!!!",
    "?.,;:-_()[]{}",
    "x",
    "X",
    "5",
    "x x x x x x x x",
    "a b a b a b a b a b",
    "b a b a b a b a b a",
    "café naïve résumé",
    "CAFÉ",
    "Straße STRASSE strasse",
    "İstanbul istanbul ISTANBUL",
    "\u212aelvin kelvin",
    "ﬁne fine",
    "１２３ 123",
    "数学 is math",
    "😀😀 ok 😀",
    "snake_case_word",
    "a\u00a0b\u2003c",
    "\u0130",
    "one-token",
    "a" * 300,
    "\ud800abc\udfff",  # lone surrogates are legal in str
    "a\x1cb\x1fc\x0bd\x00e",  # separators that str.split() and bytes.split() disagree on
    "ΣΑΣ σας",  # final-sigma lowercasing is context dependent
]


def _long_text(seed: int, n_chars: int = 20_000) -> str:
    rng = random.Random(seed)
    parts: list[str] = []
    size = 0
    while size < n_chars:
        word = rng.choice(_WORDS)
        sep = rng.choice(_SEPARATORS)
        parts.append(word + sep)
        size += len(word) + len(sep)
    return "".join(parts)[:n_chars]


# -- paper sanity values ---------------------------------------------------------------------

_PAPER_REFERENCE = "5/8 divided by 1/6?"


@pytest.mark.parametrize(
    ("candidate", "expected"),
    [
        ("8/5", 0.2500),
        ("So, would I divide 1/6 by 5/8?", 0.2667),
        ("5/8 divided by 1/6", 1.0),
    ],
)
def test_paper_sanity_values(candidate: str, expected: float) -> None:
    value = rouge_l(_PAPER_REFERENCE, candidate)
    assert round(value, 4) == expected
    assert value == _reference_f(_PAPER_REFERENCE, candidate)
    assert rouge_l_batch([_PAPER_REFERENCE], [candidate]) == [value]


def test_exact_values_for_paper_examples() -> None:
    assert rouge_l(_PAPER_REFERENCE, "8/5") == 0.25
    assert rouge_l(_PAPER_REFERENCE, "So, would I divide 1/6 by 5/8?") == 2 * (2 / 9) * (2 / 6) / (
        2 / 9 + 2 / 6
    )


# -- tokenisation ----------------------------------------------------------------------------


def test_tokenize_matches_rouge_score() -> None:
    rng = random.Random(1)
    texts = _ADVERSARIAL + [_random_text(rng, 30) for _ in range(2000)] + [_long_text(7)]
    for text in texts:
        assert tokenize(text) == _REF_TOKENIZER.tokenize(text), repr(text)


def test_tokenize_every_code_point() -> None:
    # One long text containing every code point, each between ASCII letters of mixed case, so any
    # character our tokeniser treats differently from rouge_score's regexes shows up.
    text = "".join(f"Q{chr(cp)}q" for cp in range(0x110000))
    assert tokenize(text) == _REF_TOKENIZER.tokenize(text)


def test_tokenize_examples() -> None:
    assert tokenize("5/8 divided by 1/6?") == ["5", "8", "divided", "by", "1", "6"]
    assert tokenize("") == []
    assert tokenize("?!...") == []
    # Non-ASCII letters are separators, except where lowercasing produces ASCII.
    assert tokenize("café") == ["caf"]
    assert tokenize("\u212a") == ["k"]
    assert tokenize("\u0130") == ["i"]


# -- equality with rouge_score ---------------------------------------------------------------


def test_empty_inputs_score_zero() -> None:
    for ref, cand in [("", ""), ("", "x"), ("x", ""), ("!!!", "x"), ("x", "..."), ("😀", "😀")]:
        assert rouge_l(ref, cand) == 0.0
        assert rouge_l(ref, cand) == _reference_f(ref, cand)
    assert rouge_l_batch(["", "x", "?"], ["x", "", "?"]) == [0.0, 0.0, 0.0]


def test_no_overlap_scores_zero() -> None:
    assert rouge_l("one two", "three four") == 0.0 == _reference_f("one two", "three four")


def test_random_pairs_equal_rouge_score() -> None:
    rng = random.Random(12345)
    refs: list[str] = []
    cands: list[str] = []
    for _ in range(3000):
        ref = _random_text(rng, 25)
        roll = rng.random()
        if roll < 0.1:
            cand = ref
        elif roll < 0.3 and refs:
            # Reuse an earlier reference so the batch caches are exercised.
            ref = rng.choice(refs)
            cand = _random_text(rng, 25)
        else:
            cand = _random_text(rng, 25)
        refs.append(ref)
        cands.append(cand)

    expected = [_reference_f(r, c) for r, c in zip(refs, cands, strict=True)]
    assert [rouge_l(r, c) for r, c in zip(refs, cands, strict=True)] == expected
    assert rouge_l_batch(refs, cands) == expected


def test_adversarial_pairs_equal_rouge_score() -> None:
    texts = [*_ADVERSARIAL, *(_random_text(random.Random(s), 12) for s in range(15))]
    refs = [r for r in texts for _ in texts]
    cands = [c for _ in texts for c in texts]
    expected = [_reference_f(r, c) for r, c in zip(refs, cands, strict=True)]
    assert rouge_l_batch(refs, cands) == expected
    for r, c, e in zip(refs, cands, expected, strict=True):
        assert rouge_l(r, c) == e, (r, c)


def test_single_token_texts() -> None:
    for ref, cand in [("x", "x"), ("x", "y"), ("x", "a b x c"), ("a b x c", "x"), ("x", "x x x")]:
        assert rouge_l(ref, cand) == _reference_f(ref, cand)


def test_very_long_texts_equal_rouge_score() -> None:
    long_a = _long_text(1)
    long_b = _long_text(2)
    assert len(long_a) == len(long_b) == 20_000
    short = "so I would divide the fraction by half"
    pairs = [
        (long_a, long_b),  # both ~3k tokens: the reference DP is slow, but this is the real case
        (long_a, long_a),
        (long_a, short),
        (short, long_b),
        (long_a, "x"),
        ("x", long_b),
        (long_a, ""),
    ]
    refs = [r for r, _ in pairs]
    cands = [c for _, c in pairs]
    expected = [_reference_f(r, c) for r, c in pairs]
    assert rouge_l_batch(refs, cands) == expected
    assert [rouge_l(r, c) for r, c in pairs] == expected
    assert expected[1] == 1.0


# -- LCS ---------------------------------------------------------------------------------------


def test_lcs_length_matches_dp() -> None:
    rng = random.Random(99)
    for _ in range(3000):
        alphabet = rng.randint(1, 8)
        a = [rng.randrange(alphabet) for _ in range(rng.randint(0, 40))]
        b = [rng.randrange(alphabet) for _ in range(rng.randint(0, 40))]
        assert lcs_length(a, b) == _dp_lcs(a, b), (a, b)
        assert lcs_length(b, a) == lcs_length(a, b)


def test_lcs_length_long_sequences() -> None:
    # Longer than a machine word in both directions, so the big-int carries are exercised.
    rng = random.Random(5)
    for _ in range(20):
        a = [rng.randrange(4) for _ in range(rng.randint(60, 300))]
        b = [rng.randrange(4) for _ in range(rng.randint(60, 300))]
        assert lcs_length(a, b) == _dp_lcs(a, b)


def test_lcs_length_edge_cases() -> None:
    assert lcs_length([], []) == 0
    assert lcs_length([1, 2, 3], []) == 0
    assert lcs_length([], "abc") == 0
    assert lcs_length("abcbdab", "bdcaba") == 4
    assert lcs_length(("x",) * 100, ("x",) * 70) == 70
    assert lcs_length(["a", "b"], ["c", "d"]) == 0


# -- batch API -------------------------------------------------------------------------------


def test_batch_length_mismatch() -> None:
    with pytest.raises(ValueError, match=r"3 references.*2 candidates"):
        rouge_l_batch(["a", "b", "c"], ["a", "b"])


def test_batch_empty() -> None:
    assert rouge_l_batch([], []) == []


def test_batch_returns_floats() -> None:
    values = rouge_l_batch(["a b", "", "a"], ["a", "a", "b"])
    assert all(type(v) is float for v in values)
