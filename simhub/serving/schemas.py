"""Request and response bodies of the HTTP API (docs/protocol.md §7), as msgspec structs.

Single-field constraints that never change live in the types (``msgspec.Meta``), so msgspec rejects
them while decoding and names the path (``$.sampling.n``). The service's configurable limits
(:class:`simhub.config.Limits`) are not in the types: they are enforced by the ``check_*`` functions
below (a 400 naming the field) and written into the OpenAPI schema from the configured values
(:func:`simhub.serving.openapi.apply_limits`). Rules that involve several fields are ``check_*``
functions too: one function per rule, each raising :class:`RequestError` that names the field.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from simhub.errors import SimhubError
from simhub.metrics import Output
from simhub.models import DEFAULT_MAX_TOKENS
from simhub.schema import Dialogue


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


class Unsupported(RequestError):
    type = "unsupported_parameter"


class UpstreamError(RequestError):
    """A simulator's own endpoint failed after its retries: not the client's fault, and not ours."""

    status_code = 502
    type = "upstream_error"


class Overloaded(SimhubError):
    """The queue is full; the client should retry after ``Retry-After`` seconds."""


class NotReady(SimhubError):
    """What the request needs (``field``: a simulator or metrics) is still being built or loaded
    (503 with ``Retry-After``), failed to load, or is unavailable here (``unavailable``: an endpoint
    whose API key is not set on the server; 503 without ``Retry-After`` either way: retrying will not
    help)."""

    def __init__(self, message: str, field: str | None = None, *, failed: bool = False, unavailable: bool = False):
        super().__init__(message)
        self.field, self.failed, self.unavailable = field, failed or unavailable, unavailable


#: The simulator the docs' examples name: one the demo profile serves (see :mod:`simhub.serving.examples`).
EXAMPLE_SIMULATOR = "tiny-student-sft"
ModelId = Annotated[str, Meta(min_length=1, max_length=200, description="A simulator id from GET /models",
                              examples=[EXAMPLE_SIMULATOR])]


# ---------------------------------------------------------------------------------------- /simulate


class SamplingParams(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Decoding settings. The defaults are the paper's inference: greedy, at most 400 new tokens."""

    temperature: Annotated[float, Meta(ge=0.0, le=2.0, description="0 = greedy")] = 0.0
    top_p: Annotated[float, Meta(gt=0.0, le=1.0)] = 1.0
    max_tokens: Annotated[int, Meta(ge=1, description=f"default {DEFAULT_MAX_TOKENS} (or the service's limit if lower)")] | None = None
    n: Annotated[int, Meta(ge=1, description="candidates per dialogue")] = 1
    seed: Annotated[int, Meta(ge=0, le=2**63 - 1, examples=[7])] | None = None


class SimulateRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    model: ModelId
    dialogues: Annotated[list[Dialogue], Meta(min_length=1, description="turns end where the student speaks next")]
    sampling: SamplingParams = msgspec.field(default_factory=SamplingParams)


class CandidateOut(msgspec.Struct, kw_only=True):
    text: str
    finish_reason: Literal["stop", "length"]
    end_of_dialogue: bool = False


class SimulationOut(msgspec.Struct, kw_only=True, omit_defaults=True):
    candidates: list[CandidateOut]
    end_of_dialogue: bool
    #: Why there are no candidates: the simulator's own endpoint failed after its retries.
    error: str | None = None


class SimulateUsage(msgspec.Struct, kw_only=True):
    prompt_tokens: int
    completion_tokens: int


class SimulateResponse(msgspec.Struct, kw_only=True):
    model: str
    results: list[SimulationOut]
    usage: SimulateUsage


# ---------------------------------------------------------------------------------------- /score


