"""Run ``simhub serve`` as a child process on a free loopback port, and read its ``/metrics`` (tests and benchmarks)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path


def metric_total(text: str, name: str, **labels: str) -> float:
    """The sum of the samples called ``name`` whose labels include ``labels``, in a ``/metrics`` text
    (parsed with prometheus_client's parser; ``name`` is the sample's, e.g. ``simhub_http_requests_total``
    or ``simhub_score_batch_items_count``). 0.0 when there is no such sample."""
    from prometheus_client.parser import text_string_to_metric_families

    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items())
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    """``with ServerProcess(profile, env=...) as url:`` starts the server, waits for ``/ready``, stops it."""

    def __init__(self, profile: str, *, env: dict[str, str] | None = None, args: list[str] | None = None,
                 log_path: str | os.PathLike[str] | None = None, ready_timeout: float = 300.0, cwd: str | None = None):
        self.profile, self.env, self.args = profile, env or {}, args or []
        self.log_path = Path(log_path) if log_path else None
        self.ready_timeout, self.cwd = ready_timeout, cwd
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    def log_tail(self, n: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-n:] if self.log_path and self.log_path.is_file() else ""

    def start(self) -> str:
        import httpx

        out = self.log_path.open("wb") if self.log_path else subprocess.DEVNULL
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "simhub.cli", "serve", "--profile", self.profile, "--port", str(self.port),
             "--log-level", "warning", *self.args],
            env={**os.environ, **self.env}, stdout=out, stderr=subprocess.STDOUT, cwd=self.cwd,
        )
        deadline = time.time() + self.ready_timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}: {self.log_tail()}")
            try:
                if httpx.get(f"{self.url}/ready", timeout=2).status_code == 200:
                    return self.url
            except httpx.TransportError:
                pass
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"server not ready after {self.ready_timeout} s: {self.log_tail()}")

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
