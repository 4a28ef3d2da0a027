"""The work behind the endpoints: scoring through the micro-batched Scorer, simulation through the
simulators, model listing, and readiness while models are built and loaded in the background.
Handlers only translate HTTP to these calls."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from simhub.config import Profile
from simhub.errors import ConfigError, SimhubError
from simhub.metrics import ScoreItem
from simhub.models import Sampling
from simhub.provision import is_built, pending_builds, restrict, start_parallel_builds
from simhub.scoring import ItemResult, Scorer
from simhub.scoring.rewards import RealismReward
from simhub.serving.batching import Job, MicroBatcher
from simhub.serving.metrics import ServiceMetrics
from simhub.serving.schemas import NotReady, Overloaded, RequestError, UnknownModel, output_info
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

    def reward(self, metrics: Sequence[str] | None, weights: Mapping[str, float] | None) -> RealismReward:
        """The reward over this scorer's metrics (``POST /v1/reward``); bad names or weights are a 400
        naming the field."""
        try:
            return RealismReward(self.scorer, metrics, weights)
        except ConfigError as exc:
            raise RequestError(str(exc), exc.field) from None

    def _run(self, jobs: list[Job]) -> list[tuple[list[ItemResult], dict]]:
        metrics = jobs[0].payload
        items = [it for job in jobs for it in job.items]
        result = self.scorer.score(items, list(metrics))
        out, start = [], 0
        # Each request's summary is its metric's own (Metric.summary) over its own items; the set-level
        # extras of finalize (QWK, cutoffs) come from the whole call. Merged calls never include a
        # set-dependent metric, so for them those extras are the same for every request, but for the
        # QWK, a statistic of the pooled set, which a merged call leaves out.
        for job in jobs:
            mine = result.items[start : start + len(job.items)]
            start += len(job.items)
            summary = {}
            unscored = sum(1 for r in mine if r.error is not None)  # this request's items not scored at all
            for m in metrics:
                values = [r.scores.get(m) for r in mine]
                own = self.scorer.instances[self.scorer.owner(m)].summary(values)
                extras = {k: v for k, v in result.summary[m].items() if k not in own and k not in ("nulls", "unscored")}
                if len(jobs) > 1:
                    extras.pop("qwk", None)
                summary[m] = {**own, "nulls": sum(1 for r in mine if r.error is None and r.scores.get(m) is None),
                              **({"unscored": unscored} if unscored else {}), **extras}
            out.append((mine, summary))
        return out

    def model_info(self, scorer: Scorer | None = None) -> list[dict]:
        out = []
        for name, metric in (scorer or self.scorer).instances.items():
            # every metric of the profile, a model-free one (rouge_l) too: a client discovers metrics here
            out.append({"id": name, "kind": "metric", "metrics": list(metric.output_names()), **metric.describe(),
                        "outputs": [output_info(o) for o in metric.outputs]})
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

    async def simulate(self, model: str, dialogues: list, sampling: Sampling,
                       prompts: Sequence[tuple[dict[str, str], ...] | None] | None = None) -> list[SimulationResult]:
        """Generate with simulator ``model`` (the caller has checked it with :meth:`check_model`);
        ``prompts[i]``, when given, is dialogue i's prompt already rendered (see :class:`Target`)."""
        if self.in_flight + len(dialogues) > self.max_in_flight:
            raise Overloaded(f"simulation queue is full ({self.in_flight} dialogues in flight)")
        simulator = self.simulators[model]
        self.in_flight += len(dialogues)
        try:
            prompts = prompts or [None] * len(dialogues)
            targets = [Target(d, len(d.turns), p) for d, p in zip(dialogues, prompts, strict=True)]
            results = await simulator.asimulate(targets, sampling)
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


@dataclass
class Component:
    """One thing requests wait for: a simulator, or a metric model (by registry name)."""

    kind: Literal["simulator", "metric"]
    id: str
    #: The provisioned models it needs that were not built when the service started, in build order.
    needs: list[str] = field(default_factory=list)
    status: Literal["waiting", "building", "loading", "ready", "failed", "unavailable"] = "waiting"
    error: str | None = None


