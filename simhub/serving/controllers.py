"""HTTP handlers: each a few lines that validate, call a service and shape the answer."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Annotated, ClassVar

from litestar import Controller, Response, get, post
from litestar.datastructures import State
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import Body

from simhub.metrics import ScoreItem
from simhub.models import DEFAULT_MAX_TOKENS, Sampling
from simhub.schema import Dialogue, Question, Turn
from simhub.serving import schemas as s
from simhub.serving.services import Services
from simhub.simulation import SimulationResult

ERRORS = {400: "invalid request or cap exceeded", 401: "missing or wrong API key", 413: "body too large",
          422: "wrong types or constraint violated", 429: "rate limited", 503: "queue full or not ready (Retry-After)",
          504: "request timed out"}


def _responses(*codes: int) -> dict:
    return {c: ResponseSpec(data_container=s.ErrorResponse, description=ERRORS.get(c, "error")) for c in codes}


def provide_services(state: State) -> Services:
    return state.services


async def _guarded(services: Services, coro_fn):
    """Wait for the models (503 if they are not loaded within the request timeout), then run the
    work; waiting and work together stay within the per-request timeout (else 504)."""
    timeout = services.settings.request_timeout_s
    deadline = asyncio.get_running_loop().time() + timeout
    await services.wait_ready(timeout)
    async with asyncio.timeout_at(deadline):
        return await coro_fn()


def _simulation_out(results: list[SimulationResult]) -> tuple[list[s.SimulationOut], s.Usage]:
    out = [s.SimulationOut(candidates=[s.CandidateOut(text=c.text, finish_reason=c.finish_reason, end_of_dialogue=c.end_of_dialogue)
                                       for c in r.candidates], end_of_dialogue=r.end_of_dialogue) for r in results]
    usage = s.Usage(prompt_tokens=sum(r.prompt_tokens for r in results),
                    completion_tokens=sum(c.tokens for r in results for c in r.candidates))
    return out, usage


class SimulationController(Controller):
    tags: ClassVar[list[str]] = ["simulation"]

    @post("/simulate", operation_id="simulate", status_code=200, responses=_responses(400, 404, 413, 422, 429, 503, 504),
          summary="Next student turn for each dialogue (n candidates)")
    async def simulate(self, data: Annotated[s.SimulateRequest, Body(title="Simulate request")], services: Services) -> s.SimulateResponse:
        cfg = services.settings
        services.simulation.check_model(data.model)
        s.check_count(len(data.dialogues), cfg.max_dialogues, "dialogues", "dialogues")
        s.check_count(data.sampling.n, cfg.max_n, "sampling.n", "candidates")
        max_tokens = data.sampling.max_tokens or min(DEFAULT_MAX_TOKENS, cfg.max_tokens)
        s.check_count(max_tokens, cfg.max_tokens, "sampling.max_tokens", "tokens")
        named = [(f"dialogues[{i}]", d) for i, d in enumerate(data.dialogues)]
        s.check_dialogue_caps(named, cfg.max_turns, cfg.max_request_chars)
        for where, d in named:
            s.check_student_next(where, d)
        sampling = Sampling(temperature=data.sampling.temperature, top_p=data.sampling.top_p, max_tokens=max_tokens,
                            n=data.sampling.n, seed=data.sampling.seed)
        results = await _guarded(services, lambda: services.simulation.simulate(data.model, data.dialogues, sampling))
        out, usage = _simulation_out(results)
        return s.SimulateResponse(model=data.model, results=out, usage=usage)


class ScoringController(Controller):
    tags: ClassVar[list[str]] = ["scoring"]

    @post("/score", operation_id="score", status_code=200, responses=_responses(400, 413, 422, 429, 503, 504),
          summary="Realism metrics of simulated turns against the real ones")
    async def score(self, data: Annotated[s.ScoreRequest, Body(title="Score request")], services: Services) -> s.ScoreResponse:
        cfg = services.settings
        s.check_count(len(data.items), cfg.max_items, "items", "items")
        s.check_dialogue_caps([(f"items[{i}].dialogue", it.dialogue) for i, it in enumerate(data.items)], cfg.max_turns,
                              cfg.max_request_chars, extra_chars=sum(len(it.candidate) for it in data.items))
        for n, item in enumerate(data.items):
            s.check_score_item(n, item)
        metrics = services.scoring.resolve_metrics(data.metrics)
        items = [ScoreItem(it.dialogue, it.turn_index, it.candidate) for it in data.items]
        results, summary = await _guarded(services, lambda: services.scoring.score(items, metrics))
        return s.ScoreResponse(
            metrics=list(metrics),
            items=[s.ScoreItemOut(scores=r.scores, details=r.details, error=r.error) for r in results],
            summary={m: s.MetricSummary(**{k: v for k, v in entry.items() if k in s.SUMMARY_FIELDS})
                     for m, entry in summary.items()},
        )


class InfoController(Controller):
    tags: ClassVar[list[str]] = ["service"]

    @get("/models", operation_id="listModels", summary="Simulators and metric models with their Hub ids and revisions")
    async def models(self, services: Services) -> s.ModelsResponse:
        return s.ModelsResponse(
            profile=services.profile.name,
            simulators=[s.ModelInfo(**m) for m in services.simulation.model_info()],
            metrics=[s.ModelInfo(**m) for m in services.scoring.model_info(services.display_scorer)],
        )

    @get("/health", operation_id="health", summary="Liveness: the process answers")
    async def health(self) -> s.HealthResponse:
        return s.HealthResponse(status="ok")

    @get("/ready", operation_id="ready", summary="Readiness: 200 once every model is loaded, else 503",
         responses={503: ResponseSpec(data_container=s.ReadyResponse, description="still loading or failed")})
    async def ready(self, services: Services) -> Response[s.ReadyResponse]:
        body = s.ReadyResponse(ready=services.ready, loading=list(services.loading), error=services.load_error)
        services.metrics.ready.set(1 if services.ready else 0)
        return Response(body, status_code=200 if services.ready else 503)

    @get("/metrics", operation_id="metrics", summary="Prometheus metrics", media_type="text/plain; version=0.0.4")
    async def metrics(self, services: Services) -> bytes:
        return services.metrics.exposition()


# ---------------------------------------------------------------------------------------- OpenAI-compatible


def chat_to_dialogue(messages: list[s.ChatMessage]) -> Dialogue:
    """The dialogue from the student's side: system = question, user = tutor, assistant = student."""
    question = "\n".join(m.content for m in messages if m.role in ("system", "developer")).strip()
    turns = [Turn(role="tutor" if m.role == "user" else "student", content=m.content)
             for m in messages if m.role in ("user", "assistant")]
    return Dialogue(id=f"chat-{uuid.uuid4().hex[:12]}", question=Question(text=question or "(no question given)"), turns=turns)


