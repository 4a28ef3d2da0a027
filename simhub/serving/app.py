"""The one place that builds the Litestar app: ``create_app(settings)``.

Routes: ``POST /simulate``, ``POST /score``, ``GET /models``, ``GET /health``, ``GET /ready``,
``GET /metrics``, ``POST /v1/chat/completions``, ``GET /v1/models``, the KT-learner runs of an agent
tutor under ``/lms`` (:mod:`simhub.serving.lms`), and the OpenAPI schema and
docs under ``/schema`` (``/schema/openapi.json``; Swagger UI at ``/schema`` and ``/schema/swagger``,
served from the package, so it works offline).

Middleware, outermost first: access log and metrics, API key, rate limit, then the raw-body guard
(size, UTF-8, nesting depth, lone surrogates) so nothing unauthenticated is read and nothing
malformed reaches the decoder.
"""

from __future__ import annotations

import hmac
import logging
from contextlib import asynccontextmanager

from litestar import Litestar
from litestar.di import Provide
from litestar.middleware.rate_limit import RateLimitConfig
from litestar.openapi import OpenAPIConfig

from simhub import __version__
from simhub.config import Profile, load_profile
from simhub.serving.controllers import (
    InfoController,
    OpenAIController,
    RewardController,
    ScoringController,
    SimulationController,
    provide_services,
)
from simhub.serving.errors import EXCEPTION_HANDLERS, error_response
from simhub.serving.examples import REQUESTS, RESPONSES
from simhub.serving.guard import body_guard_middleware
from simhub.serving.lms import LMS_REQUESTS, LMSController, LMSRuns, apply_lms_docs
from simhub.serving.metrics import ServiceMetrics, access_middleware, configure_logging
from simhub.serving.openapi import (
    OfflineSwaggerPlugin,
    apply_limits,
    apply_request_examples,
    apply_response_examples,
    limits_description,
)
from simhub.serving.services import Services
from simhub.serving.settings import ServiceSettings

log = logging.getLogger("simhub.serving")
#: Paths that answer without an API key (probes and docs).
PUBLIC_PATHS = ("/health", "/ready", "/schema")


def auth_middleware(api_key: str):
    """``Authorization: Bearer <key>`` or ``X-API-Key: <key>``; compared in constant time."""
    expected = api_key.encode()

    def factory(app):
        async def middleware(scope, receive, send):
            if scope["type"] != "http" or scope["path"].startswith(PUBLIC_PATHS):
                await app(scope, receive, send)
                return
            headers = dict(scope.get("headers", []))
            given = headers.get(b"x-api-key", b"")
            auth = headers.get(b"authorization", b"")
            if auth[:7].lower() == b"bearer ":
                given = auth[7:].strip()
            if not given or not hmac.compare_digest(given, expected):
                response = error_response(401, "unauthorized", "missing or wrong API key (Authorization: Bearer or X-API-Key)",
                                          headers={"WWW-Authenticate": "Bearer"})
                await response.to_asgi_response(app=None, request=None)(scope, receive, send)  # type: ignore[arg-type]
                return
            await app(scope, receive, send)

        return middleware

    return factory


def _security() -> dict:
    from litestar.openapi.spec import Components, SecurityScheme

    schemes = {"bearer": SecurityScheme(type="http", scheme="bearer"),
               "apiKey": SecurityScheme(type="apiKey", name="X-API-Key", security_scheme_in="header")}
    return {"components": Components(security_schemes=schemes), "security": [{"bearer": []}, {"apiKey": []}]}


def create_app(settings: ServiceSettings | None = None, profile: Profile | None = None) -> Litestar:
    """Build the app for ``settings.profile`` (or an already loaded ``profile``). Nothing is built or
    loaded here: the lifespan starts that in the background, so the port answers at once."""
    profile = profile if profile is not None else load_profile(settings.profile if settings else "demo")
    settings = settings or ServiceSettings.load(profile)
    configure_logging(settings.log_json, logging.getLevelName(settings.log_level.upper()))
    metrics = ServiceMetrics()
    services = Services(profile, settings, metrics)

    @asynccontextmanager
    async def lifespan(app: Litestar):
        if settings.preload:
            services.start_loading()
        try:
            yield
        finally:
            await services.close()

    middleware = [access_middleware(metrics)]
    if settings.api_key:
        middleware.append(auth_middleware(settings.api_key))
    if settings.rate_limit_per_minute > 0:
        middleware.append(RateLimitConfig(rate_limit=("minute", settings.rate_limit_per_minute),
                                          exclude=["/health", "/ready", "/metrics", "/schema"]).middleware)
    middleware.append(body_guard_middleware(settings.limits, error_response))
    app = Litestar(
        route_handlers=[SimulationController, ScoringController, RewardController, InfoController, OpenAIController,
                        LMSController],
        dependencies={"services": Provide(provide_services, sync_to_thread=False)},
        exception_handlers=EXCEPTION_HANDLERS,
        middleware=middleware,
        lifespan=[lifespan],
        request_max_body_size=settings.max_body_bytes,
        # The service logs through simhub.serving (configure_logging); Litestar's default config would
        # route every library's INFO records (paths of loaded models included) to stderr.
        logging_config=None,
        openapi_config=OpenAPIConfig(
            title="simhub", version=__version__,  # the package's: what /models and run files report
            description="Simulated students in tutoring dialogues: simulate and score; and KT-grounded learners "
                        "an agent tutor teaches over days (/lms).\n\n" + limits_description(settings.limits),
            path="/schema", render_plugins=[OfflineSwaggerPlugin("/schema")],
            **(_security() if settings.api_key else {}),
        ),
        debug=False,
    )
    apply_limits(app.openapi_schema, settings.limits)
    apply_request_examples(app.openapi_schema, {**REQUESTS, **LMS_REQUESTS})
    apply_response_examples(app.openapi_schema, RESPONSES)
    apply_lms_docs(app.openapi_schema)
    app.state.services = services
    app.state.settings = settings
    app.state.metrics = metrics
    app.state.lms = LMSRuns()
    return app


def app_from_env() -> Litestar:
    """ASGI factory: ``uvicorn --factory simhub.serving.app:app_from_env`` (profile from ``SIMHUB_PROFILE``)."""
    import os

    name = os.environ.get("SIMHUB_PROFILE", "demo")
    profile = load_profile(name)
    return create_app(ServiceSettings.load(profile), profile)