class Services:
    """Everything the app holds, built from the profile and loaded in a background thread.

    Each simulator and each metric model is served as soon as its own models are built and loaded
    (a first start of the demo builds them): what needs nothing (``rouge_l``, ``cosine``, the
    reference simulators, endpoint baselines) first, then the simulators, then the metric models,
    cheapest build first, then whatever else the profile provisions (tutors). A request that needs
    something not ready yet is answered 503 at once, with ``Retry-After`` and what it waits for.
    """

    def __init__(self, profile: Profile, settings: ServiceSettings, metrics: ServiceMetrics):
        self.profile, self.settings, self.metrics = profile, settings, metrics
        # Built from the profile as written (nothing loads), so requests can be validated while loading
        # and /models names Hub ids, never server paths. The serving scorer gets its metric models one
        # by one as they are loaded.
        self.display_scorer = Scorer.from_profile(profile)
        self.scoring = ScoringService(Scorer.from_profile(profile), settings, metrics)
        self.simulation = SimulationService(profile, settings, metrics)
        self.components: dict[tuple[str, str], Component] = {}
        for c in self._plan():
            self.components[(c.kind, c.id)] = c
            if c.kind == "metric" and type(self.scoring.scorer.instances[c.id]).config_key is None:
                c.status = "ready"  # a metric without a model (rouge_l) is served from the first request
            # An endpoint whose key is not set cannot answer here: listed as unavailable (with the variable
            # to set), never loaded, and its requests answer 503 with the reason (the key is read at start).
            shown = self.simulation.display[c.id] if c.kind == "simulator" else self.display_scorer.instances[c.id]
            if (why := shown.unavailable()) is not None:
                c.status, c.error = "unavailable", why
        #: Build progress: step k of n over the models to build, ``what`` the one being built (a
        #: provisioned name such as ``demo:acts``), ``done``/``total`` its training steps.
        self.step: dict[str, Any] = self._first_step()
        #: Models built since the start, in order (provisioned names).
        self.built: list[str] = []
        self.load_error: str | None = None
        #: True once loading has ended (successfully or not); written only by the loading thread.
        self.loaded = False
        #: (done, total, started) training steps of the current build, None between builds.
        self.build_progress: tuple[int, int, float] | None = None
        self._thread: threading.Thread | None = None
        #: Set by :meth:`close`: loading stops at the next step instead of starting engines nobody will stop.
        self._closing = threading.Event()
        #: Worker processes building the long demo models beside this one (simhub.provision).
        self._workers: list = []

    # ------------------------------------------------------------------ plan

    def _plan(self) -> list[Component]:
        """Every component with the unbuilt models it needs, in loading order (file checks only: cheap)."""
        sims = [Component("simulator", sid, pending_builds(self._needed_by("simulator", sid)))
                for sid in self.simulation.names]
        mets = [Component("metric", name, pending_builds(self._needed_by("metric", name)))
                for name in self.display_scorer.instances]
        free = [c for c in sims + mets if not c.needs]
        # Students before judges; among metrics, the cheapest build first (a recipe's steps stand in for its cost).
        sims = [c for c in sims if c.needs]
        mets = sorted((c for c in mets if c.needs), key=lambda c: sum(_build_cost(r) for r in c.needs))
        return free + sims + mets

    def _needed_by(self, kind: str, cid: str) -> Profile:
        """The profile cut down to what component ``cid`` needs (so provisioning builds only that)."""
        none: list[str] = []
        if kind == "metric":
            key = type(self.display_scorer.instances[cid]).config_key
            return restrict(self.profile, metrics=[key] if key else none, simulators=none, tutors=none, baselines=False)
        return restrict(self.profile, metrics=none, simulators=[cid], tutors=none, baselines=cid.startswith("baseline:"))

    def _builds(self) -> list[str]:
        """Every model to build, in the order the plan meets them, then the rest the profile provisions."""
        order = [r for c in self.components.values() for r in c.needs]
        return list(dict.fromkeys([*order, *pending_builds(self.profile)]))

    def _first_step(self) -> dict[str, Any]:
        return {"k": 0, "n": len(self._builds()), "what": None}

    # ------------------------------------------------------------------ state

    @property
    def ready(self) -> bool:
        return self.loaded and self.load_error is None and all(c.status in ("ready", "unavailable")
                                                                for c in self.components.values())

    @property
    def status(self) -> str:
        return "ready" if self.ready else "failed" if self.loaded else "loading"

    @property
    def loading(self) -> list[str]:
        """Ids of the simulators and metric models not ready yet."""
        return [c.id for c in self.components.values() if c.status not in ("ready", "unavailable")]

    def unavailable(self, kind: str, cid: str) -> str | None:
        """Why component ``cid`` cannot run on this server, or None."""
        c = self.components.get((kind, cid))
        return c.error if c is not None and c.status == "unavailable" else None

    def eta_s(self) -> float | None:
        """Seconds the current build should still take, from its training steps so far (None: unknown)."""
        if self.build_progress is None:
            return None
        done, total, started = self.build_progress
        if done <= 0 or total <= 0:
            return None
        return round((time.perf_counter() - started) / done * max(total - done, 0), 1)

    def progress_text(self) -> str:
        step = self.step
        if not step.get("what"):
            return "loading"
        text = f"building {step['what']}, step {step['k']} of {step['n']}"
        if self.build_progress is not None and self.build_progress[1]:
            text += f", {self.build_progress[0]}/{self.build_progress[1]} training steps"
            eta = self.eta_s()
            text += f", about {eta:.0f} s left" if eta is not None else ""
        return text

    def require(self, kind: str, ids: Sequence[str], field: str) -> None:
        """Raise NotReady (503 at once) unless every named component is ready; starts loading if needed."""
        if self._thread is None and not self.loaded:
            self.start_loading()
        waiting = [self.components[(kind, i)] for i in dict.fromkeys(ids)
                   if (kind, i) in self.components and self.components[(kind, i)].status != "ready"]
        if not waiting:
            return
        absent = [c for c in waiting if c.status == "unavailable"]
        if absent:
            raise NotReady(f"{field}: " + "; ".join(f"{c.id} is unavailable on this server ({c.error})" for c in absent),
                           field, unavailable=True)
        failed = [c for c in waiting if c.status == "failed" or (self.loaded and c.status != "ready")]
        if failed:
            raise NotReady(f"{field}: {', '.join(c.id for c in failed)} failed to load; see /ready", field, failed=True)
        needs = [r for c in waiting for r in c.needs if r not in self.built]
        what = f"{kind} {', '.join(c.id for c in waiting)} is not ready yet"
        why = f"; waits for {', '.join(needs)}" if needs else ""
        raise NotReady(f"{field}: {what}{why} ({self.progress_text()})", field)

    # ------------------------------------------------------------------ loading

    def _begin(self, what: str) -> None:
        """Start building ``what``: one log line per build."""
        k = self.step["k"] + 1
        self.step = {"k": k, "n": max(self.step["n"], k), "what": what}
        self.build_progress = (0, 0, time.perf_counter())
        log.info("step %d/%d: building %s", k, self.step["n"], what,
                 extra={"step": k, "steps": self.step["n"], "what": what})

    def _end_build(self) -> None:
        if self.step.get("what"):
            self.built.append(self.step["what"])
            self.step = {**self.step, "what": None}
        self.build_progress = None

    def _on_training_step(self, done: int, total: int) -> None:
        started = self.build_progress[2] if self.build_progress is not None else time.perf_counter()
        self.build_progress = (done, total, started)

    def _provision(self, profile: Profile) -> Profile:
        """``profile`` with its provisioned models built (each build a step) and resolved to folders."""
        from simhub.provision import provision_profile

        if self._closing.is_set():
            raise RuntimeError("the service is shutting down")
        todo = pending_builds(profile)

        def on_step(k: int, n: int, what: str) -> None:
            self._end_build()
            if self._closing.is_set():
                raise RuntimeError("the service is shutting down")
            self._begin(todo[k - 1])

        try:
            return provision_profile(profile, on_step=on_step)
        finally:
            what = self.step.get("what")
            if what in todo and is_built(what):
                self._end_build()
            elif what in todo:  # that build failed: it is not built, and a later start builds it again
                self.step, self.build_progress = {**self.step, "what": None}, None

    def _load_component(self, c: Component, options) -> None:
        from simhub.simulation import build_simulator

        c.status = "building" if any(r not in self.built for r in c.needs) else "loading"
        if c.kind == "simulator":
            profile = self._provision(self._needed_by("simulator", c.id))
            c.status = "loading"
            simulator = build_simulator(c.id, profile, options, force_backend=self.settings.simulator_backend)
            log.debug("loading simulator", extra={"simulator": c.id, "kind": simulator.kind})
            simulator.load()
            self.simulation.simulators[c.id] = simulator
        else:
            scorer = self.scoring.scorer
            cls = type(scorer.instances[c.id])
            scoring = self._provision(self._needed_by("metric", c.id)).scoring
            c.status = "loading"
            metric = cls.from_scoring(scoring, scorer.context)
            metric.load()
            scorer.instances[c.id] = metric  # the key exists already: a swap, safe beside a running batch
        c.status = "ready"
        log.info("%s %s ready", c.kind, c.id, extra={"component": c.kind, "id": c.id})

    def load(self) -> None:
        """Build (demo models on a first start) and load every component in plan order; a component
        that fails is marked failed with its cause and the others go on."""
        from simhub.simulation import load_options

        started = time.perf_counter()
        quiet = log.getEffectiveLevel() > logging.DEBUG
        from simhub.progress import PROGRESS, VERBOSE

        if quiet:
            _quiet_libraries()
            VERBOSE.set(False)  # this thread only: training elsewhere in the process still reports
        PROGRESS.set(self._on_training_step)
        try:
            self.step = self._first_step()  # what is unbuilt now (another process may have built some)
            self._workers = start_parallel_builds([b for b in self._builds() if not is_built(b)])
            options = load_options(self.profile, asynchronous=True, backend=self.settings.simulator_backend)
            for c in self.components.values():
                if c.status in ("ready", "unavailable"):
                    continue
                if self._closing.is_set():
                    raise RuntimeError("the service is shutting down")
                try:
                    self._load_component(c, options)
                except Exception as exc:
                    if self._closing.is_set():
                        raise
                    c.status, c.error = "failed", _cause(exc)
                    log.exception("loading %s %s failed", c.kind, c.id)
            self._provision(self.profile)  # what no endpoint needs (tutors) is built last
            failed = [c.id for c in self.components.values() if c.status == "failed"]
            if failed:
                self.load_error = f"failed to load: {', '.join(failed)}"
            else:
                log.info("ready in %.1f s", time.perf_counter() - started)
        except Exception as exc:
            if self._closing.is_set():
                self.load_error = "the service shut down while loading"
                log.info("loading stopped: the service is shutting down")
                return
            self.load_error = _cause(exc)
            log.exception("loading models failed")
        finally:
            self.step = {**self.step, "what": None}
            self.loaded = True
            self.metrics.ready.set(1 if self.ready else 0)

    def start_loading(self) -> None:
        """Start :meth:`load` in a thread (the app's lifespan, or the first request that needs a model)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self.load, name="simhub-load", daemon=True)
            self._thread.start()

    async def close(self) -> None:
        from simhub.models import unload_models

        self._closing.set()
        if self._thread is not None and self._thread.is_alive():
            # An engine being started would outlive the process (vLLM runs it in a process of its own):
            # let the step finish (bounded), then stop what it started.
            log.info("shutting down: waiting up to 60 s for step %d/%d to finish", self.step["k"], self.step["n"])
            await asyncio.to_thread(self._thread.join, 60)
        for worker in self._workers:  # a build nobody waits for any more: its partial folder is cleaned next start
            if worker.poll() is None:
                worker.terminate()
        await self.scoring.batcher.close()
        for simulator in self.simulation.simulators.values():
            simulator.close()
        # Engines run in processes of their own (vLLM): shut them down with the service, not at exit.
        await asyncio.to_thread(unload_models)


def _cause(exc: Exception) -> str:
    """A SimhubError's message is meant for the user (a missing extra, a bad profile); others only name their type."""
    return f"{type(exc).__name__}: {exc}" if isinstance(exc, SimhubError) else type(exc).__name__


def _build_cost(ref: str) -> int:
    """A rough cost of building ``ref``, to build cheap models first: a demo recipe's training steps."""
    if not ref.startswith("demo:"):
        return 0
    try:
        from simhub.provision import demo_steps

        return demo_steps(ref)
    except Exception:  # an unknown demo model fails when it is built, with its own message
        return 0
