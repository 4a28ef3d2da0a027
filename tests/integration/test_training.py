"""Training: recipes, label masks, tiny LoRA runs, KT loss, DPO pairing and stages, publishing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simhub.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
RECIPES = sorted((ROOT / "simhub" / "resources" / "recipes").glob("*.yaml"))


# ---------------------------------------------------------------------------------- recipes


@pytest.mark.parametrize("path", RECIPES, ids=[p.stem for p in RECIPES])
def test_every_recipe_parses(path):
    from simhub.training.config import load_recipe

    recipe = load_recipe(path)
    assert recipe.gradient_accumulation_steps(world_size=1) >= 1
    if path.stem.startswith("smol-"):  # the paper's student recipe on SmolLM2, sized for two cores
        assert recipe.base_model == "smol:135m-instruct" and recipe.data == "sample:" and not recipe.bf16
        assert recipe.base_model_hub_id == "HuggingFaceTB/SmolLM2-135M-Instruct" and recipe.persona == "none"
        assert (recipe.lora_r, recipe.lora_alpha, recipe.lora_dropout, recipe.use_rslora) == (32, 64, 0.05, True)
        assert recipe.lora_target_modules == "all-linear" and recipe.max_prompt_chars == 6000
        assert recipe.max_steps > 0  # a fixed number of steps, stated in the recipe
        if recipe.kind == "student-dpo":  # student-dpo-8b's sampling, pairing and loss on the SFT student; 5% of the data
            assert recipe.dpo.sft_adapter == "demo:smol-student-sft" and recipe.dpo.scoring_profile == "demo-smol"
            assert recipe.dpo.beta == 0.1 and recipe.dpo.num_candidates == 4 and recipe.dpo.subsample == 0.05
            assert (recipe.dpo.temperature, recipe.dpo.top_p, recipe.dpo.top_k) == (1.0, 0.95, 0)
            assert (recipe.dpo.skip_turns, recipe.dpo.epsilon, recipe.dpo.max_pairs_per_turn) == (5, 0.1, 6)
            assert (recipe.dpo.max_prompt_length, recipe.dpo.max_length, recipe.dpo.reward_metrics) == (512, 1024, None)
        if recipe.kind == "student-grpo":  # online RL on the demo's reward from the SFT student; 5% of the data
            assert recipe.grpo.sft_adapter == "demo:smol-student-sft" and recipe.grpo.scoring_profile == "demo-smol"
            assert (recipe.grpo.subsample, recipe.grpo.num_generations, recipe.grpo.beta) == (0.05, 4, 0.04)
            assert (recipe.grpo.reward_metrics, recipe.grpo.held_out_metrics) == (None, None)
    elif not path.stem.startswith("tiny-"):
        assert recipe.base_model in ("meta-llama/Llama-3.2-3B-Instruct", "meta-llama/Llama-3.1-8B-Instruct")
        assert recipe.base_model_hub_id == recipe.base_model
        assert recipe.effective_batch_size == 64 and recipe.bf16
        assert (recipe.weight_decay, recipe.max_grad_norm) == (0.01, 1.0)
        if recipe.kind == "kt":  # docs/protocol.md §8: the reference trains KT at a constant rate, no warm-up
            assert (recipe.lr_scheduler_type, recipe.warmup_ratio, recipe.persona) == ("constant", 0.0, "ocean")
        else:
            assert (recipe.lr_scheduler_type, recipe.warmup_ratio) == ("linear", 0.1)
        if recipe.kind.startswith("student"):  # docs/protocol.md §8: the fine-tuned students see no persona
            assert recipe.persona == "none"
        assert (recipe.lora_r, recipe.lora_alpha, recipe.lora_dropout, recipe.use_rslora) == (32, 64, 0.05, True)
        expected = {"student-sft": 3, "tutor-sft": 3, "acts": 2, "correctness": 1, "kt": 3, "student-dpo": 1,
                    "student-grpo": 1}
        assert recipe.epochs == expected[recipe.kind]
        rates = {"student-dpo": 5e-6, "student-grpo": 1e-6}
        assert recipe.learning_rate == rates.get(recipe.kind, 5e-5)
        if recipe.kind == "student-grpo":  # beyond the paper: online RL from the SFT student, ROUGE-L held out
            assert recipe.grpo.num_generations == 8 and recipe.grpo.beta == 0.04 and recipe.grpo.subsample == 0.2
            assert recipe.grpo.held_out_metrics == ["rouge_l"] and "rouge_l" not in recipe.grpo.reward_metrics
        if recipe.kind == "student-dpo":
            assert recipe.dpo.beta == 0.1 and recipe.dpo.num_candidates == 4 and recipe.dpo.subsample == 0.2
            assert (recipe.dpo.max_prompt_length, recipe.dpo.max_length) == (512, 1024)
            assert (recipe.dpo.skip_turns, recipe.dpo.epsilon, recipe.dpo.max_pairs_per_turn) == (5, 0.1, 6)
    elif recipe.kind.endswith("-embedding"):  # the demo's classifiers on MiniLM embeddings, logistic regression
        assert recipe.base_model == "minilm" and recipe.data == "sample:"
    else:
        assert recipe.base_model == "tiny:llama" and recipe.data == "sample:" and not recipe.bf16


def test_recipe_files_cover_every_model():
    names = {p.stem for p in RECIPES}
    for name in ("student-sft-3b", "student-sft-8b", "student-dpo-3b", "student-dpo-8b", "acts-8b",
                 "correctness-8b", "kt-8b", "tutor-8b", "tiny-student-sft", "tiny-student-dpo", "tiny-acts",
                 "tiny-acts-llm", "tiny-correctness-emb",
                 "tiny-correctness", "tiny-judge", "tiny-kt", "tiny-tutor", "smol-student-sft",
                 "smol-student-dpo"):
        assert name in names
    for name in ("single_gpu", "multi_gpu", "fsdp"):
        assert (ROOT / "training" / "accelerate" / f"{name}.yaml").is_file()


def test_set_overrides_are_typed():
    from simhub.training.config import load_recipe

    recipe = load_recipe(RECIPES[0], ["epochs=2", "bf16=false", "dpo.beta=0.2", "report_to=none,tensorboard",
                                      "base_model_revision=1234", "max_train_dialogues=null", "seed=7",
                                      "learning_rate=3e-3"])
    assert recipe.epochs == 2.0 and isinstance(recipe.epochs, float)
    assert recipe.learning_rate == 3e-3  # YAML 1.1 reads 3e-3 as a string
    assert recipe.bf16 is False and recipe.dpo.beta == 0.2 and recipe.seed == 7
    assert recipe.report_to == ["none", "tensorboard"]
    assert recipe.base_model_revision == "1234"
    with pytest.raises(ConfigError, match=r"seed: expected `int`, got `str` \('abc'\)") as info:
        load_recipe(RECIPES[0], ["seed=abc"])
    assert info.value.field == "seed"
    with pytest.raises(ConfigError, match="bf16: expected `bool`"):
        load_recipe(RECIPES[0], ["bf16=maybe"])


def test_set_reaches_a_nested_section():
    from simhub.training.config import load_recipe

    recipe = load_recipe("tiny-student-dpo", ["dpo.backend=vllm", "dpo.reward_metrics=cosine,rouge_l",
                                              "dpo.max_length=null", "dpo.sft_adapter=1234"])
    assert recipe.dpo.backend == "vllm" and recipe.dpo.reward_metrics == ["cosine", "rouge_l"]
    assert recipe.dpo.max_length is None and recipe.dpo.sft_adapter == "1234"
    assert recipe.dpo.subsample == 0.25  # the file's other dpo keys stay
    with pytest.raises(ConfigError, match=r"--set dpo: is a section"):
        load_recipe("tiny-student-dpo", ["dpo=1"])
    with pytest.raises(ConfigError, match=r"dpo.backend: 'onnx' is not one of transformers, vllm") as info:
        load_recipe("tiny-student-dpo", ["dpo.backend=onnx"])
    assert info.value.field == "dpo.backend"


def test_unknown_key_is_an_error_with_a_suggestion(tmp_path):
    from simhub.training.config import load_recipe

    with pytest.raises(ConfigError, match=r"--set: learnin_rate: unknown key \(did you mean 'learning_rate'\?\)"):
        load_recipe(RECIPES[0], ["learnin_rate=1e-4"])
    with pytest.raises(ConfigError, match=r"--set: dpo.bta: unknown key \(did you mean 'beta'\?\)") as info:
        load_recipe(RECIPES[0], ["dpo.bta=0.2"])
    assert info.value.field == "dpo.bta"
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: acts\nlora_rank: 8\n")
    with pytest.raises(ConfigError, match=r"bad.yaml: lora_rank: unknown key \(did you mean 'lora_r'\?\)"):
        load_recipe(bad)
    bad.write_text("kind: student-dpo\ndpo:\n  sft_adapter: x\n  bta: 0.2\n")
    with pytest.raises(ConfigError, match=r"bad.yaml: dpo.bta: unknown key \(did you mean 'beta'\?\)") as info:
        load_recipe(bad)
    assert info.value.field == "dpo.bta"
    bad.write_text("kind: act\n")
    with pytest.raises(ConfigError, match=r"bad.yaml: kind: 'act' is not one of .*\(did you mean 'acts'\?\)"):
        load_recipe(bad)


def test_a_wrong_type_names_the_field(tmp_path):
    from simhub.training.config import load_recipe

    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: student-dpo\ndpo:\n  sft_adapter: x\n  beta: high\n")
    with pytest.raises(ConfigError, match=r"bad.yaml: dpo.beta: expected `float`, got `str` \('high'\)") as info:
        load_recipe(bad)
    assert info.value.field == "dpo.beta"
    bad.write_text("kind: acts\nreport_to: [tensorboard, 3]\n")
    with pytest.raises(ConfigError, match=r"bad.yaml: report_to\[1\]: expected `str`, got `int` \(3\)"):
        load_recipe(bad)
    bad.write_text("kind: acts\ndpo: 3\n")
    with pytest.raises(ConfigError, match=r"bad.yaml: dpo: expected `object`, got `int`"):
        load_recipe(bad)
    bad.write_text("kind: acts\ndpo: null\nlearning_rate: 5e-5\n")  # a null section keeps its defaults
    recipe = load_recipe(bad)
    assert recipe.learning_rate == 5e-5 and recipe.dpo.beta == 0.1


def _fail_if_loaded(monkeypatch):
    import simhub.training.common as train_module

    def boom(*args, **kwargs):
        raise AssertionError("a model was loaded before the recipe was checked")

    monkeypatch.setattr(train_module, "load_base", boom)
    monkeypatch.setattr(train_module, "load_tokenizer", boom)


def test_missing_data_fails_before_training(tmp_path, monkeypatch, simhub_home):
    from simhub.training import train
    from simhub.training.config import load_recipe

    _fail_if_loaded(monkeypatch)
    tiny = "tiny-student-sft"
    with pytest.raises(ConfigError, match=r"data: .* is not a folder"):
        train(load_recipe(tiny, [f"data={tmp_path / 'nope'}"]), tmp_path / "out")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "train.jsonl").write_text("")
    with pytest.raises(ConfigError, match=r"has no val.jsonl"):
        train(load_recipe(tiny, [f"data={tmp_path / 'data'}"]), tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_nonexistent_base_model_fails_before_training(tmp_path, monkeypatch, simhub_home, local_hub):
    from simhub.cli import main
    from simhub.training import train
    from simhub.training.config import load_recipe

    _fail_if_loaded(monkeypatch)
    tiny = "tiny-student-sft"
    with pytest.raises(ConfigError, match=r"base_model: .* neither a model folder nor a Hub id"):
        train(load_recipe(tiny, [f"base_model={tmp_path / 'no-model'}"]), tmp_path / "out")
    with pytest.raises(ConfigError, match="does not exist on the Hub"):
        train(load_recipe(tiny, ["base_model=nobody/no-such-model"]), tmp_path / "out")
    with pytest.raises(ConfigError, match="must be built first"):  # the library never builds: provisioning does
        train(load_recipe(tiny, ["base_model=tiny:llama"]), tmp_path / "out")
    assert main(["train", tiny, "--output-dir", str(tmp_path / "out"), "--set", "base_model=tiny:nope"]) == 2
    assert main(["train", tiny, "--output-dir", str(tmp_path / "out"), "--set", "base_model=nobody/x"]) == 2
    assert main(["train", tiny, "--output-dir", str(tmp_path / "out"), "--set", "lr=1"]) == 2
    assert main(["train", "tiny-studnet-sft", "--output-dir", str(tmp_path / "out")]) == 2


def test_sample_data_is_the_shared_sample_corpus(sample_corpus):
    from simhub.data.sample import load_sample_corpus
    from simhub.training.data import load_split

    assert load_sample_corpus() is sample_corpus  # loaded once per process
    assert [d.id for d in load_split("sample:", "val", 3)] == [d.id for d in sample_corpus["val"][:3]]


# ---------------------------------------------------------------------------------- masks


@pytest.fixture(scope="module")
def tokenizer(tiny_kit):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_kit["llama"])


def _labelled_text(tokenizer, example) -> str:
    return tokenizer.decode([t for t in example["labels"] if t != -100])


@pytest.mark.parametrize("kind,role", [("student-sft", "student"), ("tutor-sft", "tutor")])
def test_generator_masks_cover_exactly_one_role(tokenizer, sample_corpus, kind, role):
    from simhub.prompts import END_OF_DIALOGUE
    from simhub.training.data import build_chat_examples

    dialogues = sample_corpus["train"][:12]
    examples = build_chat_examples(tokenizer, kind, dialogues, 10**9)
    assert len(examples.items) == len(dialogues)
    for dialogue, example in zip(dialogues, examples.items, strict=True):
        turns = dialogue.turns
        speaking = [t for t in turns if t.role == role]
        expected = []
        for i, t in enumerate(turns):
            if t.role != role:
                continue
            content = t.content.strip()
            if i == len(turns) - 1:
                content = f"{content}{END_OF_DIALOGUE}"  # appended as the reference does, no space
            expected.append(content + "<|eot_id|>")
        assert speaking
        assert _labelled_text(tokenizer, example) == "".join(expected)
        assert len(example["input_ids"]) == len(example["labels"])


def test_classifier_masks_cover_only_the_label(tokenizer, sample_corpus):
    from simhub.schema import ACTS, CORRECTNESS_LABELS
    from simhub.training.data import build_chat_examples

    for kind, labels in (("acts", ACTS), ("correctness", CORRECTNESS_LABELS)):
        examples = build_chat_examples(tokenizer, kind, sample_corpus["train"][:5], 10**9)
        assert examples.items
        for ex in examples.items:
            assert _labelled_text(tokenizer, ex) == labels[ex["class_index"]] + "<|eot_id|>"


def test_long_prompts_are_excluded_and_counted(tokenizer, sample_corpus):
    from simhub.training.data import build_chat_examples, build_kt_examples

    dialogues = sample_corpus["train"][:10]
    assert build_chat_examples(tokenizer, "student-sft", dialogues, 10).summary() == {
        "examples": 0, "excluded_long_prompts": 10}
    kt = build_kt_examples(tokenizer, dialogues, 10)
    assert kt.items == [] and kt.excluded_long > 0


def test_classifiers_leave_out_only_prompts_longer_than_the_limit(tokenizer, sample_corpus):
    """FIDELITY.md (§2 rule 8): the reference's acts and correctness classifiers drop prompts of more
    than 6,000 characters (``>``); the generators drop prompts of 6,000 or more (``>=``)."""
    from simhub.training.data import build_chat_examples, chat_conversations, prompt_chars

    dialogue = sample_corpus["train"][0]
    for kind in ("acts", "correctness"):
        lengths = [prompt_chars(tokenizer, kind, m) for m in chat_conversations(kind, dialogue)]
        limit = lengths[0]
        kept = build_chat_examples(tokenizer, kind, [dialogue], limit)
        assert kept.excluded_long == sum(n > limit for n in lengths) and len(kept.items) == sum(n <= limit for n in lengths)
        assert build_chat_examples(tokenizer, kind, [dialogue], limit - 1).excluded_long == sum(n >= limit for n in lengths)
    sft = prompt_chars(tokenizer, "student-sft", chat_conversations("student-sft", dialogue)[0])
    assert build_chat_examples(tokenizer, "student-sft", [dialogue], sft).excluded_long == 1


def test_kt_length_filter_measures_the_chat_templated_packed_prompt(tokenizer, sample_corpus):
    """FIDELITY.md (§2 rule 8): the KT filter counts the packed prompt as the reference lays it out:
    the templated instruction and context, then " " plus each KC's templated turn from its text on."""
    from simhub.prompts import KT_SYSTEM, kt_context, kt_context_body, kt_question
    from simhub.training.data import build_kt_examples, kt_prompt_chars, kt_samples

    dialogue = next(d for d in sample_corpus["train"] if kt_samples(d))
    history, kcs, _ = kt_samples(dialogue)[0]
    templated = tokenizer.apply_chat_template([{"role": "system", "content": KT_SYSTEM},
                                               {"role": "user", "content": kt_context_body(dialogue, history)}],
                                              tokenize=False)
    for kc in kcs:
        turn = tokenizer.apply_chat_template([{"role": "user", "content": kt_question(kc)},
                                              {"role": "assistant", "content": "\n"}], tokenize=False)
        templated += " " + turn.split("user<|end_header_id|>\n\n")[1]
    chars = kt_prompt_chars(tokenizer, dialogue, history, kcs)
    assert chars == len(templated)
    assert chars > len(kt_context(dialogue, history)) + sum(len(kt_question(k)) for k in kcs)  # the template counts
    first = build_kt_examples(tokenizer, [dialogue], chars + 1)
    assert build_kt_examples(tokenizer, [dialogue], chars).excluded_long == first.excluded_long + 1  # >= drops


