"""Every command reads and checks its inputs before it builds, trains or calls anything.

The shipped demo profile is used on purpose: on an empty ``$SIMHUB_HOME`` its first build trains for
minutes, so a command that provisioned before checking would be slow here and leave files behind.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from simhub.cli import main
from simhub.schema import write_jsonl


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "home"
    monkeypatch.setenv("SIMHUB_HOME", str(path))
    return path


@pytest.fixture
def data(tmp_path, sample_corpus) -> Path:
    path = tmp_path / "test.jsonl"
    write_jsonl(path, sample_corpus["test"][:3])
    return path


@pytest.fixture
def malformed(tmp_path) -> Path:
    path = tmp_path / "malformed.jsonl"
    path.write_text('{"id": "1-1", "question": {"text": "q"}, "turns": [}\n')
    return path


def built(home: Path) -> list[str]:
    return sorted(str(p.relative_to(home)) for p in home.rglob("*")) if home.exists() else []


def fails_fast(argv: list[str], capsys, home: Path, words: str) -> str:
    start = time.perf_counter()
    code = main(argv)
    elapsed = time.perf_counter() - start
    err = capsys.readouterr().err
    assert code == 2, err
    assert words in err, err
    assert elapsed < 1.0, f"{elapsed:.2f} s before the error"
    assert built(home) == [], "something was built before the input was checked"
    return err


@pytest.mark.parametrize("kind", ["missing", "malformed", "empty"])
def test_eval_with_bad_data_fails_in_under_a_second_and_builds_nothing(kind, tmp_path, malformed, home, capsys):
    path = {"missing": tmp_path / "nope.jsonl", "malformed": malformed, "empty": tmp_path / "empty.jsonl"}[kind]
    if kind == "empty":
        path.write_text("")
    words = {"missing": "no such file", "malformed": "malformed.jsonl:1", "empty": "holds no dialogues"}[kind]
    fails_fast(["eval", "--simulator", "tiny-student-sft", "--data", str(path), "--output", str(tmp_path / "run")],
               capsys, home, words)


def test_eval_refuses_an_unconfigured_metric_a_bad_option_and_a_bad_output_first(tmp_path, data, home, capsys):
    no_judge = tmp_path / "no-judge.yaml"
    no_judge.write_text("extends: demo\nname: no-judge\nscoring: {metrics: {judge: null}}\n")
    base = ["eval", "--simulator", "tiny-student-sft", "--data", str(data)]
    fails_fast([*base, "--profile", str(no_judge), "--metrics", "correctness", "--output", str(tmp_path / "r")],
               capsys, home, "not configured in this profile")
    fails_fast([*base, "--bootstrap", "5", "--output", str(tmp_path / "r")], capsys, home, "at least 100")
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    fails_fast([*base, "--output", str(a_file)], capsys, home, "is a file, not a folder")
    fails_fast([*base, "--output", str(a_file / "run")], capsys, home, "is a file, not a folder")


def test_the_other_commands_check_first(tmp_path, data, malformed, home, capsys):
    missing = str(tmp_path / "nope.jsonl")
    out = str(tmp_path / "out")
    fails_fast(["simulate", "--simulator", "tiny-student-sft", "--data", missing, "--output", out], capsys, home,
               "no such file")
    fails_fast(["simulate", "--simulator", "tiny-student-sft", "--data", str(data), "--output", str(tmp_path)],
               capsys, home, "is a folder, not a file")
    fails_fast(["rollout", "--simulator", "tiny-student-sft", "--tutor", "tiny-tutor", "--data", str(malformed),
                "--output", out], capsys, home, "malformed.jsonl:1")
    fails_fast(["rollout", "--simulator", "tiny-student-sft", "--tutor", "tiny-tutor", "--data", str(data),
                "--output", out, "--samples", "0"], capsys, home, "samples: must be at least 1")
    fails_fast(["score", "--input", missing, "--output", out], capsys, home, "no such file")
    fails_fast(["kt-cutoffs", "--data", missing], capsys, home, "no such file")
    fails_fast(["prompt", "show", "--simulator", "tiny-student-sft", "--data", str(data), "--dialogue", "nope",
                "--turn", "1"], capsys, home, "unknown dialogue 'nope'")
    fails_fast(["eval-dialogues", "--real", str(data), "--sim", missing, "--output", out, "--simulator",
                "tiny-student-sft"], capsys, home, "no such file")
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"id": "9-9", "question": {"text": "another question"},
                                 "turns": [{"role": "student", "content": "hi"}]}) + "\n")
    fails_fast(["eval-dialogues", "--real", str(data), "--sim", str(other), "--output", out, "--simulator",
                "tiny-student-sft"], capsys, home, "none of the 3 real dialogues")
    fails_fast(["report", str(tmp_path / "no-run"), "--output", str(tmp_path / "r.html")], capsys, home,
               "no-run")
    fails_fast(["compare", str(tmp_path / "a"), str(tmp_path / "b")], capsys, home, "not a directory")
    fails_fast(["tiny", "--output", str(data / "kit")], capsys, home, "is a file, not a folder")
