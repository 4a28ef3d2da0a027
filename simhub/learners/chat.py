"""The chat models behind a learner's LLM parts (role-play turns, signal extraction): one small interface.

:class:`ChatModel` answers a batch of chat prompts with text, one outcome per prompt, and never raises
for one of them: a failed request is a :class:`ChatOutcome` with ``error`` set. Two implementations:

* :class:`EndpointChat`: any OpenAI-compatible endpoint of the profile as an
  :class:`~simhub.models.endpoint_lm.EndpointLM` (``endpoint_lm``), asked through
  :func:`~simhub.models.endpoint_lm.ask`, for JSON (``response_format: json_object``) when the caller
  wants it; requests run concurrently up to the endpoint's ``concurrency`` and are cached on disk by
  the shared client;
* :class:`LocalChat`: a local model through :func:`simhub.models.load_lm`. Without a schema there is
  no JSON mode (the caller's parser decides what to do with free text); with one
  (``schemas``, one per prompt) the model's decoding is held to it
  (``Sampling.json_schema``: xgrammar under transformers, structured outputs under vLLM).

:func:`chat_model` builds the one a profile entry names (``simulators:`` first, then ``tutors:``), for
every role that asks a model for JSON: role-players, extractors, judges, raters, graph generation.

``schemas`` (optional, one JSON schema or None per prompt) says what JSON each reply must be.
:class:`EndpointChat` keeps JSON mode for them: not every OpenAI-compatible endpoint takes a
``json_schema`` response format, and strict modes differ in the keywords they accept, so a
schema there would turn working endpoints into failing ones.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simhub.config import EndpointSettings, ModelRef, Profile, cache_dir
from simhub.errors import UnknownNameError
from simhub.models import LanguageModel, LoadOptions, Sampling, load_lm

if TYPE_CHECKING:
    from simhub.models.endpoint_lm import EndpointLM

Messages = Sequence[Mapping[str, str]]


@dataclasses.dataclass(frozen=True)
class ChatOutcome:
    text: str = ""
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


class ChatModel(ABC):
    """A model that turns chat prompts into text; ``describe`` goes into traces and cache keys."""

    @abstractmethod
    def describe(self) -> dict[str, Any]: ...

    @abstractmethod
    def chat(self, prompts: Sequence[Messages], *, json_mode: bool, temperature: float, max_tokens: int,
             seeds: Sequence[int | None], schemas: Sequence[Mapping[str, Any] | None] | None = None
             ) -> list[ChatOutcome]:
        """One outcome per prompt. ``schemas``: a JSON schema (or None) per prompt that the reply
        must match, where the model can be held to one (see the module docstring)."""


class EndpointChat(ChatModel):
    def __init__(self, settings: EndpointSettings, model: str, *, kind: str = "simulator", field: str = "endpoint",
                 default_cache: Path | None = None):
        from simhub.models.endpoints import key_names

        if settings.base_url:  # a bad key setting is refused before anything runs
            key_names(settings.base_url, settings.api_key_env, kind=kind, field=field)
        self.settings, self.model, self.kind, self.field, self.default_cache = settings, model, kind, field, default_cache
        self._lm: EndpointLM | None = None

    def describe(self) -> dict[str, Any]:
        return {"kind": "openai", "model": self.model, "base_url": self.settings.base_url}

    def endpoint(self) -> EndpointLM:
        """The endpoint as an :class:`~simhub.models.endpoint_lm.EndpointLM` over its shared client
        (built on first use; live requests, never the Batch API)."""
        if self._lm is None:
            from simhub.models.endpoints import endpoint_lm

            self._lm = endpoint_lm(self.settings, self.model, kind=self.kind,  # type: ignore[arg-type]
                                   field=self.field, default_cache=self.default_cache, batch=False)
        return self._lm

    def chat(self, prompts: Sequence[Messages], *, json_mode: bool, temperature: float, max_tokens: int,
             seeds: Sequence[int | None], schemas: Sequence[Mapping[str, Any] | None] | None = None
             ) -> list[ChatOutcome]:
        """JSON mode for ``json_mode`` or a schema; the schemas themselves are not sent (module docstring)."""
        from simhub.models.endpoint_lm import ask

        json_mode = json_mode or any(s is not None for s in schemas or ())

        lm = self.endpoint()
        fmt = {"type": "json_object"} if json_mode else None
        payloads = [lm.request([dict(m) for m in p], Sampling(temperature=temperature, max_tokens=max_tokens, seed=s),
                               response_format=fmt) for p, s in zip(prompts, seeds, strict=True)]
        return [ChatOutcome(text=a.text) if a.text is not None else ChatOutcome(error=a.cause)
                for a in ask(lm, payloads)]


class LocalChat(ChatModel):
    def __init__(self, ref: ModelRef, options: LoadOptions | None = None, *, name: str = "local"):
        self.ref, self.options, self.name = ref, options or LoadOptions(), name
        self.lm: LanguageModel | None = None

    def describe(self) -> dict[str, Any]:
        return {"kind": "model", "name": self.name, **self.ref.describe()}

    def chat(self, prompts: Sequence[Messages], *, json_mode: bool, temperature: float, max_tokens: int,
             seeds: Sequence[int | None], schemas: Sequence[Mapping[str, Any] | None] | None = None
             ) -> list[ChatOutcome]:
        """Each prompt alone, under its schema when it has one (``Sampling.json_schema``)."""
        per_prompt = list(schemas) if schemas is not None else [None] * len(prompts)
        try:
            if self.lm is None:
                self.lm = load_lm(self.ref, self.options)
            out = []
            # One call per seed keeps each prompt's sampling reproducible on its own.
            for prompt, seed, schema in zip(prompts, seeds, per_prompt, strict=True):
                result = self.lm.generate([list(prompt)], Sampling(temperature=temperature, max_tokens=max_tokens,
                                                                   seed=seed, json_schema=schema))
                out.append(ChatOutcome(text=result[0].generations[0].text))
            return out
        except Exception as exc:  # a broken model fails these turns, with the cause
            return [ChatOutcome(error=f"{type(exc).__name__}: {str(exc)[:200]}") for _ in prompts]


def model_names(profile: Profile | None) -> list[str]:
    """The names a role may use: the profile's ``models:``, then (deprecated there) its simulators and tutors."""
    if profile is None:
        return []
    return list(dict.fromkeys([*profile.models, *profile.simulators, *profile.tutors]))


