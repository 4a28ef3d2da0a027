"""The service's edges, without model weights: raw bodies checked before decoding (size, UTF-8,
nesting depth, lone surrogates), per-item errors in /score as in ``simhub score``, the configured
limits in the OpenAPI schema, and the small things (route labels, file modes, plain CLI help)."""

from __future__ import annotations

import io
import json
import os
import stat
from contextlib import redirect_stderr, redirect_stdout

import pytest

pytest.importorskip("litestar")

from hypothesis import given, settings
from hypothesis import strategies as st

from simhub.config import Limits
from simhub.serving.guard import json_depth, lone_surrogate
from tests.doubles.server_process import metric_total
from tests.integration.test_serving import PAPER_DIALOGUE, assert_error, mini_client, rouge_items

JSON = {"content-type": "application/json"}


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


# ---------------------------------------------------------------------------------------- raw bodies


def _depth(value) -> int:
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    return 0


_text = st.text(alphabet=st.sampled_from('ab[]{}"\\\n\u00e9\U0001f600'), max_size=8)
_json = st.recursive(st.none() | st.booleans() | st.integers() | _text,
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3), max_leaves=30)


@settings(max_examples=300, deadline=None, database=None)
@given(value=_json, ascii_only=st.booleans())
def test_json_depth_ignores_brackets_in_strings(value, ascii_only):
    assert json_depth(json.dumps(value, ensure_ascii=ascii_only).encode()) == _depth(value)


def test_lone_surrogates_are_found_and_pairs_are_not():
    assert lone_surrogate(b'"\\ud83d\\ude00 \\u00e9"') is None
    assert lone_surrogate(b'"\\\\ud800"') is None  # an escaped backslash, then plain text
    assert lone_surrogate(b'"\\ud800"') == (1, "\\ud800")
    assert lone_surrogate(b'"ab\\uDC00"') == (3, "\\uDC00")
    assert lone_surrogate(b'"\\ud800\\ud800\\udc00"') == (1, "\\ud800")
    assert lone_surrogate(b'"\\\\\\ud800x"') == (3, "\\ud800")


def test_deep_nesting_is_a_400_before_decoding():
    with mini_client() as c:
        r = c.post("/score", content=nested(100_000), headers=JSON)
        err = assert_error(r, 400, words="levels deep")
        assert err["type"] == "too_deep" and "100000" in err["message"] and "limit of 32" in err["message"]
        deep_meta = {**PAPER_DIALOGUE, "meta": {"x": json.loads(nested(40))}}
        assert_error(c.post("/score", json={"items": [{"dialogue": deep_meta, "turn_index": 1, "candidate": "x"}]}), 400,
                     words="45 levels deep")  # 40 inside items, item, dialogue and meta
        fine = {**PAPER_DIALOGUE, "meta": {"x": json.loads(nested(20))}}
        assert c.post("/score", json={"items": [{"dialogue": fine, "turn_index": 1, "candidate": "x"}]}).status_code == 200
        assert c.post("/v1/chat/completions", content=b'{"model": "x", "messages": ' + nested(5000) + b"}",
                      headers=JSON).status_code == 400
        assert c.get("/health").status_code == 200


def test_invalid_utf8_and_lone_surrogates_are_named():
    with mini_client() as c:
        err = assert_error(c.post("/score", content=b'{"items": "\xff\xfe"}', headers=JSON), 400, words="not valid UTF-8")
        assert "0xff at offset 11" in err["message"] and "truncated" not in err["message"]
        encoded_surrogate = b'{"items": "\xed\xa0\x80"}'  # UTF-8 of U+D800, which UTF-8 forbids
        assert_error(c.post("/score", content=encoded_surrogate, headers=JSON), 400, words="not valid UTF-8")
        item = {"dialogue": PAPER_DIALOGUE, "turn_index": 1, "candidate": "CANDIDATE"}
        body = json.dumps({"items": [item]}).replace("CANDIDATE", "\\ud800 half")
        err = assert_error(c.post("/score", content=body.encode(), headers=JSON), 400, words="lone surrogate")
        assert "\\ud800" in err["message"] and "truncated" not in err["message"]
        pair = json.dumps({"items": [item], "metrics": ["rouge_l"]}).replace("CANDIDATE", "\\ud83d\\ude00 5/8 divided by 1/6")
        r = c.post("/score", content=pair.encode(), headers=JSON)
        assert r.status_code == 200 and r.json()["items"][0]["scores"]["rouge_l"] == 1.0
        raw = json.dumps({"items": [{**item, "candidate": "é 5/8 divided by 1/6 😀"}]}, ensure_ascii=False).encode()
        assert c.post("/score", content=raw, headers=JSON).status_code == 200


