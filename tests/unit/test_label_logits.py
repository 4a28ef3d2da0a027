"""Training's label-only logits (simhub.training.common.label_logits_loss): the same loss and the
same gradients as transformers' own causal-LM loss, with the output layer applied only where a
label is."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
peft = pytest.importorskip("peft")

from simhub.training.common import label_logits_loss, label_logits_trainer  # noqa: E402


def _model(modules_to_save=("lm_head", "embed_tokens")):
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=97, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=2, num_key_value_heads=2, head_dim=16,
                                      max_position_embeddings=64, pad_token_id=0)
    base = transformers.LlamaForCausalLM(config)
    lora = peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"],
                           modules_to_save=list(modules_to_save), task_type="CAUSAL_LM")
    return peft.get_peft_model(base, lora)


def _batch():
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(1, 97, (3, 20), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 14:] = 0  # right padding, as PadCollator makes it
    ids[1, 14:] = 0
    labels = torch.full_like(ids, -100)
    labels[0, 17:] = ids[0, 17:]  # a label at the end, a few tokens in the middle, a one-token label
    labels[1, 9:14] = ids[1, 9:14]
    labels[2, 19] = ids[2, 19]
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def _grads(model):
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad and p.grad is not None}


@pytest.mark.parametrize("num_items", [None, 11])
def test_the_label_only_loss_and_its_gradients_equal_transformers_own(num_items):
    model, batch = _model(), _batch()
    extra = {} if num_items is None else {"num_items_in_batch": torch.tensor(num_items)}
    reference = model(**batch, **extra).loss
    reference.backward()
    expected = _grads(model)
    model.zero_grad()
    loss = label_logits_loss(model, batch, None if num_items is None else torch.tensor(num_items))
    loss.backward()
    got = _grads(model)
    assert loss.item() == pytest.approx(reference.item(), rel=1e-5)
    assert expected.keys() == got.keys() and any("lm_head" in n for n in got)
    for name in expected:
        assert torch.allclose(expected[name], got[name], atol=1e-6, rtol=1e-4), name


def test_no_shortcut_without_labels_or_for_another_model_type():
    model, batch = _model(), _batch()
    assert label_logits_loss(model, {k: v for k, v in batch.items() if k != "labels"}) is None
    config = transformers.GPT2Config(vocab_size=50, n_embd=16, n_layer=1, n_head=2, n_positions=32)
    assert label_logits_loss(transformers.GPT2LMHeadModel(config), {**batch, "input_ids": batch["input_ids"] % 50}) is None


def test_the_trainer_takes_the_shortcut_in_training_and_its_own_path_for_outputs(tmp_path):
    model, batch = _model(), _batch()
    args = transformers.TrainingArguments(output_dir=str(tmp_path), report_to=[], use_cpu=True)
    trainer = label_logits_trainer()(model=model, args=args)
    plain = transformers.Trainer(model=model, args=args)
    fast = trainer.compute_loss(model, batch, num_items_in_batch=torch.tensor(11))
    slow = plain.compute_loss(model, batch, num_items_in_batch=torch.tensor(11))
    assert fast.item() == pytest.approx(slow.item(), rel=1e-5)
    loss, outputs = trainer.compute_loss(model, batch, return_outputs=True)  # evaluation: full logits
    assert loss.item() == pytest.approx(plain.compute_loss(model, batch).item(), rel=1e-5)  # the mean: no item count
    assert outputs.logits.shape == (3, 20, 97)


def _decoder_masks(model, batch):
    """The attention masks the decoder was called with while label_logits_loss ran on ``batch``."""
    seen = []
    decoder = model.get_base_model().get_decoder()
    hook = decoder.register_forward_pre_hook(lambda module, args, kwargs: seen.append(kwargs.get("attention_mask")),
                                             with_kwargs=True)
    try:
        loss = label_logits_loss(model, batch)
    finally:
        hook.remove()
    return loss, seen


def test_right_padded_rows_train_under_the_causal_mask_alone_with_the_same_loss_and_gradients():
    """PadCollator's rows (ones, then zeros; no label on a pad): a real token never sees a pad under
    the causal mask, so the decoder runs without the padding mask (its causal attention kernel), and
    the loss and gradients are transformers' own with the mask."""
    model, batch = _model(), _batch()
    reference = model(**batch).loss
    reference.backward()
    expected = _grads(model)
    model.zero_grad()
    loss, seen = _decoder_masks(model, batch)
    loss.backward()
    assert seen == [None]
    assert loss.item() == pytest.approx(reference.item(), rel=1e-5)
    for name, grad in _grads(model).items():
        assert torch.allclose(expected[name], grad, atol=1e-6, rtol=1e-4), name


@pytest.mark.parametrize("case", ["left padding", "a label on a pad"])
def test_the_padding_mask_is_kept_where_the_causal_mask_is_not_enough(case):
    model, batch = _model(), _batch()
    if case == "left padding":
        batch["input_ids"][1] = batch["input_ids"][1].roll(6)
        batch["attention_mask"][1] = batch["attention_mask"][1].roll(6)
        batch["labels"][1] = batch["labels"][1].roll(6)
    else:
        batch["labels"][1, 15] = 5
    reference = model(**batch).loss
    loss, seen = _decoder_masks(model, batch)
    assert len(seen) == 1 and torch.equal(seen[0], batch["attention_mask"])
    if case == "left padding":
        assert loss.item() == pytest.approx(reference.item(), rel=1e-5)
