"""The one client simhub uses for every OpenAI-compatible endpoint: the LLM judge, the prompted
baselines and annotation all go through :class:`OpenAIClient`.

Why it looks the way it does:

* **Pure payload building and parsing.** :func:`chat_payload` turns the paper's settings into
  the exact JSON body and :func:`parse_chat_response` turns a response body into a
  :class:`ChatResult`. Neither touches the network, so tests pin the judge's and baselines'
  request bodies exactly, and the Batch API, the live API and the cache share one parser.
* **Failures are values.** Scoring thousands of turns must not stop at the first 503, so a
  request that still fails after its retries comes back as an :class:`EndpointFailure` whose
  ``cause`` (``HTTP 503``, ``APITimeoutError``...) is short and free of secrets; callers null
  the affected score and record why.
* **Our retries, not the SDK's.** The official ``openai`` SDK does the HTTP and authentication,
  with its own retries off (``max_retries=0``): simhub retries connection errors, timeouts,
  408/409/429/5xx and 401 with exponential backoff and jitter, counts every call, and holds a
  concurrency limit shared by all batches running on one client.
* **Content-addressed cache.** With ``cache_dir`` set, each successful response body is stored
  under the SHA-256 of the base URL and the exact request body (never the key), written
  atomically, so rerunning an identical job makes no calls at all. :func:`response_cache_off`
  switches it off for every client of the process (``--no-cache``: no read, no write).
* **Batch API for big jobs.** :meth:`OpenAIClient.complete_batch` sends the requests the cache
  cannot answer as one batch (half price), and remembers the batch id in the cache folder, so a
  killed run resumes polling the same batch instead of paying twice.
* **The key stays out of sight.** It is read from the environment when a request is sent and
  handed to the SDK as a per-request header; it never reaches a log line of ours, a cache file,
  an error, a failure or a repr. Error bodies (OpenAI's 401 quotes the key it was given) are
  never copied into messages.

The package is split by role: :mod:`~simhub.models.openai.payload` (request bodies),
:mod:`~simhub.models.openai.results` (parsing; failures as values), :mod:`~simhub.models.openai.config`
(:class:`EndpointConfig`), :mod:`~simhub.models.openai.cache`, :mod:`~simhub.models.openai.failures`
(retry causes), :mod:`~simhub.models.openai.batch` and :mod:`~simhub.models.openai.client`; every public
name is importable from here. Importing it does not import ``openai``; the SDK is loaded on the first
request.
"""

from simhub.models.openai.batch import BATCH_ENDPOINT, BATCH_TERMINAL
from simhub.models.openai.cache import response_cache_off
from simhub.models.openai.client import CHAT_PATH, ClientStats, OpenAIClient
from simhub.models.openai.config import EndpointConfig, request_key
from simhub.models.openai.failures import RETRY_STATUSES
from simhub.models.openai.payload import REASONING_EFFORTS, REASONING_PREFIXES, chat_payload, is_reasoning_model
from simhub.models.openai.results import (
    MALFORMED,
    ChatResult,
    Choice,
    EndpointFailure,
    Outcome,
    ToolCall,
    Usage,
    parse_chat_response,
)

__all__ = [
    "BATCH_ENDPOINT",
    "BATCH_TERMINAL",
    "CHAT_PATH",
    "MALFORMED",
    "REASONING_EFFORTS",
    "REASONING_PREFIXES",
    "RETRY_STATUSES",
    "ChatResult",
    "Choice",
    "ClientStats",
    "EndpointConfig",
    "EndpointFailure",
    "OpenAIClient",
    "Outcome",
    "ToolCall",
    "Usage",
    "chat_payload",
    "is_reasoning_model",
    "parse_chat_response",
    "request_key",
    "response_cache_off",
]
