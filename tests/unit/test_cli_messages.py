"""Small messages that say what is wrong: wrong kinds of files, missing files and folders, help texts."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import pytest

from simhub.cli import build_parser, main
from simhub.schema import write_jsonl

REPO = Path(__file__).resolve().parents[2]
TINY = str(REPO / "tests" / "profiles" / "tiny.yaml")


@pytest.fixture
def dialogues(tmp_path, sample_corpus) -> Path:
    path = tmp_path / "dialogues.jsonl"
    write_jsonl(path, sample_corpus["test"][:2])
    return path


def run(argv, capsys) -> tuple[int, str]:
    code = main([str(a) for a in argv])
    return code, capsys.readouterr().err


def test_a_missing_profile_file_is_no_such_file_and_a_name_is_unknown(tmp_path, dialogues, capsys):
    base = ["eval", "--simulator", "reference:real", "--data", dialogues, "--output", tmp_path / "run"]
    code, err = run([*base, "--profile", tmp_path / "missing.yaml"], capsys)
    assert code == 2 and f"profile: {tmp_path / 'missing.yaml'}: no such file" in err and "unknown" not in err
    code, err = run([*base, "--profile", tmp_path], capsys)
    assert code == 2 and "is a folder, not a YAML file" in err
    code, err = run([*base, "--profile", "demoo"], capsys)
    assert code == 2 and "unknown profile 'demoo' (did you mean 'demo'?)" in err


def test_the_wrong_kind_of_file_is_named(tmp_path, dialogues, capsys):
    code, err = run(["score", "--input", dialogues, "--output", tmp_path / "s.jsonl", "--metrics", "rouge_l"], capsys)
    assert code == 2 and "holds dialogues, not score items" in err and "simhub data items" in err
    assert "unknown field" not in err
    items = tmp_path / "items.jsonl"
    assert main(["data", "items", str(dialogues), "--output", str(items)]) == 0
    code, err = run(["eval", "--profile", TINY, "--simulator", "reference:real", "--data", items,
                     "--output", tmp_path / "run"], capsys)
    assert code == 2 and "holds score items" in err and "not dialogues" in err


def test_report_refuses_to_create_folders(tmp_path, capsys):
    target = tmp_path / "new" / "dir" / "r.html"
    code, err = run(["report", tmp_path / "no-run", "--output", target], capsys)
    assert code == 2 and f"folder {target.parent} does not exist" in err
    assert not (tmp_path / "new").exists()


def test_data_stats_of_an_empty_file_is_an_error(tmp_path, capsys):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    code, err = run(["data", "stats", empty], capsys)
    assert code == 2 and "holds no dialogues" in err


def test_an_output_the_system_refuses_is_a_message_not_a_traceback(tmp_path, capsys):
    if not Path("/proc/self").is_dir():
        pytest.skip("needs /proc, where nothing can be created")
    code, err = run(["tiny", "--output", "/proc/simhub-test-kit"], capsys)
    assert code == 2 and err.startswith("simhub: error: /proc/") and "Traceback" not in err


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root may write anywhere")
def test_an_unwritable_output_folder_is_named(tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    code, err = run(["tiny", "--output", locked / "kit"], capsys)
    assert code == 2 and f"{locked} is not writable" in err


def _walk(parser: argparse.ArgumentParser, prog: str):
    yield prog, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _walk(child, f"{prog} {name}")


def test_every_subcommand_has_a_description_and_every_argument_a_help_text():
    commands = list(_walk(build_parser(), "simhub"))
    assert len(commands) > 20
    for prog, parser in commands:
        assert parser.description, f"{prog} has no description"
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction | argparse._VersionAction | argparse._SubParsersAction):
                continue
            assert action.help, f"{prog} {action.option_strings or action.dest} has no help text"


def test_help_texts_say_what_the_options_do():
    parsers = dict(_walk(build_parser(), "simhub"))
    simulate = parsers["simhub simulate"].format_help()
    assert "bootstrap" not in simulate and "--seed" not in simulate  # simulating draws no bootstrap
    assert "dialogue_results.json" in parsers["simhub eval-dialogues"].format_help()
    assert "95% CIs." in parsers["simhub eval"].description


def test_a_simulator_without_its_key_is_listed_unavailable_and_answers_503(tmp_path, monkeypatch):
    """An endpoint whose API key is not set on the server cannot answer: /ready (200: the service
    is ready for what it offers), /models and /v1/models list it as unavailable with the variable to
    set, and a request for it is a 503 ``unavailable`` with the same reason, never a 500."""
    pytest.importorskip("litestar")
    from litestar.testing import TestClient

    from simhub.config import load_profile
    from simhub.serving.app import create_app
    from simhub.serving.errors import clean
    from simhub.serving.settings import ServiceSettings

    assert clean("HTTP 503 at https://api.example.com/v1") == "HTTP 503 at https://api.example.com/v1"
    assert clean("model '/srv/models/acts' failed, file:///srv/models/x") == "model '<path>' failed, <path>"

    monkeypatch.delenv("SIMHUB_TEST_UNSET_KEY", raising=False)
    profile_file = tmp_path / "p.yaml"
    profile_file.write_text("name: p\nsimulators:\n  hosted: {kind: openai, model: m, endpoint: "
                            "{base_url: 'https://api.example.invalid/v1', api_key_env: SIMHUB_TEST_UNSET_KEY}}\n")
    profile = load_profile(profile_file)
    history = {"id": "1-1", "question": {"text": "What is 1/2 + 1/4?"},
               "turns": [{"role": "tutor", "content": "What do you get?"}]}
    reason = "no API key for api.example.invalid: set SIMHUB_TEST_UNSET_KEY"
    with TestClient(create_app(ServiceSettings.load(profile), profile)) as client:
        for _ in range(200):
            if client.get("/ready").json()["status"] != "loading":
                break
            time.sleep(0.05)
        ready = client.get("/ready")
        models, openai_models = client.get("/models").json(), client.get("/v1/models").json()
        r = client.post("/simulate", json={"model": "hosted", "dialogues": [history]})
        chat = client.post("/v1/chat/completions", json={"model": "hosted", "messages": [
            {"role": "system", "content": "What is 1/2 + 1/4?"}, {"role": "user", "content": "What do you get?"}]})
    assert ready.status_code == 200, ready.text
    (component,) = [c for c in ready.json()["components"] if c["id"] == "hosted"]
    assert (component["status"], component["error"]) == ("unavailable", reason)
    (listed,) = [m for m in models["simulators"] if m["id"] == "hosted"]
    assert (listed["available"], listed["unavailable_reason"]) == (False, reason)
    assert [m for m in openai_models["data"] if m["id"] == "hosted"] == [
        {"id": "hosted", "object": "model", "created": 0, "owned_by": "simhub", "available": False,
         "unavailable_reason": reason}]
    rouge = [m for m in models["metrics"] if m["id"] == "rouge_l"]
    assert rouge and rouge[0]["available"] is True and rouge[0]["metrics"] == ["rouge_l"]  # listed, model or not
    for response in (r, chat):
        assert response.status_code == 503, response.text
        assert "Retry-After" not in response.headers  # retrying will not help
        error = response.json()["error"]
        assert error["type"] == "unavailable" and error["field"] == "model"
        assert error["message"] == f"model: hosted is unavailable on this server ({reason})"




def test_a_data_folder_is_named_as_a_folder_and_eval_reads_its_test_split(tmp_path, sample_corpus, capsys):
    """`--data DIR`: a folder of train/val/test.jsonl (what `simhub data convert-eedi` writes) gives its
    test split, with a note; a folder without test.jsonl is named as a folder, never "no such file"."""
    import json

    from simhub.errors import SchemaError
    from simhub.schema import read_jsonl

    folder = tmp_path / "data"
    folder.mkdir()
    write_jsonl(folder / "val.jsonl", sample_corpus["val"][:1])
    run_dir = tmp_path / "run"
    base = ["eval", "--simulator", "reference:previous-turn", "--metrics", "rouge_l", "--output", run_dir]
    code, err = run([*base, "--data", folder], capsys)
    assert code == 2 and f"--data {folder}: a folder without test.jsonl (it holds val.jsonl: give one of them)" in err
    assert "no such file" not in err
    with pytest.raises(SchemaError, match=r"is a folder, not a JSONL file \(it holds val.jsonl: give one of them\)"):
        read_jsonl(folder)
    write_jsonl(folder / "test.jsonl", sample_corpus["test"][:2])
    code, err = run([*base, "--data", folder], capsys)
    assert code == 0, err
    assert f"--data {folder} is a folder: using its test split, {folder / 'test.jsonl'}" in err
    assert json.loads((run_dir / "results.json").read_text())["data"]["path"] == str(folder / "test.jsonl")
