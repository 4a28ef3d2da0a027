"""Prometheus metrics of one app (own registry, so several apps in one process do not collide),
the access-log/metrics ASGI middleware, and JSON logging. Nothing here sees request headers
except ``X-Request-ID``; secrets are never logged."""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

log = logging.getLogger("simhub.serving.access")
#: Routes whose requests are logged at DEBUG, not INFO (liveness and readiness probes, scrapes).
QUIET_ROUTES = frozenset({"/health", "/ready", "/metrics"})
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


class ServiceMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter("simhub_http_requests_total", "HTTP requests", ["method", "route", "status"], registry=r)
        self.latency = Histogram("simhub_http_request_duration_seconds", "Request latency", ["route"], registry=r,
                                 buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120))
        self.batch_items = Histogram("simhub_score_batch_items", "Items per Scorer.score call", registry=r,
                                     buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512))
        self.batch_requests = Histogram("simhub_score_batch_requests", "Requests merged per Scorer.score call", registry=r,
                                        buckets=(1, 2, 4, 8, 16, 32, 64))
        self.tokens = Counter("simhub_generated_tokens_total", "Generated tokens", ["model"], registry=r)
        self.prompt_tokens = Counter("simhub_prompt_tokens_total", "Prompt tokens", ["model"], registry=r)
        self.rejected = Counter("simhub_rejected_total", "Requests refused before the work", ["reason"], registry=r)
        self.ready = Gauge("simhub_ready", "1 when every model is loaded", registry=r)

    def observe_batch(self, requests: int, items: int) -> None:
        self.batch_requests.observe(requests)
        self.batch_items.observe(items)

    def observe_generation(self, model: str, results) -> None:
        self.tokens.labels(model).inc(sum(c.tokens for r in results for c in r.candidates))
        self.prompt_tokens.labels(model).inc(sum(r.prompt_tokens for r in results))

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


def route_of(scope: dict) -> str:
    """The route's full path template (``/v1/models``, not the handler's own ``/models``), so labels
    stay few (no ids from paths) and distinct routes are never merged; ``unmatched`` before routing."""
    return scope.get("path_template") or "unmatched"


def access_middleware(metrics: ServiceMetrics):
    """Count, time and log every request (method, route, status, duration, request id)."""

    def factory(app):
        async def middleware(scope, receive, send):
            if scope["type"] != "http":
                await app(scope, receive, send)
                return
            start = time.perf_counter()
            status = {"code": 500}
            rid = next((v.decode() for k, v in scope.get("headers", []) if k == b"x-request-id"), "")
            rid = rid if _REQUEST_ID.match(rid) else uuid.uuid4().hex[:16]

            async def send_wrapper(message):
                if message["type"] == "http.response.start":
                    status["code"] = message["status"]
                    message["headers"] = [*message.get("headers", []), (b"x-request-id", rid.encode())]
                await send(message)

            try:
                await app(scope, receive, send_wrapper)
            finally:
                route = route_of(scope)
                elapsed = time.perf_counter() - start
                metrics.requests.labels(scope["method"], route, str(status["code"])).inc()
                metrics.latency.labels(route).observe(elapsed)
                # Probes arrive every few seconds from orchestrators: log them only at DEBUG.
                level = logging.DEBUG if route in QUIET_ROUTES else logging.INFO
                log.log(level, "request", extra={"request_id": rid, "method": scope["method"], "route": route,
                                                 "status": status["code"], "duration_ms": round(elapsed * 1000, 2)})

        return middleware

    return factory


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message and the ``extra`` fields."""

    _skip = set(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime", "taskName"}

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {"time": round(record.created, 3), "level": record.levelname, "logger": record.name,
                               "message": record.getMessage()}
        out.update({k: v for k, v in record.__dict__.items() if k not in self._skip})
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def configure_logging(json_logs: bool = True, level: int = logging.INFO) -> None:
    logger = logging.getLogger("simhub.serving")
    logger.setLevel(level)
    if any(getattr(h, "_simhub", False) for h in logger.handlers):
        return
    handler = logging.StreamHandler()
    handler._simhub = True  # type: ignore[attr-defined]
    handler.setFormatter(JsonFormatter() if json_logs else logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False
