"""Dialogue-level realism: how close whole simulated dialogues (rollouts) are to whole real ones.

The paper's metrics compare one simulated student turn with the real turn it replaces. They cannot
see what only shows over a whole dialogue: a simulator that always answers in the same length, never
asks a question, drifts into an unrealistic act mix, or learns too fast. The functions here compare
the *distributions* of such properties between a set of real dialogues and a set of simulated ones
on the same questions. They are the pure computational core: plain Python / numpy in, numbers (or
small frozen result records) out, no I/O, no models. The dialogue-level metrics
(:mod:`simhub.evaluation.dialogue_level`, one per statistic or small family) wrap them.

Conventions, shared by every function:

* "real" always comes first, "simulated" second. Distances are symmetric, but normalisations
  (ranges, z-scores) use the real side only, so that every simulator is measured with the same
  ruler on a given data set.
* Missing labels (``None``) are skipped; a population that ends up empty raises
  :class:`~simhub.errors.DataError` naming the side, rather than quietly returning NaN.
* Invalid parameters raise :class:`~simhub.errors.ConfigError` whose ``field`` is the parameter.
* Only numpy is imported at module level; scikit-learn is imported by the functions that need it,
  so the core install can import this module. Embeddings come from the caller (``embed``).

Every labelled quantity (acts, correctness, helpfulness) must come from the *same* classifier or
judge on both sides; the functions cannot check this, and a difference in labellers would show up
as a difference in realism.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from dataclasses import asdict, dataclass
from typing import Literal

import numpy as np

from simhub.errors import ConfigError, DataError
from simhub.schema import ACTS, Dialogue

__all__ = [
    "DEFAULT_CHUNK_TOKENS",
    "DEFAULT_EPS",
    "HDD_SAMPLE_SIZE",
    "MATTR_WINDOW",
    "SURFACE_FEATURES",
    "DetectResult",
    "DialogueInputs",
    "KTGainDiff",
    "LexicalZ",
    "PIResult",
    "TutorSensitivity",
    "Verdict",
    "acts_jsd",
    "check_same_questions",
    "correct_share",
    "correctness_rate_diff",
    "detect_auroc",
    "dialogue_inputs",
    "hdd",
    "hdd_z",
    "kt_gain_diff",
    "length_w1",
    "lexical_diversity_z",
    "mattr",
    "mattr_z",
    "pi_calibrated",
    "pooled_chunks",
    "prepare_inputs",
    "question_rate_w1",
    "question_shares",
    "range_normalised_w1",
    "stability_sd",
    "surface_features",
    "tokenize",
    "turns_w1",
    "tutor_sensitivity",
    "under_test_first",
    "verdict_from_choice",
    "wasserstein_1d",
    "word_count",
    "yule_k",
    "yule_z",
]

#: MATTR window (tokens) and HD-D sample size: the values of the lexical-diversity literature
#: (Covington & McFall 2010; McCarthy & Jarvis 2010), so numbers are comparable with published ones.
MATTR_WINDOW = 50
HDD_SAMPLE_SIZE = 42
#: Length of the pooled chunks on which lexical diversity is measured. Eedi student turns are a
#: handful of words, far below the window, so per-turn diversity would be meaningless.
DEFAULT_CHUNK_TOKENS = 100
#: Floors of the real-side standard deviation in the lexical z-scores, per metric, on the metric's
#: own scale: MATTR and HD-D lie in [0, 1], Yule's K is typically tens to hundreds. Without a floor
#: the z-score explodes when the real chunks happen to be (nearly) identical.
DEFAULT_EPS: dict[str, float] = {"mattr": 0.01, "hdd": 0.01, "yule_k": 1.0}

_CORRECTNESS_SCORED = ("correct", "incorrect")
_CORRECTNESS_ALL = (*_CORRECTNESS_SCORED, "na")


# --------------------------------------------------------------------------------------------------
# Inputs from dialogues
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DialogueInputs:
    """The per-side inputs of the metrics, extracted once from a list of dialogues.

    ``texts``/``groups`` have one entry per student turn, in dialogue order (``groups`` holds the
    dialogue id, for grouped cross-validation); ``acts``/``correctness`` hold the labels of the
    student turns that carry one; ``per_dialogue`` holds each dialogue's student texts and
    ``turn_counts`` its number of student turns (dialogues without student turns included).
    """

    texts: list[str]
    groups: list[str]
    acts: list[str]
    correctness: list[str]
    per_dialogue: list[list[str]]
    turn_counts: list[int]
    dialogue_ids: list[str]


def dialogue_inputs(dialogues: Sequence[Dialogue]) -> DialogueInputs:
    """Extract the student-side inputs of all metrics from ``dialogues``.

    Every student turn of each dialogue is used. For rollouts that continue a real prefix, strip
    the prefix before calling this if only generated turns should count.
    """
    texts: list[str] = []
    groups: list[str] = []
    acts: list[str] = []
    correctness: list[str] = []
    per_dialogue: list[list[str]] = []
    for dialogue in dialogues:
        student = [t for t in dialogue.turns if t.role == "student"]
        contents = [t.content for t in student]
        texts.extend(contents)
        groups.extend([dialogue.id] * len(student))
        acts.extend(t.act for t in student if t.act is not None)
        correctness.extend(t.correctness for t in student if t.correctness is not None)
        per_dialogue.append(contents)
    return DialogueInputs(
        texts=texts,
        groups=groups,
        acts=acts,
        correctness=correctness,
        per_dialogue=per_dialogue,
        turn_counts=[len(d) for d in per_dialogue],
        dialogue_ids=[d.id for d in dialogues],
    )


def _question_key(text: str) -> str:
    # Whitespace differences (a trailing newline, a double space) are formatting, not a new question.
    return " ".join(text.split())


def check_same_questions(real: Sequence[Dialogue], sim: Sequence[Dialogue]) -> None:
    """Refuse to compare real and simulated dialogues that are not about the same questions.

    Dialogue-level statistics depend heavily on the question (a fraction question draws different
    answers than an angle question), so comparing rollouts on one set of questions with real
    dialogues on another measures the question mix, not the simulator. Each simulated dialogue's
    question text (whitespace-normalised) must occur among the real dialogues'; the first that does
    not raises :class:`DataError` naming its id.
    """
    if not real:
        raise DataError("no real dialogues to compare with", field="real")
    if not sim:
        raise DataError("no simulated dialogues to compare", field="sim")
    known = {_question_key(d.question.text) for d in real}
    for index, dialogue in enumerate(sim):
        if _question_key(dialogue.question.text) not in known:
            raise DataError(
                f"simulated dialogue {dialogue.id!r} is about a question that none of the {len(real)} real "
                "dialogues asks; dialogue-level metrics compare real and simulated dialogues on the same questions",
                field=f"sim[{index}].question.text",
            )


def prepare_inputs(
    real: Sequence[Dialogue], sim: Sequence[Dialogue], *, require_same_questions: bool = True
) -> tuple[DialogueInputs, DialogueInputs]:
    """``(real inputs, simulated inputs)``, after :func:`check_same_questions` unless told not to."""
    if require_same_questions:
        check_same_questions(real, sim)
    return dialogue_inputs(real), dialogue_inputs(sim)


# --------------------------------------------------------------------------------------------------
# Small shared helpers
# --------------------------------------------------------------------------------------------------


def _finite_array(values: Sequence[float] | np.ndarray, name: str) -> np.ndarray:
    array = np.asarray(values, dtype=float).ravel()
    if array.size == 0:
        raise DataError(f"{name}: no values", field=name)
    if not np.all(np.isfinite(array)):
        raise DataError(f"{name}: values must be finite numbers", field=name)
    return array


def _positive_int(value: int, name: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{name}: expected an integer >= {minimum}, got {value!r}", field=name)
    return value


# --------------------------------------------------------------------------------------------------
# Act mix and error rate
# --------------------------------------------------------------------------------------------------


def _act_distribution(labels: Sequence[str | None], acts: Sequence[str], side: str) -> np.ndarray:
    index = {act: i for i, act in enumerate(acts)}
    counts = np.zeros(len(acts), dtype=float)
    for label in labels:
        if label is None:
            continue
        if label not in index:
            raise DataError(f"{side}: unknown act {label!r}; known: {', '.join(acts)}", field=side)
        counts[index[label]] += 1
    if counts.sum() == 0:
        raise DataError(f"{side}: no labelled student turns", field=side)
    return counts / counts.sum()


def acts_jsd(
    real_acts: Sequence[str | None], sim_acts: Sequence[str | None], *, acts: Sequence[str] = ACTS
) -> float:
    """Jensen–Shannon *distance* (√JSD, base 2) between the act distributions of the two sides.

    The distributions are the shares of each of ``acts`` (default: the five student acts) among the
    labelled turns (``None`` skipped). Base 2 bounds the result to [0, 1]: 0 for identical mixes,
    1 for mixes with no act in common; the square root makes it a metric. An act outside ``acts``
    raises :class:`DataError`.
    """
    p = _act_distribution(real_acts, acts, "real_acts")
    q = _act_distribution(sim_acts, acts, "sim_acts")
    m = (p + q) / 2

    def kl(a: np.ndarray) -> float:
        nz = a > 0  # 0·log 0 = 0; where a > 0, m > 0 too
        return float(np.sum(a[nz] * np.log2(a[nz] / m[nz])))

    jsd = 0.5 * kl(p) + 0.5 * kl(q)
    return float(math.sqrt(min(max(jsd, 0.0), 1.0)))  # clamp rounding noise


def correct_share(labels: Sequence[str | None], *, side: str = "labels") -> float:
    """Share of ``correct`` among the turns labelled ``correct`` or ``incorrect``.

    ``na`` (no answer given) and ``None`` (unlabelled) are excluded: a turn that asks a question is
    neither right nor wrong. Raises :class:`DataError` when no turn is scored.
    """
    counts = Counter()
    for label in labels:
        if label is None:
            continue
        if label not in _CORRECTNESS_ALL:
            raise DataError(f"{side}: unknown correctness label {label!r}; known: "
                            f"{', '.join(_CORRECTNESS_ALL)}", field=side)
        counts[label] += 1
    scored = counts["correct"] + counts["incorrect"]
    if scored == 0:
        raise DataError(f"{side}: no student turn is labelled correct or incorrect", field=side)
    return counts["correct"] / scored


def correctness_rate_diff(real_labels: Sequence[str | None], sim_labels: Sequence[str | None]) -> float:
    """|real − simulated| share of correct answers (see :func:`correct_share`), in [0, 1]."""
    return abs(correct_share(real_labels, side="real_labels") - correct_share(sim_labels, side="sim_labels"))


# --------------------------------------------------------------------------------------------------
# Wasserstein distances of per-turn and per-dialogue quantities
# --------------------------------------------------------------------------------------------------


def wasserstein_1d(u: Sequence[float] | np.ndarray, v: Sequence[float] | np.ndarray) -> float:
    """Wasserstein-1 distance between two empirical 1-D distributions (equal weights).

    The area between the two empirical CDFs, the same quantity as
    ``scipy.stats.wasserstein_distance`` (computed here with numpy so the core needs no scipy).
    """
    u = np.sort(_finite_array(u, "u"))
    v = np.sort(_finite_array(v, "v"))
    grid = np.sort(np.concatenate([u, v]))
    widths = np.diff(grid)
    u_cdf = np.searchsorted(u, grid[:-1], side="right") / u.size
    v_cdf = np.searchsorted(v, grid[:-1], side="right") / v.size
    return float(np.sum(np.abs(u_cdf - v_cdf) * widths))


def range_normalised_w1(real: Sequence[float] | np.ndarray, sim: Sequence[float] | np.ndarray) -> float:
    """W1 between ``real`` and ``sim`` divided by the range (max − min) of the *real* values.

    Dividing by the real range makes the distance unit-free and comparable across quantities, while
    keeping the ruler fixed across simulators (a simulator with wild outliers cannot widen it). When
    every real value is the same the range is 0 and the raw, unnormalised W1 is returned: it is
    still 0 exactly when the simulated values all equal that value.
    """
    real_arr = _finite_array(real, "real")
    distance = wasserstein_1d(real_arr, sim)
    spread = float(real_arr.max() - real_arr.min())
    return distance / spread if spread > 0 else distance


def word_count(text: str) -> int:
    """Whitespace-separated words: what a reader counts, so ``3/8 = 0.375 ?`` is four words."""
    return len(text.split())


def length_w1(real_texts: Sequence[str], sim_texts: Sequence[str]) -> float:
    """Range-normalised W1 between log1p(words per student turn) of the two sides.

    The log keeps the few very long turns from dominating a distance that should describe the
    typical short answer.
    """
    if not real_texts:
        raise DataError("real_texts: no student turns", field="real_texts")
    if not sim_texts:
        raise DataError("sim_texts: no student turns", field="sim_texts")
    real = np.log1p([word_count(t) for t in real_texts])
    sim = np.log1p([word_count(t) for t in sim_texts])
    return range_normalised_w1(real, sim)


def question_shares(per_dialogue_texts: Sequence[Sequence[str]]) -> list[float]:
    """Per dialogue, the share of student turns that ask a question (contain ``?``).

    Dialogues without student turns have no share and are left out.
    """
    return [sum("?" in t for t in texts) / len(texts) for texts in per_dialogue_texts if len(texts) > 0]


def question_rate_w1(real_per_dialogue: Sequence[Sequence[str]], sim_per_dialogue: Sequence[Sequence[str]]) -> float:
    """Range-normalised W1 between the per-dialogue question shares (:func:`question_shares`).

    Per dialogue rather than per turn, so that a simulator that asks in every dialogue a little is
    told apart from one that asks all the time in a few.
    """
    real = question_shares(real_per_dialogue)
    sim = question_shares(sim_per_dialogue)
    if not real:
        raise DataError("real_per_dialogue: no dialogue has a student turn", field="real_per_dialogue")
    if not sim:
        raise DataError("sim_per_dialogue: no dialogue has a student turn", field="sim_per_dialogue")
    return range_normalised_w1(real, sim)


def turns_w1(real_counts: Sequence[int], sim_counts: Sequence[int]) -> float:
    """Range-normalised W1 between the numbers of student turns per dialogue."""
    for name, counts in (("real_counts", real_counts), ("sim_counts", sim_counts)):
        if any(isinstance(c, bool) or int(c) != c or c < 0 for c in counts):
            raise DataError(f"{name}: turn counts must be non-negative integers", field=name)
    return range_normalised_w1(real_counts, sim_counts)


# --------------------------------------------------------------------------------------------------
# Lexical diversity on pooled, length-matched chunks
# --------------------------------------------------------------------------------------------------

# Runs of letters or digits, lower-cased; an apostrophe, period, comma or slash *between* two such
# runs stays inside the token, so "don't", "0.375", "1,000" and "3/8" are one token each, while
# sentence punctuation is dropped.
_TOKEN = re.compile(r"[^\W_]+(?:['’.,/][^\W_]+)*")


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens of ``text`` (see ``_TOKEN``): numbers and contractions stay whole."""
    return _TOKEN.findall(text.lower())


