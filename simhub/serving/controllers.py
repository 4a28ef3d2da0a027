"""HTTP handlers: each a few lines that validate, call a service and shape the answer."""

from __future__ import annotations

import asyncio
from typing import Annotated, ClassVar

from litestar import Controller, Response, get, post
from litestar.datastructures import State
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import Body
from litestar.response import Stream

from simhub import __version__
from simhub.metrics import ScoreItem
from simhub.models import DEFAULT_MAX_TOKENS, Sampling
from simhub.scoring.rewards import combine
from simhub.serving import chat, examples
from simhub.serving import schemas as s
from simhub.serving.errors import clean
from simhub.serving.openapi import StreamingOperation
from simhub.serving.services import Services
from simhub.simulation import SimulationResult


def _responses(operation: str) -> dict:
    """The documented errors of ``operation``, each status with its real examples (never generated ones:
    Litestar would fill them with random strings)."""
    by_status: dict[int, list] = {}
    for error in examples.ERRORS[operation]:
        by_status.setdefault(error.status, []).append(error.as_example())
    return {status: ResponseSpec(data_container=s.ErrorResponse, description=examples.STATUS_DESCRIPTIONS[status],
                                 generate_examples=False, examples=found)
            for status, found in sorted(by_status.items())}


class EventStream(Stream):
    """Server-sent events. Litestar hands a returned response the route's media type, which would
    label the stream JSON; this keeps its own."""

    def to_asgi_response(self, *args, **kwargs):
        kwargs["media_type"] = self.media_type
        return super().to_asgi_response(*args, **kwargs)


def provide_services(state: State) -> Services:
    return state.services


async def _guarded(services: Services, coro_fn):
    """Run the work within the per-request timeout (else 504). The caller has checked with
    ``services.require`` that what it needs is loaded (else an immediate 503)."""
    async with asyncio.timeout(services.settings.request_timeout_s):
        return await coro_fn()


def _simulation_out(results: list[SimulationResult]) -> tuple[list[s.SimulationOut], s.SimulateUsage]:
    out = [s.SimulationOut(candidates=[s.CandidateOut(text=c.text, finish_reason=c.finish_reason, end_of_dialogue=c.end_of_dialogue)
                                       for c in r.candidates], end_of_dialogue=r.end_of_dialogue,
                           error=clean(r.error) if r.error is not None else None) for r in results]
    usage = s.SimulateUsage(prompt_tokens=sum(r.prompt_tokens for r in results),
                    completion_tokens=sum(c.tokens for r in results for c in r.candidates))
    return out, usage


