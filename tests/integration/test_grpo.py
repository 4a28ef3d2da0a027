"""``simhub grpo``: online RL of a student on the realism reward (trl's GRPO), on the tiny kit.

Two steps change the adapter and never the base; a run killed after its first checkpoint goes on
from it with ``--resume``; the held-out metric is logged at every step beside the reward; the
reward-hacking check flags a held-out metric that falls while the reward rises, and only then.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from simhub.cli import main
from simhub.errors import ConfigError
from simhub.training.grpo import hacking_flags


@pytest.fixture(scope="module")
def sft(tiny_kit, tmp_path_factory) -> Path:
    from tests.integration.test_training import _tiny_sft_adapter

    return _tiny_sft_adapter(tiny_kit, tmp_path_factory.mktemp("sft") / "adapter")


def _digest(folder: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            h.update(p.name.encode() + p.read_bytes())
    return h.hexdigest()


def _tensors(path: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(path))


def test_two_grpo_steps_change_the_adapter_and_not_the_base(sft, tiny_kit, tmp_path):
    base = _digest(Path(tiny_kit["llama"]))
    out = tmp_path / "grpo"
    assert main(["grpo", "tiny-student-grpo", "--output-dir", str(out), "--set", f"grpo.sft_adapter={sft}"]) == 0
    config = json.loads((out / "training_config.json").read_text())
    assert config["recipe"]["kind"] == "student-grpo" and config["recipe"]["grpo"]["num_generations"] == 4
    data = config["data"]
    assert data["global_step"] == 2 and data["reward"]["metrics"] == ["rouge_l"] and data["held_out_metrics"] == ["cosine"]
    steps = [e for e in config["log_history"] if "rewards/realism/mean" in e]
    assert len(steps) == 2
    for e in steps:  # the reward, the held-out metric and the completions' lengths, at every step
        assert e["rewards/cosine/mean"] is not None and 0 < e["completions/mean_length"] <= 8
    before, after = _tensors(sft / "adapter_model.safetensors"), _tensors(out / "adapter_model.safetensors")
    assert set(before) == set(after) and all("lora_" in k for k in after)  # an adapter, no base weight in it
    assert any(not before[k].equal(after[k]) for k in before)  # trained
    assert _digest(Path(tiny_kit["llama"])) == base  # the base is never written


def test_a_killed_grpo_run_resumes_from_its_last_checkpoint(sft, tmp_path, monkeypatch):
    import simhub.training.common as common
    from simhub.provision import grpo_reward_profile, resolve_recipe
    from simhub.training.config import load_recipe
    from simhub.training.grpo import run_grpo

    recipe = resolve_recipe(load_recipe("tiny-student-grpo", [f"grpo.sft_adapter={sft}", "max_steps=3"]))
    profile = grpo_reward_profile(recipe)
    out = tmp_path / "grpo"
    policy = common.thread_policy_callback

    def killed_after_the_first_checkpoint():
        from transformers import TrainerCallback

        class Killed(TrainerCallback):
            def on_save(self, args, state, control, **kwargs):
                if state.global_step == 1:
                    raise KeyboardInterrupt

        return Killed()

    monkeypatch.setattr(common, "thread_policy_callback", killed_after_the_first_checkpoint)
    with pytest.raises(KeyboardInterrupt):
        run_grpo(recipe, out, profile)
    assert [p.name for p in (out / "grpo").glob("checkpoint-*")] == ["checkpoint-1"]
    monkeypatch.setattr(common, "thread_policy_callback", policy)
    with pytest.raises(ConfigError, match="holds checkpoints from an earlier run"):
        run_grpo(recipe, out, profile)  # never trained over without --resume
    results = run_grpo(recipe, out, profile, resume=True)
    assert results["resumed_from"] == "checkpoint-1" and results["global_step"] == 3
    logged = [e["step"] for e in json.loads((out / "training_config.json").read_text())["log_history"]
              if "rewards/realism/mean" in e]
    assert logged == [1, 2, 3]  # the first step's log came back with its checkpoint; steps 2 and 3 ran again


def _history(reward: list[float], held: list[float]) -> list[dict]:
    return [{"step": k + 1, "rewards/realism/mean": r, "rewards/cosine/mean": h}
            for k, (r, h) in enumerate(zip(reward, held, strict=True))]


def test_reward_hacking_is_flagged_when_the_reward_rises_and_a_held_out_metric_falls():
    (flag,) = hacking_flags(_history([0.1, 0.2, 0.3, 0.4], [0.5, 0.45, 0.4, 0.3]), ["cosine"], window=2)
    assert flag == "the reward rose by 0.2000 while held-out cosine fell by 0.1250"
    assert hacking_flags(_history([0.1, 0.2, 0.3, 0.4], [0.3, 0.4, 0.45, 0.5]), ["cosine"]) == []  # both rise
    assert hacking_flags(_history([0.4, 0.3, 0.2, 0.1], [0.5, 0.45, 0.4, 0.3]), ["cosine"]) == []  # reward falls
    assert hacking_flags(_history([0.1], [0.5]), ["cosine"]) == []  # one step says nothing


def test_grpo_recipes_are_checked_before_anything_is_built(tmp_path, capsys):
    out = str(tmp_path / "x")
    assert main(["grpo", "tiny-student-grpo", "--output-dir", out, "--set", "grpo.num_generations=3"]) == 2
    assert "must be whole groups of grpo.num_generations (3)" in capsys.readouterr().err
    assert main(["grpo", "tiny-student-grpo", "--output-dir", out, "--set", "grpo.num_generations=1"]) == 2
    assert "grpo.num_generations must be at least 2" in capsys.readouterr().err
    assert main(["grpo", "tiny-student-sft", "--output-dir", out]) == 2
    assert "simhub grpo needs a student-grpo recipe" in capsys.readouterr().err
    assert main(["dpo", "tiny-student-grpo", "--output-dir", out]) == 2  # and the other way round
    assert "kind is 'student-grpo'; simhub dpo needs a student-dpo recipe" in capsys.readouterr().err
    assert main(["grpo", "tiny-student-grpo", "--output-dir", out, "--set", "grpo.reward_metrics=[rouge]"]) == 2
    assert "rouge" in capsys.readouterr().err
    assert not Path(out).exists()
    from simhub.training.config import load_recipe

    assert load_recipe("tiny-student-grpo", ["grpo.held_out_metrics=[]"]).grpo.held_out_metrics == []  # none held out