def test_huge_numbers_and_duplicate_keys_never_fail_the_server():
    with mini_client() as c:
        huge_index = json.dumps({"items": [{"dialogue": PAPER_DIALOGUE, "turn_index": 1, "candidate": "x"}]}).replace(
            '"turn_index": 1', '"turn_index": ' + "9" * 400)
        assert c.post("/score", content=huge_index.encode(), headers=JSON).status_code in (200, 400, 422)
        for number in ("1e999", "-1e999", "1" * 5000, "0." + "0" * 5000 + "1", "-0"):
            body = {"model": "nobody", "dialogues": [{"id": "d", "question": {"text": "q"}}],
                    "sampling": {"temperature": "T"}}
            r = c.post("/simulate", content=json.dumps(body).replace('"T"', number).encode(), headers=JSON)
            assert r.status_code < 500 and r.json()["error"]["message"], (number, r.text)
        # Duplicate keys: the last one wins, as in the standard library's parser.
        dup = b'{"items": [], "metrics": ["bogus"], "metrics": ["rouge_l"], "items": ' + json.dumps(rouge_items()).encode() + b"}"
        r = c.post("/score", content=dup, headers=JSON)
        assert r.status_code == 200 and r.json()["metrics"] == ["rouge_l"]


def test_body_limit_before_and_while_reading():
    with mini_client(max_body_bytes=1000) as c:
        assert_error(c.post("/score", content=b" " * 1001, headers=JSON), 413, words="limit of 1000 bytes")
        streamed = c.post("/score", content=iter([b" " * 600, b" " * 600]), headers=JSON)  # chunked: no length given
        assert_error(streamed, 413, words="limit of 1000 bytes")
        assert c.post("/score", json={"items": rouge_items()[:1]}).status_code == 200


# ---------------------------------------------------------------------------------------- /score per item


def test_score_reports_item_problems_per_item_as_the_cli_does(tmp_path):
    from simhub.cli import main

    long = "x" * 51
    items = [
        {"dialogue": PAPER_DIALOGUE, "turn_index": 0, "candidate": "x"},
        {"dialogue": PAPER_DIALOGUE, "turn_index": 9, "candidate": "x"},
        {"dialogue": PAPER_DIALOGUE, "turn_index": -1, "candidate": "x"},
        {"dialogue": {**PAPER_DIALOGUE, "turns": []}, "turn_index": 0, "candidate": "x"},
        {"dialogue": PAPER_DIALOGUE, "turn_index": 1, "candidate": long},
        {"dialogue": {**PAPER_DIALOGUE, "turns": PAPER_DIALOGUE["turns"] * 2}, "turn_index": 1, "candidate": "x"},
        {"dialogue": PAPER_DIALOGUE, "turn_index": 1, "candidate": "5/8 divided by 1/6"},
        {"dialogue": PAPER_DIALOGUE, "turn_index": 1, "candidate": ""},  # empty candidates are scored (docs/protocol.md §8)
    ]
    words = ["tutor turn", "out of range", "out of range", "out of range", "limit of 50", "limit of 6", None, None]
    profile = tmp_path / "limits.yaml"
    profile.write_text("name: limits\nserving: {limits: {max_candidate_chars: 50, max_turns: 6}}\n")
    from simhub.config import load_profile
    from simhub.serving.app import create_app
    from simhub.serving.settings import ServiceSettings

    loaded = load_profile(profile)
    from litestar.testing import TestClient

    with TestClient(create_app(ServiceSettings.load(loaded), loaded)) as c:
        r = c.post("/score", json={"items": items, "metrics": ["rouge_l"]})
    assert r.status_code == 200, r.text
    http = r.json()["items"]
    assert http[6]["scores"]["rouge_l"] == 1.0 and "error" not in http[6] and http[7]["scores"]["rouge_l"] == 0.0
    for item, word in zip(http, words, strict=True):
        if word is not None:
            assert word in item["error"] and item["scores"] == {"rouge_l": None}, item
    # the summary counts the items that were not scored at all, beside the two that were
    assert r.json()["summary"]["rouge_l"] == {"mean": 0.5, "std": 0.5, "count": 2, "unscored": 6}
    # The command line applies the same limits, with the same messages.
    source, output = tmp_path / "items.jsonl", tmp_path / "scores.jsonl"
    source.write_text("".join(json.dumps(it) + "\n" for it in items))
    printed = io.StringIO()
    with redirect_stdout(printed), redirect_stderr(io.StringIO()):
        assert main(["score", "--input", str(source), "--output", str(output), "--metrics", "rouge_l",
                     "--profile", str(profile)]) == 0
    assert "unscored=6 (items with an error: see each)" in printed.getvalue()
    cli = [json.loads(line) for line in output.read_text().splitlines()]
    assert [it.get("error") for it in cli] == [it.get("error") for it in http]
    assert [it["scores"] for it in cli] == [it["scores"] for it in http]


