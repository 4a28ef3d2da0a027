"""The knowledge metric: binning and scoring pinned to SPEC §3, packed LLMKT equal to unpacked."""

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
