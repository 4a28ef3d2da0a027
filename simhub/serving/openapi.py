"""The OpenAPI side of the app: docs that work offline, and the configured limits in the schema.

The docs page is Swagger UI, served from files vendored in the package (``simhub/resources/docs``,
Apache-2.0, licence beside them), so it renders on a machine with no network: the page loads
nothing from anywhere but this service.

The request structs carry only the constraints that never change; the service's limits are
configured (profile, environment), so :func:`apply_limits` writes the configured values into the
generated schema (``maxItems``, ``maximum``, descriptions) once, when the app is built.

Each request body and success answer gets named examples (:func:`apply_request_examples`,
:func:`apply_response_examples`, from
:mod:`simhub.serving.examples`): Litestar's ``Body(examples=...)`` writes only the values, as a JSON
Schema ``examples`` list, which Swagger UI offers no choice between; named OpenAPI examples are
listed by summary and fill "Try it out".
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from litestar import Response, get
from litestar.openapi.plugins import SwaggerRenderPlugin
from litestar.openapi.spec import Example, OpenAPIMediaType, OpenAPIResponse, OpenAPIType, Operation, Schema

from simhub.config import RESOURCES, Limits

if TYPE_CHECKING:
    from litestar import Request, Router
    from litestar.openapi.spec import OpenAPI

DOCS_DIR = RESOURCES / "docs"
#: The vendored files the docs page may load, by name (nothing else under the folder is served).
ASSETS = {
    "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
    "swagger-ui.css": "text/css; charset=utf-8",
    "favicon-32x32.png": "image/png",
    "LICENSE": "text/plain; charset=utf-8",
    "NOTICE": "text/plain; charset=utf-8",
    "swagger-ui-bundle.js.LICENSE.txt": "text/plain; charset=utf-8",
}


class OfflineSwaggerPlugin(SwaggerRenderPlugin):
    """Swagger UI from the package's own copy, at ``{schema path}/swagger`` (and the schema path itself)."""

    def __init__(self, schema_path: str = "/schema", **kwargs: Any):
        base = f"{schema_path.rstrip('/')}/assets"
        super().__init__(js_url=f"{base}/swagger-ui-bundle.js", css_url=f"{base}/swagger-ui.css",
                         favicon=f"<link rel='icon' type='image/png' href='{base}/favicon-32x32.png'>", **kwargs)

    def render(self, request: Request, openapi_schema: dict[str, Any]) -> bytes:
        """Litestar's page, without the standalone preset (a top bar that loads specs from URLs) and
        with the online validator badge off (it would call a public validator)."""
        schema = self.render_json(request, openapi_schema)
        return b"".join([
            b"<!DOCTYPE html><html><head><title>", openapi_schema["info"]["title"].encode(), b" API</title>",
            self.favicon.encode(), b'<meta charset="utf-8"/>',
            b'<meta name="viewport" content="width=device-width, initial-scale=1">',
            f'<link href="{self.css_url}" rel="stylesheet"><script src="{self.js_url}"></script>'.encode(),
            self.style.encode(), b"</head><body><div id='swagger-container'></div><script type='text/javascript'>",
            b"window.ui = SwaggerUIBundle({spec: ", schema,
            b", dom_id: '#swagger-container', deepLinking: true, validatorUrl: null,",
            b" presets: [SwaggerUIBundle.presets.apis], layout: 'BaseLayout'});</script></body></html>",
        ])

    def receive_router(self, router: Router) -> None:
        super().receive_router(router)

        @get("/assets/{name:str}", include_in_schema=False, sync_to_thread=False)
        def asset(name: str) -> Response[bytes]:
            media_type = ASSETS.get(name)
            path = DOCS_DIR / name
            if media_type is None or not path.is_file():
                return Response(b"not found", status_code=404, media_type="text/plain")
            return Response(path.read_bytes(), media_type=media_type, headers={"Cache-Control": "public, max-age=86400"})

        router.register(asset)


@dataclass
class StreamingOperation(Operation):
    """An operation whose 200 may also be a stream of server-sent events (``stream: true``)."""

    def __post_init__(self) -> None:
        ok = (self.responses or {}).get("200")
        if isinstance(ok, OpenAPIResponse):
            ok.description = "a chat completion, or with stream: true server-sent events (chat.completion.chunk objects, then [DONE])"
            ok.content = {**(ok.content or {}), "text/event-stream": OpenAPIMediaType(schema=Schema(
                type=OpenAPIType.STRING,
                description="data: {chat.completion.chunk} lines, a final chunk with finish_reason, then data: [DONE]"))}


