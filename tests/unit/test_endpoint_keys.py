"""Which key each endpoint gets (a security rule): a profile's ``api_key_env`` is the only key an
endpoint gets; a kind's default variables go only to that kind's default host; ``none`` and loopback
servers get no key; any other host must name its variable. Checked on the Authorization header a
local echo server receives, for simulators, baselines, tutors, judges, annotators and learners alike."""

from __future__ import annotations

import msgspec
import pytest

from simhub.annotation import annotator_endpoint
from simhub.config import load_profile
from simhub.errors import ConfigError
from simhub.metrics import ScoreItem
from simhub.models import LoadOptions, Sampling
from simhub.models.endpoints import KIND_KEY_ENVS, key_names
from simhub.models.openai import OpenAIClient
from simhub.scoring import Scorer
from simhub.simulation import Target, build_simulator
from simhub.simulation.tutor import TutorRequest, build_tutor
from tests.examples import DIVIDING_FRACTIONS

#: Every variable a consumer could wrongly fall back to, all set at once in every case.
SECRETS = {"OPENAI_API_KEY": "sk-openai-user", "SIMHUB_JUDGE_API_KEY": "sk-judge-kind",
           "SIMHUB_BASELINE_API_KEY": "sk-baseline-kind", "SIMHUB_ANNOTATOR_API_KEY": "sk-annotator-kind",
           "MY_KEY": "k-mine"}

CONSUMERS = ("simulator", "baseline", "tutor", "judge", "annotator", "annotation", "learner")


def _endpoint_yaml(base_url: str, api_key_env: str | None) -> str:
    key = f", api_key_env: {api_key_env}" if api_key_env is not None else ""
    return f"{{base_url: '{base_url}', cache: false, max_retries: 0{key}}}"


def _profile(tmp_path, base_url: str, api_key_env: str | None):
    endpoint = _endpoint_yaml(base_url, api_key_env)
    path = tmp_path / "keys.yaml"
    path.write_text(
        "name: keys\n"
        f"simulators:\n  hosted: {{kind: openai, model: m, endpoint: {endpoint}}}\n"
        f"tutors:\n  hosted-tutor: {{kind: openai, model: m, endpoint: {endpoint}}}\n"
        f"baselines: {{endpoint: {endpoint}}}\n"
        f"scoring:\n  metrics:\n    judge: {{kind: openai, model: gpt-4.1, endpoint: {endpoint}}}\n")
    return load_profile(path)


def _send(consumer: str, tmp_path, base_url: str, api_key_env: str | None) -> None:
    """One request from ``consumer`` configured with ``api_key_env`` (None: not named)."""
    if consumer == "annotator":  # a caller's own client on the labeller's endpoint settings
        named = "auto" if api_key_env is None else api_key_env
        config = annotator_endpoint("m", base_url, api_key_env=named, cache_dir=tmp_path / "a", max_retries=0)
        OpenAIClient(config).complete([{"model": "m", "messages": [{"role": "user", "content": "hi"}]}])
        return
    if consumer == "annotation":  # the labeller's run, as `simhub annotate` makes it (annotator_lm)
        from simhub.annotation import AnnotationSettings, annotate_splits, annotator_endpoint_settings, annotator_lm

        named = "auto" if api_key_env is None else api_key_env
        endpoint = annotator_endpoint_settings(base_url, api_key_env=named, cache_dir=tmp_path / "a", max_retries=0)
        settings = AnnotationSettings(labels=("acts",), max_tokens=8, hash_ids=True)
        annotate_splits({"test": [DIVIDING_FRACTIONS]}, tmp_path / "out", annotator_lm("m", endpoint, settings),
                        settings)
        return
    if consumer == "learner":  # a learner's chat model (role-play turns, signal extraction)
        from simhub.config import EndpointSettings
        from simhub.learners.chat import EndpointChat

        settings = EndpointSettings(base_url=base_url, api_key_env=api_key_env, cache=False, max_retries=0)
        EndpointChat(settings, "m").chat([[{"role": "user", "content": "hi"}]], json_mode=True, temperature=0.0,
                                          max_tokens=8, seeds=[None])
        return
    profile = _profile(tmp_path, base_url, api_key_env)
    target = Target(DIVIDING_FRACTIONS, 3)
    if consumer == "simulator":
        build_simulator("hosted", profile).simulate([target], Sampling(max_tokens=8))
    elif consumer == "baseline":
        build_simulator("baseline:zero-shot", profile).simulate([target], Sampling(max_tokens=8))
    elif consumer == "tutor":
        tutor = build_tutor("hosted-tutor", profile, LoadOptions())
        tutor.respond([TutorRequest(msgspec.structs.replace(DIVIDING_FRACTIONS, turns=DIVIDING_FRACTIONS.turns[:2]))], Sampling())
    else:
        Scorer(profile.scoring).score([ScoreItem(DIVIDING_FRACTIONS, 3, "8/5")], ["correctness"])


