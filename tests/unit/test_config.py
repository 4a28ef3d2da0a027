"""Profiles parsed once into typed structs: shipped profiles, extends, did-you-mean, environment overrides."""

from __future__ import annotations

import pytest

from simhub.config import (
    JudgeConfig,
    ModelRef,
    Profile,
    SimulatorConfig,
    available_profiles,
    load_profile,
    provisioned_refs,
)
from simhub.errors import ConfigError, UnknownNameError


def test_shipped_profiles_parse_into_typed_structs():
    assert {"demo", "paper-8b"} <= set(available_profiles())
    demo = load_profile("demo")
    assert isinstance(demo, Profile) and demo.source == "demo"
    assert demo.scoring.metrics.acts == ModelRef(model="demo:acts")  # a bare string is {model: ...}
    assert isinstance(demo.scoring.metrics.judge, JudgeConfig) and demo.scoring.metrics.judge.kind == "local"
    assert demo.scoring.metrics.knowledge.cutoffs == "model" and demo.scoring.metrics.knowledge.eval_cutoffs == "paper"
    assert demo.simulators["tiny-student-sft"].persona == "none"  # docs/protocol.md §8: no persona by default
    assert {"demo:acts", "demo:kt", "demo:tutor", "demo:student-sft", "tiny:llama"} <= set(provisioned_refs(demo))
    paper = load_profile("paper-8b")
    judge = paper.scoring.metrics.judge
    assert (judge.kind, judge.model, judge.reasoning_effort, judge.max_completion_tokens) == (
        "openai", "gpt-5-mini-2025-08-07", "low", 15000)
    assert paper.scoring.metrics.cosine.model == "Qwen/Qwen3-Embedding-8B"
    assert provisioned_refs(paper) == []


def test_unknown_keys_name_the_yaml_path_with_a_suggestion(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("name: p\nscoring:\n  metrics:\n    acts: {model: m, adaptr: x}\n")
    with pytest.raises(ConfigError, match=r"scoring.metrics.acts.adaptr: unknown key \(did you mean 'adapter'\?\)") as info:
        load_profile(path)
    assert info.value.field == "scoring.metrics.acts.adaptr"
    path.write_text("name: p\nsimulator:\n  x: m\n")
    with pytest.raises(ConfigError, match="did you mean 'simulators'"):
        load_profile(path)
    path.write_text("name: p\nsimulators:\n  x: {model: m, persona: yes}\n")
    with pytest.raises(ConfigError, match="persona"):
        load_profile(path)


def test_unknown_profile_lists_the_shipped_ones():
    with pytest.raises(UnknownNameError, match=r"unknown profile 'demoo' \(did you mean 'demo'\?\); known: demo, demo-smol, paper-8b"):
        load_profile("demoo")


def test_extends_adds_a_simulator_without_copying_the_paper_profile(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text(
        "extends: paper-8b\n"
        "name: mine\n"
        "simulators:\n"
        "  my-student: {kind: openai, model: my-model, endpoint: {base_url: 'http://localhost:9000/v1'}}\n"
        "  student-sft-8b: null\n"           # null removes what the base defined
        "scoring:\n  batch_size: 8\n")
    profile = load_profile(path)
    assert profile.name == "mine" and profile.extends == "paper-8b"
    assert set(profile.simulators) == {"student-dpo-8b", "my-student"}
    assert profile.simulators["my-student"] == SimulatorConfig(kind="openai", model="my-model", endpoint=profile.simulators["my-student"].endpoint)
    assert profile.scoring.batch_size == 8 and profile.scoring.device == "cuda"  # merged key by key
    assert profile.scoring.metrics.judge.model == "gpt-5-mini-2025-08-07"


def test_extends_cycles_and_relative_paths(tmp_path):
    (tmp_path / "a.yaml").write_text("extends: b.yaml\nname: a\n")
    (tmp_path / "b.yaml").write_text("extends: a.yaml\nname: b\n")
    with pytest.raises(ConfigError, match="extends itself"):
        load_profile(tmp_path / "a.yaml")
    (tmp_path / "base.yaml").write_text("name: base\nscoring: {batch_size: 3}\n")
    (tmp_path / "child.yaml").write_text("extends: base.yaml\nname: child\n")
    assert load_profile(tmp_path / "child.yaml").scoring.batch_size == 3


def test_environment_overrides_endpoints_not_keys(monkeypatch):
    profile = load_profile("paper-8b", environ={"SIMHUB_JUDGE_BASE_URL": "https://proxy.example/v1",
                                                "SIMHUB_BASELINE_BASE_URL": "http://localhost:8001/v1"})
    assert profile.scoring.metrics.judge.endpoint.base_url == "https://proxy.example/v1"
    assert profile.baselines.endpoint.base_url == "http://localhost:8001/v1"
    assert "api_key" not in repr(profile).replace("api_key_env", "")


def test_every_shipped_recipe_parses():
    from simhub.training.config import available_recipes, load_recipe

    names = available_recipes()
    assert len(names) == 22 and {"tiny-acts", "tiny-acts-llm", "tiny-correctness-emb", "smol-student-sft",
                                 "smol-student-dpo", "tiny-student-grpo", "smol-student-grpo",
                                 "student-grpo-8b"} <= set(names)
    for name in names:
        assert load_recipe(name).kind


def test_recipe_persona_is_a_choice_not_a_boolean(tmp_path):
    from simhub.training.config import load_recipe

    path = tmp_path / "r.yaml"
    path.write_text("kind: student-sft\npersona: true\n")
    with pytest.raises(ConfigError, match="no longer a boolean"):
        load_recipe(path)
    path.write_text("kind: student-sft\npersona: profile\n")
    assert load_recipe(path).persona == "profile"
