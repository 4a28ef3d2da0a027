"""Reference tables of msgspec structs: every field with its type, default and meaning.

The generated reference pages (``docs/reference/config.md``, ``docs/reference/run-files.md``) are
built from the structs themselves, so a key added, removed or retyped changes the page (and a test
fails until it is regenerated). A field's meaning is the ``#:`` comment above it in the class body;
a struct's own meaning is its docstring's first paragraph.

>>> import msgspec
>>> class Point(msgspec.Struct, kw_only=True):
...     '''A point.'''
...     x: int = 0
>>> [(r.name, r.type, r.default) for r in struct_rows(Point)]
[('x', 'int', '0')]
"""

from __future__ import annotations

import inspect
import math
import re
import types
import typing
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import msgspec

__all__ = ["FieldRow", "bound_text", "cards_page", "comment_docs", "first_paragraph", "nested_structs", "plain",
           "struct_rows", "type_text"]

_ROLE = re.compile(r":[\w:]+:`~?([^`]+)`|``([^`]+)``")
_FIELD = re.compile(r"^    (\w+)\s*:")


def plain(text: str) -> str:
    """Sphinx roles and double backticks as Markdown code spans.

    >>> plain("see :class:`~simhub.config.Profile` and ``x``")
    'see `simhub.config.Profile` and `x`'
    """
    return _ROLE.sub(lambda m: f"`{next(g for g in m.groups() if g is not None)}`", text)


def first_paragraph(doc: str | None) -> str:
    """The first paragraph of a docstring, on one line, in Markdown."""
    paragraph = inspect.cleandoc(doc or "").split("\n\n")[0]
    return " ".join(plain(paragraph).split())


def bound_text(value: float) -> str:
    """A range bound as a card prints it.

    >>> bound_text(float("inf")), bound_text(-1.0), bound_text(0.5)
    ('∞', '-1', '0.5')
    """
    return "∞" if math.isinf(value) else f"{value:g}"


def cards_page(title: str, intro: str, cards: Iterable[str]) -> str:
    """A generated page of cards: its title, one introductory paragraph, then each card."""
    return "\n".join([f"# {title}", "", intro, "", *cards]).rstrip() + "\n"


def comment_docs(cls: type) -> dict[str, str]:
    """The ``#:`` comments above each field of ``cls`` and of its bases (the nearest class wins)."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if klass is object or not issubclass(klass, msgspec.Struct) or klass is msgspec.Struct:
            continue
        try:
            lines = inspect.getsource(klass).splitlines()
        except (OSError, TypeError):
            continue
        pending: list[str] = []
        for line in lines[1:]:
            stripped = line.strip()
            if stripped.startswith("#:"):
                pending.append(stripped[2:].strip())
                continue
            match = _FIELD.match(line)
            if match and pending:
                docs[match.group(1)] = plain(" ".join(pending))
            if stripped:
                pending = []
    return docs


@dataclass(frozen=True)
class FieldRow:
    """One row of a struct's table."""

    name: str
    type: str
    default: str
    doc: str


def type_text(tp: Any) -> str:
    """A resolved annotation as the reference prints it.

    >>> type_text(int | None), type_text(typing.Literal["a", "b"]), type_text(dict[str, list[float]])
    ('int | null', '"a" | "b"', 'dict[str, list[float]]')
    """
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return type_text(typing.get_args(tp)[0])
    if tp is type(None):
        return "null"
    if tp is msgspec.UnsetType:
        return "absent"
    if tp is Any:
        return "any"
    if origin is typing.Literal:
        return " | ".join(f'"{a}"' if isinstance(a, str) else str(a) for a in typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_text(a) for a in typing.get_args(tp))
    if origin is not None:
        args = typing.get_args(tp)
        inner = ", ".join("..." if a is Ellipsis else type_text(a) for a in args)
        return f"{getattr(origin, '__name__', str(origin))}[{inner}]" if args else getattr(origin, "__name__", str(tp))
    return getattr(tp, "__name__", str(tp))


def _description(tp: Any) -> str:
    """The ``msgspec.Meta(description=...)`` of an ``Annotated`` hint, if any."""
    if typing.get_origin(tp) is typing.Annotated:
        for meta in typing.get_args(tp)[1:]:
            if isinstance(meta, msgspec.Meta) and meta.description:
                return plain(meta.description)
    return ""


def _default_text(field: msgspec.structs.FieldInfo) -> str:
    if field.required:
        return "required"
    value = field.default if field.default is not msgspec.NODEFAULT else field.default_factory()
    if value is msgspec.UNSET:
        return "absent"
    if isinstance(value, msgspec.Struct):
        return "(section)"
    if isinstance(value, str):
        return f'"{value}"'
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    return repr(value).replace("'", '"')


def struct_rows(cls: type) -> list[FieldRow]:
    """Every field of struct ``cls``: name (as encoded), type as annotated, default, meaning."""
    docs = comment_docs(cls)
    hints = typing.get_type_hints(cls, include_extras=True)
    return [FieldRow(f.encode_name, type_text(hints[f.name]), _default_text(f),
                     docs.get(f.name) or _description(hints[f.name])) for f in msgspec.structs.fields(cls)]


def _structs_in(tp: Any) -> list[type]:
    if isinstance(tp, type) and issubclass(tp, msgspec.Struct):
        return [tp]
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _structs_in(typing.get_args(tp)[0])
    if origin is not None:  # a union, list, tuple or dict: the structs among its arguments
        return [s for arg in typing.get_args(tp) for s in _structs_in(arg)]
    return []


def nested_structs(cls: type) -> list[type]:
    """``cls`` and every struct its fields hold (directly, in a union, a list or a dict), depth first."""
    seen: list[type] = []

    def visit(klass: type) -> None:
        if klass in seen:
            return
        seen.append(klass)
        hints = typing.get_type_hints(klass, include_extras=True)
        for field in msgspec.structs.fields(klass):
            for inner in _structs_in(hints.get(field.name)):
                visit(inner)

    visit(cls)
    return seen