def mattr(tokens: Sequence[str], window: int = MATTR_WINDOW) -> float:
    """Moving-average type–token ratio: the mean over all windows of ``window`` consecutive tokens
    of (distinct types in the window) / ``window``.

    Unlike the plain type–token ratio it does not fall as the text grows. Needs at least ``window``
    tokens.
    """
    window = _positive_int(window, "window")
    n = len(tokens)
    if n < window:
        raise DataError(f"MATTR needs at least {window} tokens, got {n}", field="tokens")
    counts = Counter(tokens[:window])
    total = len(counts)
    for i in range(window, n):  # slide one token at a time, keeping the window's type count
        incoming, outgoing = tokens[i], tokens[i - window]
        if incoming != outgoing:
            counts[outgoing] -= 1
            if counts[outgoing] == 0:
                del counts[outgoing]
            counts[incoming] += 1
        total += len(counts)
    return total / ((n - window + 1) * window)


def hdd(tokens: Sequence[str], sample_size: int = HDD_SAMPLE_SIZE) -> float:
    """HD-D: the expected type–token ratio of a random sample of ``sample_size`` tokens.

    For each type with frequency f among N tokens, the probability that it appears in a sample of
    ``sample_size`` tokens drawn without replacement is 1 − P(absent), with the hypergeometric
    P(absent) = C(N − f, n) / C(N, n); HD-D is the sum of these probabilities over the types,
    divided by ``sample_size``. Computed with exact integer binomials. Needs at least
    ``sample_size`` tokens.
    """
    n = _positive_int(sample_size, "sample_size")
    total = len(tokens)
    if total < n:
        raise DataError(f"HD-D needs at least {n} tokens, got {total}", field="tokens")
    denominator = math.comb(total, n)
    present = sum(1.0 - math.comb(total - f, n) / denominator for f in Counter(tokens).values())
    return present / n