# ---------------------------------------------------------------------------------- KT


def test_kt_training_reads_what_the_metric_reads(tiny_kit, tokenizer, sample_corpus):
    import numpy as np
    import torch
    from transformers import AutoModelForCausalLM

    from simhub.config import ModelRef
    from simhub.metrics.knowledge import KnowledgeTracer, true_false_ids
    from simhub.models import load_lm
    from simhub.training.data import build_kt_examples, kt_samples
    from simhub.training.kt import KTCollator, kt_probabilities

    dialogue = next(d for d in sample_corpus["train"] if len(kt_samples(d)) >= 2)
    samples = kt_samples(dialogue)[:2]
    examples = build_kt_examples(tokenizer, [dialogue], 10**9).items[:2]
    model = AutoModelForCausalLM.from_pretrained(tiny_kit["llama"]).eval()
    batch = KTCollator(tokenizer, torch.float32)(examples)
    with torch.no_grad():
        p = kt_probabilities(model, batch, *true_false_ids(tokenizer)).numpy()
    tracer = KnowledgeTracer(load_lm(ModelRef(model=str(tiny_kit["llama"]))), persona="ocean")
    expected = [tracer.mastery(dialogue, history, kcs).mean() for history, kcs, _ in samples]
    np.testing.assert_allclose(p, expected, atol=1e-5)
    assert [e["labels"] for e in examples] == [s[2] for s in samples]