#: The (profile, name) pairs whose deprecation note was printed (once each per process).
_NOTED: set[tuple[str | None, str]] = set()


def model_sections(profile: Profile, names: Sequence[str]) -> dict[str, list[str]]:
    """``names`` split by the profile section that holds each (``models``, ``simulators``, ``tutors``;
    ``models:`` first), for provisioning only those; a name no section holds is left out (the caller's
    :func:`chat_model` reports it)."""
    out: dict[str, list[str]] = {"models": [], "simulators": [], "tutors": []}
    for name in dict.fromkeys(names):
        section = next((sec for sec in out if name in getattr(profile, sec)), None)
        if section is not None:
            out[section].append(name)
    return out


def chat_model(name: str, profile: Profile | None, options: LoadOptions | None = None, *, field: str) -> ChatModel:
    """The chat model of the profile entry ``name``: a ``models:`` entry, or (deprecated: say it once
    per name, on stderr) a ``simulators:`` then ``tutors:`` entry."""
    if profile is not None:
        for section, entries in (("models", profile.models), ("simulators", profile.simulators),
                                 ("tutors", profile.tutors)):
            config = entries.get(name)
            if config is None:
                continue
            if section != "models" and (profile.source, name) not in _NOTED:
                import sys

                _NOTED.add((profile.source, name))
                print(f"simhub: note: --{field.replace('_', '-')} {name} names a {section}: entry; name the models "
                      f"a role uses under the profile's models: section (a {section}: entry is read there for now)",
                      file=sys.stderr)
            if config.kind == "openai":
                return EndpointChat(config.endpoint, config.model, kind="tutor" if section == "tutors" else "simulator",
                                    field=f"{section}.{name}.endpoint", default_cache=cache_dir("tutor-bench-endpoint"))
            return LocalChat(config.ref(), options, name=name)
    raise UnknownNameError("model", name, model_names(profile), field=field)


# ------------------------------------------------------------------------------------------ JSON answers


def find_json_object(text: str) -> tuple[dict[str, Any] | None, str | None]:
    """The JSON object in a model's answer, or why there is none: the one finder of every role that asks
    for JSON. Models sometimes wrap JSON in prose or a fenced block even in JSON mode, so the outermost
    ``{...}`` is read when there is one, else the whole text. The flags are ``not JSON`` and
    ``not a JSON object``.

    >>> find_json_object('Sure: {"score": 7}')
    ({'score': 7}, None)
    >>> find_json_object("[7]")
    (None, 'not a JSON object')
    """
    import json

    start, end = text.find("{"), text.rfind("}")
    try:
        data = json.loads(text[start:end + 1] if 0 <= start < end else text)
    except ValueError:
        return None, "not JSON"
    if not isinstance(data, dict):
        return None, "not a JSON object"
    return data, None


@dataclasses.dataclass(frozen=True)
class JsonAnswer:
    """One prompt's answer: the JSON object, or ``flag`` (the answer came but is unusable), or ``error``
    (no answer: the model or endpoint failed; a caller does not cache it, so a later run asks again)."""

    value: dict[str, Any] | None = None
    flag: str | None = None
    error: str | None = None
    text: str = ""


def ask_json(model: ChatModel, prompts: Sequence[Messages], *, temperature: float, max_tokens: int,
             seeds: Sequence[int | None] | None = None,
             schemas: Sequence[Mapping[str, Any] | None] | None = None) -> list[JsonAnswer]:
    """Ask ``model`` for a JSON object per prompt (JSON mode; a local model held to its schema when given)
    and find it in each answer (:func:`find_json_object`). Never raises for a prompt: a model that raises
    fails the whole batch, each answer with the cause as ``error``."""
    try:
        outcomes = model.chat(prompts, json_mode=True, temperature=temperature, max_tokens=max_tokens,
                              seeds=list(seeds) if seeds is not None else [0] * len(prompts), schemas=schemas)
    except Exception as exc:  # a broken model fails these prompts, with the cause; the run goes on
        cause = f"{type(exc).__name__}: {str(exc)[:200]}"
        return [JsonAnswer(error=cause) for _ in prompts]
    out = []
    for o in outcomes:
        if not o.ok:
            out.append(JsonAnswer(error=o.error))
            continue
        value, flag = find_json_object(o.text)
        out.append(JsonAnswer(value=value, flag=flag, text=o.text))
    return out
