"""A local stand-in for an OpenAI-compatible endpoint, so tests never reach a paid API.

It speaks just enough of the protocol for simhub's client: chat completions, file upload and
download, and the Batch API. Everything a test needs to steer or inspect lives on one object::

    with FakeOpenAIServer(responder=lambda body: "correct") as server:
        client = OpenAIClient(endpoint(server.base_url))
        ...
        assert len(server.chat_requests()) == 3

Steering:

* ``responder(body) -> str`` chooses the assistant text for a chat request (the default,
  :func:`default_answer`, is deterministic so cached and fresh answers can be compared); a
  responder that returns a dict answers with that exact JSON body instead (for malformed or
  unusual responses);
* :meth:`FakeOpenAIServer.fail_next` makes the next ``k`` chat requests answer an HTTP error,
  :meth:`FakeOpenAIServer.stall_next` makes them sleep first (longer than a client's timeout, to
  provoke one); faults are consumed in arrival order, by chat requests and by batch lines alike;
* ``latency_s`` delays every chat answer, so concurrent requests overlap and can be counted;
* ``batch_polls``: how many ``GET /v1/batches/{id}`` a batch answers ``in_progress`` before it
  runs its lines and ends; ``batch_final_status`` is how it ends (``completed``; ``failed``
  answers no line at all). All three may be changed while the server runs.

Inspection: ``requests`` holds every request as a :class:`RecordedRequest` (method, path,
decoded body, Authorization header); :meth:`FakeOpenAIServer.chat_requests` and
:meth:`FakeOpenAIServer.requests_to` filter it; :meth:`FakeOpenAIServer.file_content` returns an
uploaded batch input; ``max_in_flight`` is the peak number of chat requests answered at once.

Like the real service, a 401 answer quotes the key it was given, so tests can check that the
client keeps such bodies out of its errors and logs.
"""

from __future__ import annotations

import hashlib
import json
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeOpenAIServer", "RecordedRequest", "default_answer"]

Responder = Callable[[dict[str, Any]], Any]


def endpoint(base_url: str, model: str = "gpt-4.1", *, key_names: tuple[str, ...] = (), cache_dir=None,
             backoff_s: float = 1.0, max_backoff_s: float = 60.0, **settings: Any):
    """A client's :class:`~simhub.models.openai.EndpointConfig` for ``base_url``: ``settings`` are
    :class:`~simhub.config.EndpointSettings` fields, ``key_names`` the variables searched for the key."""
    from simhub.config import EndpointSettings
    from simhub.models.openai import EndpointConfig

    return EndpointConfig(EndpointSettings(base_url=base_url, **settings), model, key_names=key_names,
                          cache_dir=cache_dir, backoff_s=backoff_s, max_backoff_s=max_backoff_s)