def test_kt_loss_falls(tiny_kit, tokenizer, sample_corpus):
    from types import SimpleNamespace

    import torch
    from peft import get_peft_model
    from transformers import AutoModelForCausalLM

    from simhub.metrics.knowledge import true_false_ids
    from simhub.training.common import lora_config
    from simhub.training.config import TrainRecipe
    from simhub.training.data import build_kt_examples
    from simhub.training.kt import KTCollator, kt_loss, kt_probabilities, make_kt_trainer_class

    torch.manual_seed(0)
    pool = sorted(build_kt_examples(tokenizer, sample_corpus["train"][:8], 10**9).items,
                  key=lambda e: len(e["input_ids"]))
    # the shortest two of each label keep the test fast
    examples = [e for e in pool if e["labels"] == 1.0][:2] + [e for e in pool if e["labels"] == 0.0][:2]
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(tiny_kit["llama"]), lora_config(TrainRecipe()))
    batch = KTCollator(tokenizer, torch.float32)(examples)
    ids = true_false_ids(tokenizer)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=3e-4)
    # kt_loss is the BCE of the clamped mean P(True), and it is what KTTrainer.compute_loss returns.
    with torch.no_grad():
        loss, p = kt_loss(model, batch, *ids)
        expected = torch.nn.functional.binary_cross_entropy(
            kt_probabilities(model, batch, *ids).clamp(1e-6, 1 - 1e-6), batch["labels"])
        torch.testing.assert_close(loss, expected)
        trainer = SimpleNamespace(true_id=ids[0], false_id=ids[1])  # all compute_loss reads of the Trainer
        trainer_loss, outputs = make_kt_trainer_class().compute_loss(trainer, model, batch, return_outputs=True)
        torch.testing.assert_close(trainer_loss, loss)
        torch.testing.assert_close(outputs["p_true"], p)
    losses = []
    for _ in range(8):
        loss, _ = kt_loss(model, batch, *ids)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0] - 0.1, losses


# ---------------------------------------------------------------------------------- tiny runs


@pytest.mark.slow
def test_tiny_sft_trains_lora_only_and_resumes(tmp_path, peft_spy, simhub_home, monkeypatch):
    import torch
    import transformers

    from simhub.provision import resolve_recipe
    from simhub.training import load_recipe, train
    from simhub.training.common import PROGRESS

    captured = peft_spy
    recipe = resolve_recipe(load_recipe("tiny-student-sft",
                                        ["max_steps=2", "max_train_dialogues=4", "max_eval_dialogues=2", "eval_steps=1",
                                         "warmup_ratio=0.0"]))  # step 1 learns too: the best checkpoint may be step 1
    out = tmp_path / "sft"
    seen: list[tuple[int, int]] = []
    passes: list[int] = []  # validation passes
    real_loop = transformers.Trainer.evaluation_loop

    def counted_loop(self, *args, **kwargs):
        passes.append(1)
        return real_loop(self, *args, **kwargs)

    monkeypatch.setattr(transformers.Trainer, "evaluation_loop", counted_loop)
    token = PROGRESS.set(lambda done, total: seen.append((done, total)))  # what the service's ETA reads
    try:
        results = train(recipe, out)
    finally:
        PROGRESS.reset(token)
    assert seen == [(1, 2), (2, 2)]
    # One validation pass per eval step and none after: the results are the best checkpoint's logged ones.
    logged = [e["eval_loss"] for e in json.loads((out / "training_config.json").read_text())["log_history"]
              if "eval_loss" in e]
    assert len(passes) == len(logged) == 2 and results["eval_loss"] == min(logged)
    after = dict(captured["model"].named_parameters())
    lora = [n for n in after if "lora_" in n]
    assert lora and all(after[n].requires_grad for n in lora)
    assert any(not torch.equal(after[n], captured["before"][n]) for n in lora if "lora_B" in n)
    for name, param in after.items():
        if "lora_" not in name:
            assert torch.equal(param, captured["before"][name]), name
    for name in ("adapter_config.json", "adapter_model.safetensors", "tokenizer.json", "training_config.json",
                 "eval_results.json"):
        assert (out / name).is_file(), name
    config = json.loads((out / "training_config.json").read_text())
    assert config["recipe"]["kind"] == "student-sft" and config["gradient_accumulation_steps"] == 2
    assert config["data"]["train"]["examples"] > 0 and config["resolved"]["base_model"]
    # benchmarks/gpu_train_sft.py times the training loop with this entry
    assert [e["train_runtime"] > 0 for e in config["log_history"] if "train_runtime" in e] == [True]
    assert results["eval_loss"] > 0 and results["global_step"] == 2
    assert json.loads((out / "eval_results.json").read_text())["eval_loss"] == results["eval_loss"]

    with pytest.raises(ConfigError, match="resume it or choose another folder"):
        train(recipe, out)
    recipe.max_steps = 3
    resumed = train(recipe, out, resume=True)
    assert resumed["global_step"] == 3


@pytest.mark.slow
def test_tiny_acts_classifier_reports_accuracy_and_f1(tmp_path, simhub_home, tokenizer):
    from collections import Counter

    from simhub.provision import resolve_recipe
    from simhub.schema import ACTS
    from simhub.training import load_recipe, train
    from simhub.training.data import build_chat_examples, load_split

    recipe = resolve_recipe(load_recipe("tiny-acts-llm", ["max_steps=1", "max_train_dialogues=2", "max_eval_dialogues=2",
                                                      "eval_steps=1"]))
    results = train(recipe, tmp_path / "acts")
    assert 0 <= results["accuracy"] <= 1 and set(results["per_class"]) == set(ACTS)
    # Every validation example is evaluated once, and the gold class read back from its label
    # tokens is the class it was built with (so support per class counts the examples' class_index).
    examples = build_chat_examples(tokenizer, "acts", load_split(recipe.data, recipe.eval_split,
                                                                 recipe.max_eval_dialogues),
                                   recipe.max_prompt_chars, recipe.persona).items
    assert examples and results["count"] == len(examples)
    gold = Counter(ACTS[e["class_index"]] for e in examples)
    assert {name: v["support"] for name, v in results["per_class"].items()} == {a: gold[a] for a in ACTS}


