"""``simhub annotate`` end to end against the fake OpenAI-compatible endpoint (no network).

The fake labeller below reads each request's prompt like a model would (the numbered turns, the
listed KCs, the question) and answers realistic JSON, varying its form (``"turn N"`` or ``"N"``
keys, a reasoning block, code fences, extra keys) so the lenient parser is exercised. Its labels
are a deterministic function of the text, so a test can say what every label must be after the
round trip ``annotate`` -> ``{split}_{model}.csv`` -> ``data convert-eedi --annotations``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("openai")

from simhub.annotation import AnnotationSettings, annotate_splits, annotator_endpoint, load_inputs
from simhub.cli import main
from simhub.data.annotations import annotation_file_name, read_annotation_file
from simhub.data.sample import load_sample_corpus
from simhub.models.openai import OpenAIClient
from simhub.schema import ACTS, OCEAN_TRAITS, OPTIONS, Dialogue, Question, Turn, read_jsonl, write_jsonl
from tests.doubles.openai_server import FakeOpenAIServer

pytestmark = pytest.mark.timeout(120)

REPO = Path(__file__).resolve().parents[2]
MODEL = "fake/labeller-1"
SPLITS = ("train", "val", "test")
_TURN = re.compile(r"^Turn (\d+) \((Student|Tutor)\): (.*)$", re.MULTILINE)


# --------------------------------------------------------------------------- the fake labeller


def _h(*parts: object) -> int:
    return int(hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:8], 16)


def fake_act(content: str) -> str:
    return ACTS[_h("act", content) % len(ACTS)]


def fake_correct(content: str) -> bool | None:
    return (True, False, None)[_h("correct", content) % 3]


def fake_kcs(content: str, kcs: list[str]) -> list[str] | None:
    """A tutor turn with a question mark poses a task; it gets one KC of the list."""
    return [kcs[_h("kc", content) % len(kcs)]] if "?" in content else None


def fake_level(history: str, trait: str) -> str:
    return ("low", "neutral", "high")[_h("ocean", trait, history) % 3]


def fake_option(question: str) -> int:
    return 1 + _h("option", question) % 4


def fake_profile(history: str) -> str:
    return f"A student who writes short messages (profile {_h('profile', history) % 1000})."


def _kind(prompt: str) -> str:
    first = prompt.split("\n", 1)[0]
    for marker, kind in (("multiple-choice math question", "questions"), ("dialogue act", "acts"),
                         ("answers the tutor's most recent task", "correctness"),
                         ("knowledge components", "kcs"), ("Big Five", "ocean"), ("Describe this student", "freeform")):
        if marker in first:
            return kind
    raise AssertionError(f"unrecognised prompt: {first!r}")


def _history(prompt: str) -> str:
    return prompt.split("\nDialogue:\n", 1)[1].split("\n\n", 1)[0]


def _question(prompt: str) -> str:
    if _kind(prompt) == "questions":
        return prompt.split("\n\n", 2)[1]
    return prompt.split("\nProblem:\n", 1)[1].split("\n\nDialogue:\n", 1)[0]


def fake_labeller(body: dict) -> str:
    """Answer an annotation request as a well-behaved model would (form varies, content fixed)."""
    prompt = body["messages"][-1]["content"]
    kind = _kind(prompt)
    variant = _h("variant", prompt) % 3
    if kind == "freeform":
        return fake_profile(_history(prompt))
    if kind == "questions":
        text = _question(prompt)
        option = fake_option(text)
        answer = {"solution": f"Worked solution of {text[:20]}", "solvable": True, "correct_option": option,
                  **{f"option_{n}_explanation": f"why {n}" for n in range(1, 5)}}
    else:
        turns = [(int(n), role, content) for n, role, content in _TURN.findall(_history(prompt))]
        key = (lambda n: f"turn {n}") if variant != 1 else str
        if kind == "acts":
            answer = {key(n): {"reasoning": "they reply", "act": fake_act(c)} for n, r, c in turns if r == "Student"}
        elif kind == "correctness":
            answer = {key(n): {"summary": "s", "correct": fake_correct(c)} for n, r, c in turns if r == "Student"}
        elif kind == "kcs":
            listed = re.findall(r"^- (.*)$", prompt.split("chosen only from this list:\n", 1)[1].split("\n\n")[0],
                                re.MULTILINE)
            answer = {}
            for n, r, c in turns:
                chosen = fake_kcs(c, listed) if r == "Tutor" else None
                if chosen:
                    answer[key(n)] = {"summary": "a task", "kcs": chosen}
        else:
            history = _history(prompt)
            answer = {"reasoning": "judged from the messages",
                      **{t.capitalize(): fake_level(history, t) for t in OCEAN_TRAITS}}
        answer["note"] = "an extra key the parser ignores"
    text = json.dumps(answer)
    if variant == 2:
        return f"<think>Let me look at the turns.</think>\n```json\n{text}\n```"
    return text


def expected(dialogue: Dialogue) -> dict:
    """What the round trip must give for ``dialogue`` with the fake labeller."""
    history = "\n".join(f"Turn {i + 1} ({t.role.capitalize()}): {t.content}" for i, t in enumerate(dialogue.turns))
    kcs = dialogue.all_kcs
    corr = {True: "correct", False: "incorrect", None: "na"}
    return {
        "acts": [fake_act(t.content) if t.role == "student" else None for t in dialogue.turns],
        "correctness": [corr[fake_correct(t.content)] if t.role == "student" else None for t in dialogue.turns],
        "kcs": [fake_kcs(t.content, kcs) if t.role == "tutor" else None for t in dialogue.turns],
        "persona": {t: fake_level(history, t) for t in OCEAN_TRAITS},
        "profile": fake_profile(history),
        "correct_option": OPTIONS[fake_option(dialogue.question.text) - 1],
    }


def labelled(dialogue: Dialogue) -> dict:
    return {
        "acts": [t.act for t in dialogue.turns],
        "correctness": [t.correctness for t in dialogue.turns],
        "kcs": [t.kcs for t in dialogue.turns],
        "persona": None if dialogue.persona is None else {t: getattr(dialogue.persona, t) for t in OCEAN_TRAITS},
        "profile": dialogue.profile,
        "correct_option": dialogue.question.correct_option,
    }


# --------------------------------------------------------------------------- fixtures and helpers


def strip(dialogue: Dialogue) -> Dialogue:
    """The dialogue without any label (what annotate is given)."""
    return Dialogue(id=dialogue.id, question=Question(text=dialogue.question.text), kcs=list(dialogue.kcs),
                    turns=[Turn(role=t.role, content=t.content) for t in dialogue.turns])


@pytest.fixture
def unlabelled(tmp_path) -> Path:
    """A few sample dialogues per split, labels stripped, as canonical JSONL (two share a question)."""
    corpus = load_sample_corpus()
    folder = tmp_path / "in"
    for split in SPLITS:
        write_jsonl(folder / f"{split}.jsonl", [strip(d) for d in corpus[split][:4]])
    return folder


@pytest.fixture
def labeller():
    with FakeOpenAIServer(responder=fake_labeller) as server:
        yield server


def annotate_args(data: Path, output: Path, server: FakeOpenAIServer, cache: Path, *extra: str) -> list[str]:
    return ["annotate", "--data", str(data), "--output", str(output), "--model", MODEL, "--base-url",
            server.base_url, "--api-key-env", "none", "--cache-dir", str(cache), "--quiet", *extra]


def convert(annotations: Path, output: Path) -> dict[str, list[Dialogue]]:
    assert main(["data", "convert-eedi", "--annotations", str(annotations), "--annotator", MODEL,
                 "--output", str(output)]) == 0
    return {split: read_jsonl(output / f"{split}.jsonl") for split in SPLITS}


def csv_rows(path: Path) -> dict[str, dict[str, str]]:
    """Every cell of an annotation file as text, by dialogue id (prompt and raw columns included)."""
    import pandas as pd

    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    return {"-".join(re.findall(r"\d+", r["key"])): r for r in frame.to_dict("records")}


def bodies(requests) -> list[str]:
    return [json.dumps(r.body, sort_keys=True) for r in requests]


# --------------------------------------------------------------------------- round trip


def test_round_trip_labels_equal_what_the_labeller_answered(unlabelled, labeller, tmp_path, capsys):
    out, cache = tmp_path / "out", tmp_path / "cache"
    assert main(annotate_args(unlabelled, out, labeller, cache)) == 0
    printed = capsys.readouterr().out
    for split in SPLITS:
        assert (out / annotation_file_name(split, MODEL)).is_file()
        assert f"{split}: 4 dialogues" in printed
    assert annotation_file_name("train", MODEL) == "train_fake-labeller-1.csv"

    # The exact released column names, and the turn numbering of the prompts.
    row = read_annotation_file(out / "train_fake-labeller-1.csv")[0]
    text = (out / "train_fake-labeller-1.csv").read_text()
    header = text.split("\n", 1)[0].split(",")
    assert header[:7] == ["key", "question", "subjects", "turns", "question_prompt", "question_annotation_raw",
                          "question_annotation"]
    assert {"eedi_kcs", "ocean_persona", "freeform_persona", "acts_prompt", "correctness_annotation_raw"} <= set(header)
    assert row.key == tuple(int(p) for p in load_sample_corpus()["train"][0].id.split("-"))

    converted = convert(out, tmp_path / "converted")
    inputs = {split: read_jsonl(unlabelled / f"{split}.jsonl") for split in SPLITS}
    for split in SPLITS:
        assert [d.id for d in converted[split]] == [d.id for d in inputs[split]]
        for got, given in zip(converted[split], inputs[split], strict=True):
            assert [(t.role, t.content) for t in got.turns] == [(t.role, t.content) for t in given.turns]
            assert got.kcs == given.kcs and got.question.text == given.question.text
            assert got.failed_labels == []
            assert got.question.solvable is True and got.question.solution
            assert labelled(got) == expected(given), given.id

    # Questions are annotated once per unique text; every request asked for JSON except the profile.
    chats = labeller.chat_requests()
    questions = [r for r in chats if _kind(r.body["messages"][0]["content"]) == "questions"]
    texts = {d.question.text for split in SPLITS for d in inputs[split]}
    assert len(questions) == len(texts) < sum(len(v) for v in inputs.values())
    assert len(chats) == len(texts) + 5 * 12
    for request in chats:
        kind = _kind(request.body["messages"][0]["content"])
        assert request.body["temperature"] == 0.0 and request.body["max_completion_tokens"] == 4000
        # FIDELITY.md (annotation): every dialogue label reads the question with its answer key.
        assert (kind == "questions") != ("Correct option: " in request.body["messages"][0]["content"])
        assert ("response_format" in request.body) == (kind != "freeform")
        assert request.authorization is None  # --api-key-env none: no Authorization header at all

    # An identical rerun sends nothing and writes the same files.
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert main(annotate_args(unlabelled, out, labeller, cache)) == 0
    assert len(labeller.chat_requests()) == len(chats)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before

    # data stats reads what convert-eedi made of it: full coverage, no failures.
    capsys.readouterr()
    assert main(["data", "stats", str(tmp_path / "converted" / "train.jsonl"), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert set(stats["failed_labels"].values()) == {0}
    assert stats["label_coverage"]["acts"] == 1.0 and stats["label_coverage"]["correctness"] == 1.0


def test_dry_run_counts_requests_and_sends_nothing(unlabelled, labeller, tmp_path, capsys):
    assert main(annotate_args(unlabelled, tmp_path / "out", labeller, tmp_path / "cache", "--dry-run")) == 0
    printed = capsys.readouterr().out
    assert labeller.requests == [] and not (tmp_path / "out").exists()
    texts = {d.question.text for s in SPLITS for d in read_jsonl(unlabelled / f"{s}.jsonl")}
    assert f"total: {len(texts) + 5 * 12} requests" in printed
    assert re.search(rf"questions\s+{len(texts)} requests", printed)
    assert "characters / 4" in printed


def test_labels_subset_keeps_the_other_labels_of_an_existing_file(unlabelled, labeller, tmp_path):
    out, cache = tmp_path / "out", tmp_path / "cache"
    assert main(annotate_args(unlabelled, out, labeller, cache, "--labels", "questions,acts")) == 0
    rows = read_annotation_file(out / "test_fake-labeller-1.csv")
    assert all(r.cells["correctness"] == "" and r.cells["acts"] for r in rows)
    assert main(annotate_args(unlabelled, out, labeller, tmp_path / "other-cache", "--labels",
                              "correctness,kcs,ocean,freeform")) == 0
    converted = convert(out, tmp_path / "converted")
    given = read_jsonl(unlabelled / "test.jsonl")
    for got, want in zip(converted["test"], given, strict=True):
        assert got.failed_labels == [] and labelled(got) == expected(want)


# --------------------------------------------------------------------------- batch API


def test_batch_api_mode(unlabelled, labeller, tmp_path, capsys):
    out, cache = tmp_path / "out", tmp_path / "cache"
    assert main(annotate_args(unlabelled, out, labeller, cache, "--batch-api", "--poll-interval", "0.01")) == 0
    assert labeller.requests_to("POST", "/v1/chat/completions") == []
    # Two stages (questions, then dialogues), each one uploaded file and one batch.
    assert len(labeller.requests_to("POST", "/v1/batches")) == 2
    assert len(labeller.requests_to("POST", "/v1/files")) == 2
    converted = convert(out, tmp_path / "converted")
    given = read_jsonl(unlabelled / "val.jsonl")
    assert [labelled(d) for d in converted["val"]] == [expected(d) for d in given]
    # A rerun is answered by the cache: no upload, no batch, no chat request.
    count = len(labeller.requests)
    assert main(annotate_args(unlabelled, out, labeller, cache, "--batch-api", "--poll-interval", "0.01")) == 0
    assert len(labeller.requests) == count


def test_batch_still_running_is_collected_by_the_rerun_without_paying_twice(unlabelled, tmp_path, capsys):
    out, cache = tmp_path / "out", tmp_path / "cache"
    with FakeOpenAIServer(responder=fake_labeller, batch_polls=10_000) as server:
        args = annotate_args(unlabelled, out, server, cache, "--batch-api", "--poll-interval", "0.01",
                             "--max-wait", "0.2")
        assert main(args) == 0
        assert "batch in_progress" in capsys.readouterr().err
        # The question batch is still running: the dialogue labels were not submitted.
        assert len(server.requests_to("POST", "/v1/batches")) == 1
        rows = csv_rows(out / annotation_file_name("test", MODEL))
        assert all(r["question_annotation"] == "" and r["acts"] == "" and r["acts_prompt"] == ""
                   for r in rows.values())

        server.batch_polls = 0
        assert main(args) == 0
        # The rerun polled the remembered question batch, then submitted the dialogue batch once.
        assert len(server.requests_to("POST", "/v1/batches")) == 2
        assert len(server.requests_to("POST", "/v1/files")) == 2
    converted = convert(out, tmp_path / "converted")
    assert all(d.failed_labels == [] for s in SPLITS for d in converted[s])


# --------------------------------------------------------------------------- kill and resume


def test_killed_run_resumes_without_sending_any_answered_prompt_again(unlabelled, tmp_path):
    """A subprocess is SIGKILLed while request k+1 is in flight; the rerun sends exactly what was
    never answered, and a third run sends nothing."""
    k = 7
    release = threading.Event()
    arrived = threading.Event()
    count = {"n": 0}
    lock = threading.Lock()

    def responder(body):
        with lock:
            count["n"] += 1
            n = count["n"]
        if n == k + 1:
            arrived.set()
            release.wait(30)  # the client is killed meanwhile: this answer is never received
        return fake_labeller(body)

    out, cache = tmp_path / "out", tmp_path / "cache"
    with FakeOpenAIServer(responder=responder) as server:
        args = annotate_args(unlabelled, out, server, cache, "--concurrency", "1")
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        proc = subprocess.Popen([sys.executable, "-m", "simhub", *args], cwd=REPO, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            assert arrived.wait(60), proc.stderr.read().decode() if proc.poll() is not None else "no request k+1"
            proc.send_signal(signal.SIGKILL)
            proc.wait(30)
        finally:
            release.set()
            if proc.poll() is None:
                proc.kill()
            proc.stderr.close()
        first = bodies(server.chat_requests())
        assert len(first) == k + 1 and not out.exists()
        answered = set(first[:k])

        assert main(annotate_args(unlabelled, out, server, cache)) == 0
        second = bodies(server.chat_requests())[k + 1:]
        assert answered.isdisjoint(second)
        assert first[k] in second  # the one in flight at the kill is asked again
        assert len(set(second)) == len(second)
        texts = {d.question.text for s in SPLITS for d in read_jsonl(unlabelled / f"{s}.jsonl")}
        assert k + len(second) == len(texts) + 5 * 12

        total = len(server.chat_requests())
        assert main(annotate_args(unlabelled, out, server, cache)) == 0
        assert len(server.chat_requests()) == total
    converted = convert(out, tmp_path / "converted")
    assert all(d.failed_labels == [] for s in SPLITS for d in converted[s])


def test_interrupt_between_chunks_keeps_finished_answers(unlabelled, labeller, tmp_path):
    """In-process variant: an exception injected after the first chunk of live requests."""
    splits = load_inputs(unlabelled)
    cache = tmp_path / "cache"
    config = annotator_endpoint(MODEL, labeller.base_url, api_key_env="none", cache_dir=cache, concurrency=2)
    settings = AnnotationSettings(chunk_size=5)

    def stop(stage, done, total):
        if stage == "dialogues" and done >= 5:
            raise KeyboardInterrupt

    with OpenAIClient(config) as client, pytest.raises(KeyboardInterrupt):
        annotate_splits(splits, tmp_path / "out", client, settings, progress=stop)
    sent = bodies(labeller.chat_requests())
    assert not (tmp_path / "out").exists()
    with OpenAIClient(config) as client:
        report = annotate_splits(splits, tmp_path / "out", client, settings)
    again = bodies(labeller.chat_requests())[len(sent):]
    assert set(sent).isdisjoint(again)
    assert report.cache_hits == len(sent) and report.failed_total == 0
    assert report.requests == len(sent) + len(again)


# --------------------------------------------------------------------------- validation and failures


def test_invalid_answers_become_error_cells_and_dependent_labels_are_null(unlabelled, tmp_path, capsys):
    given = {s: read_jsonl(unlabelled / f"{s}.jsonl") for s in SPLITS}
    broken_question = given["val"][0].question.text
    broken_correctness = given["test"][1]
    broken_profile = given["train"][2]

    def responder(body):
        prompt = body["messages"][-1]["content"]
        kind = _kind(prompt)
        answer = fake_labeller(body)
        if kind == "questions" and _question(prompt) == broken_question:
            return json.dumps({"solution": "?", "solvable": True, "correct_option": 7})
        if kind == "correctness" and _history(prompt).endswith(broken_correctness.turns[-1].content):
            data = json.loads(answer)
            data.pop(next(k for k in data if k != "note"))  # one student turn left out
            return json.dumps(data)
        if kind == "freeform" and broken_profile.turns[0].content in _history(prompt):
            return "<think>hmm</think>   "
        return answer

    out = tmp_path / "out"
    with FakeOpenAIServer(responder=responder) as server:
        assert main(annotate_args(unlabelled, out, server, tmp_path / "cache")) == 0
    assert "failed labels:" in capsys.readouterr().err

    val = csv_rows(out / "val_fake-labeller-1.csv")
    bad_q = [i for i, d in enumerate(given["val"]) if d.question.text == broken_question]
    for i in bad_q:
        cells = val[given["val"][i].id]
        assert "correct_option" in cells["question_annotation"] and "error" in cells["question_annotation"]
        assert cells["correctness"] == "" and cells["correctness_prompt"] == ""  # never asked
        # FIDELITY.md (annotation): the other labels are asked all the same, without an answer key.
        assert cells["acts_prompt"] and "Correct option" not in cells["acts_prompt"]
    good = next(d.id for d in given["val"] if d.question.text != broken_question)
    assert "Correct option: " in val[good]["acts_prompt"]
    cell = csv_rows(out / "test_fake-labeller-1.csv")[broken_correctness.id]["correctness"]
    assert cell.startswith("{'error': ") and "do not match the student turns" in cell
    train = csv_rows(out / "train_fake-labeller-1.csv")
    assert train[broken_profile.id]["freeform_persona"] == ""
    assert "hmm" in train[broken_profile.id]["freeform_persona_annotation_raw"]

    from simhub.data.eedi import load_eedi

    corpus = load_eedi(annotations=out, annotator=MODEL, drop_unsolvable=False)
    assert corpus.failed_labels["val"]["question"] == len(bad_q)
    assert corpus.failed_labels["val"]["correctness"] == len(bad_q)
    assert corpus.failed_labels["test"]["correctness"] == 1
    assert corpus.failed_labels["train"]["freeform"] == 1
    by_id = {d.id: d for s in SPLITS for d in corpus[s]}
    assert all(t.correctness is None for t in by_id[broken_correctness.id].turns)
    assert by_id[broken_correctness.id].turns[1].act is not None  # the other labels stand
    assert by_id[broken_profile.id].profile is None
    # With the default drop, the dialogues of the failed question are gone (docs/protocol.md §2 rule 7).
    converted = convert(out, tmp_path / "converted")
    assert len(converted["val"]) == len(given["val"]) - len(bad_q)


def test_a_cut_off_or_empty_answer_is_an_error_cell_that_says_why(unlabelled, tmp_path):
    given = read_jsonl(unlabelled / "test.jsonl")
    cut, empty = given[0], given[1]
    assert cut.turns[-1].content != empty.turns[-1].content

    def completion(content, finish):
        return {"id": "x", "object": "chat.completion", "model": MODEL,
                "choices": [{"index": 0, "finish_reason": finish,
                             "message": {"role": "assistant", "content": content}}]}

    def responder(body):
        prompt = body["messages"][-1]["content"]
        if _kind(prompt) == "acts" and _history(prompt).endswith(cut.turns[-1].content):
            return completion('{"turn 1": {"ac', "length")
        if _kind(prompt) == "acts" and _history(prompt).endswith(empty.turns[-1].content):
            return completion(None, "stop")
        return fake_labeller(body)

    out = tmp_path / "out"
    with FakeOpenAIServer(responder=responder) as server:
        assert main(annotate_args(unlabelled / "test.jsonl", out, server, tmp_path / "cache", "--labels", "acts")) == 0
        assert all(r.body["response_format"] == {"type": "json_object"} for r in server.chat_requests())
    rows = csv_rows(out / annotation_file_name("test", MODEL))
    assert "cut off at the token limit" in rows[cut.id]["acts"] and rows[cut.id]["acts_annotation_raw"]
    assert "no text" in rows[empty.id]["acts"] and "cut off" not in rows[empty.id]["acts"]
    others = [r["acts"] for i, r in rows.items() if i not in (cut.id, empty.id)]
    assert others and all(a and not a.startswith("{'error'") for a in others)


@pytest.mark.parametrize("status", [429, 401])
def test_endpoint_errors_are_retried_then_reported_per_dialogue(unlabelled, labeller, tmp_path, capsys, monkeypatch,
                                                                status):
    key = "sk-secret-" + secrets.token_hex(8)
    monkeypatch.setenv("SIMHUB_ANNOTATOR_API_KEY", key)
    out, cache = tmp_path / "out", tmp_path / "cache"
    args = ["annotate", "--data", str(unlabelled), "--output", str(out), "--model", MODEL, "--base-url",
            labeller.base_url, "--api-key-env", "SIMHUB_ANNOTATOR_API_KEY", "--cache-dir", str(cache),
            "--concurrency", "1", "--max-retries", "1", "--labels", "questions,correctness"]
    labeller.fail_next(2, status)  # the first question fails twice: first try and its one retry
    assert main(args) == 0
    captured = capsys.readouterr()
    assert f"HTTP {status}" in captured.err and key not in captured.out + captured.err
    chats = labeller.chat_requests()
    assert chats[0].body == chats[1].body and chats[0].authorization == f"Bearer {key}"
    rows = [r for s in SPLITS for r in read_annotation_file(out / annotation_file_name(s, MODEL))]
    failed = [r for r in rows if r.cells["question_annotation"] == ""]
    assert failed and all(r.cells["correctness"] == "" for r in failed)
    assert all(r.cells["question_annotation"] and r.cells["correctness"] for r in rows if r not in failed)

    # Nothing finished is lost: the rerun sends only the failed question and its correctness requests.
    sent = len(chats)
    assert main(args) == 0
    again = labeller.chat_requests()[sent:]
    assert len(again) == 1 + len(failed)
    rows = [r for s in SPLITS for r in read_annotation_file(out / annotation_file_name(s, MODEL))]
    assert all(r.cells["question_annotation"] and r.cells["correctness"] for r in rows)


def test_unreachable_endpoint_completes_and_counts_failures(unlabelled, tmp_path, capsys):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "out"
    start = time.monotonic()
    assert main(["annotate", "--data", str(unlabelled / "test.jsonl"), "--output", str(out), "--model", MODEL,
                 "--base-url", f"http://127.0.0.1:{port}/v1", "--cache-dir", str(tmp_path / "cache"),
                 "--max-retries", "0", "--quiet", "--labels", "acts,ocean"]) == 1  # no label made
    assert time.monotonic() - start < 60
    captured = capsys.readouterr()
    assert "simhub: error: no label was made" in captured.err
    assert "failed labels: 8" in captured.err
    assert f"connection refused at http://127.0.0.1:{port}/v1 8" in captured.err
    rows = csv_rows(out / annotation_file_name("test", MODEL))
    assert len(rows) == 4 and all(r["acts"] == "" and r["acts_prompt"] and r["acts_annotation_raw"] == ""
                                  for r in rows.values())


def test_failed_requests_do_not_overwrite_labels_of_an_earlier_run(unlabelled, labeller, tmp_path):
    out = tmp_path / "out"
    data = unlabelled / "val.jsonl"
    assert main(annotate_args(data, out, labeller, tmp_path / "cache")) == 0
    before = (out / annotation_file_name("val", MODEL)).read_bytes()
    config = annotator_endpoint(MODEL, "http://127.0.0.1:9/v1", api_key_env="none", cache_dir=tmp_path / "empty",
                                max_retries=0)
    with OpenAIClient(config) as client:  # the cache is gone and the endpoint is down
        report = annotate_splits(load_inputs(data), out, client)
    assert report.failed_total == 0 and set(report.status["val"]["acts"]) == {"kept"}
    assert (out / annotation_file_name("val", MODEL)).read_bytes() == before


def test_bad_input_exits_2_with_a_message(unlabelled, labeller, tmp_path, capsys, monkeypatch):
    base = ["annotate", "--data", str(unlabelled), "--output", str(tmp_path / "o"), "--model", MODEL]
    assert main([*base, "--labels", "acts,errors"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("simhub: error: labels: unknown label 'errors'") and "questions, acts, correctness" in err

    # A third-party endpoint with no key variable named: refused before anything is sent.
    assert main([*base, "--base-url", "https://api.example.invalid/v1", "--cache-dir", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err
    assert "api.example.invalid is not api.openai.com" in err and "--api-key-env MY_KEY" in err
    # A named variable that is unset: refused, naming it (and only it).
    monkeypatch.delenv("MY_KEY", raising=False)
    assert main([*base, "--base-url", "https://api.example.invalid/v1", "--api-key-env", "MY_KEY",
                 "--cache-dir", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err
    assert "MY_KEY" in err and "OPENAI_API_KEY" not in err

    # Ids that cannot form a key are refused unless keys are derived from them.
    odd = tmp_path / "odd.jsonl"
    dialogue = strip(load_sample_corpus()["test"][0])
    dialogue.id = "my-dialogue"
    write_jsonl(odd, [dialogue])
    args = ["annotate", "--data", str(odd), "--output", str(tmp_path / "o"), "--model", MODEL, "--base-url",
            labeller.base_url, "--api-key-env", "none", "--cache-dir", str(tmp_path / "c"), "--quiet"]
    assert main(args) == 2
    assert "'my-dialogue'" in capsys.readouterr().err and labeller.requests == []
    assert main([*args, "--hash-ids"]) == 0
    rows = read_annotation_file(tmp_path / "o" / annotation_file_name("odd", MODEL))
    assert rows[0].key[0] == 0 and "my-dialogue" in (tmp_path / "o" / "odd_fake-labeller-1.csv").read_text()

    assert main(["annotate", "--data", str(tmp_path / "missing")]) == 2
    assert "--model" in capsys.readouterr().err


# --------------------------------------------------------------------------- agree


def test_agree_compares_two_annotators(unlabelled, labeller, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(annotate_args(unlabelled, out, labeller, tmp_path / "cache")) == 0
    capsys.readouterr()
    # The fake against itself agrees perfectly.
    assert main(["annotate", "agree", str(out), str(out), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["dialogues"] == {"common": 12, "only_a": 0, "only_b": 0}
    assert result["acts"]["kappa"] == pytest.approx(1.0) and result["correctness"]["agreement"] == 1.0
    assert result["kcs"]["jaccard"] == 1.0 and result["question"]["agreement"] == 1.0
    # Against the sample's own labels on the same dialogues (file names differ: pick them by name).
    from simhub.data.sample import sample_annotations_dir

    assert main(["annotate", "agree", str(out), str(sample_annotations_dir()), "--annotator-b", "gpt-4.1"]) == 0
    table = capsys.readouterr().out
    assert "dialogues compared: 12 (only in A: 0, only in B:" in table
    assert "Cohen's kappa" in table and "acts 0.73" in table


def test_progress_is_a_tqdm_bar_per_stage(unlabelled, labeller, tmp_path, capsys):
    args = [a for a in annotate_args(unlabelled, tmp_path / "out", labeller, tmp_path / "cache", "--labels", "acts")
            if a != "--quiet"]
    assert main(args) == 0
    err = capsys.readouterr().err
    # a bar per stage, written as lines (stderr is not a terminal here): the last one complete
    assert re.search(r"annotate \w+: (\d+)/\1 req \[", err) and "\r" not in err, err[-2000:]
    assert "requests answered" not in err
