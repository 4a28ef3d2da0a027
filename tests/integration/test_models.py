"""The model layer: adapters on one shared base equal merged copies, and the interface's shapes."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from simhub.config import ModelRef
from simhub.models import LoadOptions, Sampling, load_lm, unload_models


@pytest.fixture(scope="module")
def adapters(tiny_kit, tmp_path_factory):
    from simhub.provision import build_random_lora

    root = tmp_path_factory.mktemp("adapters")
    base = str(tiny_kit["llama"])
    return base, [str(build_random_lora(base, root / f"a{k}", rank=8, seed=k)) for k in range(2)]


def _pairs(lm):
    prompts = [lm.chat_ids([{"role": "user", "content": t}]) for t in ("What is 3/4 of 20?", "Why flip the fraction?")]
    return [(p, lm.text_ids(" fifteen")) for p in prompts]


def test_adapters_share_one_base_and_equal_merged_copies(adapters):
    base, (a0, a1) = adapters
    unload_models()
    shared = [load_lm(ModelRef(model=base, adapter=a), LoadOptions(share_base=True)) for a in (a0, a1)]
    plain_shared = load_lm(ModelRef(model=base), LoadOptions(share_base=True))
    assert shared[0].loaded is shared[1].loaded is plain_shared.loaded  # one base in memory
    shared_lp = [lm.continuation_logprobs(_pairs(lm)) for lm in (*shared, plain_shared)]
    unload_models()
    merged = [load_lm(ModelRef(model=base, adapter=a), LoadOptions(share_base=False)) for a in (a0, a1)]
    assert merged[0].loaded is not merged[1].loaded
    merged_lp = [lm.continuation_logprobs(_pairs(lm)) for lm in merged]
    plain = load_lm(ModelRef(model=base), LoadOptions(share_base=False))
    plain_lp = plain.continuation_logprobs(_pairs(plain))
    for got, want in zip(shared_lp, [*merged_lp, plain_lp], strict=True):
        for g, w in zip(got, want, strict=True):
            assert np.allclose(g, w, atol=1e-4)
    # The adapters are not no-ops: each changes the log-probabilities.
    assert not np.allclose(merged_lp[0][0], plain_lp[0], atol=1e-3)
    assert not np.allclose(merged_lp[0][0], merged_lp[1][0], atol=1e-3)
    unload_models()


def test_next_token_logprobs_equal_one_token_continuations(tiny_kit):
    lm = load_lm(ModelRef(model=str(tiny_kit["llama"])))
    prompts = [lm.chat_ids([{"role": "user", "content": t}]) for t in ("Is it True?", "ok")]
    tokens = lm.text_ids(" True")[:1] + lm.text_ids(" False")[:1]
    got = lm.next_token_logprobs(prompts, tokens)
    want = np.array([[lp[0] for lp in lm.continuation_logprobs([(p, [t]) for t in tokens])] for p in prompts])
    assert got.shape == (2, 2) and np.allclose(got, want, atol=1e-5)


def test_greedy_generation_equals_transformers_generate(tiny_kit):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    lm = load_lm(ModelRef(model=str(tiny_kit["llama"])))
    messages = [{"role": "user", "content": "What is 1/2 + 1/4?"}]
    result = lm.generate([messages, messages], Sampling(max_tokens=12, n=2))
    assert len(result) == 2 and len(result[0].generations) == 2
    assert result[0].generations[0].text == result[0].generations[1].text == result[1].generations[0].text
    tok = AutoTokenizer.from_pretrained(tiny_kit["llama"])
    model = AutoModelForCausalLM.from_pretrained(tiny_kit["llama"]).eval()
    ids = torch.tensor([lm.chat_ids(messages)])
    out = model.generate(ids, max_new_tokens=12, do_sample=False, eos_token_id=lm.stop_ids, pad_token_id=lm.pad_id)
    assert result[0].generations[0].text == tok.decode(out[0, ids.shape[1]:], skip_special_tokens=True)
    assert result[0].prompt_tokens == ids.shape[1]


def test_seeded_sampling_is_reproducible_and_stop_strings_cut(tiny_kit):
    lm = load_lm(ModelRef(model=str(tiny_kit["llama"])))
    messages = [{"role": "user", "content": "Explain it again please"}]
    s = Sampling(temperature=1.0, top_p=0.95, max_tokens=16, n=3, seed=7)
    a, b = lm.generate([messages], s), lm.generate([messages], s)
    assert [g.text for g in a[0].generations] == [g.text for g in b[0].generations]
    one = Sampling(temperature=1.0, top_p=0.95, max_tokens=16, n=1, seed=7)
    text = lm.generate([messages], one)[0].generations[0].text
    assert len(text) > 4
    stop = text[2:4]
    g = lm.generate([messages], dataclasses.replace(one, stop=(stop,)))[0].generations[0]
    assert g.text == text[: text.index(stop)] and g.stop_string == stop and g.finish_reason == "stop"


def _through_first_stop(new: list[int], stop_ids) -> list[int]:
    """transformers' new tokens as simhub returns them: cut after the first stop token."""
    cut = next((j for j, t in enumerate(new) if t in stop_ids), None)
    return new if cut is None else new[: cut + 1]


