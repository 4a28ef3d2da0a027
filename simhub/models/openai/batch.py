"""The Batch API half of the client: requests the cache cannot answer sent as one batch (half
price), the batch id remembered in the cache folder so that a killed run resumes polling it."""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from simhub.models.openai._util import _payload_list, _progress_bar
from simhub.models.openai.cache import _ResponseCache
from simhub.models.openai.failures import _SAFE_TOKEN, _safe_detail
from simhub.models.openai.results import EndpointFailure, Outcome
from simhub.schema import atomic_write_bytes

log = logging.getLogger("simhub.models.openai")

_T = TypeVar("_T")

#: Batch statuses after which nothing changes any more.
BATCH_TERMINAL: frozenset[str] = frozenset({"completed", "failed", "expired", "cancelled"})
BATCH_ENDPOINT = "/v1/chat/completions"


class _BatchAPI(_ResponseCache):
    """:meth:`complete_batch` and its bookkeeping (a mixin of
    :class:`~simhub.models.openai.client.OpenAIClient`, whose calls, headers and SDK it uses)."""

    if TYPE_CHECKING:
        def _call_sync(self, call: Callable[[], _T], what: str) -> _T | EndpointFailure: ...
        def _headers(self) -> dict[str, Any]: ...
        def _sdk(self) -> Any: ...
        def _check_key(self) -> None: ...
        def _accept(self, body: Any, key: str, attempts: int) -> Outcome: ...

    def complete_batch(
        self,
        payloads: Sequence[Mapping[str, Any]],
        *,
        poll_interval_s: float = 30.0,
        max_wait_s: float | None = None,
        progress: bool = False,
        desc: str = "batch",
    ) -> list[Outcome]:
        """Answer ``payloads`` through the Batch API (half the price; done within 24 hours).

        Cached answers are not re-sent and identical payloads are sent once (their custom id is
        the cache key). The batch id is remembered in ``cache_dir`` until the batch is over, so
        a rerun after a crash or kill polls the same batch instead of submitting (and paying
        for) it again. Polls every ``poll_interval_s`` seconds; with ``max_wait_s`` set, stops
        waiting after that long and reports the unanswered requests as failures with cause
        ``batch in_progress`` (rerun later to collect them). Never raises for a failed request;
        a request the batch could not answer is not retried inside it (failures are not cached,
        so a rerun sends it again).
        """
        payloads = _payload_list(payloads)
        keys, results, pending = self._from_cache(payloads)
        unique = {keys[i]: payloads[i] for i in pending}
        if unique:
            self._check_key()
            if self._cache_folder() is None:
                log.warning("batch without a cache: a killed run cannot resume its batch")
            answers = self._run_batch(unique, poll_interval_s, max_wait_s, progress, desc)
            for i in pending:
                results[i] = answers[keys[i]]
            with self._lock:
                self._stats.batched += len(unique)
        return self._finish(results, pending)

    def _run_batch(
        self,
        unique: dict[str, Mapping[str, Any]],
        poll_interval_s: float,
        max_wait_s: float | None,
        progress: bool,
        desc: str,
    ) -> dict[str, Outcome]:
        sdk = self._sdk()
        remembered = self._recall_batch(set(unique))
        batch_id = remembered.get("batch_id") if remembered else None

        def everyone(failure: EndpointFailure) -> dict[str, Outcome]:
            return dict.fromkeys(unique, failure)

        if batch_id is not None:
            log.info("resuming batch %s for %d request(s)", batch_id, len(unique))
        else:
            batch_id = self._submit_batch(sdk, unique)
            if isinstance(batch_id, EndpointFailure):
                return everyone(batch_id)

        started = time.monotonic()
        bar = _progress_bar(progress, desc, len(unique), 0)
        try:
            while True:
                batch = self._call_sync(
                    lambda: sdk.batches.retrieve(batch_id, extra_headers=self._headers()), "batch poll"
                )
                if isinstance(batch, EndpointFailure):
                    if remembered is not None and batch.status == 404:
                        # The endpoint does not know the remembered batch (another account, or
                        # purged): forget it and start over.
                        self._forget_batch(remembered["path"])
                        return self._run_batch(unique, poll_interval_s, max_wait_s, progress, desc)
                    return everyone(batch)
                counts = getattr(batch, "request_counts", None)
                if counts is not None:
                    bar.update(max(0, (counts.completed or 0) + (counts.failed or 0) - bar.n))
                if batch.status in BATCH_TERMINAL:
                    break
                if max_wait_s is not None and time.monotonic() - started >= max_wait_s:
                    note = f"still {batch.status} after {max_wait_s:g}s; rerun to collect it"
                    message = f"batch {batch_id} at {self._display_url} {note}"
                    return everyone(EndpointFailure(f"batch {batch.status}", None, 1, message))
                time.sleep(poll_interval_s)
        finally:
            bar.close()

        answers: dict[str, Outcome] = {}
        for file_id in (batch.output_file_id, batch.error_file_id):
            if not file_id:
                continue
            content = self._call_sync(
                lambda fid=file_id: sdk.files.content(fid, extra_headers=self._headers()).content,
                "batch download",
            )
            if isinstance(content, EndpointFailure):
                return everyone(content)  # the batch stays remembered; a rerun downloads again
            answers.update(self._read_batch_lines(content, unique))
        for key in unique:
            if key not in answers:
                answers[key] = EndpointFailure(
                    f"batch {batch.status}",
                    None,
                    1,
                    f"batch {batch_id} at {self._display_url} ended {batch.status} without this request",
                )
        self._forget_batch(self._batch_state_path(unique))
        if remembered is not None:
            self._forget_batch(remembered["path"])
        return answers

    def _submit_batch(self, sdk: Any, unique: Mapping[str, Mapping[str, Any]]) -> str | EndpointFailure:
        lines = [
            json.dumps(
                {"custom_id": key, "method": "POST", "url": BATCH_ENDPOINT, "body": body}, ensure_ascii=False
            )
            for key, body in unique.items()
        ]
        data = ("\n".join(lines) + "\n").encode()
        uploaded = self._call_sync(
            lambda: sdk.files.create(
                file=("simhub-batch.jsonl", data, "application/jsonl"),
                purpose="batch",
                extra_headers=self._headers(),
            ),
            "batch upload",
        )
        if isinstance(uploaded, EndpointFailure):
            return uploaded
        set_key = _set_key(unique)
        batch = self._call_sync(
            lambda: sdk.batches.create(
                input_file_id=uploaded.id,
                endpoint=BATCH_ENDPOINT,
                completion_window="24h",
                metadata={"source": "simhub", "request_set": set_key[:32]},
                extra_headers=self._headers(),
            ),
            "batch create",
        )
        if isinstance(batch, EndpointFailure):
            return batch
        log.info("submitted batch %s with %d request(s) to %s", batch.id, len(unique), self._display_url)
        path = self._batch_state_path(unique)
        if path is not None:
            state = {
                "batch_id": batch.id,
                "input_file_id": uploaded.id,
                "base_url": self._display_url,
                "submitted_at": time.time(),
                "keys": sorted(unique),
            }
            atomic_write_bytes(path, json.dumps(state).encode())
        return batch.id

    def _read_batch_lines(self, content: bytes, unique: Mapping[str, Any]) -> dict[str, Outcome]:
        """Map output/error lines back to their requests by ``custom_id``; successes are cached."""
        answers: dict[str, Outcome] = {}
        for number, raw in enumerate(content.splitlines(), start=1):
            if not raw.strip():
                continue
            try:
                line = json.loads(raw)
                key = line["custom_id"]
            except (ValueError, TypeError, KeyError):
                log.warning("batch output line %d is not a JSON record with a custom_id; skipped", number)
                continue
            if key not in unique:
                continue
            response = line.get("response") if isinstance(line.get("response"), Mapping) else {}
            status = response.get("status_code")
            if status == 200 and not line.get("error"):
                answers[key] = self._accept(response.get("body"), key, 1)
                continue
            error = line.get("error") if isinstance(line.get("error"), Mapping) else {}
            if isinstance(status, int):
                cause = f"HTTP {status} at {self._display_url}"
                detail = _safe_detail(response.get("body")) if status != 401 else ""
            else:
                code = error.get("code")
                cause = code if isinstance(code, str) and _SAFE_TOKEN.fullmatch(code) else "batch error"
                cause = f"{cause} at {self._display_url}"
                detail = ""
            answers[key] = EndpointFailure(
                cause,
                status if isinstance(status, int) else None,
                1,
                f"batch request failed: {cause}{detail}",
            )
        return answers

    def _batch_state_path(self, unique: Mapping[str, Any]) -> Path | None:
        folder = self._cache_folder()
        return None if folder is None else folder / "batches" / f"{_set_key(unique)}.json"

    def _recall_batch(self, keys: set[str]) -> dict[str, Any] | None:
        """A remembered, unfinished batch covering every one of ``keys`` (exactly this request set
        first; else any superset, left behind by a run killed while storing its answers)."""
        root = self._cache_folder()
        if root is None:
            return None
        folder = root / "batches"
        exact = folder / f"{_set_key(keys)}.json"
        candidates = [exact] if exact.is_file() else []
        if folder.is_dir():
            candidates += sorted(p for p in folder.glob("*.json") if p != exact)
        for path in candidates:
            try:
                state = json.loads(path.read_bytes())
            except (OSError, ValueError):
                continue
            if (
                isinstance(state, dict)
                and state.get("base_url") == self._display_url
                and isinstance(state.get("batch_id"), str)
                and keys <= set(state.get("keys") or ())
            ):
                return {**state, "path": path}
        return None

    @staticmethod
    def _forget_batch(path: Path | None) -> None:
        if path is not None:
            path.unlink(missing_ok=True)


def _set_key(keys: Any) -> str:
    return hashlib.sha256("\n".join(sorted(keys)).encode()).hexdigest()
