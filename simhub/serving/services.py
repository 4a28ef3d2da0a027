"""The work behind the endpoints: scoring through the micro-batched Scorer, simulation through the
generator registry, model listing and readiness. Handlers only translate HTTP to these calls."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Hashable, Sequence
from typing import Any

from simhub.backends.generation import (
    Sampling,
    SimulationResult,
    SimulatorRegistry,
    VLLMOptions,
    simulator_specs,
)
from simhub.errors import ConfigError
from simhub.schema import Dialogue
from simhub.scoring import ItemResult, ScoreItem, Scorer, summarize
from simhub.serving.batching import Job, MicroBatcher
from simhub.serving.metrics import ServiceMetrics
from simhub.serving.schemas import Overloaded, RequestError, UnknownModel
from simhub.serving.settings import ServiceSettings

log = logging.getLogger("simhub.serving")


class ScoringService:
    """Scores items with one Scorer; concurrent requests with the same metrics share a call.

    Knowledge scores with ``cutoffs: paper`` depend on the whole scored set, so such requests are
    never merged with others (their result must not depend on who else asked at the same time).
    """

    def __init__(self, scorer: Scorer, settings: ServiceSettings, metrics: ServiceMetrics):
        self.scorer = scorer
        self.batcher = MicroBatcher(
            self._run, window_s=settings.batch_window_ms / 1000, max_items=settings.max_batch_items,
            max_pending=settings.queue_size, on_batch=metrics.observe_batch, name="simhub-score",
        )

    def resolve_metrics(self, metrics: Sequence[str] | None) -> tuple[str, ...]:
        """The Scorer's own check (known, configured), as a 400 naming ``metrics``."""
        try:
            return tuple(self.scorer.resolve_metrics(metrics))
        except ConfigError as exc:
            raise RequestError(str(exc), "metrics") from None

    def _batch_key(self, metrics: tuple[str, ...]) -> Hashable | None:
        if "knowledge" in metrics and self.scorer.config.knowledge_cutoffs == "paper":
            return None
        return metrics

    async def score(self, items: list[ScoreItem], metrics: tuple[str, ...]) -> tuple[list[ItemResult], dict]:
        return await self.batcher.submit(self._batch_key(metrics), items, payload=metrics)

    def _run(self, jobs: list[Job]) -> list[tuple[list[ItemResult], dict]]:
        metrics = jobs[0].payload
        items = [it for job in jobs for it in job.items]
        result = self.scorer.score(items, list(metrics))
        out, start = [], 0
        stable = {m: {k: v for k, v in s.items() if k in ("cutoffs", "cutoff_source")} for m, s in result.summary.items()}
        for job in jobs:
            mine = result.items[start : start + len(job.items)]
            start += len(job.items)
            summary = {m: {**summarize([r.scores.get(m) for r in mine]), **stable.get(m, {})} for m in metrics}
            out.append((mine, summary))
        return out

    def model_info(self) -> list[dict]:
        c = self.scorer.config
        uses = {"acts": ["acts"], "judge": ["correctness", "errors"], "knowledge": ["knowledge"], "cosine": ["cosine"],
                "tutor_response": ["tutor_response"]}
        out = []
        for name, metrics in uses.items():
            ref = getattr(c, name)
            if ref is None:
                continue
            info: dict[str, Any] = {"id": name, "kind": "metric", "metrics": metrics}
            if name == "cosine":
                info["base_model"] = ref
            elif name == "judge":
                info.update(base_model=ref.get("model"), backend=ref.get("kind", "local"))
                if ref.get("base_url"):
                    info["base_url"] = ref["base_url"]
            else:
                info.update(base_model=ref.model, revision=ref.revision, adapter=ref.adapter, adapter_revision=ref.adapter_revision)
            out.append(info)
        return out