def default_answer(body: dict[str, Any]) -> str:
    """A deterministic answer naming a digest of the request's messages (same request, same text)."""
    digest = hashlib.sha256(json.dumps(body.get("messages"), sort_keys=True).encode()).hexdigest()
    return f"answer {digest[:12]}"


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server saw it. ``body`` is the parsed JSON, the raw bytes of a multipart
    upload, or None for a GET."""

    method: str
    path: str
    body: Any
    authorization: str | None


@dataclass(frozen=True)
class _Fault:
    status: int | None = None  # answer this HTTP status instead of a completion
    stall_s: float = 0.0  # sleep this long before answering


@dataclass
class _Batch:
    id: str
    input_file_id: str
    endpoint: str
    total: int
    polls: int = 0
    status: str = "validating"
    output_file_id: str | None = None
    error_file_id: str | None = None
    completed: int = 0
    failed: int = 0
    created_at: int = field(default_factory=lambda: int(time.time()))


class FakeOpenAIServer:
    """A threaded HTTP server answering like an OpenAI-compatible API; use it as a context manager.

    ``base_url`` (``http://127.0.0.1:PORT/v1``) is what a client is pointed at.
    """

    def __init__(
        self,
        responder: Responder | None = None,
        *,
        latency_s: float = 0.0,
        batch_polls: int = 1,
        batch_final_status: str = "completed",
    ):
        self.responder: Responder = responder or default_answer
        self.latency_s = latency_s
        self.batch_polls = batch_polls
        self.batch_final_status = batch_final_status
        self.requests: list[RecordedRequest] = []
        self.max_in_flight = 0
        self._in_flight = 0
        self._faults: deque[_Fault] = deque()
        self._files: dict[str, bytes] = {}
        self._batches: dict[str, _Batch] = {}
        self._lock = threading.Lock()
        self._counter = 0
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ steering and inspection

    def fail_next(self, count: int, status: int = 500) -> None:
        """The next ``count`` chat requests (or batch lines) answer ``status`` with an error body."""
        with self._lock:
            self._faults.extend(_Fault(status=status) for _ in range(count))

    def stall_next(self, count: int, seconds: float) -> None:
        """The next ``count`` chat requests sleep ``seconds`` before answering normally."""
        with self._lock:
            self._faults.extend(_Fault(stall_s=seconds) for _ in range(count))

    def chat_requests(self) -> list[RecordedRequest]:
        """The chat-completion requests received so far (retries included)."""
        with self._lock:
            return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def requests_to(self, method: str, prefix: str) -> list[RecordedRequest]:
        """Requests with this method whose path starts with ``prefix`` (e.g. ``POST``, ``/v1/batches``)."""
        with self._lock:
            return [r for r in self.requests if r.method == method and r.path.startswith(prefix)]

    def file_content(self, file_id: str) -> bytes:
        """The bytes of an uploaded or generated file."""
        with self._lock:
            return self._files[file_id]

    @property
    def base_url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("the fake server is not running; use it as a context manager")
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> FakeOpenAIServer:
        handler = type("_BoundHandler", (_Handler,), {"fake": self})
        self._httpd = _Server(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-openai", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ behaviour

    def _new_id(self, prefix: str) -> str:
        with self._lock:
            self._counter += 1
            return f"{prefix}{self._counter}"

    def _next_fault(self) -> _Fault | None:
        with self._lock:
            return self._faults.popleft() if self._faults else None

    def _completion(self, body: dict[str, Any]) -> dict[str, Any]:
        text = self.responder(body)
        if isinstance(text, dict):
            return text
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": text},
            "finish_reason": "stop",
            "logprobs": None,
        }
        if body.get("logprobs") and isinstance(text, str):
            top = int(body.get("top_logprobs") or 0)
            choice["logprobs"] = {
                "content": [
                    {
                        "token": tok,
                        "logprob": -0.5,
                        "bytes": list(tok.encode()),
                        "top_logprobs": [{"token": tok, "logprob": -0.5, "bytes": list(tok.encode())}][:top],
                    }
                    for tok in text.split(" ")
                ]
            }
        choices = [{**choice, "index": i} for i in range(int(body.get("n") or 1))]
        prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in body.get("messages", []))
        completion_tokens = len(str(text).split()) * len(choices)
        return {
            "id": self._new_id("chatcmpl-"),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "fake"),
            "choices": choices,
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }

    def _answer_chat(self, body: dict[str, Any], authorization: str | None) -> tuple[int, dict[str, Any]]:
        """(status, JSON body) for one chat request, applying the next fault if any."""
        fault = self._next_fault()
        if fault is not None and fault.stall_s:
            time.sleep(fault.stall_s)
        if self.latency_s:
            time.sleep(self.latency_s)
        if fault is not None and fault.status is not None:
            return fault.status, _error_body(fault.status, authorization)
        return 200, self._completion(body)

    def _run_batch(self, batch: _Batch) -> None:
        """Answer every line of the batch's input file and write the output and error files."""
        outputs, errors = [], []
        for raw in self.file_content(batch.input_file_id).splitlines():
            if not raw.strip():
                continue
            line = json.loads(raw)
            status, body = self._answer_chat(line["body"], None)
            record = {
                "id": self._new_id("batch_req_"),
                "custom_id": line["custom_id"],
                "response": {"status_code": status, "request_id": self._new_id("req_"), "body": body},
                "error": None,
            }
            (outputs if status == 200 else errors).append(record)
        batch.completed, batch.failed = len(outputs), len(errors)
        with self._lock:
            if outputs:
                batch.output_file_id = f"file-out-{batch.id}"
                self._files[batch.output_file_id] = _jsonl(outputs)
            if errors:
                batch.error_file_id = f"file-err-{batch.id}"
                self._files[batch.error_file_id] = _jsonl(errors)
        batch.status = self.batch_final_status

    def _poll_batch(self, batch_id: str) -> _Batch | None:
        batch = self._batches.get(batch_id)
        if batch is None:
            return None
        batch.polls += 1
        if batch.status in ("validating", "in_progress"):
            if batch.polls > self.batch_polls:
                if self.batch_final_status in ("completed", "expired", "cancelled"):
                    self._run_batch(batch)
                else:
                    batch.status = self.batch_final_status
            else:
                batch.status = "in_progress"
        return batch


def _jsonl(records: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


def _error_body(status: int, authorization: str | None) -> dict[str, Any]:
    if status == 401:
        given = (authorization or "").removeprefix("Bearer ")
        message = f"Incorrect API key provided: {given}. You can find your API key in your account settings."
        return {"error": {"message": message, "type": "invalid_request_error", "code": "invalid_api_key"}}
    return {"error": {"message": f"injected failure {status}", "type": "server_error", "code": None}}


def _batch_json(batch: _Batch) -> dict[str, Any]:
    return {
        "id": batch.id,
        "object": "batch",
        "endpoint": batch.endpoint,
        "errors": None,
        "input_file_id": batch.input_file_id,
        "completion_window": "24h",
        "status": batch.status,
        "output_file_id": batch.output_file_id,
        "error_file_id": batch.error_file_id,
        "created_at": batch.created_at,
        "request_counts": {"total": batch.total, "completed": batch.completed, "failed": batch.failed},
    }


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # a stalled handler must not hold up the end of a test

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that timed out closes its socket, so the late answer fails to send: expected.
        # Anything else is a bug in the fake and is reported as usual.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    fake: FakeOpenAIServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send_json(self, status: int, body: Any) -> None:
        self._send(status, json.dumps(body).encode(), "application/json")

    def _send(self, status: int, data: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _record(self, body: Any) -> None:
        fake = self.fake
        with fake._lock:
            fake.requests.append(
                RecordedRequest(self.command, self.path, body, self.headers.get("Authorization"))
            )

    def do_GET(self) -> None:
        fake = self.fake
        self._record(None)
        parts = self.path.split("?")[0].strip("/").split("/")
        if parts[:2] == ["v1", "batches"] and len(parts) == 3:
            batch = fake._poll_batch(parts[2])
            if batch is not None:
                return self._send_json(200, _batch_json(batch))
        elif parts[:2] == ["v1", "files"] and len(parts) == 4 and parts[3] == "content":
            with fake._lock:
                data = fake._files.get(parts[2])
            if data is not None:
                return self._send(200, data, "application/octet-stream")
        self._send_json(404, {"error": {"message": "not found", "type": "invalid_request_error"}})

    def do_POST(self) -> None:
        fake = self.fake
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        path = self.path.split("?")[0].rstrip("/")
        if path == "/v1/files":
            self._record(raw)
            return self._upload(raw)
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._record(raw)
            return self._send_json(
                400, {"error": {"message": "body is not JSON", "type": "invalid_request_error"}}
            )
        self._record(body)
        if path == "/v1/chat/completions":
            with fake._lock:
                fake._in_flight += 1
                fake.max_in_flight = max(fake.max_in_flight, fake._in_flight)
            try:
                status, answer = fake._answer_chat(body, self.headers.get("Authorization"))
            finally:
                with fake._lock:
                    fake._in_flight -= 1
            return self._send_json(status, answer)
        if path == "/v1/batches":
            input_id = body.get("input_file_id")
            with fake._lock:
                data = fake._files.get(input_id)
            if data is None:
                return self._send_json(
                    400, {"error": {"message": "unknown input_file_id", "type": "invalid_request_error"}}
                )
            batch = _Batch(
                id=fake._new_id("batch_"),
                input_file_id=input_id,
                endpoint=body.get("endpoint", ""),
                total=sum(1 for line in data.splitlines() if line.strip()),
            )
            with fake._lock:
                fake._batches[batch.id] = batch
            return self._send_json(200, _batch_json(batch))
        self._send_json(404, {"error": {"message": "not found", "type": "invalid_request_error"}})

    def _upload(self, raw: bytes) -> None:
        """Store the ``file`` part of a multipart/form-data upload."""
        header = f"Content-Type: {self.headers.get('Content-Type', '')}\r\n\r\n".encode()
        message = BytesParser(policy=HTTP).parsebytes(header + raw)
        fields: dict[str, tuple[str | None, bytes]] = {}
        for part in message.iter_parts():
            name = part.get_param("name", header="content-disposition")
            fields[str(name)] = (part.get_filename(), part.get_payload(decode=True) or b"")
        if "file" not in fields:
            return self._send_json(
                400, {"error": {"message": "missing file", "type": "invalid_request_error"}}
            )
        filename, data = fields["file"]
        purpose = fields.get("purpose", (None, b""))[1].decode()
        file_id = self.fake._new_id("file-")
        with self.fake._lock:
            self.fake._files[file_id] = data
        self._send_json(
            200,
            {
                "id": file_id,
                "object": "file",
                "bytes": len(data),
                "created_at": int(time.time()),
                "filename": filename or "upload",
                "purpose": purpose,
                "status": "processed",
            },
        )