def yule_k(tokens: Sequence[str]) -> float:
    """Yule's K = 10⁴·(Σ f² − N)/N² over the type frequencies f of N tokens.

    A measure of repetitiveness: 0 when no type repeats, larger for more repetitive text (so,
    unlike MATTR and HD-D, *lower* means more diverse). Nearly independent of text length.
    """
    total = len(tokens)
    if total == 0:
        raise DataError("Yule's K needs at least one token", field="tokens")
    squares = sum(f * f for f in Counter(tokens).values())
    return 1e4 * (squares - total) / (total * total)


def pooled_chunks(texts: Sequence[str], chunk_tokens: int = DEFAULT_CHUNK_TOKENS) -> list[list[str]]:
    """Tokenize ``texts`` in order, pool the tokens and cut them into consecutive chunks of
    ``chunk_tokens``; the incomplete last chunk is dropped so every chunk has the same length
    (lexical-diversity measures depend on length, so only equal lengths compare)."""
    chunk_tokens = _positive_int(chunk_tokens, "chunk_tokens")
    pooled = [token for text in texts for token in tokenize(text)]
    return [pooled[i:i + chunk_tokens] for i in range(0, len(pooled) - chunk_tokens + 1, chunk_tokens)]


@dataclass(frozen=True, slots=True)
class LexicalZ:
    """A lexical-diversity comparison of simulated with real student text.

    ``z`` = (``sim_mean`` − ``real_mean``) / max(``real_sd``, ``eps``): how many real-chunk standard
    deviations the simulated mean lies from the real mean (0 = as diverse as real students; its sign
    says which side is more diverse, reversed for Yule's K). ``real_sd`` is the sample SD over the
    real chunks (0 when there is only one); ``sd_floored`` says that ``eps`` replaced it.
    """

    metric: str
    z: float
    sim_mean: float
    real_mean: float
    real_sd: float
    eps: float
    sd_floored: bool
    n_real_chunks: int
    n_sim_chunks: int
    chunk_tokens: int

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def _chunk_values(chunks: list[list[str]], measure: Callable[[list[str]], float]) -> np.ndarray:
    return np.array([measure(chunk) for chunk in chunks], dtype=float)


