"""An installed wheel, in an empty folder: what users get from `pip install .` (not editable)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "--no-build-isolation", "-q", "-w", str(out)],
                   check=True, capture_output=True, cwd=ROOT)
    (path,) = out.glob("simhub-*.whl")
    return path


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> Path:
    target = tmp_path_factory.mktemp("site")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
                   check=True, capture_output=True)
    return target


def test_the_wheel_holds_what_users_run_and_no_test_doubles(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert "simhub/resources/recipes/tiny-student-sft.yaml" in names
    assert "simhub/resources/profiles/demo.yaml" in names
    assert any(n.startswith("simhub/resources/sample/raw/") for n in names)
    assert any(n.startswith("simhub/resources/sample/annotations/") for n in names)
    assert not [n for n in names if n.startswith(("tests/", "scripts/")) or "hub_server" in n or "make_sample" in n
                or "server_process" in n or "/testing/" in n]


def test_python_m_simhub_builds_a_demo_model_in_an_empty_folder(installed, tmp_path, sample_corpus):
    """`python -m simhub score --profile demo` from an installed wheel trains a demo model (the tutor,
    the quickest to train) from the shipped recipe and the shipped sample corpus: nothing outside the package is read."""
    from simhub.metrics import ScoreItem
    from simhub.schema import to_json

    work = tmp_path / "empty"
    work.mkdir()
    dialogue = sample_corpus["test"][0]
    index = next(i for i in dialogue.student_turn_indices()
                 if i + 1 < len(dialogue.turns) and dialogue.turns[i + 1].role == "tutor")  # tutor_response needs one
    (work / "items.jsonl").write_bytes(to_json(ScoreItem(dialogue, index, "I think it is B")) + b"\n")
    env = {**os.environ, "PYTHONPATH": str(installed), "SIMHUB_HOME": str(tmp_path / "home")}
    where = subprocess.run([sys.executable, "-c", "import simhub; print(simhub.__file__)"], env=env, cwd=work,
                           capture_output=True, text=True, check=True)
    assert where.stdout.strip().startswith(str(installed))  # the wheel, not the checkout
    run = subprocess.run([sys.executable, "-m", "simhub", "score", "--input", "items.jsonl", "--output", "scores.jsonl",
                          "--metrics", "tutor_response,rouge_l", "--profile", "demo"], env=env, cwd=work, capture_output=True,
                         text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "building demo:tutor" in run.stderr
    row = json.loads((work / "scores.jsonl").read_text())
    assert 0.0 <= row["scores"]["tutor_response"] <= 1.0 and row["scores"]["rouge_l"] is not None
    assert (tmp_path / "home" / "demo" / "tutor" / "adapter_config.json").is_file()
    assert sorted(p.name for p in work.iterdir()) == ["items.jsonl", "scores.jsonl"]  # nothing else written here
