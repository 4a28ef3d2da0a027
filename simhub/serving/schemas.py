"""Request and response bodies of the HTTP API (SPEC §7), as msgspec structs.

Single-field constraints live in the types (``msgspec.Meta``), so msgspec rejects them while
decoding and names the path (``$.sampling.n``). Rules that involve several fields or the
service's configurable caps are the ``check_*`` functions below: one function per rule, each
raising :class:`RequestError` that names the field.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from simhub.errors import SimhubError
from simhub.models import DEFAULT_MAX_TOKENS
from simhub.schema import Dialogue, SchemaError


class RequestError(SimhubError):
    """A request the client must fix; ``field`` is the JSON path of the offending value."""

    status_code = 400
    type = "invalid_request"

    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.field = field


class CapExceeded(RequestError):
    type = "cap_exceeded"


class UnknownModel(RequestError):
    status_code = 404
    type = "unknown_model"


class Overloaded(SimhubError):
    """The queue is full; the client should retry after ``Retry-After`` seconds."""


Text = Annotated[str, Meta(max_length=100_000)]
ModelId = Annotated[str, Meta(min_length=1, max_length=200, description="A simulator id from GET /models")]


# ---------------------------------------------------------------------------------------- /simulate


class SamplingParams(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Decoding settings. The defaults are the paper's inference: greedy, at most 400 new tokens."""

    temperature: Annotated[float, Meta(ge=0.0, le=2.0, description="0 = greedy")] = 0.0
    top_p: Annotated[float, Meta(gt=0.0, le=1.0)] = 1.0
    max_tokens: Annotated[int, Meta(ge=1, le=4096, description=f"default {DEFAULT_MAX_TOKENS} (or the service cap if lower)")] | None = None
    n: Annotated[int, Meta(ge=1, le=64, description="candidates per dialogue")] = 1
    seed: Annotated[int, Meta(ge=0, le=2**63 - 1)] | None = None


class SimulateRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    model: ModelId
    dialogues: Annotated[list[Dialogue], Meta(min_length=1, description="turns end where the student speaks next")]
    sampling: SamplingParams = msgspec.field(default_factory=SamplingParams)


class CandidateOut(msgspec.Struct, kw_only=True):
    text: str
    finish_reason: Literal["stop", "length"]
    end_of_dialogue: bool = False


class SimulationOut(msgspec.Struct, kw_only=True):
    candidates: list[CandidateOut]
    end_of_dialogue: bool


class Usage(msgspec.Struct, kw_only=True):
    prompt_tokens: int
    completion_tokens: int


class SimulateResponse(msgspec.Struct, kw_only=True):
    model: str
    results: list[SimulationOut]
    usage: Usage


# ---------------------------------------------------------------------------------------- /score