def _z(metric: str, real: np.ndarray, sim: np.ndarray, eps: float, chunk_tokens: int) -> LexicalZ:
    real_mean = float(real.mean())
    real_sd = float(real.std(ddof=1)) if real.size > 1 else 0.0
    scale = max(real_sd, eps)
    sim_mean = float(sim.mean())
    return LexicalZ(
        metric=metric,
        z=(sim_mean - real_mean) / scale,
        sim_mean=sim_mean,
        real_mean=real_mean,
        real_sd=real_sd,
        eps=eps,
        sd_floored=real_sd < eps,
        n_real_chunks=int(real.size),
        n_sim_chunks=int(sim.size),
        chunk_tokens=chunk_tokens,
    )


def _check_eps(eps: float, name: str = "eps") -> float:
    if not isinstance(eps, int | float) or isinstance(eps, bool) or not math.isfinite(eps) or eps <= 0:
        raise ConfigError(f"{name}: expected a positive number, got {eps!r}", field=name)
    return float(eps)


def _side_chunks(real_texts: Sequence[str], sim_texts: Sequence[str], chunk_tokens: int
                 ) -> tuple[list[list[str]], list[list[str]]]:
    real = pooled_chunks(real_texts, chunk_tokens)
    sim = pooled_chunks(sim_texts, chunk_tokens)
    for side, chunks in (("real_texts", real), ("sim_texts", sim)):
        if not chunks:
            raise DataError(f"{side}: fewer than {chunk_tokens} word tokens in all, not one chunk", field=side)
    return real, sim


