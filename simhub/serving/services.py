"""The work behind the endpoints: scoring through the micro-batched Scorer, simulation through the
simulators, model listing, and readiness while models are built and loaded in the background.
Handlers only translate HTTP to these calls."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Hashable, Sequence
from typing import Any

from simhub.config import Profile
from simhub.errors import ConfigError, SimhubError
from simhub.metrics import ScoreItem, summarize
from simhub.models import Sampling
from simhub.provision import pending_builds
from simhub.scoring import ItemResult, Scorer
from simhub.serving.batching import Job, MicroBatcher
from simhub.serving.metrics import ServiceMetrics
from simhub.serving.schemas import Overloaded, RequestError, UnknownModel
from simhub.serving.settings import ServiceSettings
from simhub.simulation import SimulationResult, Simulator, Target

log = logging.getLogger("simhub.serving")


class ScoringService:
    """Scores items with one Scorer; concurrent requests with the same metrics share a call.

    A metric whose values depend on the whole scored set (knowledge with paper cutoffs) is never
    merged across requests: a request's result must not depend on who else asked at the same time.
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
        return None if self.scorer.set_dependent(metrics) else metrics

    async def score(self, items: list[ScoreItem], metrics: tuple[str, ...]) -> tuple[list[ItemResult], dict]:
        return await self.batcher.submit(self._batch_key(metrics), items, payload=metrics)

    def _run(self, jobs: list[Job]) -> list[tuple[list[ItemResult], dict]]:
        metrics = jobs[0].payload
        items = [it for job in jobs for it in job.items]
        result = self.scorer.score(items, list(metrics))
        out, start = [], 0
        # Set-level extras (QWK, cutoffs) come from the whole call; merged calls never include a
        # set-dependent metric, so for them the extras are the same for every request.
        for job in jobs:
            mine = result.items[start : start + len(job.items)]
            start += len(job.items)
            summary = {}
            for m in metrics:
                extras = {k: v for k, v in result.summary[m].items() if k not in ("mean", "std", "count", "nulls")}
                if len(jobs) > 1:
                    extras.pop("qwk", None)
                values = [r.scores.get(m) for r in mine]
                summary[m] = {**summarize(values), "nulls": sum(1 for r in mine if r.error is None and r.scores.get(m) is None),
                              **extras}
            out.append((mine, summary))
        return out

    def model_info(self, scorer: Scorer | None = None) -> list[dict]:
        out = []
        for name, metric in (scorer or self.scorer).instances.items():
            config = metric.config
            if config is None:
                continue
            info: dict[str, Any] = {"id": name, "kind": "metric", "metrics": list(metric.output_names())}
            if name == "cosine":
                info["base_model"] = config.model
            elif name == "judge" and config.kind == "openai":
                info.update(base_model=config.model, backend="openai", base_url=config.endpoint.base_url)
            else:
                info.update(base_model=config.model, revision=config.revision, adapter=config.adapter,
                            adapter_revision=config.adapter_revision, backend=getattr(config, "kind", None))
            out.append(info)
        return out


class SimulationService:
    """Routes /simulate to a simulator, with a bound on dialogues in flight."""

    def __init__(self, profile: Profile, settings: ServiceSettings, metrics: ServiceMetrics):
        from simhub.simulation import build_simulator, simulator_names

        #: Known before the models are built, so unknown ids get a 404 while loading.
        self.names = simulator_names(profile, http=True)
        self.simulators: dict[str, Simulator] = {}
        # Described from the profile as written (Hub ids, tiny:/demo: names), never server paths.
        self.display = {n: build_simulator(n, profile, force_backend=settings.simulator_backend) for n in self.names}
        self.max_in_flight = settings.queue_size
        self.in_flight = 0
        self.stats = metrics
        self.profile = profile

    @property
    def ids(self) -> list[str]:
        return list(self.names)

    def check_model(self, model: str, field: str = "model") -> None:
        if model not in self.names:
            known = ", ".join(self.names) or "none configured"
            raise UnknownModel(f"{field}: unknown simulator {model!r}; available: {known}", field)

    async def simulate(self, model: str, dialogues: list, sampling: Sampling) -> list[SimulationResult]:
        """Generate with simulator ``model`` (the caller has checked it with :meth:`check_model`)."""
        if self.in_flight + len(dialogues) > self.max_in_flight:
            raise Overloaded(f"simulation queue is full ({self.in_flight} dialogues in flight)")
        simulator = self.simulators[model]
        self.in_flight += len(dialogues)
        try:
            results = await simulator.asimulate([Target(d, len(d.turns)) for d in dialogues], sampling)
        finally:
            self.in_flight -= len(dialogues)
        self.stats.observe_generation(model, results)
        return results

    def model_info(self) -> list[dict]:
        return [{**self.display[n].describe(), "kind": "simulator", "simulator_kind": self.display[n].kind}
                for n in self.names]


def _quiet_libraries() -> None:
    """Progress bars of the Hugging Face libraries off and their logs at ERROR, for the whole process:
    a service's log is one line per build step, not nested bars (``--log-level debug`` keeps them)."""
    import os

    from simhub.config import QUIET_ENVIRONMENT

    for name, value in QUIET_ENVIRONMENT.items():
        if name != "TQDM_DISABLE":  # the process's own bars (a CLI in the same process) stay
            os.environ.setdefault(name, value)
    with contextlib.suppress(ImportError):
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()
    with contextlib.suppress(ImportError):
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()