# ---------------------------------------------------------------------------------------- schema and docs


def test_openapi_schema_carries_the_configured_limits():
    with mini_client(max_items=5, max_dialogues=3, max_turns=7, max_n=2, max_tokens=99, max_body_bytes=12345,
                     max_candidate_chars=77) as c:
        schema = c.get("/schema/openapi.json").json()
    comps = schema["components"]["schemas"]

    def value(struct, name):
        prop = comps[struct]["properties"][name]
        return next((b for b in prop.get("oneOf", []) if b.get("type") != "null"), prop)

    assert value("ScoreRequest", "items")["maxItems"] == 5
    assert value("SimulateRequest", "dialogues")["maxItems"] == 3
    assert value("Dialogue", "turns")["maxItems"] == 7
    assert value("SamplingParams", "n")["maximum"] == 2 and value("SamplingParams", "max_tokens")["maximum"] == 99
    assert value("ChatCompletionRequest", "max_completion_tokens")["maximum"] == 99
    assert value("ChatCompletionRequest", "n")["maximum"] == 2
    assert "77 characters" in value("ScoreItemIn", "candidate")["description"]
    assert "12345 bytes" in schema["info"]["description"] and "32 levels" in schema["info"]["description"]
    defaults = Limits()
    with mini_client() as c:
        comps = c.get("/schema/openapi.json").json()["components"]["schemas"]
    assert comps["ScoreRequest"]["properties"]["items"]["maxItems"] == defaults.max_items


def test_chat_operation_documents_the_event_stream():
    with mini_client() as c:
        op = c.get("/schema/openapi.json").json()["paths"]["/v1/chat/completions"]["post"]
    assert {"application/json", "text/event-stream"} <= set(op["responses"]["200"]["content"])
    assert "502" in op["responses"]


def test_unsupported_openai_parameters_are_refused_before_any_work():
    with mini_client() as c:
        body = {"model": "baseline:zero-shot", "messages": [{"role": "user", "content": "hi"}], "tools": [],
                "logit_bias": {"1": 2}}
        err = assert_error(c.post("/v1/chat/completions", json=body), 400, "tools", "not supported")
        assert "logit_bias" in err["message"] and err["type"] == "unsupported_parameter"


# ---------------------------------------------------------------------------------------- small things


def test_route_labels_keep_the_full_path():
    with mini_client() as c:
        c.get("/models")
        c.get("/v1/models")
        c.get("/v1/models")
        text = c.get("/metrics").text
    assert metric_total(text, "simhub_http_requests_total", method="GET", route="/models", status="200") == 1
    assert metric_total(text, "simhub_http_requests_total", method="GET", route="/v1/models", status="200") == 2


