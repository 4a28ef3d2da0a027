"""simhub's own KT model (the knowledge metric's LLMKT tracer) as a KT-learner backbone: its masteries
are the tracer's on the rendered history, the update is pure and windowed, and the file names the model."""

from __future__ import annotations

import numpy as np
import pytest

from simhub.learners.kt import UnknownKCError, load_kt_model
from simhub.learners.kt.items import KTItem
from simhub.learners.kt.llmkt import LLMKTModel
from simhub.prompts import kt_context, kt_question
from simhub.schema import Dialogue, Question, Turn

KCS = ["Add fractions", "Equivalent fractions", "Compare fractions"]
ITEMS = {f"q{i}": KTItem(id=f"q{i}", kc=KCS[i % 3], question=f"What is {i}/4 + 1/4?",
                         options={"A": f"{i + 1}/4", "B": f"{i + 1}/8"}, answer="A") for i in range(4)}


@pytest.fixture(scope="module")
def tracer(tmp_path_factory):
    from simhub.config import ModelRef
    from simhub.demo.tiny import build_causal_lm, build_tokenizer
    from simhub.metrics.knowledge import KnowledgeTracer
    from simhub.models import LoadOptions, load_lm

    d = Dialogue(id="x", question=Question(text=ITEMS["q0"].text()), kcs=KCS,
                 turns=[Turn(role="tutor", content="Try this one.\n" + ITEMS["q0"].text(), kcs=[KCS[0]])])
    texts = [kt_context(d, d.turns)] + [f"{kt_question(kc)} True" for kc in KCS] * 10 + ["A) 1/4 B) 2/8"] * 5
    folder = tmp_path_factory.mktemp("llmkt") / "llama"
    build_causal_lm(folder, build_tokenizer(texts, vocab_size=400))
    return KnowledgeTracer(load_lm(ModelRef(model=str(folder)), LoadOptions(device="cpu", batch_size=4))), folder


def test_masteries_are_the_knowledge_metrics_on_the_rendered_history(tracer):
    kt, _ = tracer
    model = LLMKTModel(kt, KCS, ITEMS, window=3)
    b = model.initial_belief()
    for item, correct in (("q0", True), ("q1", False)):
        b = model.update(b, item, ITEMS[item].kc, correct)
    dialogue, turns = model.render(b)
    # the rendering: a tutor turn with the item and its KC, the student's answer with its correctness
    assert [t.role for t in turns] == ["tutor", "student", "tutor", "student"]
    assert turns[0].kcs == [KCS[0]] and turns[1].content == "A) 1/4" and turns[1].correctness == "correct"
    assert turns[3].content == "B) 2/8" and turns[3].correctness == "incorrect"   # the first wrong option
    expected = kt.mastery(dialogue, turns, KCS)                # the knowledge metric's own call
    got = model.masteries(b)
    assert list(got) == KCS
    assert np.allclose([got[k] for k in KCS], expected, atol=1e-9)
    assert dialogue.kcs == KCS                                  # every KC listed, whatever is asked
    # one KC read alone equals its entry in the packed read of all
    assert model.mastery(b, KCS[2]) == pytest.approx(float(expected[2]), abs=1e-5)   # float32 packing noise
    assert model.predict(b, KCS[2], "q1") == model.mastery(b, KCS[2])


def test_update_is_pure_and_windowed(tracer):
    kt, _ = tracer
    model = LLMKTModel(kt, KCS, ITEMS, window=2)
    b0 = model.initial_belief()
    b = b0
    for item in ("q0", "q1", "q2"):
        b = model.update(b, item, ITEMS[item].kc, True)
    assert b0.steps == () and [s[0] for s in b.steps] == ["q1", "q2"]
    with pytest.raises(UnknownKCError):
        model.update(b, "q0", "Divide fractions", True)


def test_the_file_names_the_model_and_loads(tracer, tmp_path):
    kt, folder = tracer
    model = LLMKTModel(kt, KCS, ITEMS, window=4, model=str(folder))
    path = model.save(tmp_path / "llmkt.json")
    loaded = load_kt_model(path)
    assert loaded.backend == "llmkt" and loaded.window == 4 and list(loaded.kcs) == KCS
    b = loaded.update(loaded.initial_belief(), "4990", KCS[0], True)    # an item of the sample bank
    assert 0.0 <= loaded.mastery(b, KCS[0]) <= 1.0


def test_kt_fit_names_the_tracer_and_the_bench_runs_on_it(tracer, tmp_path, monkeypatch):
    import json

    from simhub.cli import main

    _, folder = tracer
    monkeypatch.setenv("SIMHUB_HOME", str(tmp_path / "home"))
    out = tmp_path / "llmkt.json"
    assert main(["learners", "kt-fit", "--backend", "llmkt", "--model", str(folder), "--output", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["backend"] == "llmkt" and doc["model"] == str(folder) and len(doc["kcs"]) == 49
    run = tmp_path / "run"
    assert main(["tutor-bench", "--learner", "kt-learner", "--kt-model", str(out), "--tutor", "scripted:weakest",
                 "--scenarios", "help-seeker__after-school", "--days", "1", "--output", str(run), "--bootstrap", "50",
                 "--no-cache"]) == 0
    results = json.loads((run / "results.json").read_text())
    assert results["tutors"]["scripted:weakest"]["failed_days"] == 0
    assert results["settings"]["kt_model"] == str(out)