@pytest.fixture
def secrets(monkeypatch):
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    return SECRETS


@pytest.mark.parametrize("consumer", CONSUMERS)
def test_the_profiles_variable_is_the_only_key_sent(consumer, fake_openai, tmp_path, secrets):
    _send(consumer, tmp_path, fake_openai.base_url, "MY_KEY")
    requests = fake_openai.chat_requests()
    assert requests and {r.authorization for r in requests} == {"Bearer k-mine"}


@pytest.mark.parametrize("consumer", CONSUMERS)
def test_none_sends_no_key(consumer, fake_openai, tmp_path, secrets):
    _send(consumer, tmp_path, fake_openai.base_url, "none")
    requests = fake_openai.chat_requests()
    assert requests and {r.authorization for r in requests} == {None}


@pytest.mark.parametrize("consumer", CONSUMERS)
def test_a_loopback_server_gets_no_default_key(consumer, fake_openai, tmp_path, secrets):
    _send(consumer, tmp_path, fake_openai.base_url, None)
    requests = fake_openai.chat_requests()
    assert requests and {r.authorization for r in requests} == {None}


@pytest.mark.parametrize("consumer", CONSUMERS)
def test_a_named_variable_that_is_unset_is_an_error_not_a_fallback(consumer, fake_openai, tmp_path, secrets,
                                                                   monkeypatch):
    monkeypatch.delenv("MY_KEY")
    try:
        _send(consumer, tmp_path, fake_openai.base_url, "MY_KEY")
    except ConfigError as exc:  # raised by the direct client; consumers record it per item instead
        assert "MY_KEY" in str(exc) and "OPENAI_API_KEY" not in str(exc)
    assert fake_openai.chat_requests() == []


@pytest.mark.parametrize("consumer", CONSUMERS)
def test_a_third_party_host_must_name_its_variable(consumer, tmp_path, secrets):
    # Refused before anything is sent (the host does not exist; a request would fail differently).
    with pytest.raises(ConfigError, match=r"llm\.example\.com is not api\.openai\.com") as info:
        _send(consumer, tmp_path, "https://llm.example.com/v1", None)
    assert info.value.field.endswith("api_key_env")
    assert not any(value in str(info.value) for value in SECRETS.values())


@pytest.mark.parametrize("kind", ["simulator", "baseline", "tutor", "judge", "annotator"])
def test_the_kinds_variables_apply_to_the_default_host_only(kind):
    assert key_names("https://api.openai.com/v1", None, kind=kind) == KIND_KEY_ENVS[kind]
    assert key_names("https://api.openai.com/v1", "MY_KEY", kind=kind) == ("MY_KEY",)
    assert key_names("https://api.openai.com/v1", "none", kind=kind) == ()
    for local in ("http://localhost:8000/v1", "http://127.0.0.1:8000/v1", "http://[::1]:8000/v1"):
        assert key_names(local, None, kind=kind) == ()
    # A look-alike host is not the default host.
    with pytest.raises(ConfigError):
        key_names("https://api.openai.com.evil.example/v1", None, kind=kind)


def test_kind_defaults_read_their_own_variable_first():
    assert KIND_KEY_ENVS["judge"] == ("SIMHUB_JUDGE_API_KEY", "OPENAI_API_KEY")
    assert KIND_KEY_ENVS["baseline"] == ("SIMHUB_BASELINE_API_KEY", "OPENAI_API_KEY")
    assert KIND_KEY_ENVS["annotator"] == ("SIMHUB_ANNOTATOR_API_KEY", "OPENAI_API_KEY")
    assert KIND_KEY_ENVS["simulator"] == KIND_KEY_ENVS["tutor"] == ("OPENAI_API_KEY",)


def test_environment_overrides_pair_the_url_with_the_kinds_key(monkeypatch, fake_openai, tmp_path):
    """SIMHUB_BASELINE_BASE_URL moves the baselines; only SIMHUB_BASELINE_API_KEY follows them."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-user")
    monkeypatch.setenv("SIMHUB_BASELINE_BASE_URL", fake_openai.base_url)
    target = Target(DIVIDING_FRACTIONS, 3)
    build_simulator("baseline:zero-shot", load_profile("demo")).simulate([target], Sampling(max_tokens=8))
    monkeypatch.setenv("SIMHUB_BASELINE_API_KEY", "sk-baseline-kind")
    build_simulator("baseline:zero-shot", load_profile("demo")).simulate([target], Sampling(max_tokens=8, seed=1))
    assert [r.authorization for r in fake_openai.chat_requests()] == [None, "Bearer sk-baseline-kind"]