def _value_schema(schema: Any) -> Any:
    """The non-null branch of an optional field's schema (``X | None`` is ``oneOf: [X, null]``)."""
    for branch in schema.one_of or ():
        if getattr(branch, "type", None) != OpenAPIType.NULL:
            return branch
    return schema


def _note(schema: Any, text: str) -> None:
    schema.description = f"{schema.description} ({text})" if schema.description else text.capitalize()


def apply_limits(openapi: OpenAPI, limits: Limits) -> None:
    """Write the configured ``limits`` into ``openapi`` (the requests' caps, as enforced with a 400)."""
    schemas = openapi.components.schemas

    def field(struct: str, name: str) -> Any:
        return _value_schema(schemas[struct].properties[name])

    caps = [
        (field("ScoreRequest", "items"), "max_items", limits.max_items, "items per request"),
        (field("SimulateRequest", "dialogues"), "max_items", limits.max_dialogues, "dialogues per request"),
        (field("Dialogue", "turns"), "max_items", limits.max_turns, "turns per dialogue"),
        (field("SamplingParams", "n"), "maximum", limits.max_n, "candidates per dialogue"),
        (field("SamplingParams", "max_tokens"), "maximum", limits.max_tokens, "new tokens"),
        (field("ChatCompletionRequest", "n"), "maximum", limits.max_n, "choices"),
        (field("ChatCompletionRequest", "max_tokens"), "maximum", limits.max_tokens, "new tokens"),
        (field("ChatCompletionRequest", "max_completion_tokens"), "maximum", limits.max_tokens, "new tokens"),
        (field("ChatCompletionRequest", "messages"), "max_items", limits.max_turns + 2,
         "messages: the turns of a dialogue and up to two system messages"),
    ]
    for schema, attribute, value, what in caps:
        setattr(schema, attribute, value)
        _note(schema, f"at most {value} {what}: a configured limit")
    _note(field("ScoreItemIn", "candidate"),
          f"longer than {limits.max_candidate_chars} characters: an error of this item; scoring cuts it anyway")
    _note(field("Dialogue", "turns"), "in /score, a dialogue over the limit is an error of its item")


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def apply_request_examples(openapi: OpenAPI, requests: Mapping[str, Sequence[Example]]) -> None:
    """Give the JSON request body of each operation in ``requests`` (by operation id) its named
    examples, in order (the first fills "Try it out")."""
    found = set()
    for item in (openapi.paths or {}).values():
        for method in ("get", "put", "post", "delete", "patch"):
            operation = getattr(item, method, None)
            if operation is None or operation.operation_id not in requests or operation.request_body is None:
                continue
            media = operation.request_body.content["application/json"]
            media.examples = {_slug(e.summary or f"example {i}"): e
                              for i, e in enumerate(requests[operation.operation_id], 1)}
            found.add(operation.operation_id)
    missing = set(requests) - found
    if missing:
        raise ValueError(f"request examples for operations without a JSON body: {', '.join(sorted(missing))}")


def apply_response_examples(openapi: OpenAPI, responses: Mapping[str, Sequence[Example]]) -> None:
    """Give the JSON success answer of each operation in ``responses`` (by operation id) its named
    examples: real answers, where the docs page would otherwise make one up from the schema
    (``additionalProp1`` for every map)."""
    found = set()
    for item in (openapi.paths or {}).values():
        for method in ("get", "put", "post", "delete", "patch"):
            operation = getattr(item, method, None)
            if operation is None or operation.operation_id not in responses:
                continue
            for status, response in (operation.responses or {}).items():
                if str(status).startswith("2") and isinstance(response, OpenAPIResponse) and response.content:
                    response.content["application/json"].examples = {
                        _slug(e.summary or f"example {i}"): e for i, e in enumerate(responses[operation.operation_id], 1)}
                    found.add(operation.operation_id)
    missing = set(responses) - found
    if missing:
        raise ValueError(f"response examples for operations without a JSON success answer: {', '.join(sorted(missing))}")


def limits_description(limits: Limits) -> str:
    """The API-wide limits, for the schema's description (the same set the command line applies)."""
    return (f"Limits (configured: profile serving.limits, SIMHUB_* environment): bodies up to {limits.max_body_bytes} "
            f"bytes (else 413), JSON nested at most {limits.max_json_depth} levels, at most {limits.max_request_chars} "
            f"characters of dialogue text per request, {limits.max_items} items per /score request, "
            f"{limits.max_dialogues} dialogues per /simulate request, {limits.max_turns} turns per dialogue, "
            f"{limits.max_n} candidates and {limits.max_tokens} new tokens per dialogue; a candidate longer than "
            f"{limits.max_candidate_chars} characters is an error of its item.")