class ScoreItemIn(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    dialogue: Dialogue
    turn_index: Annotated[int, Meta(ge=0, description="index of the real student turn the candidate replaces")]
    candidate: Annotated[str, Meta(min_length=1, max_length=100_000)]


class ScoreRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    items: Annotated[list[ScoreItemIn], Meta(min_length=1)]
    metrics: Annotated[list[Annotated[str, Meta(max_length=64)]], Meta(min_length=1, max_length=16)] | None = msgspec.field(
        default=None
    )


class ScoreItemOut(msgspec.Struct, kw_only=True, omit_defaults=True):
    scores: dict[str, float | None]
    details: dict[str, Any] = msgspec.field(default_factory=dict)
    error: str | None = None


class MetricSummary(msgspec.Struct, kw_only=True, omit_defaults=True):
    """The same summary ``simhub score`` prints and the evaluate module returns."""

    mean: float | None
    std: float | None
    count: int
    #: Scorable items whose value is null (the metric does not apply, or its model failed).
    nulls: int = 0
    #: knowledge: quadratic-weighted kappa of the pooled quantiles, and the cutoffs used.
    qwk: float | None = None
    cutoffs: list[float] | None = None
    cutoff_source: str | None = None


SUMMARY_FIELDS = frozenset(f.name for f in msgspec.structs.fields(MetricSummary))


class ScoreResponse(msgspec.Struct, kw_only=True):
    metrics: list[str]
    items: list[ScoreItemOut]
    summary: dict[str, MetricSummary]


# ---------------------------------------------------------------------------------------- /models, /health


class ModelInfo(msgspec.Struct, kw_only=True, omit_defaults=True):
    id: str
    kind: Literal["simulator", "metric"]
    base_model: str | None = None
    revision: str | None = None
    adapter: str | None = None
    adapter_revision: str | None = None
    backend: str | None = None
    metrics: list[str] | None = None
    base_url: str | None = None
    description: str | None = None
    #: Simulators: model (our models), openai, baseline; and what their prompt says about the student.
    simulator_kind: str | None = None
    persona: str | None = None
    baseline: str | None = None


class ModelsResponse(msgspec.Struct, kw_only=True):
    profile: str
    simulators: list[ModelInfo]
    metrics: list[ModelInfo]


class HealthResponse(msgspec.Struct, kw_only=True):
    status: Literal["ok"]


class ReadyResponse(msgspec.Struct, kw_only=True, omit_defaults=True):
    ready: bool
    loading: list[str] = msgspec.field(default_factory=list)
    error: str | None = None


class ErrorBody(msgspec.Struct, kw_only=True):
    type: str
    message: str
    field: str | None = None


class ErrorResponse(msgspec.Struct, kw_only=True):
    error: ErrorBody


# ---------------------------------------------------------------------------------------- OpenAI-compatible


class ChatMessage(msgspec.Struct, kw_only=True):
    role: Literal["system", "developer", "user", "assistant"]
    content: Annotated[str, Meta(max_length=100_000)]
    name: str | None = None


class ChatCompletionRequest(msgspec.Struct, kw_only=True):
    """The subset of OpenAI's chat completion request a student simulator honours. Unknown
    fields are ignored (as OpenAI clients send many); ``stream`` is refused. Greedy by default."""

    model: ModelId
    messages: Annotated[list[ChatMessage], Meta(min_length=1)]
    temperature: Annotated[float, Meta(ge=0.0, le=2.0)] | None = None
    top_p: Annotated[float, Meta(gt=0.0, le=1.0)] | None = None
    max_tokens: Annotated[int, Meta(ge=1, le=4096)] | None = None
    max_completion_tokens: Annotated[int, Meta(ge=1, le=4096)] | None = None
    n: Annotated[int, Meta(ge=1, le=64)] = 1
    seed: Annotated[int, Meta(ge=0, le=2**63 - 1)] | None = None
    stream: bool = False


class ChatChoiceMessage(msgspec.Struct, kw_only=True):
    role: Literal["assistant"]
    content: str


class ChatChoice(msgspec.Struct, kw_only=True):
    index: int
    message: ChatChoiceMessage
    finish_reason: Literal["stop", "length"]


class ChatUsage(msgspec.Struct, kw_only=True):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class ChatCompletion(msgspec.Struct, kw_only=True):
    id: str
    object: Literal["chat.completion"]
    created: int
    model: str
    choices: list[ChatChoice]
    usage: ChatUsage


class OpenAIModel(msgspec.Struct, kw_only=True):
    id: str
    object: Literal["model"]
    created: int
    owned_by: str


class OpenAIModelList(msgspec.Struct, kw_only=True):
    object: Literal["list"]
    data: list[OpenAIModel]


# ---------------------------------------------------------------------------------------- cross-field rules


def dialogue_chars(d: Dialogue) -> int:
    return len(d.question.text) + sum(len(t.content) for t in d.turns) + len(d.profile or "")


def check_count(n: int, cap: int, field: str, what: str) -> None:
    if n > cap:
        raise CapExceeded(f"{field}: {n} {what}, more than the cap of {cap}", field)


def check_dialogue_caps(dialogues: list[tuple[str, Dialogue]], max_turns: int, max_chars: int, extra_chars: int = 0) -> None:
    """Turns per dialogue and characters per request."""
    total = extra_chars
    for where, d in dialogues:
        check_count(len(d.turns), max_turns, f"{where}.turns", "turns")
        total += dialogue_chars(d)
    if total > max_chars:
        field = dialogues[0][0].split("[")[0] if dialogues else None
        raise CapExceeded(f"{field}: {total} characters of text in the request, more than the cap of {max_chars}", field)


def check_student_next(where: str, d: Dialogue) -> None:
    """/simulate: the student must speak next, so the history is empty or ends with a tutor turn."""
    if d.turns and d.turns[-1].role != "tutor":
        raise RequestError(
            f"{where}.turns: the last turn is a student turn; send the history up to the tutor turn the student answers",
            f"{where}.turns",
        )


def check_score_item(n: int, item: ScoreItemIn) -> None:
    """/score: ``turn_index`` must point at a real student turn of the item's dialogue."""
    if not item.dialogue.turns:
        raise RequestError(f"items[{n}].dialogue.turns: the dialogue has no turns", f"items[{n}].dialogue.turns")
    field = f"items[{n}].turn_index"
    try:
        item.dialogue.check_student_turn(item.turn_index, field)
    except SchemaError as exc:
        raise RequestError(str(exc), field) from None
    if not item.candidate.strip():
        raise RequestError(f"items[{n}].candidate: empty text", f"items[{n}].candidate")


def check_chat_messages(messages: list[ChatMessage]) -> None:
    """/v1/chat/completions: system first, then the dialogue; the student (assistant) speaks next."""
    seen_turn = False
    for i, m in enumerate(messages):
        if m.role in ("system", "developer"):
            if seen_turn:
                raise RequestError(f"messages[{i}].role: system messages must come before the dialogue", f"messages[{i}].role")
        else:
            seen_turn = True
    if messages[-1].role == "assistant":
        raise RequestError(
            "messages: the last message is the student's (assistant); end with the tutor's (user) message",
            f"messages[{len(messages) - 1}].role",
        )
