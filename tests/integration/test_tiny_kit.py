"""The sample corpus through the CLI, and the tiny model kit the demo and the tests run on."""

from __future__ import annotations

import pytest

from simhub.cli import main
from simhub.data.sample import sample_annotations_dir, sample_raw_dir
from simhub.schema import read_jsonl
from tests.digests import assert_same_file


def test_convert_sample_corpus_follows_rules(tmp_path, capsys):
    out = tmp_path / "out"
    code = main(["data", "convert-eedi", "--source", str(sample_raw_dir()), "--annotations", str(sample_annotations_dir()), "--output", str(out)])
    assert code == 0
    splits = {s: read_jsonl(out / f"{s}.jsonl") for s in ("train", "val", "test")}
    assert sum(map(len, splits.values())) >= 200
    ids = [d.id for s in splits.values() for d in s]
    assert len(ids) == len(set(ids))
    for dialogues in splits.values():
        for d in dialogues:
            qid, iid = d.id.split("-")
            assert qid.isdigit() and iid.isdigit()
            assert all(a.role != b.role for a, b in zip(d.turns, d.turns[1:], strict=False))  # merged turns alternate
            assert all("\n" not in t.content and t.content == t.content.strip() for t in d.turns)
            assert d.question.solvable is not False
            assert d.question.text.startswith("Question Text: ")
    # Test dialogues keep the key order of rule 1.
    keys = [tuple(map(int, d.id.split("-"))) for d in splits["test"]]
    assert keys == sorted(keys)
    assert "unsolvable dropped" in capsys.readouterr().out