def test_judge_examples_carry_their_source_and_real_turns_weigh_more(sample_corpus, tiny_kit):
    """judge_real_weight: the trainer draws a real turn put as its own candidate ``w`` times as often
    as another candidate, the same draws for the same seed; the examples say which is which."""
    from types import SimpleNamespace

    from simhub.models.refs import load_tokenizer
    from simhub.provision import resolve_model
    from simhub.training.classifiers import _weighted_trainer, judge_sample_weights
    from simhub.training.data import build_chat_examples, judge_cases

    tokenizer = load_tokenizer(resolve_model("tiny:llama"))
    train = list(sample_corpus["train"])[:6]
    items = build_chat_examples(tokenizer, "judge", train, 6000, judge_candidates=1).items
    cases = judge_cases(train, candidates=1)
    assert [item["source"] for item in items] == [case.source for case in cases]
    weights = judge_sample_weights(items, 2.0)
    assert weights == [2.0 if case.source == "real" else 1.0 for case in cases]
    real, other = sum(w == 2.0 for w in weights), sum(w == 1.0 for w in weights)

    def sampler(seed):  # the trainer's own sampler method; it reads nothing of the trainer but its dataset
        return _weighted_trainer(2.0, seed)._get_train_sampler(SimpleNamespace(train_dataset=items))

    epochs = sampler(0)
    draws = [i for _ in range(500) for i in epochs]  # one epoch is len(items) draws, new ones each epoch
    assert len(draws) == 500 * len(items) and draws[:len(items)] != draws[len(items):2 * len(items)]
    share = sum(weights[i] == 2.0 for i in draws) / len(draws)
    assert share == pytest.approx(2 * real / (2 * real + other), abs=0.02)
    assert list(sampler(3)) == list(sampler(3)) != list(sampler(4))


def test_tiny_judge_trains_on_verdicts_from_corpus_labels(tmp_path, simhub_home):
    """kind: judge trains the local judge on judge_cases; evaluation tells correct / incorrect / na
    apart, and the adapter saves its fully trained modules. Such an adapter gets a private merged
    base when loaded, so it cannot leak into another adapter of the same base."""
    from simhub.config import JudgeConfig, ModelRef
    from simhub.metrics.judge import JUDGE_OPTIONS
    from simhub.models import LoadOptions, load_lm
    from simhub.provision import build_random_lora, resolve_model, resolve_recipe
    from simhub.training import load_recipe, train

    recipe = resolve_recipe(load_recipe("tiny-judge", ["max_steps=1", "max_train_dialogues=2", "max_eval_dialogues=2",
                                                       "eval_steps=1"]))
    results = train(recipe, tmp_path / "judge")
    assert set(results["per_class"]) == {"correct", "incorrect", "na"} and results["count"] > 0
    config = json.loads((tmp_path / "judge" / "adapter_config.json").read_text())
    assert sorted(config["modules_to_save"]) == ["down_proj", "embed_tokens", "gate_proj", "k_proj", "lm_head",
                                                 "q_proj", "up_proj", "v_proj"]
    saved = json.loads((tmp_path / "judge" / "training_config.json").read_text())["recipe"]
    assert (saved["judge_candidates"], saved["judge_tutor_candidates"], saved["judge_real_weight"]) == (1, 1, 3.0)

    base = resolve_model("tiny:llama")
    options = LoadOptions(device="cpu", share_base=True)
    other = build_random_lora(base, tmp_path / "other")
    student = load_lm(ModelRef(model=base, adapter=str(other)), options)
    prompt = [student.chat_ids([{"role": "user", "content": "What is 5/8 divided by 1/6?"}])]
    labels = [[*student.text_ids(o), student.eot_id] for o in JUDGE_OPTIONS]
    _, before = student.choose(prompt, labels)
    judge = load_lm(JudgeConfig(kind="local", model=base, adapter=str(tmp_path / "judge")).plain(), options)
    _, judged = judge.choose(prompt, labels)
    assert judge.loaded is not student.loaded  # the judge has its own merged copy
    _, after = student.choose(prompt, labels)
    assert after.tolist() == before.tolist() != judged.tolist()
    # vLLM's LoRA cannot serve such an adapter: refused before any engine starts.
    from simhub.models import loader

    engines = dict(loader._ENGINES)
    with pytest.raises(ConfigError, match="modules_to_save"):
        load_lm(JudgeConfig(kind="local", model=base, adapter=str(tmp_path / "judge")).plain(), LoadOptions(backend="vllm"))
    assert engines == loader._ENGINES  # no engine was started


@pytest.mark.slow
def test_tiny_kt_writes_cutoffs_after_freeing_the_trained_model(tmp_path, monkeypatch, simhub_home):
    import gc
    import weakref

    import peft

    import simhub.training.kt as kt_module
    from simhub.provision import resolve_recipe
    from simhub.training import load_recipe, train

    trained = []
    real_peft = peft.get_peft_model

    def spy(model, config, *args, **kwargs):
        wrapped = real_peft(model, config, *args, **kwargs)
        trained.append(weakref.ref(wrapped))
        return wrapped

    alive = []
    real_cutoffs = kt_module.write_kt_cutoffs

    def cutoffs(*args, **kwargs):
        gc.collect()
        alive.append(trained[0]() is not None)
        return real_cutoffs(*args, **kwargs)

    monkeypatch.setattr(peft, "get_peft_model", spy)
    monkeypatch.setattr(kt_module, "write_kt_cutoffs", cutoffs)
    recipe = resolve_recipe(load_recipe("tiny-kt", ["max_steps=1", "eval_steps=1"]))
    out = tmp_path / "kt"
    results = train(recipe, out)
    assert alive == [False]  # the trainer's copy was gone before the tracer loaded the saved adapter
    saved = json.loads((out / "kt_cutoffs.json").read_text())
    assert results["kt_cutoffs"]["n_deltas"] == saved["n_deltas"] > 0
    assert results["kt_cutoffs"]["cutoffs"] == pytest.approx(saved["cutoffs"]) and len(saved["cutoffs"]) == 4
    assert saved["source"] == "sample: split val" and saved["model"] == str(out)
    assert json.loads((out / "eval_results.json").read_text())["kt_cutoffs"] == results["kt_cutoffs"]


# ---------------------------------------------------------------------------------- DPO


def _turn(index, rewards, dialogue="d1"):
    return {"dialogue_id": dialogue, "turn_index": index,
            "candidates": [{"text": f"t{i}", "reward": r} for i, r in enumerate(rewards)]}


def test_pairs_rules():
    from simhub.training.dpo import make_pairs

    # gap strictly above epsilon; chosen is the higher reward
    pairs = make_pairs([_turn(5, [0.5, 0.58, 0.66])], epsilon=0.1)
    assert [(p["chosen"], p["rejected"]) for p in pairs] == [("t2", "t0")]
    assert pairs[0]["gap"] == pytest.approx(0.16)
    assert make_pairs([_turn(5, [0.5, 0.6])], epsilon=0.1) == []  # a gap of exactly epsilon is not enough
    # first turns and turns with a long prompt are not paired (they are scored)
    assert make_pairs([_turn(4, [0.0, 1.0])], skip_turns=5) == []
    assert len(make_pairs([_turn(5, [0.0, 1.0])], skip_turns=5)) == 1
    assert make_pairs([{**_turn(5, [0.0, 1.0]), "long_prompt": True}], skip_turns=5) == []
    # at most 6 widest pairs per turn, widest first
    pairs = make_pairs([_turn(7, [0.0, 0.2, 0.4, 0.6, 0.8, 1.0])], epsilon=0.1, max_pairs_per_turn=6)
    assert len(pairs) == 6
    gaps = [round(p["gap"], 6) for p in pairs]
    assert gaps == sorted(gaps, reverse=True) and gaps[0] == 1.0 and min(gaps) >= 0.6
    # null rewards and identical texts never pair
    turn = _turn(6, [None, 1.0, 0.0])
    turn["candidates"].append({"text": "t1", "reward": 0.0})
    assert [(p["chosen"], p["rejected"]) for p in make_pairs([turn])] == [("t1", "t2")]


def _scored(index, **columns):
    n = len(next(iter(columns.values())))
    return {"dialogue_id": "d", "turn_index": index,
            "candidates": [{"text": f"t{i}", "scores": {m: v[i] for m, v in columns.items()}} for i in range(n)]}


def test_reward_normalisation_and_squaring_as_the_reference():
    """FIDELITY.md (DPO options): reward_norm_level group/dataset z-score each metric (scipy's
    norm.fit, the reference's, gives the mean and std), a constant metric becomes 0, square_rewards
    squares each value, and the reward is the mean of the non-null values."""
    from scipy.stats import norm

    from simhub.training.dpo import mean_reward, turn_rewards

    turns = [_scored(5, acts=[1.0, 0.0, 0.0], cosine=[0.5, 0.5, 0.5]),
             _scored(6, acts=[1.0, None, 0.0], cosine=[None, None, None]),
             _scored(7, acts=[0.0, 1.0, 1.0], cosine=[0.2, 0.4, 0.9])]
    metrics = ["acts", "cosine"]
    assert turn_rewards(turns, metrics) == [[mean_reward(c["scores"], metrics) for c in t["candidates"]] for t in turns]

    mean, std = norm.fit([1.0, 0.0, 0.0])
    group = turn_rewards(turns, metrics, "group")
    assert group[0] == pytest.approx([(1 - mean) / std / 2, (0 - mean) / std / 2, (0 - mean) / std / 2])
    assert group[1] == pytest.approx([0.5, 0.0, -0.5])  # acts over [1, 0]: ±1; the all-null cosine column is 0
    squared = turn_rewards(turns, metrics, "group", square=True)
    assert squared[1] == pytest.approx([0.5, 0.0, 0.5])

    acts_mean, acts_std = norm.fit([1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 1.0, 1.0])
    cos_mean, cos_std = norm.fit([0.5, 0.5, 0.5, 0.2, 0.4, 0.9])
    dataset = turn_rewards(turns, metrics, "dataset")
    assert dataset[2] == pytest.approx([((0 - acts_mean) / acts_std + (0.2 - cos_mean) / cos_std) / 2,
                                        ((1 - acts_mean) / acts_std + (0.4 - cos_mean) / cos_std) / 2,
                                        ((1 - acts_mean) / acts_std + (0.9 - cos_mean) / cos_std) / 2])
    assert dataset[1][1] is None  # no non-null value at all
    with pytest.raises(ConfigError, match="reward_norm_level"):
        turn_rewards(turns, metrics, "turn")


