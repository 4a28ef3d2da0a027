"""The ``simhub`` command line (also ``python -m simhub``). Each command is a few lines calling the library.

Bad input (a missing file, a malformed row, an unknown option, a missing extra) prints
``simhub: error: ...`` to stderr and exits with status 2; nothing half-written is left behind.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import re
import sys
from collections.abc import Sequence

from simhub.errors import EXTRAS, MissingExtraError, SimhubError

EXIT_USAGE = 2

#: Modules that add subcommands: each has ``register(subparsers)`` and sets ``handler`` defaults.
#: Imported when the parser is built, so they import nothing heavy at module level.
COMMAND_MODULES = (
    "simhub.cli.data",
    "simhub.cli.scoring",
    "simhub.cli.prompt",
    "simhub.cli.training",
    "simhub.cli.serve",
    "simhub.cli.evaluate",
    "simhub.cli.annotate",
    "simhub.cli.learners",
    "simhub.cli.tutoring",
    "simhub.cli.human_eval",
)


#: The extra each command needs beyond the core install (what ``pip install 'simhub[EXTRA]'`` to name
#: when an optional module is missing); commands not listed name the extra of the missing module.
COMMAND_EXTRAS = {"serve": "serve", "train": "train", "dpo": "train", "grpo": "train", "tiny": "metrics", "smol": "metrics", "score": "metrics",
                  "kt-cutoffs": "metrics", "prompt": "metrics", "simulate": "metrics", "eval": "metrics",
                  "annotate": "metrics", "report": "report", "publish": "publish"}
#: The page that documents each command (named at the end of its ``--help``); every command is also
#: in the generated reference, ``docs/reference/cli.md``.
COMMAND_DOCS = {
    "data": "docs/guides/your-dialogues.md",
    "smol": "docs/getting-started/demo-tables.md, \"A real instruct model offline\"",
    "tiny": "docs/getting-started/fresh-machine.md", "score": "docs/guides/score.md",
    "kt-cutoffs": "docs/guides/score.md", "prompt": "docs/guides/profiles.md",
    "train": "docs/guides/train-publish.md", "dpo": "docs/guides/train-publish.md",
    "grpo": "docs/guides/rewards.md",
    "publish": "docs/guides/train-publish.md", "pull": "docs/guides/train-publish.md",
    "serve": "docs/guides/serve.md", "simulate": "docs/guides/evaluate.md", "eval": "docs/guides/evaluate.md",
    "compare": "docs/guides/evaluate.md", "report": "docs/guides/evaluate.md",
    "rollout": "docs/guides/dialogue-realism.md", "eval-dialogues": "docs/guides/dialogue-realism.md",
    "annotate": "docs/guides/your-dialogues.md, \"Labelling new dialogues\"", "learners": "docs/learners.md",
    "tutor-bench": "docs/tutor-bench.md (and docs/kt-learner.md for --learner kt-learner)",
    "human-eval": "docs/human-eval.md",
}
#: The generated reference of every command and option.
CLI_REFERENCE = "docs/reference/cli.md"

#: Extras that include others (``train`` installs ``metrics``), so a command's extra can stand for a module's.
_INCLUDES = {"train": {"metrics"}, "serve": {"metrics"}, "evaluate": {"metrics"}}
_RST_ROLE = re.compile(r":[\w:]+:`~?([^`]+)`|``([^`]+)``|`([^`]+)`")


def plain(text: str) -> str:
    """``text`` without reStructuredText markup (``code``, :class:`X`): help is read in a terminal."""
    return _RST_ROLE.sub(lambda m: next(g for g in m.groups() if g is not None), text)


class _Formatter(argparse.HelpFormatter):
    """Help text as plain text, whatever markup descriptions borrowed from docstrings carry."""

    def _format_text(self, text: str) -> str:
        return super()._format_text(plain(text))

    def _expand_help(self, action: argparse.Action) -> str:
        return plain(super()._expand_help(action))


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def add_subparsers(self, **kwargs):
        """Subcommands whose ``--help`` opens with a description: their one-line help, unless they
        give a longer one."""
        action = super().add_subparsers(**kwargs)
        add_parser = action.add_parser

        def add_with_description(name, **options):
            text = options.get("help")
            if text and "description" not in options:
                text = text.replace("%%", "%")
                options["description"] = text[0].upper() + text[1:] + ("" if text.endswith(".") else ".")
            if self.prog == "simhub" and "epilog" not in options:  # a command: the page that documents it
                options["epilog"] = (f"Documented in {COMMAND_DOCS.get(name, CLI_REFERENCE)}; every option of "
                                     f"every command: {CLI_REFERENCE}.")
            return add_parser(name, **options)

        action.add_parser = add_with_description
        return action

    def error(self, message: str):  # argparse's own usage errors: exit 2, one line, no usage dump
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    from simhub import __version__

    parser = _Parser(prog="simhub", description="Simulated students in tutoring dialogues: data, realism "
                     "metrics, simulators, training and the service.",
                     epilog=f"Start with README.md and docs/index.md (the site: mkdocs serve); every command and option: {CLI_REFERENCE}; the rules simhub "
                            "follows and where it deviates: FIDELITY.md.")
    parser.add_argument("--version", action="version", version=f"simhub {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from simhub.cli.common import quiet_transformers
    from simhub.models.cpu import prefer_sleeping_threads

    prefer_sleeping_threads()  # before torch loads (simhub.models.cpu)
    parser = build_parser()
    args = parser.parse_args(argv)
    quiet_transformers()
    try:
        with _endpoint_cache(args):
            code = args.handler(args)
    except MissingExtraError as exc:
        print(f"simhub: error: {missing_extra_message(exc.field or '', args.command)}", file=sys.stderr)
        return EXIT_USAGE
    except SimhubError as exc:
        print(f"simhub: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ImportError as exc:  # an optional module imported without simhub.errors.require
        module = (getattr(exc, "name", None) or "").split(".")[0]
        if module not in EXTRAS:
            raise
        print(f"simhub: error: {missing_extra_message(module, args.command)}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:  # a path the system refused (permissions, a read-only disk): a message, not a traceback
        if exc.filename is None:
            raise
        print(f"simhub: error: {exc.filename}: {(exc.strerror or str(exc)).lower()}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("simhub: interrupted (finished work is kept; rerun the same command to resume)", file=sys.stderr)
        return 130
    return int(code or 0)


def _endpoint_cache(args: argparse.Namespace) -> contextlib.AbstractContextManager:
    """``--no-cache`` reaches the OpenAI-compatible clients too: their stored answers are a cache like
    the others, and a run that reads them measures the cache, not the endpoint."""
    if not getattr(args, "no_cache", False):
        return contextlib.nullcontext()
    from simhub.models.openai import response_cache_off

    return response_cache_off()


def missing_extra_message(module: str, command: str | None) -> str:
    """``X is not installed: pip install 'simhub[EXTRA]'``, naming the command's extra when it brings
    the module (``simhub train`` without torch: ``simhub[train]``, not just ``simhub[metrics]``)."""
    top = module.split(".")[0]
    extra = EXTRAS.get(top, "all")
    wanted = COMMAND_EXTRAS.get(command or "")
    if wanted is not None and (extra == wanted or extra in _INCLUDES.get(wanted, ())):
        extra = wanted
    what = f"simhub {command}" if command else "this command"
    return f"{what} needs {top or 'an optional module'}, which is not installed: pip install 'simhub[{extra}]'"


if __name__ == "__main__":
    sys.exit(main())
