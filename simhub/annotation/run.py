"""The annotation workflow: canonical dialogues in, ``{split}_{annotator}.csv`` in the released layout out.

How a run goes, and why:

1. **Questions first, once per unique question text** (dialogues share questions; annotating
   each text once is cheaper and keeps its label consistent). The correctness prompt then
   shows the annotated answer, so correctness depends on the question label: a dialogue whose
   question annotation failed, or found no correct option, gets no correctness request and an
   empty (failed) correctness cell. Without ``questions`` in the run, the correctness prompt
   shows whatever answer the input dialogue already carries. With the Batch API and a wait
   limit, a question batch that has not ended holds the dialogue stage back until a rerun
   collects it (otherwise the dialogue batch would be sent, and paid for, twice).
2. **Then one request per dialogue and label.** A dialogue with no student turn gets ``{}`` for
   acts and correctness without a request (nothing to label), likewise no tutor turn for KCs.
3. **Every answer is parsed and checked** (:mod:`simhub.annotation.parsing`); an answer that
   fails becomes an ``{"error": ...}`` cell, a request that failed after the client's retries an
   empty cell. Both read back as failed labels; the run always completes and counts them.
4. **Resume is the client's cache.** Every answer is stored (content-addressed, atomically) the
   moment it arrives, so a killed run, rerun, sends only what was never answered, and an
   identical rerun sends nothing. Live requests go out in chunks, so an interrupt stops the run
   after at most one chunk (whose answers are cached too) and a kill loses only the requests in
   flight; the Batch API path remembers its batch ids instead.
5. **Output is written last, atomically, one file per split.** Labels this run does not make
   (not asked for, or asked and failed) are carried over from an existing file of the same name
   when the row's turns are unchanged, so annotating labels in several runs builds one complete
   file and a run against a failing endpoint never erases an earlier run's labels.
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from simhub.annotation.labels import ANNOTATION_LABELS, JSON_LABELS, columns_of, parse_labels
from simhub.annotation.layout import dialogue_key, dialogue_row, read_cells, write_annotation_file
from simhub.annotation.parsing import InvalidAnnotation, parse_answer
from simhub.config import EndpointSettings
from simhub.config import cache_dir as default_cache_dir
from simhub.data.annotations import annotation_file_name, holds_label, parse_literal
from simhub.errors import ConfigError, DataError
from simhub.executors import BatchFailure, Executor, runs_here
from simhub.models.base import DEFAULT_MAX_TOKENS, Sampling
from simhub.models.endpoint_lm import Answer, EndpointLM, ask, chat_request
from simhub.models.endpoints import KIND_KEY_ENVS, endpoint_config, endpoint_lm, key_names
from simhub.prompts.annotation import annotation_messages, question_messages
from simhub.schema import OPTIONS, Dialogue, Question, read_jsonl

if TYPE_CHECKING:
    from simhub.models.openai import EndpointConfig, OpenAIClient

__all__ = [
    "CHARS_PER_TOKEN",
    "DEFAULT_BASE_URL",
    "KEY_ENV",
    "AnnotationPlan",
    "AnnotationReport",
    "AnnotationSettings",
    "annotate_splits",
    "annotator_endpoint",
    "annotator_endpoint_settings",
    "annotator_lm",
    "load_inputs",
    "plan_annotation",
]

log = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://api.openai.com/v1"
#: The key variable read first; ``OPENAI_API_KEY`` is the fallback.
KEY_ENV = KIND_KEY_ENVS["annotator"][0]
#: The dry run's token estimate: characters per token (about right for English with GPT tokenizers).
CHARS_PER_TOKEN = 4
INPUT_SPLITS: tuple[str, ...] = ("train", "val", "test")

Progress = Callable[[str, int, int], None]

# Statuses of a label this run did not make; an existing file's label is kept over them.
_NOT_MADE = frozenset({"failed", "skipped"})
# Causes the client gives requests of a batch that has not ended when the wait limit is reached.
_PENDING_BATCH = frozenset({"batch validating", "batch in_progress", "batch finalizing", "batch cancelling"})


# --------------------------------------------------------------------------- inputs and endpoint


def load_inputs(data: str | os.PathLike[str]) -> dict[str, list[Dialogue]]:
    """Canonical JSONL to annotate: a folder's ``train``/``val``/``test.jsonl`` (those present), or
    one file, whose name without ``.jsonl`` is its split."""
    path = Path(data)
    if path.is_dir():
        files = {split: path / f"{split}.jsonl" for split in INPUT_SPLITS if (path / f"{split}.jsonl").is_file()}
        if not files:
            raise DataError(f"{path}: no train.jsonl, val.jsonl or test.jsonl to annotate", file=str(path), field="data")
        return {split: read_jsonl(file) for split, file in files.items()}
    if path.is_file():
        split = path.name.removesuffix(".jsonl") if path.name.endswith(".jsonl") else path.stem
        return {split: read_jsonl(path)}
    raise DataError(f"{path}: no such file or folder", file=str(path), field="data")


def annotator_endpoint_settings(
    base_url: str | None = None,
    *,
    api_key_env: str | None = "auto",
    concurrency: int = 8,
    cache_dir: str | os.PathLike[str] | None = None,
    max_retries: int = 5,
    timeout_s: float = 120.0,
) -> EndpointSettings:
    """The labeller's endpoint, as the endpoint section of a profile would give it (answers always cached).

    The key follows :mod:`simhub.models.endpoints`: ``api_key_env="auto"`` reads
    ``SIMHUB_ANNOTATOR_API_KEY``, then ``OPENAI_API_KEY``, for ``api.openai.com`` only; a loopback
    server (a local vLLM) gets no key, and any other host needs the variable named (checked here, the
    error naming ``--api-key-env``). A variable name reads that variable only; ``None`` or ``"none"``
    sends no key. The key is read per request, never stored or logged. ``cache_dir`` defaults to
    ``$SIMHUB_HOME/cache/annotation``.
    """
    base_url = base_url or DEFAULT_BASE_URL
    named = "none" if api_key_env is None else (None if api_key_env == "auto" else api_key_env)
    try:
        key_names(base_url, named, kind="annotator")
    except ConfigError:
        raise ConfigError(f"--api-key-env: {urlsplit(base_url).hostname or base_url} is not api.openai.com, so no key is sent to it by default; "
                          "name the variable that holds its key (--api-key-env MY_KEY), or --api-key-env none",
                          field="api_key_env") from None
    return EndpointSettings(base_url=base_url, api_key_env=named, timeout_s=timeout_s, max_retries=max_retries,
                            concurrency=concurrency, cache=True,
                            cache_dir=os.fspath(cache_dir) if cache_dir is not None else None)


def annotator_endpoint(model: str, base_url: str | None = None, **options: Any) -> EndpointConfig:
    """The client settings of the labeller's endpoint (:func:`annotator_endpoint_settings` takes the
    ``options``), for a caller that brings its own client to :func:`annotate_splits`."""
    return endpoint_config(annotator_endpoint_settings(base_url, **options), model, kind="annotator",
                           default_cache=default_cache_dir("annotation"))


def annotator_lm(model: str, endpoint: EndpointSettings, settings: AnnotationSettings | None = None) -> EndpointLM:
    """The labeller's endpoint as an :class:`~simhub.models.endpoint_lm.EndpointLM` over its shared
    client (:func:`~simhub.models.endpoints.endpoint_lm`), sending through the Batch API as
    ``settings`` say; ``endpoint`` from :func:`annotator_endpoint_settings`."""
    settings = settings or AnnotationSettings()
    return endpoint_lm(endpoint, model, kind="annotator", default_cache=default_cache_dir("annotation"),
                       batch=settings.batch, poll_interval_s=settings.poll_interval_s, max_wait_s=settings.max_wait_s,
                       name="annotator")


# --------------------------------------------------------------------------- settings and results


@dataclass(frozen=True)
class AnnotationSettings:
    """What to annotate and how to ask.

    ``temperature``/``max_tokens`` default to the paper's GPT-4.1 settings (0 and 4,000; a
    reasoning model gets no temperature, see :func:`~simhub.models.openai.chat_payload`).
    ``json_mode`` asks for ``response_format: json_object`` on the JSON labels; turn it off for
    an endpoint that rejects it (the parser copes with prose around the JSON either way).
    ``batch`` sends each stage through the Batch API (polling every ``poll_interval_s``, giving
    up waiting after ``max_wait_s``: the batch stays remembered and a rerun collects it).
    ``chunk_size``: live requests per chunk (default four times the client's concurrency, at
    least 32). ``hash_ids``: derive keys for ids that are not QATD-2k's (see
    :mod:`simhub.annotation.layout`).
    """

    labels: tuple[str, ...] = ANNOTATION_LABELS
    temperature: float | None = 0.0
    max_tokens: int | None = 4000
    json_mode: bool = True
    batch: bool = False
    poll_interval_s: float = 30.0
    max_wait_s: float | None = None
    chunk_size: int | None = None
    hash_ids: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "labels", parse_labels(self.labels))
        if self.chunk_size is not None and self.chunk_size < 1:
            raise ConfigError("chunk_size: must be at least 1", field="chunk_size")

    def sampling(self) -> Sampling:
        """The decoding asked for (a temperature or token limit of None is left out of the request)."""
        return Sampling(temperature=0.0 if self.temperature is None else self.temperature,
                        max_tokens=DEFAULT_MAX_TOKENS if self.max_tokens is None else self.max_tokens)

    def payload(self, model: str, label: str, messages: list[dict]) -> dict[str, Any]:
        """The request body for ``label``'s ``messages``, as :class:`~simhub.models.endpoint_lm.EndpointLM`
        builds it (JSON mode only for the JSON labels)."""
        json_format = {"type": "json_object"} if self.json_mode and label in JSON_LABELS else None
        return chat_request(model, messages, self.sampling(), temperature=self.temperature is not None,
                            token_limit=self.max_tokens is not None, response_format=json_format)


@dataclass
class AnnotationPlan:
    """What a run would send (the dry run): requests and prompt characters per label."""

    requests: dict[str, int]
    prompt_chars: dict[str, int]
    dialogues: dict[str, int]
    max_tokens: int | None

    @property
    def total_requests(self) -> int:
        return sum(self.requests.values())

    @property
    def prompt_tokens(self) -> int:
        """Estimated prompt tokens: characters / :data:`CHARS_PER_TOKEN`, rounded up."""
        return math.ceil(sum(self.prompt_chars.values()) / CHARS_PER_TOKEN)

    @property
    def max_answer_tokens(self) -> int | None:
        return None if self.max_tokens is None else self.max_tokens * self.total_requests


@dataclass
class AnnotationReport:
    """What a run did.

    ``status[split][label]`` counts the dialogues whose cell is ``ok``, ``kept`` (not made now, but
    an existing output file's label for the same turns was kept), ``invalid`` (an answer that
    failed parsing or validation: an ``{"error"}`` cell), ``failed`` (the request failed after its
    retries: an empty cell) or ``skipped`` (correctness not asked because the question label
    failed; any dialogue label not asked while the question batch is still running). ``causes`` counts the failed requests by cause (``HTTP 429``...). ``requests`` is the
    number of distinct requests the run needed, ``cache_hits`` how many the cache answered, and
    ``calls`` the HTTP calls made (retries, batch uploads and polls included).
    """

    files: dict[str, Path] = field(default_factory=dict)
    dialogues: dict[str, int] = field(default_factory=dict)
    status: dict[str, dict[str, Counter]] = field(default_factory=dict)
    causes: Counter = field(default_factory=Counter)
    requests: int = 0
    cache_hits: int = 0
    calls: int = 0

    def failed(self, split: str | None = None) -> dict[str, int]:
        """Dialogues per label whose label failed (invalid, failed or skipped), in one split or all."""
        out: Counter = Counter()
        for name, labels in self.status.items():
            if split is None or name == split:
                for label, counts in labels.items():
                    out[label] += sum(v for k, v in counts.items() if k not in ("ok", "kept"))
        return {label: out[label] for label in ANNOTATION_LABELS if out[label]}

    @property
    def failed_total(self) -> int:
        return sum(self.failed().values())

    @property
    def made(self) -> int:
        """Dialogue labels this run made or kept."""
        return sum(counts.get("ok", 0) + counts.get("kept", 0)
                   for labels in self.status.values() for counts in labels.values())

    @property
    def waiting(self) -> bool:
        """Whether some requests sit in a batch that is still running (a rerun collects them)."""
        return any(cause in _PENDING_BATCH for cause in self.causes)


# --------------------------------------------------------------------------- cells


@dataclass
class _Cell:
    prompt: str | None
    raw: str | None
    value: Any
    status: str  # ok | invalid | failed | skipped
    cause: str | None = None


@dataclass
class _Row:
    split: str
    dialogue: Dialogue
    key: tuple[int, int]
    columns: dict[str, Any]
    cells: dict[str, _Cell] = field(default_factory=dict)


def _interpret(label: str, prompt: str, answer: Answer, dialogue: Dialogue | None) -> _Cell:
    if answer.text is None:
        return _Cell(prompt, None, None, "failed", answer.cause)
    text = answer.text or None  # an answer without content has no text to parse
    try:
        value = parse_answer(label, text, dialogue)
    except InvalidAnnotation as exc:
        message = str(exc)
        if answer.cut:
            message += " (the answer was cut off at the token limit)"
        # The free-text cell is read as text, so an error record there would pass for a profile.
        return _Cell(prompt, text, None if label == "freeform" else {"error": message}, "invalid", message)
    return _Cell(prompt, text, value, "ok")


def _question_with_answer(dialogue: Dialogue, cell: _Cell) -> Dialogue | None:
    """The dialogue with its question's annotation, or None when that annotation is unusable."""
    value = cell.value
    if cell.status != "ok" or not isinstance(value, dict) or value.get("correct_option") is None:
        return None
    explanations = {
        letter: value[f"option_{n}_explanation"]
        for n, letter in enumerate(OPTIONS, start=1)
        if value.get(f"option_{n}_explanation") is not None
    }
    question = Question(
        text=dialogue.question.text,
        correct_option=OPTIONS[value["correct_option"] - 1],  # type: ignore[arg-type]
        solution=value.get("solution"),
        option_explanations=explanations or None,
        solvable=bool(value.get("solvable")),
    )
    return Dialogue(id=dialogue.id, question=question, kcs=list(dialogue.kcs), turns=list(dialogue.turns))


