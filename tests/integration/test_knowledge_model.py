"""The knowledge metric: binning and scoring pinned to docs/protocol.md §3, packed LLMKT equal to unpacked."""

from __future__ import annotations

import numpy as np
import pytest

from simhub.metrics.knowledge import (
    FIRST_TURN_REASON,
    KnowledgeDeltas,
    KnowledgeTracer,
    NoDelta,
    knowledge_deltas,
    knowledge_scores,
    paper_cutoffs,
)
from simhub.prompts import kt_context, kt_question
from simhub.schema import Dialogue, Persona, Question, Turn

torch = pytest.importorskip("torch")

SPEC_CUTOFFS = [-0.0234, 0.0000, 0.0156, 0.0430]
SPEC_REAL = [0.0117, 0.0117, -0.0156, 0.0039, 0.0078, -0.0078]
SPEC_SIM = [0.0391, 0.0352, 0.0391, 0.0352, 0.0156, 0.0352]


# ---------------------------------------------------------------------------------- pure functions


def _dialogue(kcs: list[str], persona: bool = True, student_first: bool = False) -> Dialogue:
    turns = [
        Turn(role="tutor", content="What is 1/2 + 1/4?"),
        Turn(role="student", content="It is 2/6."),
        Turn(role="tutor", content="Check the denominators. What is 1/2 in quarters?"),
        Turn(role="student", content="2/4, so the answer is 3/4."),
        Turn(role="tutor", content="Great! Which fraction is larger, 1/2 or 1/3?"),
        Turn(role="student", content="1/3 because 3 is bigger."),
    ]
    if student_first:
        turns = [Turn(role="student", content="Hi, I need help."), *turns]
    return Dialogue(
        id="d1" if not student_first else "d2",
        question=Question(
            text="What is 1/2 + 1/4?\nA: 3/4\nB: 2/6", correct_option="A", solution="1/2 = 2/4."
        ),
        kcs=kcs,
        persona=Persona(
            openness="high",
            conscientiousness="low",
            extraversion="neutral",
            agreeableness="high",
            neuroticism="low",
        )
        if persona
        else None,
        turns=turns,
    )


KCS3 = ["Add fractions", "Equivalent fractions", "Compare fractions"]


@pytest.fixture(scope="session")
def tracer(tmp_path_factory) -> KnowledgeTracer:
    from simhub.config import ModelRef
    from simhub.demo.tiny import build_causal_lm, build_tokenizer
    from simhub.models import LoadOptions, load_lm

    d = _dialogue(KCS3)
    texts = [kt_context(d, d.turns)] + [f"{kt_question(kc)} True" for kc in d.all_kcs] * 10
    texts += [f"{kt_question(kc)} False" for kc in d.all_kcs] * 10
    folder = tmp_path_factory.mktemp("llmkt") / "llama"
    build_causal_lm(folder, build_tokenizer(texts, vocab_size=400))
    return KnowledgeTracer(load_lm(ModelRef(model=str(folder)), LoadOptions(device="cpu", batch_size=4)), persona="ocean")


def _separate(tracer: KnowledgeTracer, dialogue: Dialogue, history: list[Turn], kcs: list[str]) -> np.ndarray:
    """Each KC as its own unpacked sequence ``context + question`` with the model's default causal mask."""
    tok = tracer.lm.tokenizer
    context = [tok.bos_token_id, *tok.encode(kt_context(dialogue, history, persona="ocean"), add_special_tokens=False)]
    out = []
    for kc in kcs:
        ids = torch.tensor([context + tok.encode(kt_question(kc), add_special_tokens=False)])
        with torch.inference_mode(), tracer.lm.active() as model:
            logits = model(input_ids=ids).logits[0, -1, [tracer.true_id, tracer.false_id]]
        out.append(torch.softmax(logits.double(), dim=-1)[0].item())
    return np.array(out)


def test_packed_equals_separate(tracer):
    d = _dialogue(KCS3)
    kcs = d.all_kcs
    assert len(kcs) == 4  # three level-3 KCs plus Default
    packed = tracer.mastery(d, d.turns[:4], kcs)
    assert packed.shape == (4,)
    assert np.all((packed > 0) & (packed < 1))
    np.testing.assert_allclose(packed, _separate(tracer, d, d.turns[:4], kcs), atol=1e-5, rtol=0)


def test_batch_with_padding_equals_separate(tracer):
    long, short = _dialogue(KCS3), _dialogue(["Add fractions"], persona=False)
    requests = [(short, short.turns[:2], short.all_kcs), (long, long.turns, long.all_kcs)]
    prompts = [tracer.prompt(*r) for r in requests]
    assert len(prompts[0].input_ids) < len(prompts[1].input_ids)  # the short one is right-padded
    batched = tracer.mastery_batch(requests)
    for (dialogue, history, kcs), got in zip(requests, batched, strict=True):
        assert not np.isnan(got).any()
        np.testing.assert_allclose(got, _separate(tracer, dialogue, history, kcs), atol=1e-5, rtol=0)


def _count_runs(tracer, monkeypatch) -> list[int]:
    counts: list[int] = []
    run = tracer._run

    def counting(prompts):
        counts.append(len(prompts))
        return run(prompts)

    monkeypatch.setattr(tracer, "_run", counting)
    return counts


