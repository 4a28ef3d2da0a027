"""The command-line reference page, generated from the parsers themselves (``docs/reference/cli.md``).

Every command and subcommand with its description and usage, then one row per option: the flags,
the default, the choices and the help text. ``python scripts/gen_reference.py`` writes the page; a
test fails when a flag changes and the page was not written again, so the reference cannot drift
from what ``simhub --help`` says.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from simhub.cli import build_parser, plain

#: Where the page lives in the repository.
CLI_PAGE = "docs/reference/cli.md"


def walk(parser: argparse.ArgumentParser, prog: str = "simhub") -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every parser under ``parser`` (itself first), depth first in the order they were added."""
    yield prog, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from walk(child, f"{prog} {name}")


def _cell(text: str) -> str:
    return " ".join(plain(text).replace("%%", "%").split()).replace("|", "\\|")


def _default(action: argparse.Action) -> str:
    if action.default in (None, argparse.SUPPRESS) or isinstance(action, argparse._StoreTrueAction | argparse._HelpAction):
        return ""
    if isinstance(action.default, list | tuple):
        return ", ".join(map(str, action.default))
    return f"`{action.default}`"


def cli_markdown() -> str:
    """The whole page, as Markdown."""
    out = ["# Command-line reference", "",
           "Generated from simhub's own parsers by `python scripts/gen_reference.py`: every command, its usage "
           "and every option (a test checks that this page matches the parsers). `simhub COMMAND --help` "
           "prints the same.", ""]
    for prog, parser in walk(build_parser()):
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        depth = prog.count(" ")
        out += [f"{'#' * min(2 + depth, 4)} `{prog}`", ""]
        if parser.description:
            out += [_cell(parser.description), ""]
        usage = " ".join(parser.format_usage().removeprefix("usage: ").split())
        out += ["```text", usage, "```", ""]
        rows = []
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
                continue
            flags = ", ".join(f"`{s}`" for s in action.option_strings) or f"`{action.dest}`"
            choices = ", ".join(f"`{c}`" for c in action.choices) if action.choices else ""
            rows.append(f"| {flags} | {_default(action)} | {choices} | {_cell(action.help or '')} |")
        if rows:
            out += ["| option | default | choices | what it does |", "|---|---|---|---|", *rows, ""]
        for action in subs:
            out += ["| command | what it does |", "|---|---|"]
            for choice in action._choices_actions:
                out.append(f"| `{prog} {choice.dest}` | {_cell(choice.help or '')} |")
            out.append("")
    return "\n".join(out).rstrip() + "\n"