def _prompt_of(messages: list[dict]) -> str:
    return "\n\n".join(str(m["content"]) for m in messages)


def _nothing_to_label(label: str, dialogue: Dialogue) -> bool:
    if label in ("acts", "correctness"):
        return not any(t.role == "student" for t in dialogue.turns)
    if label == "kcs":
        return not any(t.role == "tutor" for t in dialogue.turns)
    return False


# --------------------------------------------------------------------------- planning


def _rows(splits: Mapping[str, Sequence[Dialogue]], hash_ids: bool) -> list[_Row]:
    rows: list[_Row] = []
    seen: dict[tuple[int, int], str] = {}
    for split, dialogues in splits.items():
        for number, dialogue in enumerate(dialogues, start=1):
            where = f"{split}, dialogue {number}"
            key = dialogue_key(dialogue.id, hash_ids=hash_ids, where=where)
            if key in seen:
                raise DataError(
                    f"{where}: dialogue {dialogue.id!r} has the key {key} of {seen[key]}; each dialogue needs its "
                    "own key", field="id",
                )
            seen[key] = f"{split}, dialogue {dialogue.id!r}"
            keep_id = f"{key[0]}-{key[1]}" != dialogue.id
            rows.append(_Row(split, dialogue, key, dialogue_row(dialogue, key, keep_id=keep_id)))
    return rows


