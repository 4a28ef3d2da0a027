"""The getting-started page's commands, run as the page writes them (docs/getting-started/first-ten-minutes.md).

The bash blocks are read from the page itself, so a command that changes on the page is the command
tested; each block runs with ``bash -e`` in an empty folder, as a newcomer would run it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "getting-started" / "first-ten-minutes.md"


def bash_blocks(page: Path) -> list[str]:
    """The page's ```bash blocks, in order."""
    return re.findall(r"^```bash\n(.*?)^```$", page.read_text(encoding="utf-8"), re.S | re.M)


@pytest.fixture(scope="module")
def demo_profile(simhub_home):
    """The demo's models (built beside the other tests: tests/conftest.py), so the page's last eval reuses them."""
    from simhub.config import load_profile
    from simhub.provision import provision_profile

    return provision_profile(load_profile("demo"), on_step=None)


def _run(block: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    return subprocess.run(["bash", "-e", "-o", "pipefail", "-c", block], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=1800, check=False)


def test_the_first_ten_minutes_run_as_written(demo_profile, tmp_path):
    blocks = bash_blocks(PAGE)
    assert len(blocks) == 2 and "simhub eval --simulator tiny-student-sft" in blocks[0]
    first = _run(blocks[0], tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    work = tmp_path / "work"
    assert {p.name for p in (work / "data").iterdir()} >= {"train.jsonl", "val.jsonl", "test.jsonl"}
    assert "test" in first.stdout  # the dataset table names the splits
    # the sample test split the demo tables are measured on: 47 dialogues, 281 student turns
    assert re.search(r"^dialogues\s+47$", first.stdout, re.M) and re.search(r"^student_turns\s+281$", first.stdout, re.M)
    floor = json.loads((work / "runs" / "floor" / "results.json").read_text())
    assert list(floor["metrics"]) == ["rouge_l"] and floor["simulator"] == "reference:previous-turn"
    sft = json.loads((work / "runs" / "sft" / "results.json").read_text())
    assert set(sft["metrics"]) == {"acts", "correctness", "errors", "knowledge", "cosine", "rouge_l", "tutor_response"}
    assert "<svg" in (work / "report.html").read_text(encoding="utf-8")

    second = _run(blocks[1], tmp_path)  # both runs on one page, then the paired comparison
    assert second.returncode == 0, second.stderr[-3000:]
    page = (work / "report.html").read_text(encoding="utf-8")
    assert "reference:previous-turn" in page and "tiny-student-sft" in page
    assert "rouge_l" in second.stdout.lower() or "rouge-l" in second.stdout.lower()