def test_each_wins_pairs_every_winner_once():
    import random

    from simhub.training.dpo import make_pairs

    turn = _turn(5, [0.9, 0.5, 0.1, 0.85])
    pairs = make_pairs([turn], epsilon=0.1, strategy="each_wins", rng=random.Random(0))
    # t0 and t3 beat t1 and t2, t1 beats t2, t2 beats nobody: one pair per winner, in candidate order.
    assert [p["chosen"] for p in pairs] == ["t0", "t1", "t3"]
    assert pairs[1]["rejected"] == "t2" and {pairs[0]["rejected"], pairs[2]["rejected"]} <= {"t1", "t2"}
    drawn = {make_pairs([turn], strategy="each_wins", rng=random.Random(seed))[0]["rejected"] for seed in range(20)}
    assert drawn == {"t1", "t2"}  # the rejected one is drawn at random among those beaten
    with pytest.raises(ConfigError, match="pair_strategy"):
        make_pairs([turn], strategy="best_of")


def test_mean_reward_and_dedup():
    from simhub.training.dpo import dedup, mean_reward

    assert mean_reward({"acts": 1.0, "cosine": 0.5, "rouge_l": 0.0, "knowledge": None},
                       ["acts", "cosine", "knowledge"]) == 0.75
    assert mean_reward({"acts": None}, ["acts"]) is None
    assert dedup(["a", "b", "a", " ", "c", ""]) == ["a", "b", " ", "c", ""]  # blank candidates are candidates


def test_dpo_scores_blank_candidates_and_those_that_end_the_dialogue(tmp_path, simhub_home):
    """FIDELITY.md (DPO data): a blank candidate and one that ends the dialogue are kept and scored
    like the others; the marker stays in the candidate (a pair can prefer ending) and scoring removes it."""
    from simhub.config import load_profile
    from simhub.prompts import END_OF_DIALOGUE
    from simhub.provision import provision_profile, restrict
    from simhub.schema import write_jsonl
    from simhub.simulation import Candidate
    from simhub.training.config import load_recipe
    from simhub.training.dpo import Context, candidate_text, stage_score

    assert candidate_text(Candidate(text="bye", finish_reason="stop", end_of_dialogue=True)) == f"bye{END_OF_DIALOGUE}"
    assert candidate_text(Candidate(text="", finish_reason="stop")) == ""
    recipe = load_recipe("tiny-student-dpo", ["dpo.reward_metrics=cosine"])
    profile = provision_profile(restrict(load_profile("demo"), metrics=["cosine"], simulators=[], tutors=[]))
    ctx = Context(recipe, tmp_path, False, {}, profile)
    dialogue = ctx.dialogues("train")[0]
    turn = dialogue.student_turn_indices()[0]
    texts = ["", f"I think so{END_OF_DIALOGUE}", "I think so"]
    write_jsonl(ctx.path("generate"), [{"split": "train", "dialogue_id": dialogue.id, "turn_index": turn,
                                        "long_prompt": False, "candidates": texts}])
    (scored,) = stage_score(ctx)
    assert [c["text"] for c in scored["candidates"]] == texts and scored["long_prompt"] is False
    rewards = [c["reward"] for c in scored["candidates"]]
    assert all(r is not None for r in rewards) and rewards[1] == pytest.approx(rewards[2])


def test_dpo_stages_resume_after_a_crash(tmp_path, monkeypatch, tiny_kit):
    import simhub.training.dpo as dpo
    from simhub.schema import iter_jsonl
    from simhub.training.config import load_recipe

    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text("{}")
    recipe = load_recipe("tiny-student-dpo", [f"dpo.sft_adapter={adapter}", f"base_model={tiny_kit['llama']}"])
    calls = []

    def fake_generate(ctx):
        calls.append("generate")
        return [{"split": "train", "dialogue_id": "d1", "turn_index": 5, "candidates": ["a", "b", "c"]}]

    def crash(ctx):
        calls.append("score")
        raise RuntimeError("scorer died")

    def fake_score(ctx):
        calls.append("score")
        recs = list(iter_jsonl(ctx.path("generate"), type=dict))
        return [{**r, "candidates": [{"text": t, "reward": float(i)} for i, t in enumerate(r["candidates"])]}
                for r in recs]

    import simhub.training.common as train_module
    from simhub.config import load_profile

    released = []  # the stage each release_models() call followed
    monkeypatch.setattr(train_module, "release_models", lambda: released.append(calls[-1]))
    monkeypatch.setitem(dpo.STAGE_FUNCTIONS, "generate", fake_generate)
    monkeypatch.setitem(dpo.STAGE_FUNCTIONS, "score", crash)
    out = tmp_path / "dpo"
    with pytest.raises(RuntimeError, match="scorer died"):
        dpo.run_dpo(recipe, out, load_profile("demo"), until="pairs")
    assert (out / "candidates.jsonl").is_file() and not (out / "scores.jsonl").exists()
    assert not list(out.glob(".*tmp"))
    monkeypatch.setitem(dpo.STAGE_FUNCTIONS, "score", fake_score)
    summary = dpo.run_dpo(recipe, out, load_profile("demo"), until="pairs")
    assert summary == {"generate": "skipped", "score": "done", "pairs": "done"}
    assert calls == ["generate", "score", "score"]
    assert released == ["generate", "score"]  # models freed after generating and after scoring, not after pairing
    pairs = list(iter_jsonl(out / "pairs.jsonl", type=dict))
    assert [(p["chosen"], p["rejected"]) for p in pairs] == [("c", "a"), ("b", "a"), ("c", "b")]


@pytest.mark.slow
def _tiny_sft_adapter(tiny_kit, folder: Path) -> Path:
    """An untrained LoRA (the paper's settings) on the tiny Llama, saved with its tokenizer: a stand-in SFT student."""
    from peft import get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from simhub.training.common import lora_config
    from simhub.training.config import TrainRecipe

    model = AutoModelForCausalLM.from_pretrained(tiny_kit["llama"])
    get_peft_model(model, lora_config(TrainRecipe())).save_pretrained(folder)
    AutoTokenizer.from_pretrained(tiny_kit["llama"]).save_pretrained(folder)
    return folder


