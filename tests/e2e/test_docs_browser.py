"""The service's docs page in a real browser, with the network cut off.

A live service (no models: the docs need none) is opened in headless Chromium; every request that
is not to that service is aborted and recorded. The page must load only from the service (Swagger
UI is vendored in the package), render without errors, and list the operations. Needs Debian's
``chromium`` and the playwright package (not its downloaded browsers).
"""

from __future__ import annotations

import json
import threading
import time

import pytest

from tests.e2e.browser import require_browser

pytestmark = pytest.mark.browser
require_browser()  # skips the module without Chromium and playwright
pytest.importorskip("litestar", reason="the service needs simhub[serve]")
uvicorn = pytest.importorskip("uvicorn", reason="the service needs simhub[serve]")

from simhub.config import Profile  # noqa: E402
from simhub.serving.app import create_app  # noqa: E402
from simhub.serving.examples import REQUESTS  # noqa: E402
from simhub.serving.settings import ServiceSettings  # noqa: E402
from tests.doubles.server_process import free_port  # noqa: E402

OPERATIONS = ["simulate", "score", "listModels", "health", "ready", "createChatCompletion", "listOpenAIModels"]


@pytest.fixture(scope="module")
def service():
    """A service with no models on a free loopback port, in a thread of this process, with an API key
    (the docs stay public)."""
    profile = Profile(name="docs")
    app = create_app(ServiceSettings.load(profile, api_key="docs-test-key", preload=False), profile)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.time() + 30
    while not server.started and time.time() < deadline:
        time.sleep(0.05)
    assert server.started, "the service did not start"
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


@pytest.mark.parametrize("path", ["/schema", "/schema/swagger"])
def test_docs_render_offline_and_list_the_operations(service, browser, path):
    blocked: list[str] = []
    errors: list[str] = []
    loaded: list[str] = []
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()

    def route(route):
        if route.request.url.startswith(service + "/"):
            loaded.append(route.request.url.removeprefix(service))
            route.continue_()
        else:
            blocked.append(route.request.url)
            route.abort()

    page.route("**/*", route)
    page.on("console", lambda msg: errors.append(f"console: {msg.text}") if msg.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(f"page error: {exc}"))
    try:
        response = page.goto(service + path, wait_until="load")
        assert response is not None and response.ok
        page.wait_for_selector(".opblock", timeout=30_000)
        ids = page.eval_on_selector_all(".opblock", "nodes => nodes.map(n => n.id)")
        summaries = page.locator(".opblock-summary-path").all_inner_texts()
        for operation in OPERATIONS:
            assert any(i.endswith(f"-{operation}") for i in ids), (operation, ids)
        assert {"/simulate", "/score", "/v1/chat/completions", "/ready"} <= {s.replace("\u200b", "").strip() for s in summaries}
        assert page.locator(".info .title").inner_text().startswith("simhub")
        assert not blocked, f"the docs page asked the network for {blocked}"
        assert not errors, errors
        assert "/schema/assets/swagger-ui-bundle.js" in loaded and "/schema/assets/swagger-ui.css" in loaded
    finally:
        context.close()


def test_try_it_out_is_filled_with_the_named_examples(service, browser):
    """Each POST's "Try it out" body is its first documented example, and the others can be chosen
    by summary (not a sample generated from the schema, whose seed and metric names were invalid)."""
    context = browser.new_context(viewport={"width": 1920, "height": 1200})
    page = context.new_page()
    try:
        page.goto(service + "/schema", wait_until="load")
        page.wait_for_selector(".opblock", timeout=30_000)
        for tag, operation in (("simulation", "simulate"), ("scoring", "score"), ("openai", "createChatCompletion")):
            block = page.locator(f"#operations-{tag}-{operation}")
            block.locator(".opblock-summary").click()
            block.locator("button.try-out__btn").click()
            body = block.locator("textarea.body-param__text")
            body.wait_for(timeout=10_000)
            assert json.loads(body.input_value()) == REQUESTS[operation][0].value, operation
            choices = block.locator(".opblock-section-request-body select").all_inner_texts()
            assert all(example.summary in "".join(choices) for example in REQUESTS[operation]), (operation, choices)
    finally:
        context.close()