def lexical_diversity_z(
    real_texts: Sequence[str],
    sim_texts: Sequence[str],
    *,
    chunk_tokens: int = DEFAULT_CHUNK_TOKENS,
    window: int = MATTR_WINDOW,
    sample_size: int = HDD_SAMPLE_SIZE,
    eps: dict[str, float] | None = None,
) -> dict[str, LexicalZ]:
    """MATTR, HD-D and Yule's K of simulated vs real student text, as z-scores over real chunks.

    Each side's student turns (in dialogue order) are tokenized, pooled and cut into chunks of
    ``chunk_tokens`` (:func:`pooled_chunks`); the measure is computed per chunk; then
    z = (mean over simulated chunks − μ_real) / max(σ_real, ε) with μ, σ over the real chunks and ε
    from ``eps`` (defaults :data:`DEFAULT_EPS`). The ε floor keeps z finite and interpretable when
    the real chunks barely vary. Keys: ``mattr``, ``hdd``, ``yule_k``.
    """
    chunk_tokens = _positive_int(chunk_tokens, "chunk_tokens")
    window = _positive_int(window, "window")
    sample_size = _positive_int(sample_size, "sample_size")
    if chunk_tokens < window:
        raise ConfigError(f"chunk_tokens: {chunk_tokens} is shorter than the MATTR window {window}",
                          field="chunk_tokens")
    if chunk_tokens < sample_size:
        raise ConfigError(f"chunk_tokens: {chunk_tokens} is shorter than the HD-D sample size {sample_size}",
                          field="chunk_tokens")
    floors = {**DEFAULT_EPS, **(eps or {})}
    unknown = set(floors) - set(DEFAULT_EPS)
    if unknown:
        raise ConfigError(f"eps: unknown metric {sorted(unknown)[0]!r}; known: {', '.join(DEFAULT_EPS)}", field="eps")
    for key, value in floors.items():
        _check_eps(value, f"eps.{key}")
    real, sim = _side_chunks(real_texts, sim_texts, chunk_tokens)
    measures: dict[str, Callable[[list[str]], float]] = {
        "mattr": lambda c: mattr(c, window),
        "hdd": lambda c: hdd(c, sample_size),
        "yule_k": yule_k,
    }
    return {
        name: _z(name, _chunk_values(real, fn), _chunk_values(sim, fn), floors[name], chunk_tokens)
        for name, fn in measures.items()
    }


def mattr_z(real_texts: Sequence[str], sim_texts: Sequence[str], *, chunk_tokens: int = DEFAULT_CHUNK_TOKENS,
            window: int = MATTR_WINDOW, eps: float = DEFAULT_EPS["mattr"]) -> LexicalZ:
    """MATTR (window ``window``) z-score of simulated vs real chunks; see :func:`lexical_diversity_z`."""
    chunk_tokens, window = _positive_int(chunk_tokens, "chunk_tokens"), _positive_int(window, "window")
    if chunk_tokens < window:
        raise ConfigError(f"chunk_tokens: {chunk_tokens} is shorter than the MATTR window {window}",
                          field="chunk_tokens")
    eps = _check_eps(eps)
    real, sim = _side_chunks(real_texts, sim_texts, chunk_tokens)
    return _z("mattr", _chunk_values(real, lambda c: mattr(c, window)),
              _chunk_values(sim, lambda c: mattr(c, window)), eps, chunk_tokens)


def hdd_z(real_texts: Sequence[str], sim_texts: Sequence[str], *, chunk_tokens: int = DEFAULT_CHUNK_TOKENS,
          sample_size: int = HDD_SAMPLE_SIZE, eps: float = DEFAULT_EPS["hdd"]) -> LexicalZ:
    """HD-D (sample size ``sample_size``) z-score of simulated vs real chunks; see :func:`lexical_diversity_z`."""
    chunk_tokens, n = _positive_int(chunk_tokens, "chunk_tokens"), _positive_int(sample_size, "sample_size")
    if chunk_tokens < n:
        raise ConfigError(f"chunk_tokens: {chunk_tokens} is shorter than the HD-D sample size {n}",
                          field="chunk_tokens")
    eps = _check_eps(eps)
    real, sim = _side_chunks(real_texts, sim_texts, chunk_tokens)
    return _z("hdd", _chunk_values(real, lambda c: hdd(c, n)), _chunk_values(sim, lambda c: hdd(c, n)),
              eps, chunk_tokens)


def yule_z(real_texts: Sequence[str], sim_texts: Sequence[str], *, chunk_tokens: int = DEFAULT_CHUNK_TOKENS,
           eps: float = DEFAULT_EPS["yule_k"]) -> LexicalZ:
    """Yule's K z-score of simulated vs real chunks (positive = more repetitive than real students)."""
    chunk_tokens = _positive_int(chunk_tokens, "chunk_tokens")
    eps = _check_eps(eps)
    real, sim = _side_chunks(real_texts, sim_texts, chunk_tokens)
    return _z("yule_k", _chunk_values(real, yule_k), _chunk_values(sim, yule_k), eps, chunk_tokens)


# --------------------------------------------------------------------------------------------------
# Detectability: can a classifier tell simulated turns from real ones?
# --------------------------------------------------------------------------------------------------

_PUNCTUATION = re.compile(r"[^\w\s]")

SURFACE_FEATURES: tuple[str, ...] = (
    "log1p_words", "log1p_chars", "has_question_mark", "has_digit", "punctuation_share", "uppercase_share",
    "is_empty",
)