def test_tiny_dpo_end_to_end(tmp_path, monkeypatch, simhub_home, tiny_kit):
    import shutil

    import torch
    from safetensors.torch import load_file

    import simhub.training.dpo as dpo
    from simhub.config import load_profile
    from simhub.models import loaded_models
    from simhub.provision import provision_profile, resolve_recipe, restrict
    from simhub.training import dpo_packing
    from simhub.training.config import load_recipe
    from simhub.training.dpo import run_dpo

    sft = _tiny_sft_adapter(tiny_kit, tmp_path / "sft")
    recipe = resolve_recipe(load_recipe("tiny-student-dpo", [
        f"dpo.sft_adapter={sft}", "max_train_dialogues=24", "max_eval_dialogues=8", "dpo.subsample=0.25",
        "dpo.num_candidates=3", "dpo.max_new_tokens=6", "max_steps=1", "dpo.epsilon=0.01", "dpo.reward_metrics=cosine"]))
    profile = provision_profile(restrict(load_profile("demo"), metrics=["cosine"], simulators=[], tutors=[]))
    out = tmp_path / "dpo"
    cached_at_train = []

    def train_stage(ctx):
        cached_at_train.append(len(loaded_models()))
        return dpo.stage_train(ctx)

    monkeypatch.setitem(dpo.STAGE_FUNCTIONS, "train", train_stage)
    packed = []
    pack_pairs = dpo_packing.pack_pairs

    def counted_pack_pairs(*args):
        result = pack_pairs(*args)
        packed.append(result is not None)
        return result

    monkeypatch.setattr(dpo_packing, "pack_pairs", counted_pack_pairs)
    summary = run_dpo(recipe, out, profile)
    assert summary == dict.fromkeys(("generate", "score", "pairs", "train"), "done")
    assert cached_at_train == [0]  # neither the policy nor the metric models are held while DPO trains
    config = json.loads((out / "training_config.json").read_text())
    assert config["recipe"]["kind"] == "student-dpo" and config["resolved"]["sft_adapter"] == str(sft)
    assert config["resolved"]["base_model"] and config["log_history"]
    assert config["data"]["pairs"] == len((out / "pairs.jsonl").read_text().splitlines())
    for name in ("candidates.jsonl", "scores.jsonl", "pairs.jsonl", "adapter_config.json", "eval_results.json"):
        assert (out / name).is_file(), name
    scored = [json.loads(line) for line in (out / "scores.jsonl").read_text().splitlines()]
    # FIDELITY.md (DPO data): every student turn of the DPO dialogues is sampled and scored, the first
    # five turns too; only pairing skips them.
    assert any(r["turn_index"] < 5 for r in scored) and any(r["turn_index"] >= 5 for r in scored)
    assert all(c.get("scores") is not None for r in scored for c in r["candidates"])
    pairs = [json.loads(line) for line in (out / "pairs.jsonl").read_text().splitlines()]
    assert pairs and all(p["turn_index"] >= 5 for p in pairs)
    # docs/protocol.md §8: candidates come from the first int(0.25·24) = 6 training dialogues (and the first 2 of
    # the validation split), never from later ones.
    from simhub.data.sample import load_sample_corpus

    corpus = load_sample_corpus()
    assert {r["dialogue_id"] for r in scored if r["split"] == "train"} <= {d.id for d in corpus["train"][:6]}
    assert {r["dialogue_id"] for r in scored if r["split"] == "val"} <= {d.id for d in corpus["val"][:2]}
    assert any(r["split"] == "val" for r in scored)
    assert all(len({c["text"] for c in r["candidates"]}) == len(r["candidates"]) <= 3 for r in scored)
    assert (out / "ref" / "adapter_config.json").is_file()  # trl's frozen SFT reference copy
    assert run_dpo(recipe, out, profile) == dict.fromkeys(("generate", "score", "pairs", "train"), "skipped")
    assert packed and all(packed)  # every DPO forward (policy, reference, validation) ran on packed pairs

    # FIDELITY.md (DPO packing): trained on trl's own unpacked rows, the same pairs give the same model.
    plain = tmp_path / "dpo-unpacked"
    plain.mkdir()
    for name in ("candidates.jsonl", "scores.jsonl", "pairs.jsonl"):
        shutil.copy(out / name, plain / name)
    monkeypatch.setattr(dpo_packing, "install", lambda model: None)
    packed.clear()
    assert run_dpo(recipe, plain, profile)["train"] == "done" and not packed
    results = [json.loads((d / "eval_results.json").read_text()) for d in (out, plain)]
    assert results[0]["eval_loss"] == pytest.approx(results[1]["eval_loss"], rel=1e-4)
    assert results[0]["train_loss"] == pytest.approx(results[1]["train_loss"], rel=1e-4)
    weights = [load_file(d / "adapter_model.safetensors") for d in (out, plain)]
    assert weights[0].keys() == weights[1].keys()
    for name, value in weights[1].items():
        torch.testing.assert_close(weights[0][name], value, rtol=1e-4, atol=1e-6)


