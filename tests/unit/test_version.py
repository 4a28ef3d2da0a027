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