def plan_annotation(
    splits: Mapping[str, Sequence[Dialogue]], model: str, settings: AnnotationSettings | None = None
) -> AnnotationPlan:
    """Count what a run would send and how long its prompts are, sending nothing.

    Counted as if nothing were cached and every question annotation succeeded; correctness
    prompts are measured without the question's answer (which is not known yet), so the estimate
    is slightly low for them.
    """
    settings = settings or AnnotationSettings()
    rows = _rows(splits, settings.hash_ids)
    requests: Counter = Counter()
    chars: Counter = Counter()
    seen: set[str] = set()
    for row in rows:
        for label in settings.labels:
            if label == "questions":
                if row.dialogue.question.text in seen:
                    continue
                seen.add(row.dialogue.question.text)
                messages = question_messages(row.dialogue.question.text)
            elif _nothing_to_label(label, row.dialogue):
                continue
            else:
                messages = annotation_messages(label, row.dialogue, with_answer=True)
            settings.payload(model, label, messages)  # the same checks a real run makes
            requests[label] += 1
            chars[label] += len(_prompt_of(messages))
    return AnnotationPlan(
        requests={label: requests[label] for label in settings.labels},
        prompt_chars={label: chars[label] for label in settings.labels},
        dialogues={split: len(dialogues) for split, dialogues in splits.items()},
        max_tokens=settings.max_tokens,
    )