class SimulationService:
    """Routes /simulate to the simulator's generator, with a bound on dialogues in flight."""

    def __init__(self, specs: dict, settings: ServiceSettings, metrics: ServiceMetrics):
        #: Known before the models are built (so unknown ids get a 404 while loading).
        self.specs = specs
        self.registry: SimulatorRegistry | None = None
        self.max_in_flight = settings.queue_size
        self.in_flight = 0
        self.stats = metrics

    @property
    def ids(self) -> list[str]:
        return list(self.specs)

    def check_model(self, model: str, field: str = "model") -> None:
        if model not in self.specs:
            known = ", ".join(self.ids) or "none configured"
            raise UnknownModel(f"{field}: unknown simulator {model!r}; available: {known}", field)

    async def simulate(self, model: str, dialogues: list[Dialogue], sampling: Sampling) -> list[SimulationResult]:
        """Generate with simulator ``model`` (the caller has checked it with :meth:`check_model`)."""
        if self.in_flight + len(dialogues) > self.max_in_flight:
            raise Overloaded(f"simulation queue is full ({self.in_flight} dialogues in flight)")
        assert self.registry is not None, "wait_ready() before simulate()"
        self.in_flight += len(dialogues)
        try:
            results = await self.registry.get(model).simulate(dialogues, sampling)
        finally:
            self.in_flight -= len(dialogues)
        self.stats.observe_generation(model, results)
        return results

    def model_info(self) -> list[dict]:
        return [spec.describe() for spec in self.specs.values()]


class Services:
    """Everything the app holds: built from the profile, loaded in a background thread.

    Requests that arrive while loading wait (on an asyncio event, no thread parked) up to their
    timeout, then get 503; ``simhub_ready`` is set as soon as loading ends.
    """

    def __init__(self, profile: dict, settings: ServiceSettings, metrics: ServiceMetrics):
        from simhub.profiles import scorer_config

        self.profile, self.settings, self.metrics = profile, settings, metrics
        self.scoring = ScoringService(Scorer(scorer_config(profile)), settings, metrics)
        specs = simulator_specs(profile, settings.simulator_backend, resolve=False)
        self.simulation = SimulationService(specs, settings, metrics)
        self.loading: list[str] = ["scorer", *specs]
        self.load_error: str | None = None
        #: True once loading has ended (successfully or not); written only by the loading thread.
        self.loaded = False
        self._loaded_event: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def ready(self) -> bool:
        return self.loaded and self.load_error is None

    def load(self) -> None:
        """Build (demo models on first start) and load every model; sets ``ready``."""
        try:
            specs = simulator_specs(self.profile, self.settings.simulator_backend, resolve=True)
            registry = SimulatorRegistry(specs, VLLMOptions.from_profile(self.profile), self.scoring.scorer.config.device)
            for sid, gen in registry.generators.items():
                log.info("loading simulator", extra={"simulator": sid, "backend": specs[sid].backend})
                gen.load()
                self.loading.remove(sid)
            self.simulation.registry, self.simulation.specs = registry, specs
            log.info("loading metric models", extra={"metrics": self.scoring.scorer.metrics})
            self.scoring.scorer.load()
            self.loading.remove("scorer")
            log.info("ready")
        except Exception as exc:
            self.load_error = f"{type(exc).__name__}: {exc}" if isinstance(exc, ConfigError) else type(exc).__name__
            log.exception("loading models failed")
        finally:
            self.loaded = True
            self.metrics.ready.set(1 if self.ready else 0)
            if self._loop is not None and self._loaded_event is not None:
                with contextlib.suppress(RuntimeError):  # the loop has closed: nobody is waiting
                    self._loop.call_soon_threadsafe(self._loaded_event.set)

    def start_loading(self) -> None:
        """Start :meth:`load` in a thread; called on the event loop (the app's lifespan, or the first request)."""
        self._loop = asyncio.get_running_loop()
        self._loaded_event = asyncio.Event()
        self._thread = threading.Thread(target=self.load, name="simhub-load", daemon=True)
        self._thread.start()

    async def wait_ready(self, timeout: float) -> None:
        if not self.loaded:
            if self._thread is None:
                self.start_loading()
            assert self._loaded_event is not None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._loaded_event.wait(), timeout)
        if not self.ready:
            raise Overloaded("models are still loading" if not self.loaded else "models failed to load; see /ready")

    async def close(self) -> None:
        await self.scoring.batcher.close()
        if self.simulation.registry is not None:
            await self.simulation.registry.close()