def surface_features(texts: Sequence[str]) -> np.ndarray:
    """Cheap style features per text, columns :data:`SURFACE_FEATURES`.

    Sentence embeddings are largely blind to length, casing and punctuation, which are exactly where
    language-model students tend to differ from children typing in a chat, so these are added.
    """
    rows = []
    for text in texts:
        chars = len(text)
        letters = sum(c.isalpha() for c in text)
        rows.append([
            math.log1p(word_count(text)),
            math.log1p(chars),
            float("?" in text),
            float(any(c.isdigit() for c in text)),
            len(_PUNCTUATION.findall(text)) / chars if chars else 0.0,
            sum(c.isupper() for c in text) / letters if letters else 0.0,
            float(not text.strip()),
        ])
    return np.asarray(rows, dtype=float).reshape(len(rows), len(SURFACE_FEATURES))


@dataclass(frozen=True, slots=True)
class DetectResult:
    """Out-of-fold ROC AUC of a real-vs-simulated classifier: 0.5 = indistinguishable, 1 = always
    told apart (below 0.5 is chance variation, not "more real than real")."""

    auroc: float
    n_real: int
    n_sim: int
    n_groups: int
    n_splits: int
    seed: int
    #: Out-of-fold P(simulated) of every turn, real turns first (for a bootstrap over dialogues).
    scores: tuple[float, ...] = ()

    def as_dict(self) -> dict[str, object]:
        return {k: v for k, v in asdict(self).items() if k != "scores"}


def detect_auroc(
    real_texts: Sequence[str],
    real_groups: Sequence[Hashable],
    sim_texts: Sequence[str],
    sim_groups: Sequence[Hashable],
    *,
    embed: Callable[[Sequence[str]], np.ndarray],
    n_splits: int = 5,
    seed: int = 0,
    C: float = 1.0,
) -> DetectResult:
    """How well a logistic regression tells simulated student turns from real ones (ROC AUC).

    Features: ``embed(texts)`` (normalised sentence embeddings; ``simhub eval-dialogues`` passes the
    cosine metric's embedder; each distinct text is embedded once) plus :func:`surface_features`,
    standardised inside each fold. Folds are grouped by dialogue (``*_groups``, e.g. dialogue ids)
    with ``StratifiedGroupKFold``, so turns of one dialogue are never both trained and tested on;
    otherwise the classifier could recognise a
    dialogue's topic or a student's quirks rather than simulation. Pass the same group key for a
    real dialogue and its rollouts to keep them in one fold. Groups are otherwise shared between the
    sides as given. ``n_splits`` is lowered to the number of groups of the smaller side when needed
    (at least 2). Out-of-fold probabilities from all folds are pooled into one AUC. Deterministic
    for a given ``seed``.
    """
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score
    from sklearn.model_selection import StratifiedGroupKFold
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    for side, texts, groups in (("real", real_texts, real_groups), ("sim", sim_texts, sim_groups)):
        if len(texts) != len(groups):
            raise DataError(f"{side}_groups: {len(groups)} groups for {len(texts)} texts", field=f"{side}_groups")
        if not texts:
            raise DataError(f"{side}_texts: no student turns", field=f"{side}_texts")
    n_splits = _positive_int(n_splits, "n_splits", minimum=2)
    if not (isinstance(C, int | float) and math.isfinite(C) and C > 0):
        raise ConfigError(f"C: expected a positive number, got {C!r}", field="C")

    texts = [*real_texts, *sim_texts]
    y = np.array([0] * len(real_texts) + [1] * len(sim_texts))
    group_ids = {g: i for i, g in enumerate(dict.fromkeys([*real_groups, *sim_groups]))}
    groups = np.array([group_ids[g] for g in (*real_groups, *sim_groups)])
    smaller = min(len(set(real_groups)), len(set(sim_groups)))
    splits = min(n_splits, smaller)
    if splits < 2:
        raise DataError(f"grouped cross-validation needs at least 2 dialogues on each side, got {smaller}",
                        field="real_groups" if len(set(real_groups)) < 2 else "sim_groups")

    unique = list(dict.fromkeys(texts))
    vectors = np.asarray(embed(unique), dtype=float)
    if vectors.ndim != 2 or vectors.shape[0] != len(unique):
        raise DataError(f"embed: expected an array of shape ({len(unique)}, d), got {vectors.shape}", field="embed")
    row = {t: i for i, t in enumerate(unique)}
    features = np.hstack([vectors[[row[t] for t in texts]], surface_features(texts)])

    scores = np.zeros(len(texts), dtype=float)
    folds = StratifiedGroupKFold(n_splits=splits, shuffle=True, random_state=seed)
    for train, test in folds.split(features, y, groups):
        if np.unique(y[train]).size < 2:  # a degenerate fold: predict the training prior
            scores[test] = float(y[train].mean())
            continue
        model = make_pipeline(StandardScaler(), LogisticRegression(C=C, max_iter=2000, random_state=seed))
        model.fit(features[train], y[train])
        scores[test] = model.predict_proba(features[test])[:, 1]
    return DetectResult(
        auroc=float(roc_auc_score(y, scores)),
        n_real=len(real_texts),
        n_sim=len(sim_texts),
        n_groups=len(group_ids),
        n_splits=splits,
        seed=seed,
        scores=tuple(float(x) for x in scores),
    )


# --------------------------------------------------------------------------------------------------
# Pairwise indistinguishability from judge verdicts
# --------------------------------------------------------------------------------------------------