# --------------------------------------------------------------------------- running


class AskWork:
    """A worker's part of the annotation on another executor (:mod:`simhub.executors`): the labeller's
    endpoint (the worker opens its own client of the same settings); :meth:`run` sends one chunk of
    request bodies and returns the answers with the calls and cache hits they took."""

    def __init__(self, lm: EndpointLM):
        self.lm = lm

    def run(self, payloads: list[dict[str, Any]]) -> tuple[list[Answer], int, int]:
        before = self.lm.client.stats
        answers = ask(self.lm, payloads)
        after = self.lm.client.stats
        return answers, after.calls - before.calls, after.cache_hits - before.cache_hits


class _Sender:
    """Sends one stage's requests through the labeller's :class:`EndpointLM`: deduplicated, as one
    Batch API batch or in live chunks (:func:`~simhub.models.endpoint_lm.ask`)."""

    def __init__(self, lm: EndpointLM, settings: AnnotationSettings, progress: Progress | None,
                 executor: Executor | None = None):
        self.lm, self.settings, self.progress = lm, settings, progress
        self.requests = 0
        #: Live chunks go to this executor's workers (None: sent from here); a Batch API batch is one
        #: job, sent from here.
        self.executor = executor
        self._work = AskWork(lm)
        #: The calls and cache hits the workers' clients made (added to this client's in the report).
        self.remote_calls = self.remote_hits = 0

    def send(self, stage: str, payloads: Sequence[dict[str, Any]]) -> list[Answer]:
        index: dict[str, int] = {}
        unique: list[dict[str, Any]] = []
        slots = []
        for payload in payloads:
            text = json.dumps(payload, sort_keys=True, ensure_ascii=False)
            if text not in index:
                index[text] = len(unique)
                unique.append(payload)
            slots.append(index[text])
        self.requests += len(unique)
        size = self.settings.chunk_size or max(32, 4 * self.lm.client.config.concurrency)
        if runs_here(self.executor) or self.lm.batch:
            answers = ask(self.lm, unique, chunk_size=size, on_chunk=lambda done, total: self._tell(stage, done, total))
        else:
            answers = self._remote(stage, unique, size)
        return [answers[slot] for slot in slots]

    def _remote(self, stage: str, payloads: list[dict[str, Any]], size: int) -> list[Answer]:
        """The answers to ``payloads``, sent in chunks of ``size`` from the executor's workers (each
        worker's client at the endpoint's concurrency); a chunk lost there fails its requests."""
        chunks = [payloads[k:k + size] for k in range(0, len(payloads), size)]
        out: list[list[Answer]] = [[] for _ in chunks]
        done = 0
        for i, outcome in self.executor.map(self._work, "run", chunks, keep=True):  # type: ignore[union-attr]
            if isinstance(outcome, BatchFailure):
                out[i] = [Answer(None, f"lost on the executor: {outcome.cause}") for _ in chunks[i]]
            else:
                out[i], calls, hits = outcome
                self.remote_calls += calls
                self.remote_hits += hits
            done += len(chunks[i])
            self._tell(stage, done, len(payloads))
        return [a for chunk in out for a in chunk]

    def _tell(self, stage: str, done: int, total: int) -> None:
        if self.progress is not None:
            self.progress(stage, done, total)