class OpenAIController(Controller):
    path = "/v1"
    tags: ClassVar[list[str]] = ["openai"]

    @post("/chat/completions", operation_id="createChatCompletion", status_code=200,
          responses=_responses(400, 404, 413, 422, 429, 503, 504), summary="Next student turn, OpenAI chat format")
    async def chat(self, data: Annotated[s.ChatCompletionRequest, Body(title="Chat completion request")],
                   services: Services) -> s.ChatCompletion:
        cfg = services.settings
        if data.stream:
            raise s.RequestError("stream: streaming is not supported; send stream=false", "stream")
        services.simulation.check_model(data.model)
        s.check_count(data.n, cfg.max_n, "n", "candidates")
        s.check_count(len(data.messages), cfg.max_turns + 2, "messages", "messages")
        max_tokens = data.max_completion_tokens or data.max_tokens or min(DEFAULT_MAX_TOKENS, cfg.max_tokens)
        s.check_count(max_tokens, cfg.max_tokens, "max_tokens", "tokens")
        s.check_chat_messages(data.messages)
        dialogue = chat_to_dialogue(data.messages)
        s.check_dialogue_caps([("messages", dialogue)], cfg.max_turns, cfg.max_request_chars)
        sampling = Sampling(temperature=data.temperature or 0.0, top_p=data.top_p or 1.0, n=data.n, seed=data.seed,
                            max_tokens=max_tokens)
        (result,) = await _guarded(services, lambda: services.simulation.simulate(data.model, [dialogue], sampling))
        completion = sum(c.tokens for c in result.candidates)
        return s.ChatCompletion(
            id=f"chatcmpl-{uuid.uuid4().hex}", object="chat.completion", created=int(time.time()), model=data.model,
            choices=[s.ChatChoice(index=i, message=s.ChatChoiceMessage(role="assistant", content=c.text), finish_reason=c.finish_reason)
                     for i, c in enumerate(result.candidates)],
            usage=s.ChatUsage(prompt_tokens=result.prompt_tokens, completion_tokens=completion,
                              total_tokens=result.prompt_tokens + completion),
        )

    @get("/models", operation_id="listOpenAIModels", summary="Simulator ids, OpenAI format")
    async def models(self, services: Services) -> s.OpenAIModelList:
        return s.OpenAIModelList(object="list", data=[s.OpenAIModel(id=i, object="model", created=0, owned_by="simhub")
                                                      for i in services.simulation.ids])
