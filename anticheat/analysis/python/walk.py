"""`ast.walk` for the analyses, as one list and without the leaves no analysis matches.

The analyses walk every tree once for its names and every expression once for its calls;
`ast.walk` (a generator over `iter_child_nodes` over `iter_fields`) was a third of their
cost. `walk` gives the same nodes in the same (breadth-first) order, minus the
expression contexts and operators (`Load`, `Store`, `Add`, `Eq` …): no analysis matches
those as nodes, only reads them as fields (`node.ctx`, `node.op`). Which fields of a node
class can hold nodes is worked out once per class.
"""

# ruff: noqa: SIM905 -- a table of names reads best as one whitespace-separated string

from __future__ import annotations

import ast

__all__ = ["children", "walk"]

# fields that hold a context or operator leaf, or always a plain value (a name, a number)
_NOT_NODES = frozenset(
    "ctx op ops id attr arg name module level kind conversion type_comment is_async "
    "simple asname lineno col_offset end_lineno end_col_offset".split()
)
_FIELDS: dict[type, tuple[str, ...]] = {}


def _fields(cls: type) -> tuple[str, ...]:
    fields = tuple(f for f in getattr(cls, "_fields", ()) if f not in _NOT_NODES)
    _FIELDS[cls] = fields
    return fields


def children(node: ast.AST) -> list[ast.AST]:
    """The nodes directly below `node`, as `ast.iter_child_nodes` gives them (without
    context and operator leaves)."""
    out: list[ast.AST] = []
    fields = _FIELDS.get(node.__class__)
    if fields is None:
        fields = _fields(node.__class__)
    for name in fields:
        value = getattr(node, name, None)
        if value.__class__ is list:
            out.extend(item for item in value if isinstance(item, ast.AST))
        elif isinstance(value, ast.AST):
            out.append(value)
    return out


def walk(node: ast.AST) -> list[ast.AST]:
    """`node` and every node below it, breadth-first as `ast.walk` yields them (without
    context and operator leaves)."""
    out: list[ast.AST] = [node]
    append = out.append
    known = _FIELDS
    AST = ast.AST
    for n in out:  # grows as it goes: a breadth-first queue that is also the answer
        cls = n.__class__
        fields = known.get(cls)
        if fields is None:
            fields = _fields(cls)
        for name in fields:
            value = getattr(n, name, None)
            if value.__class__ is list:
                for item in value:
                    if isinstance(item, AST):
                        append(item)
            elif isinstance(value, AST):
                append(value)
    return out
