"""The ``simhub`` command line (also ``python -m simhub``). Each command is a few lines calling the library.

Bad input (a missing file, a malformed row, an unknown option, a missing extra) prints
``simhub: error: ...`` to stderr and exits with status 2; nothing half-written is left behind.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from simhub.errors import SimhubError

EXIT_USAGE = 2

#: Modules that add subcommands: each has ``register(subparsers)`` and sets ``handler`` defaults.
#: Imported when the parser is built, so they import nothing heavy at module level.
COMMAND_MODULES = (
    "simhub.cli.data",
    "simhub.cli.scoring",
    "simhub.cli.prompt",
    "simhub.cli.training",
    "simhub.cli.serve",
)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse's own usage errors: exit 2, one line, no usage dump
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    from simhub import __version__

    parser = _Parser(prog="simhub", description="Simulated students in tutoring dialogues: data, realism "
                     "metrics, simulators, training and the service.")
    parser.add_argument("--version", action="version", version=f"simhub {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code = args.handler(args)
    except SimhubError as exc:
        print(f"simhub: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("simhub: interrupted (finished work is kept; rerun the same command to resume)", file=sys.stderr)
        return 130
    return int(code or 0)


if __name__ == "__main__":
    sys.exit(main())