class Services:
    """Everything the app holds, built from the profile and loaded in a background thread.

    Loading first builds what the profile provisions (demo models on a first start), step by step,
    then loads every simulator and metric model: steps ``1..n`` are the builds, then "loading
    simulators", then "loading metric models". Requests that arrive meanwhile wait (on an asyncio
    event, no thread parked) up to their timeout, then get 503.
    """

    def __init__(self, profile: Profile, settings: ServiceSettings, metrics: ServiceMetrics):
        self.profile, self.settings, self.metrics = profile, settings, metrics
        # Built from the profile as written (nothing loads), so requests can be validated while loading;
        # the provisioned scorer replaces it once its models are built.
        self.scoring = ScoringService(Scorer.from_profile(profile), settings, metrics)
        self.display_scorer = self.scoring.scorer
        self.simulation = SimulationService(profile, settings, metrics)
        self.loading: list[str] = ["scorer", *self.simulation.names]
        #: Start-up progress: the current step (k of n, k = 0 before the first) and what it does;
        #: finished steps in ``built``. Every unbuilt provisioned model is a step, then two loading steps.
        self.step: dict[str, Any] = self._first_step()
        self.built: list[str] = []
        self.load_error: str | None = None
        #: True once loading has ended (successfully or not); written only by the loading thread.
        self.loaded = False
        self._loaded_event: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        #: Set by :meth:`close`: loading stops at the next step instead of starting engines nobody will stop.
        self._closing = threading.Event()

    @property
    def ready(self) -> bool:
        return self.loaded and self.load_error is None

    @property
    def status(self) -> str:
        return "ready" if self.ready else "failed" if self.loaded else "loading"

    def _first_step(self) -> dict[str, Any]:
        """Step 0 of n: one step per unbuilt provisioned model, then the two loading steps."""
        return {"k": 0, "n": len(pending_builds(self.profile)) + 2, "what": None}

    def _begin(self, what: str) -> None:
        """Start the next step (the previous one is done): one log line per step."""
        if self.step.get("what"):
            self.built.append(self.step["what"])
        k = self.step["k"] + 1
        self.step = {"k": k, "n": max(self.step["n"], k), "what": what}
        log.info("step %d/%d: %s", k, self.step["n"], what, extra={"step": k, "steps": self.step["n"], "what": what})

    def load(self) -> None:
        """Build (demo models on first start) and load every model; sets ``ready``."""
        from simhub.provision import provision_profile
        from simhub.simulation import build_simulator, load_options

        started = time.perf_counter()
        quiet = log.getEffectiveLevel() > logging.DEBUG
        if quiet:
            _quiet_libraries()
            with contextlib.suppress(ImportError):
                from simhub.training.common import VERBOSE

                VERBOSE.set(False)  # this thread only: training elsewhere in the process still reports
        try:
            self.step = self._first_step()  # what is unbuilt now (another process may have built some)
            profile = provision_profile(self.profile, on_step=lambda k, n, what: self._begin(what))
            options = load_options(profile, asynchronous=True, backend=self.settings.simulator_backend)
            self._begin(f"loading {len(self.simulation.names)} simulators")
            for sid in self.simulation.names:
                if self._closing.is_set():
                    raise RuntimeError("the service is shutting down")
                simulator = build_simulator(sid, profile, options, force_backend=self.settings.simulator_backend)
                log.debug("loading simulator", extra={"simulator": sid, "kind": simulator.kind})
                simulator.load()
                self.simulation.simulators[sid] = simulator
                self.loading.remove(sid)
            if self._closing.is_set():
                raise RuntimeError("the service is shutting down")
            scorer = Scorer.from_profile(profile)
            self._begin(f"loading metric models ({', '.join(scorer.metrics) or 'none'})")
            scorer.load()
            self.scoring.scorer = scorer
            self.loading.remove("scorer")
            self.built.append(self.step["what"])
            self.step = {**self.step, "what": None}
            log.info("ready in %.1f s", time.perf_counter() - started)
        except Exception as exc:
            if self._closing.is_set():
                self.load_error = "the service shut down while loading"
                log.info("loading stopped: the service is shutting down")
                return
            # A SimhubError's message is meant for the user (a missing extra, a bad profile); others only name their type.
            self.load_error = f"{type(exc).__name__}: {exc}" if isinstance(exc, SimhubError) else type(exc).__name__
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
        from simhub.models import unload_models

        self._closing.set()
        if self._thread is not None and self._thread.is_alive():
            # An engine being started would outlive the process (vLLM runs it in a process of its own):
            # let the step finish (bounded), then stop what it started.
            log.info("shutting down: waiting up to 60 s for step %d/%d to finish", self.step["k"], self.step["n"])
            await asyncio.to_thread(self._thread.join, 60)
        await self.scoring.batcher.close()
        for simulator in self.simulation.simulators.values():
            simulator.close()
        # Engines run in processes of their own (vLLM): shut them down with the service, not at exit.
        await asyncio.to_thread(unload_models)