def test_output_files_get_ordinary_permissions(tmp_path):
    from simhub.schema import atomic_write_bytes

    old = os.umask(0o022)
    try:
        atomic_write_bytes(tmp_path / "a.jsonl", b"{}\n")
        os.umask(0o002)
        atomic_write_bytes(tmp_path / "b.jsonl", b"{}\n")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "a.jsonl").stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "b.jsonl").stat().st_mode) == 0o664


def test_cli_help_is_plain_text():
    import argparse

    from simhub.cli import build_parser, plain

    assert plain("see ``simhub score`` and :class:`simhub.scoring.Scorer` or `x`") == \
        "see simhub score and simhub.scoring.Scorer or x"
    parser = build_parser()
    parsers = [parser]
    seen = []
    while parsers:
        p = parsers.pop()
        seen.append(p.prog)
        text = p.format_help()
        assert "``" not in text and ":class:" not in text and "`" not in text, (p.prog, text)
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                parsers.extend(action.choices.values())
    assert {"simhub serve", "simhub score", "simhub tiny", "simhub train"} <= set(seen)


def test_default_tiny_location_is_under_simhub_home(monkeypatch, tmp_path):
    from simhub.cli import build_parser

    parser = build_parser()
    tiny = parser.parse_args(["tiny"])
    assert tiny.output is None  # the handler builds under $SIMHUB_HOME/tiny
    monkeypatch.setenv("SIMHUB_HOME", str(tmp_path))
    from simhub.provision import tiny_dir

    assert tiny_dir() == tmp_path / "tiny"


# ---------------------------------------------------------------------------------------- failures


def test_failed_loading_is_reported_without_retry_after(monkeypatch):
    import time

    from litestar.testing import TestClient

    from simhub.config import EmbedderConfig, MetricModels, Profile, ScoringConfig
    from simhub.errors import ConfigError
    from simhub.metrics.cosine import Cosine
    from simhub.serving.app import create_app
    from simhub.serving.settings import ServiceSettings

    def broken(self):
        raise ConfigError("scoring.metrics.cosine: model '/srv/models/minilm' could not be loaded",
                          field="scoring.metrics.cosine")

    monkeypatch.setattr(Cosine, "load", broken)
    profile = Profile(name="broken-cosine", scoring=ScoringConfig(metrics=MetricModels(cosine=EmbedderConfig())))
    with TestClient(create_app(ServiceSettings.load(profile), profile)) as c:
        deadline = time.time() + 30
        while not c.app.state.services.loaded and time.time() < deadline:
            time.sleep(0.05)
        r = c.get("/ready")
        body = r.json()
        # The others are still served; the failed metric answers 503 without Retry-After (retrying won't help).
        assert c.post("/score", json={"items": rouge_items(), "metrics": ["rouge_l"]}).status_code == 200
        failed = c.post("/score", json={"items": rouge_items(), "metrics": ["cosine"]})
    assert r.status_code == 503 and "retry-after" not in r.headers
    assert body["status"] == "failed" and body["ready"] is False and body["loading"] == ["cosine"]
    (cosine,) = [x for x in body["components"] if x["id"] == "cosine"]
    assert cosine["status"] == "failed" and "could not be loaded" in cosine["error"] and "/srv/" not in cosine["error"]
    assert "cosine" in body["error"]
    assert failed.status_code == 503 and "retry-after" not in failed.headers
    assert failed.json()["error"]["type"] == "load_failed" and failed.json()["error"]["field"] == "metrics"


def test_simulator_endpoint_failures_are_reported():
    from simhub.serving import chat
    from simhub.serving.controllers import _simulation_out
    from simhub.serving.schemas import UpstreamError
    from simhub.simulation import SimulationResult

    out, usage = _simulation_out([SimulationResult(error="HTTP 503")])
    assert out[0].error == "HTTP 503" and out[0].candidates == [] and usage.completion_tokens == 0
    with pytest.raises(UpstreamError, match="ConnectTimeout") as failed:
        chat.check_result(SimulationResult(error="ConnectTimeout"))
    assert failed.value.status_code == 502 and failed.value.field == "model"