def annotate_splits(
    splits: Mapping[str, Sequence[Dialogue]],
    output: str | os.PathLike[str],
    endpoint: EndpointLM | OpenAIClient,
    settings: AnnotationSettings | None = None,
    *,
    annotator: str | None = None,
    progress: Progress | None = None,
    executor: Executor | None = None,
) -> AnnotationReport:
    """Annotate ``splits`` by asking ``endpoint`` and write ``{split}_{annotator}.csv`` files to ``output``.

    ``endpoint`` is the labeller's :class:`~simhub.models.endpoint_lm.EndpointLM`, asked as it is
    (:func:`annotator_lm` builds it to follow ``settings``' Batch API choice), or a caller's own
    client, asked through an ``EndpointLM`` that follows them; either way with the bodies
    :meth:`AnnotationSettings.payload` builds.

    ``annotator`` names the files (default: the endpoint's model; a slash becomes ``-``).
    ``progress(stage, done, total)`` is called as answers come in. Failed requests and answers
    are recorded in the cells and the report, never raised; bad input (ids without a key, a
    missing key variable) raises before anything is sent. ``executor`` (:mod:`simhub.executors`;
    default: this process) sends the live requests from its workers; this process writes the files.
    """
    settings = settings or AnnotationSettings()
    if isinstance(endpoint, EndpointLM):
        lm = endpoint
    else:  # a caller's own client
        lm = EndpointLM(endpoint, batch=settings.batch, poll_interval_s=settings.poll_interval_s,
                        max_wait_s=settings.max_wait_s, name="annotator")
    client, model = lm.client, lm.model
    annotator = annotator or model
    rows = _rows(splits, settings.hash_ids)
    before = client.stats
    sender = _Sender(lm, settings, progress, executor)
    labels = settings.labels

    if "questions" in labels:
        texts = list(dict.fromkeys(row.dialogue.question.text for row in rows))
        messages = [question_messages(text) for text in texts]
        outcomes = sender.send("questions", [settings.payload(model, "questions", m) for m in messages])
        by_text = {
            text: _interpret("questions", _prompt_of(m), outcome, None)
            for text, m, outcome in zip(texts, messages, outcomes, strict=True)
        }
        for row in rows:
            row.cells["questions"] = by_text[row.dialogue.question.text]

    # A question batch still running (the wait limit was reached) would change the correctness
    # prompts once it is collected, and a dialogue batch submitted now would be paid for again
    # then: the dialogue stage waits for the rerun that collects the questions.
    waiting = lm.batch and any(
        cell.cause in _PENDING_BATCH for row in rows for cell in [row.cells.get("questions")] if cell is not None
    )
    if waiting:
        log.warning("the question batch is still running: dialogue labels wait for a rerun that collects it")
    pending: list[tuple[_Row, str, str, dict[str, Any], Dialogue]] = []
    for row in rows:
        for label in labels:
            if label == "questions":
                continue
            if waiting:
                row.cells[label] = _Cell(None, None, None, "skipped", "waiting for the question batch")
                continue
            dialogue = row.dialogue
            if _nothing_to_label(label, dialogue):
                row.cells[label] = _Cell(None, None, {}, "ok")
                continue
            if "questions" in labels:
                # Every label reads the question with its answer key, as in the reference; only
                # correctness cannot do without it.
                answered = _question_with_answer(dialogue, row.cells["questions"])
                if answered is None and label == "correctness":
                    row.cells[label] = _Cell(None, None, None, "skipped", "question label failed")
                    continue
                dialogue = answered or dialogue
            messages = annotation_messages(label, dialogue, with_answer=True)
            pending.append((row, label, _prompt_of(messages), settings.payload(model, label, messages), dialogue))
    outcomes = sender.send("dialogues", [item[3] for item in pending])
    for (row, label, prompt, _, dialogue), outcome in zip(pending, outcomes, strict=True):
        row.cells[label] = _interpret(label, prompt, outcome, dialogue)

    after = client.stats
    report = AnnotationReport(
        requests=sender.requests,
        cache_hits=after.cache_hits - before.cache_hits + sender.remote_hits,
        calls=after.calls - before.calls + sender.remote_calls,
    )
    for split in splits:
        split_rows = [row for row in rows if row.split == split]
        path = Path(output) / annotation_file_name(split, annotator)
        existing = read_cells(path)
        results = [_record(row, labels, existing.get(row.key)) for row in split_rows]
        report.files[split] = write_annotation_file(path, [record for record, _ in results])
        report.dialogues[split] = len(split_rows)
        report.status[split] = {label: Counter() for label in labels}
        for row, (_, kept_labels) in zip(split_rows, results, strict=True):
            for label in labels:
                cell = row.cells[label]
                status = "kept" if label in kept_labels else cell.status
                report.status[split][label][status] += 1
                if status == "failed":
                    report.causes[cell.cause or "unknown"] += 1
    return report


