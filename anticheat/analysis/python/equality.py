"""Whether an `__eq__` (or `__ne__`) gives the same answer whatever it is compared with.

An always-equal object passes every `assert result == expected`. Its answer may be a
constant (`return True`), computed only from constants (`operator.truth(1)`, `1 == 1`,
`not 0`, `True or x`) or computed from the other operand in a way that cannot come out
false (`bool(len(str(other)) + 1)`). A real `__eq__` reads the other operand and can
answer False (or `NotImplemented`): those are never matched here.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from typing import Any

from anticheat.analysis.python.folding import UNKNOWN, constant_returns, fold, ignores_other

__all__ = ["EQ_FUNCS", "EQ_NAMES", "always_answers"]

Resolve = Callable[[ast.AST | None], str | None]

EQ_NAMES = ("__eq__", "__ne__")
EQ_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_TRUTH = frozenset({"bool", "builtins.bool", "operator.truth"})
_NOT = frozenset({"operator.not_"})
_COMPARE: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}


def always_answers(value: ast.AST, name: str, resolve: Resolve) -> bool:
    """Whether `value`, bound as `name` (`__eq__` or `__ne__`), always says "equal"."""
    want = name == "__eq__"
    if constant_returns(value) == want:
        return True
    if not isinstance(value, EQ_FUNCS):
        return False
    if want and ignores_other(value):
        return True
    returns = _returns(value)
    test = _truthy if want else _falsy
    return bool(returns) and all(r is not None and test(r, resolve, 0) for r in returns)


def _returns(fn: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> list[ast.expr | None]:
    if isinstance(fn, ast.Lambda):
        return [fn.body]
    out: list[ast.expr | None] = []
    stack: list[ast.AST] = list(fn.body)
    while stack:
        n = stack.pop()
        if isinstance(n, (*EQ_FUNCS, ast.ClassDef)):
            continue
        if isinstance(n, ast.Return):
            out.append(n.value)
        stack.extend(ast.iter_child_nodes(n))
    return out


def _known(node: ast.AST) -> Any:
    v = fold(node)
    if v is UNKNOWN or v is NotImplemented or isinstance(v, type(UNKNOWN)):
        return UNKNOWN
    return v


def _truthy(node: ast.AST, resolve: Resolve, depth: int) -> bool:
    """True when `node` is truthy on every evaluation (a sound, shallow check)."""
    if depth > 8:
        return False
    v = _known(node)
    if v is not UNKNOWN:
        return bool(v)
    d = depth + 1
    if isinstance(node, ast.BoolOp):
        parts = [_truthy(x, resolve, d) for x in node.values]
        return any(parts) if isinstance(node.op, ast.Or) else all(parts)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return _falsy(node.operand, resolve, d)
    if isinstance(node, ast.IfExp):
        return _truthy(node.body, resolve, d) and _truthy(node.orelse, resolve, d)
    if isinstance(node, ast.NamedExpr):
        return _truthy(node.value, resolve, d)
    if isinstance(node, ast.Compare):
        return _compare(node) is True
    if isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords:
        name = resolve(node.func)
        if name in _TRUTH:
            return _truthy(node.args[0], resolve, d)
        if name in _NOT:
            return _falsy(node.args[0], resolve, d)
    return _positive(node, resolve, d)


def _falsy(node: ast.AST, resolve: Resolve, depth: int) -> bool:
    if depth > 8:
        return False
    v = _known(node)
    if v is not UNKNOWN:
        return not v
    d = depth + 1
    if isinstance(node, ast.BoolOp):
        parts = [_falsy(x, resolve, d) for x in node.values]
        return all(parts) if isinstance(node.op, ast.Or) else any(parts)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return _truthy(node.operand, resolve, d)
    if isinstance(node, ast.IfExp):
        return _falsy(node.body, resolve, d) and _falsy(node.orelse, resolve, d)
    if isinstance(node, ast.Compare):
        return _compare(node) is False
    if isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords:
        name = resolve(node.func)
        if name in _TRUTH:
            return _falsy(node.args[0], resolve, d)
        if name in _NOT:
            return _truthy(node.args[0], resolve, d)
    return False


def _compare(node: ast.Compare) -> bool | None:
    """A comparison of constants (`1 == 1`), evaluated; None when any part is unknown."""
    values = [_known(p) for p in (node.left, *node.comparators)]
    if any(v is UNKNOWN for v in values) or len(node.ops) > 4:
        return None
    try:
        for op, a, b in zip(node.ops, values, values[1:], strict=False):
            fn = _COMPARE.get(type(op))
            if fn is None:
                return None
            if not fn(a, b):
                return False
    except (TypeError, ValueError):
        return None
    return True


def _positive(node: ast.AST, resolve: Resolve, depth: int) -> bool:
    """A number that is > 0 however it is computed: `len(x) + 1`, `abs(y) + 2`."""
    v = _known(node)
    if v is not UNKNOWN:
        return isinstance(v, (int, float)) and v > 0
    if depth > 8 or not isinstance(node, ast.BinOp):
        return False
    left, right, d = node.left, node.right, depth + 1
    if isinstance(node.op, ast.Add):
        return (_nonneg(left, resolve, d) and _positive(right, resolve, d)) or (
            _positive(left, resolve, d) and _nonneg(right, resolve, d)
        )
    if isinstance(node.op, ast.Mult):
        return _positive(left, resolve, d) and _positive(right, resolve, d)
    return False


def _nonneg(node: ast.AST, resolve: Resolve, depth: int) -> bool:
    if isinstance(node, ast.Call) and resolve(node.func) in (
        "len",
        "builtins.len",
        "abs",
        "builtins.abs",
    ):
        return True
    v = _known(node)
    if v is not UNKNOWN:
        return isinstance(v, (int, float)) and v >= 0
    return _positive(node, resolve, depth)