def test_knowledge_deltas(tracer, monkeypatch):
    d = _dialogue(KCS3)
    counts = _count_runs(tracer, monkeypatch)
    results = knowledge_deltas(tracer, [(d, 1, "3/4"), (d, 3, d.turns[3].content), (d, 5, "1/2 is larger.")])
    # One forward pass: z_prev(5) is z(3), and candidate == real text makes ẑ(3) == z(3).
    assert counts == [4]
    first, same, other = results
    assert isinstance(first, NoDelta) and first.reason == FIRST_TURN_REASON
    assert isinstance(same, KnowledgeDeltas) and isinstance(other, KnowledgeDeltas)
    assert same.kcs == d.all_kcs
    np.testing.assert_array_equal(same.real, same.sim)
    np.testing.assert_array_equal(other.z_prev, same.z_real)
    np.testing.assert_allclose(other.z_real, tracer.mastery(d, d.turns[:6], d.all_kcs), atol=1e-6, rtol=0)
    changed = [*d.turns[:5], Turn(role="student", content="1/2 is larger.")]
    np.testing.assert_allclose(other.z_sim, tracer.mastery(d, changed, d.all_kcs), atol=1e-6, rtol=0)
    np.testing.assert_allclose(same.z_prev, tracer.mastery(d, d.turns[:2], d.all_kcs), atol=1e-6, rtol=0)

    cutoffs = paper_cutoffs(results)
    per_item, summary = knowledge_scores(results, cutoffs)
    assert per_item[0]["score"] is None
    assert per_item[1]["score"] == 1.0
    assert 0.0 <= per_item[2]["score"] <= 1.0
    assert summary["n_scored"] == 2


def test_default_only_and_student_first(tracer):
    plain = _dialogue([], persona=False)
    assert plain.all_kcs == ["Default"]
    (res,) = knowledge_deltas(tracer, [(plain, 3, "I don't know.")])
    assert isinstance(res, KnowledgeDeltas) and res.real.shape == (1,) and res.sim.shape == (1,)
    first = _dialogue(KCS3, student_first=True)
    out = knowledge_deltas(tracer, [(first, 0, "hello"), (first, 2, "2/6")])
    assert isinstance(out[0], NoDelta) and isinstance(out[1], KnowledgeDeltas)
    assert knowledge_deltas(tracer, []) == []


def test_round_to_bfloat16_is_torchs_rounding():
    from simhub.metrics.knowledge import round_to_bfloat16

    values = np.concatenate([np.random.default_rng(3).random(5000), [0.0, 1.0, 0.5, 0.501953125, 0.50390625]])
    expected = torch.tensor(values, dtype=torch.float32).to(torch.bfloat16).double().numpy()
    np.testing.assert_array_equal(round_to_bfloat16(values), expected)


def test_bf16_masteries_sit_on_the_references_grid(tiny_profile, sample_corpus):
    """FIDELITY.md (bf16 masteries): with ``kt_dtype: bfloat16`` the KT model runs in bf16 and each
    mastery is the two-way softmax in bf16, as the reference's: a bf16 number, so masteries of 0.5 or
    more are multiples of 1/256; float32, the default, keeps values off that grid."""
    import msgspec

    from simhub.metrics import MetricContext
    from simhub.metrics.knowledge import Knowledge
    from simhub.models import LoadOptions

    base = tiny_profile.scoring.metrics.knowledge
    assert base.kt_dtype == "float32"
    context = MetricContext(load=LoadOptions(device="cpu", batch_size=8))
    requests = [(d, d.turns[: i + 1], d.all_kcs) for d in sample_corpus["val"][:3] for i in d.student_turn_indices()]

    bf16 = Knowledge(msgspec.structs.replace(base, kt_dtype="bfloat16"), context).load()
    assert bf16.lm.model.dtype == torch.bfloat16
    values = np.concatenate(bf16.mastery_batch(requests))
    assert values.size > 20
    as_bf16 = torch.tensor(values).to(torch.bfloat16).double().numpy()
    np.testing.assert_array_equal(values, as_bf16)
    high = values[values >= 0.5]
    assert high.size and np.all(high * 256 == np.round(high * 256))

    # The reference's computation on one prompt: the bf16 model's two logits, softmax in bf16.
    dialogue, history, kcs = requests[1]
    prompt = bf16.prompt(dialogue, list(history), list(kcs))
    start, end = prompt.segments[0]
    ids = torch.tensor([prompt.input_ids[: prompt.context_len] + prompt.input_ids[start:end]])
    with torch.inference_mode(), bf16.lm.active() as model:
        logits = model(input_ids=ids).logits[0, -1, [bf16.true_id, bf16.false_id]]
    assert logits.dtype == torch.bfloat16
    reference = torch.softmax(logits, dim=-1)[0].item()
    assert abs(bf16.mastery_batch([requests[1]])[0][0] - reference) <= 1 / 256  # packed vs alone: bf16 noise

    fp32 = Knowledge(base, context).load()
    full = np.concatenate(fp32.mastery_batch(requests))
    assert not np.array_equal(full, torch.tensor(full).to(torch.bfloat16).double().numpy())


def test_paper_profile_takes_bf16_masteries_and_the_others_float32():
    from simhub.config import load_profile

    assert load_profile("paper-8b").scoring.metrics.knowledge.kt_dtype == "bfloat16"
    assert load_profile("demo").scoring.metrics.knowledge.kt_dtype == "float32"
