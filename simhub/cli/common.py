"""What the command modules share: loading and provisioning a profile, reading dialogues."""

from __future__ import annotations

import argparse

from simhub.config import Profile

#: The command ran, but nothing it was asked to do succeeded (every turn failed, say): worth a
#: non-zero status for scripts, and distinct from bad input (2).
EXIT_FAILED = 1


def add_profile(p: argparse.ArgumentParser, default: str = "demo") -> None:
    p.add_argument("--profile", default=default, help=f"profile name or YAML path (default: {default})")


def add_executor(p: argparse.ArgumentParser, unit: str = "batches") -> None:
    """``--executor``, ``--ray-address`` and ``--actors`` (see :func:`job_executor`)."""
    p.add_argument("--executor", help=f"where the {unit} run: local (this process) or ray (a Ray cluster: "
                   "--ray-address, else RAY_ADDRESS, else a local instance; docs/guides/scale-out.md) (default: the "
                   "profile's executor: section, local)")
    p.add_argument("--ray-address", metavar="HOST:PORT", help="--executor ray: the cluster's address")
    p.add_argument("--actors", type=int, help="--executor ray: actors (default: the CPUs)")


def job_executor(args: argparse.Namespace, profile: Profile | None):
    """The executor :func:`add_executor`'s flags name, with ``profile``'s ``executor:`` section for what
    they leave unset; checked (Ray installed, the cluster answering) when it is built, so build it
    before any model. Close it when the job ends (``with closing(job_executor(...))``)."""
    from simhub.executors import executor_from

    return executor_from(getattr(args, "executor", None), address=getattr(args, "ray_address", None),
                         actors=getattr(args, "actors", None), progress=True,
                         defaults=profile.executor if profile is not None else None)


def profile_for(args: argparse.Namespace, *, metrics: list[str] | None = None, simulators: list[str] | None = None,
                tutors: list[str] | None = None, loaded: Profile | None = None, models: list[str] | None = None
                ) -> Profile:
    """The command's profile, with the models it needs (and only those) built: its ``metrics``,
    ``simulators``, ``tutors`` and named ``models``. ``loaded``: the profile ``args.profile`` names,
    when the command has read it already."""
    from simhub.config import load_profile
    from simhub.provision import provision_profile, restrict

    profile = loaded if loaded is not None else load_profile(args.profile)
    if simulators:  # unknown names are reported against the whole profile, before it is narrowed
        from simhub.errors import UnknownNameError
        from simhub.simulation import simulator_names

        known = simulator_names(profile)
        for name in simulators:
            if name not in known:
                raise UnknownNameError("simulator", name, known, field="simulator")
    return provision_profile(restrict(profile, metrics=metrics, simulators=simulators, tutors=tutors, models=models))


def metric_list(text: str | None) -> list[str] | None:
    if not text:
        return None
    from simhub.metrics import check_metric_names

    return check_metric_names([m.strip() for m in text.split(",") if m.strip()], "metrics")


def metric_models(metrics: list[str] | None) -> list[str] | None:
    """:func:`simhub.provision.metric_models`, imported when called (the command line starts light)."""
    from simhub.provision import metric_models as entries

    return entries(metrics)


def causes(errors) -> str:
    """The commonest failure causes, with their counts, for a summary line."""
    from collections import Counter

    counts = Counter(e for e in errors if e)
    shown = "; ".join(f"{cause} ({n})" for cause, n in counts.most_common(3))
    return shown + ("; ..." if len(counts) > 3 else "")


def all_failed(what: str, total: int, errors) -> int:
    """Say on stderr that every one of ``total`` things failed, with the causes, and return the exit status."""
    import sys

    print(f"simhub: error: every one of the {total} {what} failed: {causes(errors)}", file=sys.stderr)
    return EXIT_FAILED


def check_output(path: str | None, *, folder: bool, make_folders: bool = True, field: str = "output") -> None:
    """Refuse an output path that cannot be written, before the command builds, trains or calls anything.

    ``folder``: the path is a folder the command fills (else a file). ``make_folders``: missing
    folders on the way may be created; when False the enclosing folder must exist, so a typo in a
    path is an error rather than a new tree of folders.
    """
    import os
    from pathlib import Path

    from simhub.errors import ConfigError

    if path is None:
        return
    target = Path(path)
    if folder and target.exists() and not target.is_dir():
        raise ConfigError(f"{field}: {target} is a file, not a folder", field=field)
    if not folder and target.is_dir():
        raise ConfigError(f"{field}: {target} is a folder, not a file", field=field)
    enclosing = target if folder else target.parent
    if not make_folders and not enclosing.is_dir():
        raise ConfigError(f"{field}: folder {enclosing} does not exist (create it first)", field=field)
    existing = enclosing.absolute()
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise ConfigError(f"{field}: cannot write {target}: {existing} is a file, not a folder", field=field)
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"{field}: cannot write {target}: {existing} is not writable", field=field)


