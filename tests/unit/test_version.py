"""One version everywhere: pyproject.toml's, through the package metadata, in every place that shows or keys on it."""

from __future__ import annotations

import json
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest

import simhub
from simhub.cli import main

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]


def test_metadata_package_and_cli_agree_with_pyproject(capsys):
    assert version("simhub") == PYPROJECT
    assert simhub.__version__ == PYPROJECT
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"simhub {PYPROJECT}"


def test_a_source_tree_without_metadata_reads_its_pyproject(monkeypatch):
    import importlib.metadata

    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    assert simhub._package_version() == PYPROJECT


def test_run_files_and_the_report_header_carry_it(tmp_path, sample_corpus):
    pytest.importorskip("matplotlib")
    from simhub.schema import write_jsonl

    data = tmp_path / "test.jsonl"
    write_jsonl(data, sample_corpus["test"][:3])
    run = tmp_path / "run"
    # reference:real with ROUGE-L needs no model: a run directory in well under a second.
    assert main(["eval", "--profile", str(REPO / "tests" / "profiles" / "tiny.yaml"), "--simulator", "reference:real",
                 "--metrics", "rouge_l", "--data", str(data), "--output", str(run), "--bootstrap", "100",
                 "--no-cache"]) == 0
    assert json.loads((run / "results.json").read_text())["simhub_version"] == PYPROJECT
    page = tmp_path / "report.html"
    assert main(["report", str(run), "--output", str(page)]) == 0
    html = page.read_text()
    assert f"by simhub {PYPROJECT}</p>" in html and f"<dd>{PYPROJECT}</dd>" in html
    assert "0.1.0" not in html


def test_cache_keys_change_with_the_version(monkeypatch):
    from simhub.simulation.base import outputs_fingerprint

    record = {"simulator": "s", "base_model": None, "adapter": None}
    now = outputs_fingerprint(record)
    monkeypatch.setattr(simhub, "__version__", "0.0.1")
    assert outputs_fingerprint(record) != now


def test_models_endpoint_reports_it():
    pytest.importorskip("litestar")
    from litestar.testing import TestClient

    from simhub.config import Profile
    from simhub.serving.app import create_app
    from simhub.serving.settings import ServiceSettings

    profile = Profile(name="mini")  # no models: the cheapest app
    with TestClient(create_app(ServiceSettings.load(profile), profile)) as client:
        body = client.get("/models").json()
        document = client.get("/schema/openapi.json").json()
    assert body["simhub_version"] == PYPROJECT
    assert document["info"]["version"] == PYPROJECT  # the API's version badge is the package's


def test_the_root_files_agree_with_pyproject():
    """LICENSE is the licence pyproject declares; CITATION.cff cites this version and the three papers
    simhub implements; CHANGELOG.md has a section for this version."""
    import yaml

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["license"] == "MIT" and (REPO / "LICENSE").read_text().startswith("MIT License\n")
    citation = yaml.safe_load((REPO / "CITATION.cff").read_text())
    assert citation["cff-version"] == "1.2.0" and str(citation["version"]) == PYPROJECT
    assert citation["license"] == project["license"]
    papers = {r["identifiers"][0]["value"]: r["title"] for r in citation["references"]}
    assert set(papers) == {"arXiv:2601.04025", "arXiv:2608.17150", "arXiv:2608.03206"}
    assert papers["arXiv:2601.04025"] == "Simulated Students in Tutoring Dialogues: Substance or Illusion?"
    assert f"\n## {PYPROJECT} " in (REPO / "CHANGELOG.md").read_text()