def test_tiny_kit_tokenizer_and_chat_template(tiny_kit):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_kit["llama"])
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "What is 3/4 of 20?"}, {"role": "assistant", "content": "15"}]
    enc = tok.apply_chat_template(messages, tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
    ids, mask = enc["input_ids"], enc["assistant_masks"]
    assistant = [i for i, m in zip(ids, mask, strict=True) if m]
    assert tok.decode(assistant) == "15<|eot_id|>"
    assert tok.decode(ids).startswith("<|begin_of_text|><|start_header_id|>system<|end_header_id|>")
    text = "Can you explain how you got 5/8?"
    assert tok.decode(tok.encode(text, add_special_tokens=False)) == text  # byte-level: lossless


def test_tiny_models_load_generate_and_train_one_step(tiny_kit):
    import torch
    from transformers import (
        AutoConfig,
        AutoModelForCausalLM,
        AutoModelForSequenceClassification,
        AutoTokenizer,
    )

    config = AutoConfig.from_pretrained(tiny_kit["llama"])
    assert config.head_dim == 64 and config.num_hidden_layers >= 3
    tok = AutoTokenizer.from_pretrained(tiny_kit["llama"])
    model = AutoModelForCausalLM.from_pretrained(tiny_kit["llama"])
    prompt = tok.apply_chat_template([{"role": "user", "content": "What is 1/2 + 1/4?"}], add_generation_prompt=True, return_tensors="pt", return_dict=True)
    out1 = model.generate(**prompt, max_new_tokens=8, do_sample=False)
    out2 = model.generate(**prompt, max_new_tokens=8, do_sample=False)
    assert out1.shape[1] > prompt["input_ids"].shape[1] and torch.equal(out1, out2)

    before = {k: v.clone() for k, v in model.state_dict().items()}
    optim = torch.optim.AdamW(model.parameters(), lr=1e-3)
    batch = tok(["Well done, that is right."], return_tensors="pt")
    loss = model(**batch, labels=batch["input_ids"]).loss
    loss.backward()
    optim.step()
    assert torch.isfinite(loss)
    assert any(not torch.equal(before[k], v) for k, v in model.state_dict().items())

    cls = AutoModelForSequenceClassification.from_pretrained(tiny_kit["llama-cls"])
    assert cls.config.num_labels == 5 and cls.config.id2label[0] == "Math Answer"
    assert cls(**batch).logits.shape == (1, 5)


def test_cli_tiny_kit_is_deterministic(tiny_kit, tmp_path, capsys):
    """`simhub tiny` builds the same bytes as the session's kit (tokenizer and pre-trained weights),
    whatever torch's thread count was left at by what ran before in this process (here: four)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(4)  # as a thread policy under a faked core count once left it
    try:
        assert main(["tiny", "--output", str(tmp_path / "k")]) == 0
        assert torch.get_num_threads() == 4  # the build runs in a process of its own: the caller's count is kept
    finally:
        torch.set_num_threads(before)
    assert "llama:" in capsys.readouterr().out
    _assert_same_kit(tmp_path / "k", tiny_kit)


def _assert_same_kit(folder, kit) -> None:
    assert_same_file(folder / "tokenizer" / "tokenizer.json", kit["tokenizer"] / "tokenizer.json")
    for name in ("llama", "llama-cls"):
        assert_same_file(folder / name / "model.safetensors", kit[name] / "model.safetensors")


def test_the_kit_is_the_same_beside_a_cpu_hog(tiny_kit, tmp_path):
    """A kit built while two other processes keep every core busy has the session kit's bytes (a build
    whose bytes tests and the demo's tables rely on never depends on the load)."""
    import subprocess
    import sys

    from simhub.demo.tiny import build_kit

    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        built = build_kit(tmp_path / "k")
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    _assert_same_kit(tmp_path / "k", tiny_kit)
    assert set(built) == {"tokenizer", "llama", "llama-cls"}


def test_pretraining_lowers_the_loss():
    from simhub.demo.tiny import _config, build_tokenizer, pretrain, pretraining_ids

    texts = ["What is 3/4 of 20? I think it is 15.", "Can you explain how you got that?", "idk"] * 20
    tok = build_tokenizer(texts, vocab_size=300)
    import torch
    from transformers import LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM(_config(tok))
    ids = pretraining_ids(tok)
    losses = pretrain(model, ids, steps=12, batch=2, length=64)
    assert len(losses) == 12 and losses[-1] < losses[0] - 0.5


def test_the_kit_tokenizer_texts_are_frozen_not_the_live_prompts():
    """simhub.demo.tiny.PROMPT_TEXTS_FILE: the tokenizer learns a frozen snapshot of the prompts, so a
    prompt's new wording does not change the kit (and every demo model built on it)."""
    import hashlib

    from simhub.demo.tiny import PROMPT_TEXTS_FILE, prompt_texts
    from simhub.prompts import classifiers

    assert hashlib.sha256(PROMPT_TEXTS_FILE.read_bytes()).hexdigest() == "c7e561dfe12e8c4a604fe2e131f0642797733929676c92ab646f58a2bbef216c"
    texts = prompt_texts()
    assert len(texts) == 18 and classifiers.ACTS_SYSTEM not in texts  # the act prompt has changed since


def test_a_copied_home_serves_its_demo_models_from_where_it_is_now(tiny_kit, tmp_path, monkeypatch):
    """docs/getting-started/demo-tables.md, "Demo models differ between machines": demo models built once can be copied to
    another machine. An adapter-only demo model (the tutor-response model, ``demo:tutor``) records
    its base as a path from its own folder, so a home copied elsewhere is used as it is: nothing is
    trained again and the copy answers as the original did, with the original gone."""
    import json
    import shutil

    import simhub.provision as provision
    import simhub.training as training
    from simhub.config import ModelRef
    from simhub.models import Sampling
    from simhub.models.loader import load_lm, unload_models
    from simhub.models.refs import resolve_peft

    first, second = tmp_path / "first", tmp_path / "elsewhere" / "second"
    shutil.copytree(tiny_kit["llama"].parent, first / "tiny")
    monkeypatch.setenv("SIMHUB_HOME", str(first))
    built = provision.build_demo_model("tutor")
    assert json.loads((built / "adapter_config.json").read_text())["base_model_name_or_path"] == "../../tiny/llama"
    messages = [[{"role": "user", "content": "What is 1/2 + 1/4?"}]]
    before = load_lm(ModelRef(model=str(built))).generate(messages, Sampling(max_tokens=8))[0].generations[0].text
    unload_models()

    shutil.copytree(first, second)
    shutil.rmtree(first)
    monkeypatch.setenv("SIMHUB_HOME", str(second))
    monkeypatch.setattr(training, "train", lambda *a, **k: pytest.fail("a copied demo model was trained again"))
    folder = provision.build_demo_model("tutor")
    assert folder == second / "demo" / "tutor"
    assert resolve_peft(ModelRef(model=str(folder))).base == str(second / "tiny" / "llama")
    try:
        after = load_lm(ModelRef(model=str(folder))).generate(messages, Sampling(max_tokens=8))[0].generations[0].text
    finally:
        unload_models()
    assert after == before