class ScoreItemIn(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    dialogue: Dialogue
    turn_index: Annotated[int, Meta(description="index of the real student turn the candidate replaces; a tutor turn "
                                                "or an index out of range is an error of this item, not of the request")]
    candidate: Annotated[str, Meta(description="the simulated turn (scored as sent; empty text is scored too)")]


class ScoreRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    items: Annotated[list[ScoreItemIn], Meta(min_length=1)]
    metrics: Annotated[list[Annotated[str, Meta(max_length=64)]], Meta(
        min_length=1, max_length=16, description="metric names (GET /models); default: every configured metric",
        examples=[["rouge_l", "cosine"]])] | None = msgspec.field(
        default=None
    )


class ScoreItemOut(msgspec.Struct, kw_only=True, omit_defaults=True):
    scores: dict[str, float | None]
    details: dict[str, Any] = msgspec.field(default_factory=dict)
    #: Why this item could not be scored (its scores are all null); the other items are scored.
    error: str | None = None


class ScoreSummary(msgspec.Struct, kw_only=True, omit_defaults=True):
    """The same summary ``simhub score`` prints and the evaluate module returns."""

    mean: float | None
    std: float | None
    count: int
    #: Scorable items whose value is null (the metric does not apply, or its model failed).
    nulls: int = 0
    #: Items not scored at all (a tutor turn, an index out of range, a candidate over its limit): each
    #: has its own ``error``; ``count`` leaves them out.
    unscored: int = 0
    #: knowledge: quadratic-weighted kappa of the pooled quantiles, and the cutoffs used.
    qwk: float | None = None
    cutoffs: list[float] | None = None
    cutoff_source: str | None = None
    #: Whatever else the metric's summary holds (a plug-in metric's own statistics), as it gives them.
    extra: dict[str, Any] | None = None


SUMMARY_FIELDS = frozenset(f.name for f in msgspec.structs.fields(ScoreSummary)) - {"extra"}


def metric_summary(entry: dict[str, Any]) -> ScoreSummary:
    """A metric's summary as the response carries it: the known fields, and every other key in ``extra``."""
    extra = {k: v for k, v in entry.items() if k not in SUMMARY_FIELDS}
    return ScoreSummary(**{k: v for k, v in entry.items() if k in SUMMARY_FIELDS}, extra=extra or None)


class ScoreResponse(msgspec.Struct, kw_only=True):
    metrics: list[str]
    items: list[ScoreItemOut]
    summary: dict[str, ScoreSummary]


# ---------------------------------------------------------------------------------------- /v1/reward


class RewardLabel(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Which real turn a query's completion replaces: a dialogue and the index of its real student turn,
    or the real turn's text alone (for metrics that read no dialogue: cosine, rouge_l)."""

    dialogue: Dialogue | None = None
    turn_index: int | None = None
    real: str | None = None


class RewardRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The remote reward-model protocol OpenRLHF's trainers send (``query``, ``prompts``, ``labels``),
    with simhub's own optional ``metrics`` and ``weights``."""

    query: Annotated[list[str], Meta(min_length=1, description=(
        "one sample each: the prompt and its completion as one text (OpenRLHF's query), or the completion alone "
        "when prompts is left out"))]
    prompts: Annotated[list[str], Meta(description=(
        "the prompt each query starts with; the completion is the rest of the query"))] | None = None
    labels: Annotated[list[RewardLabel | str], Meta(description=(
        "per query, which real turn the completion replaces: {dialogue, turn_index} or {real}, as an object or "
        "as that object's JSON text (OpenRLHF passes a dataset column as text)"))]
    metrics: Annotated[list[Annotated[str, Meta(max_length=64)]], Meta(
        min_length=1, max_length=16, description="the reward's metrics (default: every configured one but rouge_l, "
                                                 "as the paper's DPO reward)")] | None = None
    weights: Annotated[dict[str, float], Meta(description=(
        "a weight per metric (default: equal); the reward is the weighted mean of the non-null values"))] | None = None


class RewardResponse(msgspec.Struct, kw_only=True):
    rewards: Annotated[list[float | None], Meta(description="one per query; null when every metric was null")]
    #: OpenRLHF reads ``rewards`` (or ``scores``, by its score key): the same values.
    scores: list[float | None]
    extra_logs: Annotated[dict[str, list[float | None]], Meta(description="each metric's values, per query")]


def reward_items(data: RewardRequest, reward: Any, scorer: Any) -> list[Any]:
    """The scored item of each query (its completion, the real turn its label names), every problem a
    400 naming the field: counts that differ, a prompt the query does not start with, a label that is
    not one, a real turn that cannot be scored, a ``real`` label for a metric that reads the dialogue."""
    from simhub.errors import DataError
    from simhub.metrics import ScoreItem

    n = len(data.query)
    if data.prompts is not None and len(data.prompts) != n:
        raise RequestError(f"prompts: {len(data.prompts)} prompts for {n} queries", "prompts")
    if len(data.labels) != n:
        raise RequestError(f"labels: {len(data.labels)} labels for {n} queries", "labels")
    items = []
    for i, (query, raw) in enumerate(zip(data.query, data.labels, strict=True)):
        completion = query
        if data.prompts is not None:
            if not query.startswith(data.prompts[i]):
                raise RequestError(f"prompts[{i}]: query[{i}] does not start with its prompt", f"prompts[{i}]")
            completion = query[len(data.prompts[i]):]
        label = _reward_label(raw, i)
        if label.dialogue is not None:
            if label.turn_index is None or label.real is not None:
                raise RequestError(f"labels[{i}]: a dialogue needs turn_index (and no real)", f"labels[{i}].turn_index")
            item = ScoreItem(label.dialogue, label.turn_index, completion.strip())
            why = scorer.validate(item)
            if why is not None and why.startswith("candidate"):  # the completion is the query's
                raise RequestError(f"query[{i}]{why.removeprefix('candidate')}", f"query[{i}]")
            if why is not None:
                raise RequestError(f"labels[{i}].{why}", f"labels[{i}].{why.split(':', 1)[0]}")
        elif label.real is not None:
            if label.turn_index is not None:
                raise RequestError(f"labels[{i}].turn_index: only with a dialogue", f"labels[{i}].turn_index")
            try:
                item = ScoreItem(reward.text_only(label.real, i), 0, completion.strip())
            except DataError as exc:
                raise RequestError(f"labels[{i}].{exc}", f"labels[{i}].real") from None
        else:
            raise RequestError(f"labels[{i}]: give {{dialogue, turn_index}} or {{real}}", f"labels[{i}]")
        items.append(item)
    return items


def _reward_label(raw: RewardLabel | str, i: int) -> RewardLabel:
    if isinstance(raw, RewardLabel):
        return raw
    try:
        return msgspec.json.decode(raw, type=RewardLabel)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise RequestError(f"labels[{i}]: not a label's JSON ({str(exc).splitlines()[0][:200]})", f"labels[{i}]") from None


# ---------------------------------------------------------------------------------------- /models, /health, /ready


class OutputInfo(msgspec.Struct, kw_only=True):
    """One number a metric gives per item, as the metric declares it (``simhub.metrics.Output``)."""

    name: str
    label: str
    description: str
    null_rule: Annotated[str, Meta(description="when the value is null, in words")]
    low: Annotated[float | None, Meta(description="the least value (null: unbounded)")]
    high: Annotated[float | None, Meta(description="the greatest value (null: unbounded)")]
    higher_is_better: bool
    binary: Annotated[bool, Meta(description="values are 0 or 1")]
    summary: Annotated[dict[str, str], Meta(
        description="summary statistics the metric adds beside mean, std and count, and their labels")]


def output_info(output: Output) -> OutputInfo:
    """An output's declared metadata as ``GET /models`` lists it."""
    def bound(value: float) -> float | None:
        return value if math.isfinite(value) else None

    return OutputInfo(name=output.name, label=output.heading, description=output.description,
                      null_rule=output.null_rule, low=bound(output.low), high=bound(output.high),
                      higher_is_better=output.higher_is_better, binary=output.binary, summary=dict(output.summary))


class ModelInfo(msgspec.Struct, kw_only=True, omit_defaults=True):
    id: str
    kind: Literal["simulator", "metric"]
    base_model: str | None = None
    revision: str | None = None
    adapter: str | None = None
    adapter_revision: str | None = None
    backend: str | None = None
    metrics: list[str] | None = None
    #: Metric models: the declared metadata of each output (direction, range, null rule, label).
    outputs: list[OutputInfo] | None = None
    base_url: str | None = None
    description: str | None = None
    #: Simulators: model (our models), openai, baseline; and what their prompt says about the student.
    simulator_kind: str | None = None
    persona: str | None = None
    baseline: str | None = None
    #: False when it cannot run on this server (an endpoint whose API key is not set); its requests
    #: answer 503 ``unavailable`` with ``unavailable_reason``, which names the variable to set.
    available: bool
    unavailable_reason: str | None = None


class ModelsResponse(msgspec.Struct, kw_only=True):
    profile: str
    #: The serving package's version, as ``simhub --version`` and run files give it.
    simhub_version: str
    simulators: list[ModelInfo]
    metrics: list[ModelInfo]


class HealthResponse(msgspec.Struct, kw_only=True):
    status: Literal["ok"]


class BuildStep(msgspec.Struct, kw_only=True):
    """Build ``k`` of ``n`` of starting up (``n`` counts the models to build; 0 when all exist)."""

    k: int
    n: int
    #: The model being built (a provisioned name such as ``demo:acts``), None between builds.
    what: str | None = None
    #: Training steps of that build done so far, of ``total``, and the seconds it should still take.
    done: int | None = None
    total: int | None = None
    eta_s: float | None = None


class ComponentStatus(msgspec.Struct, kw_only=True):
    """One simulator or metric model: ready to serve, or what it waits for."""

    kind: Literal["simulator", "metric"]
    id: str
    #: ``unavailable``: it cannot run on this server (``error`` says why and what to set); the service
    #: is ready without it.
    status: Literal["waiting", "building", "loading", "ready", "failed", "unavailable"]
    #: The models it still waits for (provisioned names).
    waits_for: list[str] = msgspec.field(default_factory=list)
    error: str | None = None


class ReadyResponse(msgspec.Struct, kw_only=True):
    """What starting up has done and is doing. Each simulator and metric model is served as soon as
    it is ready (``components``); the status is 200 once all are."""

    ready: bool
    status: Literal["loading", "ready", "failed"]
    step: BuildStep
    #: The model being built (None once ready or failed).
    building: str | None = None
    #: Models built since the start, in order (provisioned names such as ``demo:acts``).
    built: list[str] = msgspec.field(default_factory=list)
    #: Ids of the simulators and metric models not ready yet.
    loading: list[str] = msgspec.field(default_factory=list)
    components: list[ComponentStatus] = msgspec.field(default_factory=list)
    error: str | None = None


class ErrorBody(msgspec.Struct, kw_only=True):
    type: str
    message: str
    field: str | None = None


class ErrorResponse(msgspec.Struct, kw_only=True):
    error: ErrorBody


# ---------------------------------------------------------------------------------------- OpenAI-compatible


class ContentPart(msgspec.Struct, kw_only=True):
    """One part of a message's content; only ``text`` parts are read."""

    type: str
    text: str | None = None


class ChatMessage(msgspec.Struct, kw_only=True):
    role: Literal["system", "developer", "user", "assistant"]
    content: str | list[ContentPart] | None = None
    name: str | None = None

    @property
    def text(self) -> str:
        """The message's text (text parts joined; a missing content is empty)."""
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text or "" for part in self.content)


class StreamOptions(msgspec.Struct, kw_only=True):
    include_usage: bool = False


_NOT_SUPPORTED = "Not supported: any value but null is refused with 400."


def _only(default: str) -> str:
    return f"Accepted only as {default} (or null); any other value is refused with 400."


class ChatCompletionRequest(msgspec.Struct, kw_only=True):
    """The OpenAI chat-completions request, as a simulated student honours it. Greedy by default.

    Policy for the rest of OpenAI's parameters: fields a simulated student cannot honour (tools,
    response formats, penalties, logit bias, stop sequences...) are refused with a 400 naming them,
    unless they carry their neutral value; ``user``, ``metadata``, ``service_tier``, ``store: false``
    and ``parallel_tool_calls`` change nothing and are accepted. Fields OpenAI does not define
    (other vendors' extensions) are ignored.
    """

    model: ModelId
    messages: Annotated[list[ChatMessage], Meta(min_length=1)]
    temperature: Annotated[float, Meta(ge=0.0, le=2.0, description="0 (the default) = greedy")] | None = None
    top_p: Annotated[float, Meta(gt=0.0, le=1.0)] | None = None
    max_tokens: Annotated[int, Meta(ge=1)] | None = None
    max_completion_tokens: Annotated[int, Meta(ge=1)] | None = None
    n: Annotated[int, Meta(ge=1)] = 1
    seed: Annotated[int, Meta(ge=0, le=2**63 - 1, examples=[7])] | None = None
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    logprobs: Annotated[bool, Meta(description="return the log-probability of each generated token")] | None = None
    top_logprobs: Annotated[int, Meta(ge=0, le=20, description="with logprobs: the k most likely tokens at each position")] | None = None
    # simhub's extensions (OpenAI clients send them with ``extra_body``).
    roles: Annotated[Literal["student", "user_proxy"], Meta(description=(
        "How messages map to the dialogue. student: system = the question, user = the tutor, assistant = the "
        "student's earlier turns. user_proxy (for harnesses that drive a simulated user): user = the student's own "
        "earlier turns, assistant = the tutor, and system messages (the harness's own instructions) are replaced "
        "by the student's prompt. Default: the profile's serving.chat_roles."))] | None = None
    question: Annotated[str, Meta(description=(
        "The question the student works on. Default: the system messages (student roles), or metadata.question "
        "(user_proxy roles)."))] | None = None
    # Accepted and without effect.
    user: str | None = None
    metadata: dict[str, Any] | None = None
    service_tier: str | None = None
    store: Annotated[bool, Meta(description=_only("false"))] | None = None
    parallel_tool_calls: bool | None = None
    # Accepted only at their neutral value.
    frequency_penalty: Annotated[float, Meta(description=_only("0"))] | None = None
    presence_penalty: Annotated[float, Meta(description=_only("0"))] | None = None
    logit_bias: Annotated[dict[str, Any], Meta(description=_only("{}"))] | None = None
    response_format: Annotated[dict[str, Any], Meta(description=_only('{"type": "text"}'))] | None = None
    tool_choice: Annotated[Any, Meta(description=_only('"none"'))] = None
    modalities: Annotated[list[str], Meta(description=_only('["text"]'))] | None = None
    stop: Annotated[Any, Meta(description=_only("[]: the turn ends at the end-of-turn token or the end-of-dialogue marker"))] = None
    # Refused whenever given.
    tools: Annotated[Any, Meta(description=_NOT_SUPPORTED)] = None
    functions: Annotated[Any, Meta(description=_NOT_SUPPORTED)] = None
    function_call: Annotated[Any, Meta(description=_NOT_SUPPORTED)] = None
    audio: Annotated[Any, Meta(description=_NOT_SUPPORTED)] = None
    prediction: Annotated[Any, Meta(description=_NOT_SUPPORTED)] = None
    web_search_options: Annotated[Any, Meta(description=_NOT_SUPPORTED)] = None
    reasoning_effort: Annotated[Any, Meta(description=_NOT_SUPPORTED)] = None
    verbosity: Annotated[Any, Meta(description=_NOT_SUPPORTED)] = None


#: OpenAI parameters accepted only at a neutral value: name -> whether a given (non-null) value is neutral.
NEUTRAL_ONLY = {
    "frequency_penalty": lambda v: v == 0,
    "presence_penalty": lambda v: v == 0,
    "logit_bias": lambda v: not v,
    "response_format": lambda v: v == {"type": "text"},
    "tool_choice": lambda v: v == "none",
    "modalities": lambda v: v == ["text"],
    "stop": lambda v: v == [] or v == "",
    "store": lambda v: v is False,
}
#: OpenAI parameters refused whenever given.
REFUSED = ("tools", "functions", "function_call", "audio", "prediction", "web_search_options", "reasoning_effort",
           "verbosity")


class ChatChoiceMessage(msgspec.Struct, kw_only=True):
    role: Literal["assistant"]
    content: str


class TopLogprob(msgspec.Struct, kw_only=True):
    token: str
    logprob: float
    bytes: list[int] | None = None


class TokenLogprobOut(msgspec.Struct, kw_only=True):
    token: str
    logprob: float
    bytes: list[int] | None = None
    top_logprobs: list[TopLogprob] = msgspec.field(default_factory=list)


class ChoiceLogprobs(msgspec.Struct, kw_only=True):
    """One entry per generated token (``usage.completion_tokens`` of the choice), in order."""

    content: list[TokenLogprobOut] | None = None
    refusal: list[TokenLogprobOut] | None = None


class ChatChoice(msgspec.Struct, kw_only=True):
    index: int
    message: ChatChoiceMessage
    finish_reason: Literal["stop", "length"]
    logprobs: ChoiceLogprobs | None = None
    #: simhub's extension: the student ended the dialogue (the end-of-dialogue marker; then
    #: ``finish_reason`` is ``stop`` and the marker is not in the text).
    end_of_dialogue: bool = False


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


class OpenAIModel(msgspec.Struct, kw_only=True, omit_defaults=True):
    id: str
    object: Literal["model"]
    created: int
    owned_by: str
    #: simhub's extension: false (with the reason, naming the variable to set) for a simulator that
    #: cannot run on this server; its requests answer 503 ``unavailable``.
    available: bool
    unavailable_reason: str | None = None


class OpenAIModelList(msgspec.Struct, kw_only=True):
    object: Literal["list"]
    data: list[OpenAIModel]


# ---------------------------------------------------------------------------------------- cross-field rules


def dialogue_chars(d: Dialogue) -> int:
    return len(d.question.text) + sum(len(t.content) for t in d.turns) + len(d.profile or "")


def check_count(n: int, cap: int, field: str, what: str) -> None:
    if n > cap:
        raise CapExceeded(f"{field}: {n} {what}, more than the cap of {cap}", field)


def check_dialogue_caps(dialogues: list[tuple[str, Dialogue]], max_turns: int | None, max_chars: int,
                        extra_chars: int = 0) -> None:
    """Turns per dialogue (unless ``max_turns`` is None: /score reports those per item) and
    characters of text per request."""
    total = extra_chars
    for where, d in dialogues:
        if max_turns is not None:
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


def check_chat_messages(messages: list[ChatMessage], roles: str = "student") -> None:
    """/v1/chat/completions: text content only; system first, then the dialogue; the student
    (assistant, or user with ``user_proxy`` roles) speaks next."""
    seen_turn = False
    for i, m in enumerate(messages):
        if isinstance(m.content, list):
            for j, part in enumerate(m.content):
                if part.type != "text":
                    where = f"messages[{i}].content[{j}].type"
                    raise Unsupported(f"{where}: only text content is supported, not {part.type[:40]!r}", where)
        if m.role in ("system", "developer"):
            if seen_turn:
                raise RequestError(f"messages[{i}].role: system messages must come before the dialogue", f"messages[{i}].role")
        else:
            seen_turn = True
    student, tutor = ("user", "assistant") if roles == "user_proxy" else ("assistant", "user")
    if messages[-1].role == student:
        raise RequestError(
            f"messages: the last message is the student's ({student}, with {roles} roles); end with the tutor's "
            f"({tutor}) message",
            f"messages[{len(messages) - 1}].role",
        )


def check_chat_parameters(request: ChatCompletionRequest) -> None:
    """Known OpenAI parameters a simulated student cannot honour: one 400 naming all of them."""
    given = [name for name in REFUSED if getattr(request, name) is not None]
    given += [name for name, neutral in NEUTRAL_ONLY.items()
              if getattr(request, name) is not None and not neutral(getattr(request, name))]
    if given:
        raise Unsupported(f"{', '.join(given)}: not supported by a simulated student (it answers in plain text with the "
                          "model's own distribution); leave them out", given[0])
    if request.top_logprobs is not None and not request.logprobs:
        raise RequestError("top_logprobs: needs logprobs: true", "top_logprobs")
