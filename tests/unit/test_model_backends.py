"""The loader's backend registry: lazy "module:function" entries, a plugin backend through
register_backend, one shared state per backend, and a clear error for an unknown one."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from simhub.errors import ConfigError
from simhub.models import GenerationResult, LanguageModel, LoadOptions, Prompt, Sampling, load_lm, loader, unload_models
from simhub.models.refs import ResolvedRef


class EchoLM(LanguageModel):
    def __init__(self, ref: ResolvedRef):
        self.name = f"echo {ref.base}"

    def generate(self, prompts: Sequence[Prompt], sampling: Sampling, *, progress: bool = False) -> list[GenerationResult]:
        return [GenerationResult([]) for _ in prompts]


class Resource:
    closed = False

    def close(self) -> None:
        self.closed = True


LOADS: list[tuple[ResolvedRef, dict]] = []


def load_echo(ref: ResolvedRef, options: LoadOptions, shared: dict) -> EchoLM:
    LOADS.append((ref, shared))
    shared.setdefault("resource", Resource())
    return EchoLM(ref)


@pytest.fixture
def echo_backend():
    LOADS.clear()
    loader.register_backend("echo", f"{__name__}:load_echo")
    yield
    unload_models()
    with loader._LOCK:
        loader._REGISTRY.pop("echo", None)
        loader._LOADERS.pop("echo", None)
        loader._SHARED.pop("echo", None)


def test_the_built_in_backends_are_lazy_registry_lines():
    from simhub.config import BUILTIN_BACKENDS

    assert loader.backend_names()[:2] == list(BUILTIN_BACKENDS) == ["transformers", "vllm"]
    assert loader._REGISTRY["transformers"] == "simhub.models.transformers:load_backend"
    assert loader._REGISTRY["vllm"] == "simhub.models.vllm:load_backend"


def test_a_registered_backend_loads_once_and_shares_its_state(echo_backend, tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    model = load_lm(str(first), LoadOptions(backend="echo"))
    assert isinstance(model, EchoLM) and model.name == f"echo {first}"
    assert load_lm(str(first), LoadOptions(backend="echo")) is model  # loaded once
    load_lm(str(second), LoadOptions(backend="echo"))
    assert [ref.base for ref, _ in LOADS] == [str(first), str(second)]
    assert LOADS[0][1] is LOADS[1][1]  # one shared state for the backend
    resource = LOADS[0][1]["resource"]
    unload_models()
    assert resource.closed and LOADS[0][1] == {}


def test_a_backend_can_be_registered_as_a_function(echo_backend, tmp_path):
    loader.register_backend("echo", load_echo)
    assert loader.backend_loader("echo") is load_echo
    assert isinstance(load_lm(str(tmp_path), LoadOptions(backend="echo")), EchoLM)


def test_an_unknown_backend_names_the_known_ones(tmp_path):
    with pytest.raises(ConfigError) as err:
        load_lm(str(tmp_path), LoadOptions(backend="onnx"))
    assert err.value.field == "backend"
    assert "transformers" in str(err.value) and "vllm" in str(err.value)