def _record(row: _Row, labels: Sequence[str], existing: Mapping[str, str] | None) -> tuple[dict[str, Any], set[str]]:
    """The row's columns and the labels of this run that were kept from ``existing``.

    Labels this run made go in; the others (not asked for, or asked but not made because the
    request failed) are carried over from ``existing`` when its turns are the row's (labels are
    keyed by turn number).
    """
    record = dict(row.columns)
    kept: set[str] = set()
    carry = existing is not None and _same_turns(existing.get("turns"), record["turns"])
    for label in ANNOTATION_LABELS:
        prompt_col, raw_col, value_col = columns_of(label)
        cell = row.cells.get(label) if label in labels else None
        if cell is not None and not (carry and cell.status in _NOT_MADE and _made(existing, label, value_col)):
            record[prompt_col], record[raw_col], record[value_col] = cell.prompt, cell.raw, cell.value
        elif carry:
            # Not made in this run (not asked for, or the request failed): an earlier run's label stands.
            assert existing is not None
            for column in (prompt_col, raw_col, value_col):
                record[column] = existing.get(column) or None
            if cell is not None:
                kept.add(label)
    return record, kept


def _made(existing: Mapping[str, str] | None, label: str, column: str) -> bool:
    """Whether an existing file's cell holds a label, by the reader's rule (:func:`holds_label`)."""
    return holds_label((existing or {}).get(column) or "", label)


def _same_turns(text: str | None, turns: list[dict[str, str]]) -> bool:
    if not text:
        return False
    try:
        return parse_literal(text) == turns
    except ValueError:
        return False