class SimulationController(Controller):
    tags: ClassVar[list[str]] = ["simulation"]

    @post("/simulate", operation_id="simulate", status_code=200, responses=_responses("simulate"),
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
        services.require("simulator", [data.model], "model")
        results = await _guarded(services, lambda: services.simulation.simulate(data.model, data.dialogues, sampling))
        out, usage = _simulation_out(results)
        return s.SimulateResponse(model=data.model, results=out, usage=usage)


class ScoringController(Controller):
    tags: ClassVar[list[str]] = ["scoring"]

    @post("/score", operation_id="score", status_code=200, responses=_responses("score"),
          summary="Realism metrics of simulated turns against the real ones",
          description="An item that cannot be scored (a tutor turn, an index out of range, a candidate or a dialogue "
                      "over its limit) gets an error of its own, the others are scored, as in simhub score.")
    async def score(self, data: Annotated[s.ScoreRequest, Body(title="Score request")], services: Services) -> s.ScoreResponse:
        cfg = services.settings
        s.check_count(len(data.items), cfg.max_items, "items", "items")
        s.check_dialogue_caps([(f"items[{i}].dialogue", it.dialogue) for i, it in enumerate(data.items)], None,
                              cfg.max_request_chars, extra_chars=sum(len(it.candidate) for it in data.items))
        metrics = services.scoring.resolve_metrics(data.metrics)
        items = [ScoreItem(it.dialogue, it.turn_index, it.candidate) for it in data.items]
        services.require("metric", [services.scoring.scorer.owner(m) for m in metrics], "metrics")
        results, summary = await _guarded(services, lambda: services.scoring.score(items, metrics))
        return s.ScoreResponse(
            metrics=list(metrics),
            items=[s.ScoreItemOut(scores=r.scores, details=r.details, error=r.error) for r in results],
            summary={m: s.metric_summary(entry) for m, entry in summary.items()},
        )


class RewardController(Controller):
    path = "/v1"
    tags: ClassVar[list[str]] = ["scoring"]

    @post("/reward", operation_id="reward", status_code=200, responses=_responses("reward"),
          summary="A realism reward per completion (the remote reward-model protocol of OpenRLHF)",
          description="Each query's completion is scored against the real turn its label names, with the chosen "
                      "metrics; the reward is their weighted mean. Requests share the scoring micro-batches of "
                      "/score.")
    async def reward(self, data: Annotated[s.RewardRequest, Body(title="Reward request")],
                     services: Services) -> s.RewardResponse:
        cfg = services.settings
        s.check_count(len(data.query), cfg.max_items, "query", "queries")
        reward = services.scoring.reward(data.metrics, data.weights)
        items = s.reward_items(data, reward, services.scoring.scorer)
        s.check_dialogue_caps([(f"labels[{i}].dialogue", it.dialogue) for i, it in enumerate(items)], None,
                              cfg.max_request_chars, extra_chars=sum(len(q) for q in data.query))
        metrics = tuple(reward.metrics)
        services.require("metric", [services.scoring.scorer.owner(m) for m in metrics], "metrics")
        results, _ = await _guarded(services, lambda: services.scoring.score(items, metrics))
        values = [{m: r.scores.get(m) for m in metrics} for r in results]
        rewards = [combine(v, reward.weights, reward.higher_is_better) for v in values]
        return s.RewardResponse(rewards=rewards, scores=list(rewards),
                                extra_logs={m: [v[m] for v in values] for m in metrics})


class InfoController(Controller):
    tags: ClassVar[list[str]] = ["service"]

    @get("/models", operation_id="listModels", summary="Simulators and metric models with their Hub ids and revisions")
    async def models(self, services: Services) -> s.ModelsResponse:
        def info(m: dict) -> s.ModelInfo:
            why = services.unavailable(m["kind"], m["id"])
            return s.ModelInfo(**m, available=why is None, unavailable_reason=why)

        return s.ModelsResponse(
            profile=services.profile.name, simhub_version=__version__,
            simulators=[info(m) for m in services.simulation.model_info()],
            metrics=[info(m) for m in services.scoring.model_info(services.display_scorer)],
        )

    @get("/health", operation_id="health", summary="Liveness: the process answers")
    async def health(self) -> s.HealthResponse:
        return s.HealthResponse(status="ok")

    @get("/ready", operation_id="ready", summary="Readiness: 200 once every model is loaded, else 503",
         description="While starting, 503 with Retry-After: each simulator and metric model with its status and "
                     "what it waits for, the models built so far, and the build in progress (k of n, training "
                     "steps, ETA). A simulator or metric is served as soon as it is ready.",
         responses={503: ResponseSpec(data_container=s.ReadyResponse, description="still building or loading, or failed",
                                      generate_examples=False, examples=[examples.READY_EXAMPLE])})
    async def ready(self, services: Services) -> Response[s.ReadyResponse]:
        step, progress, built = dict(services.step), services.build_progress, list(services.built)
        what = step["what"]
        components = [s.ComponentStatus(kind=c.kind, id=c.id, status=c.status,
                                        waits_for=[r for r in c.needs if r not in built] if c.status != "ready" else [],
                                        error=clean(c.error) if c.error else None)
                      for c in list(services.components.values())]
        body = s.ReadyResponse(
            ready=services.ready, status=services.status,  # type: ignore[arg-type]
            step=s.BuildStep(k=step["k"], n=step["n"], what=what,
                             done=progress[0] if what and progress else None,
                             total=progress[1] if what and progress and progress[1] else None,
                             eta_s=services.eta_s() if what else None),
            building=what, built=built, loading=services.loading, components=components,
            error=clean(services.load_error) if services.load_error else None)
        services.metrics.ready.set(1 if services.ready else 0)
        if services.ready:
            return Response(body, status_code=200)
        headers = {"Retry-After": str(services.settings.retry_after_s)} if not services.loaded else None
        return Response(body, status_code=503, headers=headers)

    @get("/metrics", operation_id="metrics", summary="Prometheus metrics", media_type="text/plain; version=0.0.4")
    async def metrics(self, services: Services) -> bytes:
        return services.metrics.exposition()


# ---------------------------------------------------------------------------------------- OpenAI-compatible


class OpenAIController(Controller):
    path = "/v1"
    tags: ClassVar[list[str]] = ["openai"]

    @post("/chat/completions", operation_id="createChatCompletion", status_code=200, operation_class=StreamingOperation,
          responses=_responses("createChatCompletion"), summary="Next student turn, OpenAI chat format",
          description="system = the question, user = the tutor, assistant = the student, who speaks next. Choices "
                      "carry end_of_dialogue (simhub's extension). OpenAI parameters a simulated student cannot "
                      "honour are refused with 400 naming them; fields OpenAI does not define are ignored.")
    async def chat(self, data: Annotated[s.ChatCompletionRequest, Body(title="Chat completion request")],
                   services: Services) -> s.ChatCompletion:
        services.simulation.check_model(data.model)
        dialogue, sampling, prompt = chat.check_request(data, services.settings)
        services.require("simulator", [data.model], "model")
        (result,) = await _guarded(services, lambda: services.simulation.simulate(data.model, [dialogue], sampling,
                                                                                 prompts=[prompt]))
        chat.check_result(result)
        if data.stream:
            return EventStream(chat.stream_events(data, sampling, result), media_type="text/event-stream",  # type: ignore[return-value]
                               headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        return chat.completion(data, sampling, result)

    @get("/models", operation_id="listOpenAIModels", summary="Simulator ids, OpenAI format")
    async def models(self, services: Services) -> s.OpenAIModelList:
        def model(i: str) -> s.OpenAIModel:
            why = services.unavailable("simulator", i)
            return s.OpenAIModel(id=i, object="model", created=0, owned_by="simhub", available=why is None,
                                 unavailable_reason=why)

        return s.OpenAIModelList(object="list", data=[model(i) for i in services.simulation.ids])