def data_file(path: str, *, flag: str = "--data", split: str = "test") -> str:
    """The dialogue file ``path`` names: the file itself, or, for a folder of ``train``/``val``/
    ``test.jsonl`` (what ``simhub data convert-eedi`` writes, and what ``annotate`` reads), its
    ``split`` file, with a note on stderr saying so. A folder without that file is an error naming
    what it holds."""
    import sys
    from pathlib import Path

    from simhub.errors import DataError

    folder = Path(path)
    if not folder.is_dir():
        return path
    chosen = folder / f"{split}.jsonl"
    if not chosen.is_file():
        inside = sorted(p.name for p in folder.glob("*.jsonl"))
        raise DataError(f"{flag} {path}: a folder without {split}.jsonl"
                        + (f" (it holds {', '.join(inside[:5])}: give one of them)" if inside else " (no .jsonl file in it)"),
                        file=path, field=flag.lstrip("-"))
    print(f"{flag} {path} is a folder: using its {split} split, {chosen}", file=sys.stderr)
    return str(chosen)


def read_dialogues(path: str, field: str = "data") -> list:
    """The dialogues of a JSONL file, read and checked now (before any model is built); an empty
    file is an error, since no command has anything to do with it."""
    from simhub.errors import DataError, SchemaError
    from simhub.metrics import ScoreItem
    from simhub.schema import read_jsonl

    try:
        dialogues = read_jsonl(path)
    except SchemaError:
        if _first_record_is(path, ScoreItem):
            raise DataError(f"{field}: {path} holds score items ({{dialogue, turn_index, candidate}}), not "
                            "dialogues; give the dialogue file they were made from", file=str(path), field=field) from None
        raise
    if not dialogues:
        raise DataError(f"{field}: {path} holds no dialogues", file=str(path), field=field)
    return dialogues


def read_score_items(path: str, field: str = "input") -> list:
    """The score items of a JSONL file; a file of dialogues is named as the wrong kind of file."""
    from simhub.errors import DataError, SchemaError
    from simhub.metrics import ScoreItem
    from simhub.schema import Dialogue, iter_jsonl

    try:
        return list(iter_jsonl(path, type=ScoreItem))
    except SchemaError:
        if _first_record_is(path, Dialogue):
            raise DataError(f"{field}: {path} holds dialogues, not score items ({{dialogue, turn_index, candidate}} "
                            "per line); 'simhub data items' makes score items from dialogues",
                            file=str(path), field=field) from None
        raise


def _first_record_is(path: str, kind: type) -> bool:
    """Whether the first non-empty line of ``path`` reads as ``kind`` (to name a wrong kind of file),
    as the file's reader reads it (a line of ``rollouts.jsonl`` is a dialogue)."""
    from simhub.errors import DataError
    from simhub.schema import iter_jsonl

    records = iter_jsonl(path, type=kind)
    try:
        return next(records, None) is not None
    except (OSError, DataError):
        return False
    finally:
        records.close()


def check_configured(profile: Profile, metrics: list[str] | None) -> None:
    """Metric names that the profile does not configure are refused before its models are built."""
    from simhub.scoring import Scorer

    Scorer.from_profile(profile).resolve_metrics(metrics)


_TRANSFORMERS_LOGGING = "transformers.utils.logging"


def quiet_transformers() -> None:
    """transformers' own progress bars off (its per-file "Loading weights" and "Writing model shards"),
    in this process, whenever transformers is imported; simhub's bars and the Hub's download bars stay.

    transformers is imported late, by whichever command needs it, and importing it up front would
    cost every command seconds (a bad input must fail at once). So the switch is thrown the moment
    transformers' logging module is first imported, by wrapping that one module's loader.
    """
    import sys

    module = sys.modules.get(_TRANSFORMERS_LOGGING)
    if module is not None:
        _bars_off(module)
    elif not any(isinstance(finder, _BarsOffFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _BarsOffFinder())


def _bars_off(logging_module) -> None:
    # transformers' switch also turns the Hub's download bars off; those say something useful, so
    # they are switched back on when they were on.
    import contextlib

    hub_bars = None
    with contextlib.suppress(ImportError):
        from huggingface_hub import utils as hub_utils

        hub_bars = not hub_utils.are_progress_bars_disabled()
    logging_module.disable_progress_bar()
    if hub_bars:
        hub_utils.enable_progress_bars()


class _BarsOffFinder:
    """A meta-path finder that only watches for transformers' logging module: it finds it as the
    path finder would, and runs :func:`_bars_off` right after the module has executed."""

    def find_spec(self, name, path, target=None):
        if name != _TRANSFORMERS_LOGGING:
            return None
        from importlib.machinery import PathFinder

        spec = PathFinder.find_spec(name, path, target)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            import sys

            run(module)
            _bars_off(module)
            # Out of the way once done (not from find_spec: the import system is iterating the list then).
            if self in sys.meta_path:
                sys.meta_path.remove(self)

        spec.loader.exec_module = exec_module
        return spec