def _tiny_dpo_demo_recipe(tiny_kit, tmp_path, monkeypatch):
    """(the SFT adapter, the recipe file) of a stand-in for ``demo:smol-student-dpo``: the tiny DPO
    recipe on a saved LoRA, cut to one step, shipped as that demo model's recipe in a fresh home."""
    import simhub.provision as provision

    sft = _tiny_sft_adapter(tiny_kit, tmp_path / "sft")
    text = (ROOT / "simhub" / "resources" / "recipes" / "tiny-student-dpo.yaml").read_text()
    recipe = tmp_path / "demo-dpo.yaml"
    recipe.write_text(text.replace("base_model: tiny:llama", f"base_model: {tiny_kit['llama']}")
                      .replace("sft_adapter: demo:student-sft", f"sft_adapter: {sft}")
                      .replace("max_steps: 2", "max_steps: 1").replace("max_new_tokens: 12", "max_new_tokens: 6")
                      .replace("reward_metrics: [rouge_l]", "reward_metrics: [cosine]")
                      .replace("epsilon: 0.1", "epsilon: 0.01"))
    monkeypatch.setenv("SIMHUB_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(provision, "demo_recipe", lambda name: str(recipe))
    provision._shipped_recipe.cache_clear()
    return sft, recipe


def test_a_student_dpo_demo_recipe_builds_through_the_whole_pipeline(tmp_path, monkeypatch, tiny_kit):
    """``demo:smol-student-dpo``'s build path, on the tiny kit: a demo model whose shipped recipe is a
    student-dpo one is built by the DPO pipeline (generate, score with the scoring profile's reward
    models, pair, train) into its folder, which keeps the pairs and no checkpoint, and is reused after."""
    import simhub.provision as provision

    sft, _ = _tiny_dpo_demo_recipe(tiny_kit, tmp_path, monkeypatch)
    try:
        folder = provision.build_demo_model("smol-student-dpo")
        assert folder == tmp_path / "home" / "demo" / "smol-student-dpo"
        for name in ("candidates.jsonl", "scores.jsonl", "pairs.jsonl", "adapter_config.json", "eval_results.json"):
            assert (folder / name).is_file(), name
        config = json.loads((folder / "training_config.json").read_text())
        assert config["recipe"]["kind"] == "student-dpo" and config["resolved"]["sft_adapter"] == str(sft)
        assert config["data"]["reward_profile"] == "demo"
        assert not list(folder.rglob("checkpoint-*")) and not list(folder.parent.glob(".*.partial"))
        assert provision.build_demo_model("smol-student-dpo") == folder and provision.is_built("demo:smol-student-dpo")
    finally:
        provision._shipped_recipe.cache_clear()


def test_a_stopped_dpo_demo_build_goes_on_from_its_last_finished_stage(tmp_path, monkeypatch, tiny_kit):
    """A DPO demo build stopped in training keeps its candidates, scores and pairs: the next build
    of the same recipe does not sample again, and one of another recipe starts afresh."""
    import simhub.provision as provision
    from simhub.training import dpo

    _, recipe = _tiny_dpo_demo_recipe(tiny_kit, tmp_path, monkeypatch)
    stages = dict(dpo.STAGE_FUNCTIONS)
    calls: list[str] = []

    def stage(name, fail=False):
        def run(ctx):
            calls.append(name)
            if fail:
                raise KeyboardInterrupt  # the user stops the build
            return stages[name](ctx)
        return run

    resume = tmp_path / "home" / "demo" / ".smol-student-dpo.resume"
    try:
        monkeypatch.setattr(dpo, "STAGE_FUNCTIONS", {**{n: stage(n) for n in stages}, "train": stage("train", fail=True)})
        with pytest.raises(KeyboardInterrupt):
            provision.build_demo_model("smol-student-dpo")
        assert calls == ["generate", "score", "pairs", "train"]
        kept = {name: (resume / name).read_bytes() for name in ("candidates.jsonl", "scores.jsonl", "pairs.jsonl")}
        assert not provision.is_built("demo:smol-student-dpo")

        calls.clear()
        monkeypatch.setattr(dpo, "STAGE_FUNCTIONS", {n: stage(n) for n in stages})
        folder = provision.build_demo_model("smol-student-dpo")
        assert calls == ["train"] and not resume.exists()
        assert {name: (folder / name).read_bytes() for name in kept} == kept
        assert (folder / "adapter_config.json").is_file() and provision.is_built("demo:smol-student-dpo")

        # the shipped recipe changes (so the built model is stale); a folder left by another recipe
        # is not gone on from
        resume.mkdir()
        (resume / provision.DEMO_RECIPE_FILE).write_text("{}")
        (resume / "pairs.jsonl").write_text("")
        recipe.write_text(recipe.read_text().replace("seed: 0", "seed: 1"))
        provision._shipped_recipe.cache_clear()
        calls.clear()
        provision.build_demo_model("smol-student-dpo")
        assert calls == ["generate", "score", "pairs", "train"]
    finally:
        provision._shipped_recipe.cache_clear()


# ---------------------------------------------------------------------------------- publishing


def _fake_model_dir(root: Path, base_hub_id: str, kind: str = "student-sft") -> Path:
    from simhub.training.config import TrainRecipe

    recipe = TrainRecipe(kind=kind, base_model="tiny:llama", base_model_hub_id=base_hub_id)
    root.mkdir(parents=True, exist_ok=True)
    (root / "training_config.json").write_text(json.dumps(
        {"recipe": recipe.to_dict(), "resolved": {"base_model": "/home/me/llama", "base_model_hub_id": base_hub_id},
         "log_history": [{"loss": 1.0}]}))
    results = {"eval_loss": 1.25, "perplexity": 3.49} if kind.startswith("student") else {
        "accuracy": 0.9, "macro_f1": 0.8, "auc": 0.65}
    (root / "eval_results.json").write_text(json.dumps(results))
    return root


@pytest.mark.parametrize("kind", ["student-sft", "student-dpo", "acts", "kt", "judge"])
def test_card_renders_and_round_trips(tmp_path, kind):
    from huggingface_hub import ModelCard

    from simhub.hub import render_card

    model_dir = _fake_model_dir(tmp_path / "m", "meta-llama/Llama-3.1-8B-Instruct", kind)
    (model_dir / "adapter_config.json").write_text("{}")
    text = render_card(model_dir, "my-org/simhub-model")
    (tmp_path / "README.md").write_text(text)
    card = ModelCard.load(tmp_path / "README.md")
    data = card.data.to_dict()
    assert data["base_model"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert data["library_name"] == "peft" and data["license"] == "cc-by-nc-sa-4.0"
    assert data["datasets"] == ["Eedi/Question-Anchored-Tutoring-Dialogues-2k"]
    assert data["pipeline_tag"] == "text-generation" and kind in data["tags"]
    results = card.data.eval_results
    assert results and all(r.dataset_type == "Eedi/Question-Anchored-Tutoring-Dialogues-2k" for r in results)
    if kind == "kt":
        assert {r.metric_type: r.metric_value for r in results}["roc_auc"] == 0.65
    if kind == "judge":
        assert "not in the paper" in card.text and {r.metric_type for r in results} == {"accuracy", "f1"}
    assert "CC BY-NC-SA 4.0" in card.text and "non-commercial" in card.text
    assert "learning_rate" in card.text


def test_card_needs_a_hub_base_model(tmp_path):
    from simhub.hub import render_card

    model_dir = _fake_model_dir(tmp_path / "m", None)
    with pytest.raises(ConfigError, match="base_model_hub_id"):
        render_card(model_dir, "org/x")


def test_publish_pull_round_trip(tmp_path, tiny_kit, local_hub, hub_api, simhub_home):
    import torch
    from peft import PeftModel, get_peft_model
    from transformers import AutoModelForCausalLM

    from simhub.cli import main
    from simhub.training.common import lora_config
    from simhub.training.config import TrainRecipe

    base_id = "simhub-test/tiny-llama"
    hub_api.create_repo(base_id, exist_ok=True)
    hub_api.upload_folder(repo_id=base_id, folder_path=str(tiny_kit["llama"]))
    model_dir = _fake_model_dir(tmp_path / "run", base_id)
    torch.manual_seed(0)
    peft_model = get_peft_model(AutoModelForCausalLM.from_pretrained(tiny_kit["llama"]), lora_config(TrainRecipe()))
    with torch.no_grad():
        for name, param in peft_model.named_parameters():
            if "lora_B" in name:
                param.normal_()
    peft_model.save_pretrained(model_dir)
    assert json.loads((model_dir / "adapter_config.json").read_text())["base_model_name_or_path"] != base_id
    (model_dir / "ref").mkdir()
    (model_dir / "ref" / "adapter_config.json").write_text("{}")
    (model_dir / "checkpoint-1").mkdir()
    (model_dir / "checkpoint-1" / "x.bin").write_text("x")

    repo = "simhub-test/student"
    assert main(["publish", str(model_dir), "--repo-id", repo, "--private", "--revision", "v1"]) == 0
    files = set(hub_api.list_repo_files(repo, revision="v1"))
    assert {"README.md", "adapter_config.json", "adapter_model.safetensors", "training_config.json",
            "eval_results.json"} <= files
    assert not any(f.startswith(("ref/", "checkpoint-")) for f in files)
    published = json.loads(Path(hub_api.hf_hub_download(repo, "training_config.json", revision="v1")).read_text())
    assert "/home/me" not in json.dumps(published) and "log_history" not in published

    pulled = tmp_path / "pulled"
    assert main(["pull", repo, "--revision", "v1", "--output-dir", str(pulled)]) == 0
    config = json.loads((pulled / "adapter_config.json").read_text())
    assert config["base_model_name_or_path"] == base_id
    assert not (pulled / "ref").exists()
    base = AutoModelForCausalLM.from_pretrained(config["base_model_name_or_path"])
    loaded = PeftModel.from_pretrained(base, str(pulled))
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        torch.testing.assert_close(loaded(ids).logits, peft_model.eval()(ids).logits)
    assert main(["pull", "simhub-test/no-such-model", "--output-dir", str(tmp_path / "x")]) == 2


@pytest.mark.parametrize("prompt_len,completion_len,prompt_kept", [
    (300, 5, 300), (600, 5, 512), (900, 5, 512), (1000, 20, 512), (900, 700, 324), (100, 1100, 0)])
def test_dpo_truncation_is_trl_0_22_2(prompt_len, completion_len, prompt_kept):
    """FIDELITY.md (DPO truncation, trl 0.22.2): the prompt always keeps its last 512 tokens, then the
    sequence keeps its last 1,024 (keep_end), so a long completion stays whole; trl's collator, with
    the arguments simhub's trainer passes it, cuts the same tokens."""
    from trl.trainer.dpo_trainer import DataCollatorForPreference

    from simhub.training.dpo import DPO_TRUNCATION_MODE, truncate_sequence

    prompt = list(range(1, prompt_len + 1))
    completion = list(range(10_000, 10_000 + completion_len))
    p, c = truncate_sequence(prompt, completion, 512, 1024)
    assert len(p) == prompt_kept and p == (prompt[len(prompt) - prompt_kept:] if prompt_kept else [])
    assert c == completion[-(1024 - len(p)):] if len(p) + len(completion) > 1024 else c == completion
    assert len(p) + len(c) == min(min(prompt_len, 512) + completion_len, 1024)
    if (prompt_len, completion_len) == (900, 700):
        assert len(p) + len(c) == 1024 and c == completion

    collator = DataCollatorForPreference(pad_token_id=0, max_length=1024, truncation_mode=DPO_TRUNCATION_MODE)
    short = completion[:3]
    batch = collator([{"prompt_ids": truncate_sequence(prompt, [], 512, None)[0], "chosen_ids": completion,
                       "rejected_ids": short}])
    for row, kept in enumerate([(p, c), truncate_sequence(prompt, short, 512, 1024)]):
        length = int(batch["attention_mask"][row].sum())
        ids, mask = batch["input_ids"][row][:length].tolist(), batch["completion_mask"][row][:length].tolist()
        assert ids == kept[0] + kept[1] and sum(mask) == len(kept[1])  # chosen and rejected cut separately


def _fused_tiny_policy(tiny_kit):
    """The tiny Llama with trl's fused log-prob head and a random (non-zero) LoRA, as trl's DPO sees it."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM
    from trl.trainer.utils import add_fused_lm_head

    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(tiny_kit["llama"])
    add_fused_lm_head(base, outputs=("log_probs", "entropy", "mean_logits", "is_top1"))
    return get_peft_model(base, LoraConfig(r=4, target_modules=["q_proj", "v_proj", "down_proj"],
                                           init_lora_weights=False))


def test_dpo_packed_pairs_give_trls_log_probs_and_gradients_with_each_prompt_encoded_once(tiny_kit):
    """FIDELITY.md (DPO packing): a pair's prompt, chosen and rejected completions in one row give
    the same per-token log-probs, entropies, logits means, top-1 flags and gradients as trl's two
    rows, while the model embeds each shared prompt once (the branches fork one token early)."""
    import torch
    from trl.trainer.dpo_trainer import DataCollatorForPreference

    from simhub.training import dpo_packing

    model = _fused_tiny_policy(tiny_kit)
    vocab = model.config.vocab_size
    g = torch.Generator().manual_seed(1)

    def tokens(n):
        return torch.randint(5, vocab, (n,), generator=g).tolist()

    prompt = tokens(20)
    shared = tokens(2)
    examples = [
        {"prompt_ids": prompt, "chosen_ids": tokens(5), "rejected_ids": tokens(7)},
        {"prompt_ids": tokens(13), "chosen_ids": shared + tokens(2), "rejected_ids": shared + tokens(4)},
        {"prompt_ids": prompt, "chosen_ids": shared, "rejected_ids": shared + tokens(3)},  # a prefix of the other
        {"prompt_ids": tokens(30), "chosen_ids": tokens(1), "rejected_ids": tokens(9)},
    ]
    # keep_end with max_length 32 cuts the fourth pair's prompt differently for its two completions.
    batch = DataCollatorForPreference(pad_token_id=0, max_length=32, truncation_mode="keep_end")(examples)
    labels = batch["input_ids"].masked_fill(batch["completion_mask"] == 0, -100)
    embedded = []
    model.get_base_model().get_input_embeddings().register_forward_hook(
        lambda module, args, out: embedded.append(args[0].numel()))

    def step():
        model.zero_grad()
        embedded.clear()
        out = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=labels,
                    fused_lm_head=True, use_cache=False)
        out.log_probs.sum(dim=1).pow(2).sum().backward()
        fields = {name: getattr(out, name).detach() for name in ("log_probs", "entropy", "mean_logits", "is_top1")}
        grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
        return fields, grads, sum(embedded)

    rows, grads, plain_tokens = step()
    dpo_packing.install(model.get_base_model())
    packed_rows, packed_grads, packed_tokens = step()
    for name, value in rows.items():
        if name == "is_top1":
            assert torch.equal(packed_rows[name], value)
        else:
            torch.testing.assert_close(packed_rows[name], value, rtol=1e-5, atol=1e-5)
    assert rows["log_probs"].ne(0).sum(dim=1).tolist() == batch["completion_mask"].sum(dim=1).tolist()
    assert grads.keys() == packed_grads.keys() and grads
    for name, grad in grads.items():
        torch.testing.assert_close(packed_grads[name], grad, rtol=1e-3, atol=1e-4 * float(grad.abs().max()))
    lengths = batch["attention_mask"].sum(dim=1).tolist()
    n = len(examples)
    # Trunks: the prompt less its last token; the second pair shares its completions' first two tokens;
    # the fourth pair's prompts start at different tokens, so it shares nothing.
    trunks = [19, 13 + 2 - 1, 20 + 2 - 1, 0]
    width = max(lengths[i] + lengths[n + i] - trunks[i] for i in range(n))
    assert plain_tokens == 2 * n * batch["input_ids"].size(1) and packed_tokens == n * width < plain_tokens


def test_dpo_packing_leaves_other_calls_to_the_plain_forward(tiny_kit):
    """Generation-style calls (no fused head) and left-padded batches are not packed."""
    import torch

    from simhub.training import dpo_packing

    model = _fused_tiny_policy(tiny_kit)
    ids = torch.tensor([[0, 0, 5, 6, 7, 8], [9, 10, 11, 12, 13, 14]])
    mask = (ids != 0).long()
    labels = ids.masked_fill(torch.tensor([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 0, 0]]).bool(), -100)
    assert dpo_packing.pack_pairs(ids, mask, labels, torch.float32) is None
    with torch.no_grad():
        before = model(input_ids=ids, attention_mask=mask, labels=labels, fused_lm_head=True).log_probs
        logits = model(input_ids=ids, attention_mask=mask).logits
        dpo_packing.install(model.get_base_model())
        torch.testing.assert_close(model(input_ids=ids, attention_mask=mask, labels=labels,
                                         fused_lm_head=True).log_probs, before)
        torch.testing.assert_close(model(input_ids=ids, attention_mask=mask).logits, logits)


def test_dpo_completion_is_the_candidate_and_one_end_of_turn_token(tokenizer, sample_corpus):
    """FIDELITY.md (DPO truncation): what trl trains on for a pair. The reference passed the templated
    prompt string and the raw candidate, and trl appended the end-of-turn token (Llama 3.1's EOS); simhub
    passes conversational rows (:func:`preference_rows`), and trl's own tokenisation gives the same ids:
    the templated prompt, then the candidate (its end-of-dialogue marker kept) and one end-of-turn token.
    Only whitespace around a candidate differs: the chat template trims it (FIDELITY.md, deviations)."""
    from types import SimpleNamespace

    from datasets import Dataset
    from trl import DPOTrainer

    from simhub.prompts import END_OF_DIALOGUE, student_messages
    from simhub.training.dpo import DPO_TRUNCATION_MODE, preference_rows

    dialogue = sample_corpus["train"][0]
    turn = dialogue.student_turn_indices()[1]
    chosen, rejected = f"I think it is 3/4{END_OF_DIALOGUE}", "  no idea "
    rows = preference_rows([{"dialogue_id": dialogue.id, "turn_index": turn, "chosen": chosen, "rejected": rejected}],
                           {dialogue.id: dialogue}, "none")
    assert rows[0]["prompt"] == student_messages(dialogue, upto=turn, persona="none")
    args = SimpleNamespace(dataset_num_proc=None, max_length=1024, truncation_mode=DPO_TRUNCATION_MODE)
    (example,) = DPOTrainer._prepare_dataset(SimpleNamespace(_tokenizer=tokenizer), Dataset.from_list(rows),
                                             tokenizer, args, "train")
    prompt = tokenizer.apply_chat_template(rows[0]["prompt"], add_generation_prompt=True, tokenize=False)
    eot = tokenizer.convert_tokens_to_ids("<|eot_id|>")
    assert eot == tokenizer.eos_token_id
    assert example["prompt_ids"] == tokenizer.encode(prompt, add_special_tokens=False)
    assert example["chosen_ids"] == [*tokenizer.encode(chosen, add_special_tokens=False), eot]
    assert example["rejected_ids"] == [*tokenizer.encode("no idea", add_special_tokens=False), eot]  # trimmed


def test_dpo_truncation_without_limits_keeps_everything():
    from simhub.training.dpo import truncate_sequence

    prompt, completion = list(range(2000)), list(range(700))
    assert truncate_sequence(prompt, completion, None, None) == (prompt, completion)
    assert truncate_sequence(prompt, completion, 512, None) == (prompt[-512:], completion)


def test_chat_templated_prompt_length_filter(tokenizer, sample_corpus):
    """docs/protocol.md §2 rule 8 / §8: the 6,000-character rule measures the chat-templated prompt string."""
    from simhub.training.data import build_chat_examples, chat_conversations

    dialogue = max(sample_corpus["train"], key=lambda d: sum(len(t.content) for t in d.turns))
    messages = chat_conversations("student-sft", dialogue)[0]
    templated = len(tokenizer.apply_chat_template(messages, tokenize=False))
    raw = sum(len(m["content"]) for m in messages)
    assert templated > raw
    assert build_chat_examples(tokenizer, "student-sft", [dialogue], templated + 1).excluded_long == 0
    assert build_chat_examples(tokenizer, "student-sft", [dialogue], templated).excluded_long == 1


# ---- the act classifier's greedy decoding against the label scoring --------------------------------------------
# (in this file, one of the two with the most tests: pytest-xdist deals those out first, so this
# long test starts early on a worker rather than ending the run)


@pytest.mark.slow
def test_act_classifier_greedy_generation_agrees_with_label_scoring(sample_corpus, tmp_path):
    """FIDELITY.md, act prediction: the reference generates the act greedily and compares strings;
    simhub scores the five labels as continuations. On a tiny LM act classifier (the paper's kind of
    classifier: the ``tiny-acts-llm`` recipe, trained here for 300 of its 1,000 steps at three times
    its rate, to keep the suite short), wherever greedy decoding writes a label it is the label the
    scoring picks. How often it writes one depends on the machine: CPU training is not bit-identical
    across vector instruction sets, and this short, fast run ends in a different classifier on each
    (measured: a label for 261 and 263 of the 273 labelled real test turns on two machines, 92 on an
    AVX2-only one; every written label the scoring's on all three). The fully trained
    ``demo:acts-llm`` wrote a label for all 273, each the scoring's (measured once)."""
    from simhub.config import ModelRef
    from simhub.metrics import MetricContext
    from simhub.metrics.acts import Acts
    from simhub.models import Sampling
    from simhub.models.cpu import pinned_threads
    from simhub.prompts import act_messages
    from simhub.provision import DEMO_BUILD_THREADS, resolve_recipe
    from simhub.schema import ACTS
    from simhub.training import load_recipe, train

    recipe = resolve_recipe(load_recipe("tiny-acts-llm", ["max_steps=300", "eval_steps=300", "learning_rate=3e-3"]))
    with pinned_threads(DEMO_BUILD_THREADS):  # as a demo build (the same classifier whatever the load)
        train(recipe, tmp_path / "acts-llm")
    metric = Acts(ModelRef(model=str(tmp_path / "acts-llm")), MetricContext())
    items = [(d.turns[:i], d.turns[i].content, d) for d in sample_corpus["test"]
             for i in d.student_turn_indices() if d.turns[i].act is not None]
    scored = metric.predict(items)
    lm = metric.load()
    greedy = lm.generate([act_messages(*item) for item in items], Sampling(max_tokens=8))
    written = [r.generations[0].text.strip() for r in greedy]
    on_label = [(w, s) for w, s in zip(written, scored, strict=True) if w in ACTS]
    assert len(items) == 273 and len(on_label) >= 60  # enough written labels to compare (92 to 263 measured)
    assert sum(w == s for w, s in on_label) >= 0.98 * len(on_label)
