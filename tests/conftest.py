"""Shared fixtures. Tests never touch the network: the Hub is the local one in simhub.testing."""

from __future__ import annotations

import os
import tempfile

# Isolate every Hugging Face cache from the user's before any HF library is imported.
_HF_HOME = tempfile.mkdtemp(prefix="simhub-test-hf-")
os.environ["HF_HOME"] = _HF_HOME
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


import pytest  # noqa: E402


@pytest.fixture(scope="session")
def tiny_kit(tmp_path_factory):
    """The tiny model kit (tokenizer, causal LM, classifier), built once per test session."""
    from simhub.testing.tiny import build_kit

    return build_kit(tmp_path_factory.mktemp("tiny-kit"))


@pytest.fixture(scope="session")
def sample_corpus():
    """The bundled sample corpus, loaded with its annotations."""
    from simhub.data.sample import load_sample_corpus

    return load_sample_corpus()


@pytest.fixture(scope="session")
def simhub_home(tmp_path_factory, tiny_kit):
    """A SIMHUB_HOME whose tiny kit is the session's (so profiles do not rebuild it)."""
    import shutil

    home = tmp_path_factory.mktemp("simhub-home")
    shutil.copytree(tiny_kit["llama"].parent, home / "tiny")
    with pytest.MonkeyPatch.context() as patch:  # restored when the session ends
        patch.setenv("SIMHUB_HOME", str(home))
        yield home


# --- Local Hugging Face Hub -------------------------------------------------------------------------------------

# Any token works against the local Hub (it is started with tokens=None); a fixed one keeps requests authenticated.
LOCAL_HUB_TOKEN = "test-token"


@pytest.fixture(scope="session")
def local_hub(tmp_path_factory):
    """A LocalHub for the whole session, with huggingface_hub/transformers/peft pointed at it.

    HF_ENDPOINT and HF_TOKEN are set so code that relies on the environment (push_to_hub, subprocesses) talks
    to it authenticated; pass token=False to act anonymously. Everything is restored at the end.
    """
    from simhub.testing.hub_server import LocalHub, point_hf_at

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