def test_sampling_has_no_top_k_unless_asked(tiny_kit):
    """FIDELITY.md (sampling): transformers' generate cuts to the 50 most likely tokens unless told
    otherwise; simhub passes top_k itself (0, none, as the reference's vLLM sampling), so a seeded
    sample is transformers' with top_k=0, and top_k=5 is honoured. A high temperature flattens the
    tiny model's distribution, so that the top-50 cut changes samples."""
    import torch
    from transformers import AutoModelForCausalLM

    lm = load_lm(ModelRef(model=str(tiny_kit["llama"])))
    ids = lm.chat_ids([{"role": "user", "content": "Explain it again please"}])
    model = AutoModelForCausalLM.from_pretrained(tiny_kit["llama"]).eval()

    def transformers_sample(seed: int, **top_k) -> list[int]:
        torch.manual_seed(seed)
        out = model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                             do_sample=True, temperature=3.0, top_p=1.0, max_new_tokens=12, eos_token_id=lm.stop_ids,
                             pad_token_id=lm.pad_id, **top_k)
        return _through_first_stop(out[0, len(ids):].tolist(), lm.stop_ids)

    differs = False
    for seed in range(6):
        unset, none = transformers_sample(seed), transformers_sample(seed, top_k=0)
        assert unset == transformers_sample(seed, top_k=50)  # what generate does when not told
        differs = differs or unset != none
        assert lm.generate_ids([ids], Sampling(temperature=3.0, max_tokens=12, seed=seed))[0][0] == none
        assert lm.generate_ids([ids], Sampling(temperature=3.0, max_tokens=12, seed=seed, top_k=5))[0][0] == \
            transformers_sample(seed, top_k=5)
    assert differs  # the top-50 cut changes some samples, so passing top_k=0 matters


def test_samples_of_one_prompt_share_the_encoding_of_its_history(tiny_kit):
    """n samples per prompt (DPO's candidates): each prompt's history is encoded once, not n times,
    and the samples are those of transformers' own ``num_return_sequences`` on left-padded prompts of
    different lengths, seed for seed (same rows, logits and random draws)."""
    import torch
    from transformers import AutoModelForCausalLM

    lm = load_lm(ModelRef(model=str(tiny_kit["llama"])))
    prompts = [lm.chat_ids([{"role": "user", "content": text}])
               for text in ("Explain it again please", "What is 3/4 of 12?", "ok")]
    assert len({len(p) for p in prompts}) == 3  # left padding is exercised
    model = AutoModelForCausalLM.from_pretrained(tiny_kit["llama"]).eval()
    n, width = 4, max(len(p) for p in prompts)

    def transformers_samples(seed: int) -> list[list[int]]:
        ids = torch.tensor([[lm.pad_id] * (width - len(p)) + p for p in prompts])
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
        torch.manual_seed(seed)
        out = model.generate(ids, attention_mask=mask, do_sample=True, temperature=3.0, top_p=0.95, top_k=0,
                             num_return_sequences=n, max_new_tokens=10, eos_token_id=lm.stop_ids, pad_token_id=lm.pad_id)
        return [_through_first_stop(row, lm.stop_ids) for row in out[:, width:].tolist()]

    encoded: list[int] = []  # tokens each forward pass of simhub's model embeds
    hook = lm.model.get_input_embeddings().register_forward_hook(lambda _m, args, _out: encoded.append(args[0].numel()))
    try:
        for seed in range(3):
            encoded.clear()
            got = lm.generate_ids(prompts, Sampling(temperature=3.0, top_p=0.95, max_tokens=10, n=n, seed=seed))
            assert [seq for row in got for seq in row] == transformers_samples(seed), seed
            # the histories once (all but their last token), then one token per sample and step
            assert encoded[0] == len(prompts) * (width - 1) and max(encoded[1:]) == len(prompts) * n, encoded
    finally:
        hook.remove()