#: A judge's verdict from the point of view of the side under test: ``win`` = the judge took it for
#: the real one, ``loss`` = it took the other side for real, ``tie`` = it could not decide.
Verdict = Literal["win", "loss", "tie"]
_VERDICT_SCORE: dict[str, float] = {"win": 1.0, "tie": 0.5, "loss": 0.0}


def under_test_first(seed: int, dialogue_id: str, sample_index: int) -> bool:
    """Whether the side under test is shown to the judge first, for this (seed, dialogue, sample).

    Judges prefer one position, so the order is randomised; it must also be reproducible, across
    processes and machines, to rerun or audit a judgement. Python's ``hash`` of a string is salted
    per process, so the coin is the lowest bit of the SHA-256 of ``"seed|dialogue_id|sample_index"``.
    """
    digest = hashlib.sha256(f"{int(seed)}|{dialogue_id}|{int(sample_index)}".encode()).digest()
    return bool(digest[-1] & 1)



def verdict_from_choice(choice: str, test_first: bool) -> Verdict:
    """Turn the judge's positional answer (``A``/``first``, ``B``/``second``, ``tie``; any case) into a
    :data:`Verdict` for the side under test, given where it was shown (:func:`under_test_first`)."""
    key = choice.strip().lower()
    if key in ("a", "first", "1"):
        return "win" if test_first else "loss"
    if key in ("b", "second", "2"):
        return "loss" if test_first else "win"
    if key == "tie":
        return "tie"
    raise DataError(f"judge choice {choice!r} is none of A, B, tie", field="choice")


@dataclass(frozen=True, slots=True)
class PIResult:
    """Pairwise indistinguishability.

    ``pi``: mean score of the simulated side over real-vs-simulated (PS) pairs (win 1, tie 0.5,
    loss 0); 0.5 = the judge cannot tell. ``hh``/``pp``: the same score of the side under test in
    the real-vs-real and simulated-vs-simulated control pairs (``None`` when not given).
    ``calibrated`` = clip((pi − pp)/(hh − pp), 0, 1), or ``None`` when a control is missing or
    |hh − pp| ≤ ``min_gap`` (the anchors do not separate, so the ratio would only amplify noise).
    Tie rates are the shares of ``tie`` verdicts per kind of pair.
    """

    pi: float
    hh: float | None
    pp: float | None
    calibrated: float | None
    tie_rate: float
    hh_tie_rate: float | None
    pp_tie_rate: float | None
    n_ps: int
    n_hh: int
    n_pp: int

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def _verdict_mean(verdicts: Sequence[str], name: str) -> tuple[float, float]:
    if not verdicts:
        raise DataError(f"{name}: no verdicts", field=name)
    scores = []
    for i, verdict in enumerate(verdicts):
        if verdict not in _VERDICT_SCORE:
            raise DataError(f"{name}[{i}]: verdict {verdict!r} is none of win, loss, tie", field=f"{name}[{i}]")
        scores.append(_VERDICT_SCORE[verdict])
    return float(np.mean(scores)), sum(v == "tie" for v in verdicts) / len(verdicts)


def pi_calibrated(
    ps: Sequence[Verdict],
    hh: Sequence[Verdict] | None = None,
    pp: Sequence[Verdict] | None = None,
    *,
    min_gap: float = 1e-9,
) -> PIResult:
    """Pairwise indistinguishability of simulated dialogues, calibrated by control pairs.

    ``ps``: verdicts on (real, simulated) pairs of the same question, the simulated side under test.
    ``hh``: verdicts on (real, another real of the same question) pairs, the second under test:
    what a perfectly realistic simulator would score with this judge. ``pp``: verdicts on
    (simulated, simulated) pairs: what the judge does when both sides are simulated. The raw PI is
    compared against these two anchors, cancelling the judge's own biases (ties, position, taste):
    calibrated = clip((PI − PP)/(HH − PP), 0, 1).

    Caveat: with positions balanced (:func:`under_test_first`) and a judge that treats both sides
    alike, HH and PP both tend to 0.5; the calibration is informative only when the anchors are
    clearly apart, hence the ``min_gap`` guard (raise it to demand more separation).
    """
    if not isinstance(min_gap, int | float) or not math.isfinite(min_gap) or min_gap < 0:
        raise ConfigError(f"min_gap: expected a non-negative number, got {min_gap!r}", field="min_gap")
    pi, tie_rate = _verdict_mean(ps, "ps")
    hh_mean, hh_ties = _verdict_mean(hh, "hh") if hh is not None else (None, None)
    pp_mean, pp_ties = _verdict_mean(pp, "pp") if pp is not None else (None, None)
    calibrated = None
    if hh_mean is not None and pp_mean is not None and abs(hh_mean - pp_mean) > min_gap:
        calibrated = float(np.clip((pi - pp_mean) / (hh_mean - pp_mean), 0.0, 1.0))
    return PIResult(
        pi=pi, hh=hh_mean, pp=pp_mean, calibrated=calibrated, tie_rate=tie_rate, hh_tie_rate=hh_ties,
        pp_tie_rate=pp_ties, n_ps=len(ps), n_hh=len(hh or ()), n_pp=len(pp or ()),
    )


