"""`simhub prompt show`: the exact text a simulator or a metric model receives for one turn."""

from __future__ import annotations

import pytest

from simhub.cli import main
from simhub.schema import write_jsonl

TINY = "tests/profiles/tiny.yaml"


@pytest.fixture(scope="module")
def data(tmp_path_factory, sample_corpus):
    path = tmp_path_factory.mktemp("data") / "test.jsonl"
    write_jsonl(path, sample_corpus["test"][:5])
    dialogue = next(d for d in sample_corpus["test"][:5] if d.profile and len(d.student_turn_indices()) > 2)
    return path, dialogue


def _show(capsys, *args) -> str:
    assert main(["prompt", "show", "--profile", TINY, *args]) == 0
    return capsys.readouterr().out


def test_simulator_prompt_is_templated_and_holds_no_profile(data, capsys, tiny_profile):
    path, d = data
    turn = d.student_turn_indices()[1]
    text = _show(capsys, "--simulator", "tiny-student", "--data", str(path), "--dialogue", d.id, "--turn", str(turn))
    assert text.startswith("<|begin_of_text|><|start_header_id|>system<|end_header_id|>")
    assert text.rstrip().endswith("<|start_header_id|>assistant<|end_header_id|>")
    assert d.turns[turn - 1].content in text and d.turns[turn].content not in text.split("assistant<|end_header_id|>")[-1]
    assert d.profile not in text  # docs/protocol.md §8: no Oracle leak in a trained student's prompt


def test_baseline_and_metric_prompts(data, capsys, tiny_profile):
    path, d = data
    turn = d.student_turn_indices()[1]
    oracle = _show(capsys, "--simulator", "baseline:oracle", "--data", str(path), "--dialogue", d.id, "--turn", str(turn))
    assert d.profile in oracle and f"Turn {turn} (Tutor): " in oracle
    acts = _show(capsys, "--model", "acts", "--data", str(path), "--dialogue", d.id, "--turn", str(turn), "--candidate", "42")
    assert f"Turn {turn + 1} (Student): 42" in acts and "<|start_header_id|>" in acts
    kt = _show(capsys, "--model", "kt", "--data", str(path), "--dialogue", d.id, "--turn", str(turn))
    assert "- Default" in kt and kt.count("Does the student have") == len(d.all_kcs)
    judge = _show(capsys, "--model", "judge", "--data", str(path), "--dialogue", d.id, "--turn", str(turn))
    assert "mathematically equivalent" in judge
    tutor = _show(capsys, "--model", "tutor", "--data", str(path), "--dialogue", d.id, "--turn", str(turn))
    assert "You are a tutor" in tutor


def test_training_forms(data, capsys, tiny_profile):
    path, d = data
    turn = d.student_turn_indices()[1]
    train = _show(capsys, "--simulator", "tiny-student", "--data", str(path), "--dialogue", d.id, "--turn", str(turn),
                  "--training")
    assert "[end of dialogue]" in train and d.turns[-1].content in train
    acts = _show(capsys, "--model", "acts", "--training", "--data", str(path), "--dialogue", d.id, "--turn", str(turn))
    assert acts.rstrip().endswith(f"{d.turns[turn].act}<|eot_id|>")


def test_bad_requests_exit_2(data, capsys, tiny_profile):
    path, d = data
    assert main(["prompt", "show", "--profile", TINY, "--simulator", "tiny-studnet", "--data", str(path),
                 "--dialogue", d.id, "--turn", "1"]) == 2
    assert "did you mean 'tiny-student'" in capsys.readouterr().err
    assert main(["prompt", "show", "--profile", TINY, "--simulator", "tiny-student", "--data", str(path),
                 "--dialogue", d.id, "--turn", "0"]) == 2
    assert "turn: turn 0" in capsys.readouterr().err
    assert main(["prompt", "show", "--profile", TINY, "--simulator", "tiny-student", "--data", str(path),
                 "--dialogue", "nope", "--turn", "1"]) == 2
    assert "unknown dialogue 'nope'" in capsys.readouterr().err


def test_a_simulator_prompt_needs_no_weights_and_works_offline(data, capsys, monkeypatch):
    """`prompt show` never loads a simulator's weights: the tokenizer's chat template when it is at hand,
    else (paper-8b offline: Llama-3.1-8B-Instruct is not downloaded) the messages with a note saying so."""
    import huggingface_hub.constants

    from simhub.models import loader

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)  # as a machine without the Hub

    def refuse(*args, **kwargs):
        raise AssertionError("prompt show loaded a model")

    monkeypatch.setattr(loader, "load_lm", refuse)
    monkeypatch.setattr("simhub.simulation.model.load_lm", refuse)
    path, d = data
    turn = d.student_turn_indices()[1]
    assert main(["prompt", "show", "--profile", "paper-8b", "--simulator", "student-sft-8b", "--data", str(path),
                 "--dialogue", d.id, "--turn", str(turn)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("[system]\n") and "[user]\n" in text and d.turns[turn - 1].content in text
    assert "(note: these are the messages; the text after meta-llama/Llama-3.1-8B-Instruct's chat template needs its " \
           "tokenizer, which could not be loaded here" in text
    # with the tokenizer at hand (the tiny kit's), the templated text, still without loading the model
    templated = _show(capsys, "--simulator", "tiny-student", "--data", str(path), "--dialogue", d.id, "--turn", str(turn))
    assert templated.startswith("<|begin_of_text|><|start_header_id|>system<|end_header_id|>")