# --------------------------------------------------------------------------------------------------
# Learning and responsiveness
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class KTGainDiff:
    """|``real_mean`` − ``sim_mean``| of the mean per-dialogue mastery gain (``diff``), with the
    numbers of dialogues that had a trajectory."""

    diff: float
    real_mean: float
    sim_mean: float
    n_real: int
    n_sim: int

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def _gains(trajectories: Sequence[Sequence[float] | Sequence[Sequence[float]] | np.ndarray], side: str
           ) -> list[float]:
    gains = []
    for i, trajectory in enumerate(trajectories):
        try:
            steps = np.asarray(trajectory, dtype=float)
        except (TypeError, ValueError):  # ragged vectors or non-numbers
            raise DataError(f"{side}[{i}]: expected per-turn numbers or equal-length vectors of numbers",
                            field=f"{side}[{i}]") from None
        if steps.size == 0:
            continue  # a dialogue without student turns has no trajectory
        if steps.ndim == 1:
            steps = steps[:, None]  # scalars: one KC
        if steps.ndim != 2:
            raise DataError(f"{side}[{i}]: expected per-turn scalars or equal-length vectors, got shape "
                            f"{steps.shape}", field=f"{side}[{i}]")
        if not np.all(np.isfinite(steps)):
            raise DataError(f"{side}[{i}]: mastery values must be finite", field=f"{side}[{i}]")
        gains.append(float(np.mean(steps[-1] - steps[0])))
    if not gains:
        raise DataError(f"{side}: no dialogue has a mastery trajectory", field=side)
    return gains


def kt_gain_diff(real_trajectories: Sequence, sim_trajectories: Sequence) -> KTGainDiff:
    """Does the simulated student learn as much per dialogue as real students?

    Each trajectory is one dialogue's mastery after each student turn, as scalars or as vectors
    over knowledge components (from a knowledge-tracing model run over the dialogue). A dialogue's
    gain is mastery after its last student turn minus after its first (averaged over components for
    vectors; 0 with a single student turn); ``diff`` compares the two sides' mean gains. Empty
    trajectories are skipped.
    """
    real = _gains(real_trajectories, "real_trajectories")
    sim = _gains(sim_trajectories, "sim_trajectories")
    real_mean, sim_mean = float(np.mean(real)), float(np.mean(sim))
    return KTGainDiff(diff=abs(real_mean - sim_mean), real_mean=real_mean, sim_mean=sim_mean,
                      n_real=len(real), n_sim=len(sim))


@dataclass(frozen=True, slots=True)
class TutorSensitivity:
    """Δ = P(correct | helpful) − P(correct | unhelpful) for each side, and ``diff`` = ``sim_delta`` −
    ``real_delta`` (signed: negative = the simulator responds less to tutoring than real students)."""

    real_delta: float
    sim_delta: float
    diff: float
    real_p_helpful: float
    real_p_unhelpful: float
    sim_p_helpful: float
    sim_p_unhelpful: float

    @property
    def abs_diff(self) -> float:
        return abs(self.diff)

    def as_dict(self) -> dict[str, object]:
        return {**asdict(self), "abs_diff": self.abs_diff}


def _share_true(outcomes: Sequence[bool | None], name: str) -> float:
    known = [o for o in outcomes if o is not None]
    if any(not isinstance(o, bool | np.bool_) for o in known):
        raise DataError(f"{name}: outcomes must be True, False or None", field=name)
    if not known:
        raise DataError(f"{name}: no prefix with a known outcome", field=name)
    return sum(bool(o) for o in known) / len(known)


def tutor_sensitivity(
    real_helpful: Sequence[bool | None],
    real_unhelpful: Sequence[bool | None],
    sim_helpful: Sequence[bool | None],
    sim_unhelpful: Sequence[bool | None],
) -> TutorSensitivity:
    """Do simulated students respond to good and bad tutoring the way real ones do?

    Each list holds, per dialogue prefix, whether the student answered correctly within two student
    turns after a helpful (resp. unhelpful) tutor turn; ``None`` = unknown (e.g. the dialogue ended)
    and is skipped. For real dialogues the outcomes come from the tutor turns that happened, for
    simulated ones from rollouts after injected turns; the lists need not align.
    """
    real_h = _share_true(real_helpful, "real_helpful")
    real_u = _share_true(real_unhelpful, "real_unhelpful")
    sim_h = _share_true(sim_helpful, "sim_helpful")
    sim_u = _share_true(sim_unhelpful, "sim_unhelpful")
    real_delta, sim_delta = real_h - real_u, sim_h - sim_u
    return TutorSensitivity(real_delta=real_delta, sim_delta=sim_delta, diff=sim_delta - real_delta,
                            real_p_helpful=real_h, real_p_unhelpful=real_u, sim_p_helpful=sim_h,
                            sim_p_unhelpful=sim_u)


# --------------------------------------------------------------------------------------------------
# Stability across rollout samples
# --------------------------------------------------------------------------------------------------


def stability_sd(values: Sequence[float]) -> float:
    """Between-sample standard deviation (ddof = 1) of a metric computed on each of K rollout samples.

    A realism number is only worth reporting if resampling the rollouts would not change it much;
    this is that spread. Needs K ≥ 2.
    """
    array = _finite_array(values, "values")
    if array.size < 2:
        raise DataError(f"values: a between-sample SD needs at least 2 samples, got {array.size}", field="values")
    return float(array.std(ddof=1))
