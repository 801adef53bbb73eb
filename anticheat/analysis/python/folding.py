"""Constant folding and the small AST predicates `analyzer` is built from.

`fold` evaluates what is constant in an expression (`'gi' + 't'`, `10**12`,
`base64.b64decode('…').decode()`, `''.join([...])`) so renamings and encodings do not hide
a name, a URL or a size; the predicates answer questions like "does every return of
this `__eq__` give True" or "can this test ever fail".
"""

# ruff: noqa: SIM905 -- tables of names read best as one whitespace-separated string

from __future__ import annotations

import ast
import base64
import binascii
import builtins
import codecs
import math
import re
from collections.abc import Callable
from typing import Any

from anticheat.analysis import limits
from anticheat.analysis.limits import (
    FOLD_DEPTH,
    HUGE,
    MAX_FOLD_LEN,
    MAX_FOLD_STEPS,
    MAX_FOLD_TOTAL,
    MAX_INT_BITS,
    MAX_UNPARSE,
    MAX_UNPARSE_TOTAL,
    Budget,
)

__all__ = [
    "HUGE",
    "UNKNOWN",
    "Lazy",
    "closure",
    "constant_returns",
    "dotted",
    "fold",
    "harness_env",
    "is_main_guard",
    "is_runner",
    "is_skip_mark",
    "leaves",
    "pattern",
    "src",
    "strings",
    "trivial_test",
    "truthy",
    "unbounded",
]

_RUNNER_ROOTS = ("unittest", "_pytest", "pytest", "doctest", "pluggy", "nose")
# every builtin a test may call or catch (`_` aside: gettext installs it, nothing tests it)
_BUILTIN_TARGETS = frozenset(n for n in dir(builtins) if n != "_" and not n.startswith("__")) | {
    "__import__",
    "__build_class__",
}
_HARNESS_ENV = tuple(
    (
        "PYTEST _PYTEST GRADER GRADING EVAL JUDGE PROCTOR HIDDEN REWARD VERIFIER SWE_ SWEBENCH "
        "UNITTEST TESTING_HARNESS"
    ).split()
)
_HARNESS_ENV_EXACT = frozenset({"CI", "GITHUB_ACTIONS", "CONTINUOUS_INTEGRATION", "BUILD_ID"})


def src(node: ast.AST) -> str:
    """A node's source for evidence (160 characters); big nodes by their head only."""
    span, b = _span(node), limits.current()
    b.unparsed += span
    if span > MAX_UNPARSE or b.unparsed > MAX_UNPARSE_TOTAL:  # unparse is linear in the node
        head = node.func if isinstance(node, ast.Call) else None
        return f"{src(head)}(…)" if head is not None else f"{type(node).__name__}(…)"
    try:
        return ast.unparse(node)[:160]
    except (ValueError, RecursionError, AttributeError):
        return type(node).__name__


def _span(node: ast.AST) -> int:
    """Roughly how many characters of source a node covers (0 when it has no position)."""
    first, last = getattr(node, "lineno", None), getattr(node, "end_lineno", None)
    start, end = getattr(node, "col_offset", 0) or 0, getattr(node, "end_col_offset", 0) or 0
    if not isinstance(first, int) or not isinstance(last, int):
        return 0
    return int(end) - int(start) if first == last else (last - first) * 80 + int(end)


class Unknown:
    pass


class Lazy:
    """The source of a node, rendered only if it ends up in evidence (unparse is slow)."""

    __slots__ = ("node",)

    def __init__(self, node: ast.AST) -> None:
        self.node = node

    def __str__(self) -> str:
        return src(self.node)

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)


UNKNOWN = Unknown()


def fold(node: ast.AST | None, depth: int = 0) -> Any:
    """The value of a constant expression, or UNKNOWN (also when folding it would cost more
    than the caps in `limits` allow: then the budget says where it gave up)."""
    return _fold(node, limits.current(), depth)


_MISS = object()
_SEQ = (str, bytes, tuple)
_SCALAR = (str, int, float, bool, type(None))
_PRINTABLE = (*_SCALAR, bytes)


def _fold(node: ast.AST | None, b: Budget, depth: int) -> Any:
    if node is None:
        return UNKNOWN
    if isinstance(node, ast.Constant):
        return node.value
    hit = b.memo.get(node, _MISS)
    if hit is not _MISS:
        return hit
    if depth > FOLD_DEPTH:
        b.cuts += 1  # this value depends on where folding started: not memoised
        return UNKNOWN
    if b.fold_steps >= MAX_FOLD_STEPS:
        b.give_up(f"folding gave up: more than {MAX_FOLD_STEPS:,} expression nodes to evaluate")
        return UNKNOWN
    b.fold_steps += 1
    cuts = b.cuts
    v = _eval(node, b, depth)
    if isinstance(v, _SEQ):
        if len(v) > MAX_FOLD_LEN:
            v = _too_big(b, node, len(v))
        elif b.fold_bytes + len(v) > MAX_FOLD_TOTAL:
            b.give_up(
                f"folding gave up: the values folded for this action exceed "
                f"{MAX_FOLD_TOTAL:,} characters (at `{src(node)}`)"
            )
            v = UNKNOWN
        else:
            b.fold_bytes += len(v)
    elif isinstance(v, int) and not isinstance(v, bool) and v.bit_length() > MAX_INT_BITS:
        v = math.inf if v > 0 else -math.inf  # astronomic: a number hides no name
    if b.cuts == cuts:
        b.memo[node] = v
    return v


def _too_big(b: Budget, node: ast.AST, size: float) -> Unknown:
    b.give_up(
        f"folding gave up on `{src(node)}`: it would be {size:,.0f} characters or elements "
        f"(cap {MAX_FOLD_LEN:,})"
    )
    return UNKNOWN


def _eval(node: ast.AST, b: Budget, depth: int) -> Any:
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        vals = [_fold(e, b, depth + 1) for e in node.elts]
        return UNKNOWN if any(v is UNKNOWN for v in vals) else tuple(vals)
    if isinstance(node, ast.JoinedStr):
        parts = [
            _fold(v.value if isinstance(v, ast.FormattedValue) else v, b, depth + 1)
            for v in node.values
        ]
        if not all(isinstance(p, _PRINTABLE) for p in parts):
            return UNKNOWN  # unknown, or a container whose repr is not worth building
        texts = [str(p) for p in parts]
        if sum(map(len, texts)) > MAX_FOLD_LEN:
            return _too_big(b, node, sum(map(len, texts)))
        return "".join(texts)
    if isinstance(node, ast.UnaryOp):
        v = _fold(node.operand, b, depth + 1)
        if v is UNKNOWN:
            return UNKNOWN
        try:
            ops: dict[type, Callable[[], Any]] = {
                ast.Not: lambda: not v,
                ast.USub: lambda: -v,
                ast.UAdd: lambda: +v,
                ast.Invert: lambda: ~v,
            }
            return ops[type(node.op)]()
        except (TypeError, KeyError):
            return UNKNOWN
    if isinstance(node, ast.BinOp):
        a, c = _fold(node.left, b, depth + 1), _fold(node.right, b, depth + 1)
        if a is UNKNOWN or c is UNKNOWN:
            return UNKNOWN
        return _binop(node, a, c, b)
    if isinstance(node, ast.Subscript):
        v, s = _fold(node.value, b, depth + 1), node.slice
        if (
            isinstance(v, _SEQ)
            and isinstance(s, ast.Slice)
            and s.lower is None
            and s.upper is None
            and _fold(s.step, b, depth + 1) == -1
        ):
            return v[::-1]
        return UNKNOWN
    if isinstance(node, ast.Call):
        return _fold_call(node, b, depth)
    return UNKNOWN


def _binop(node: ast.BinOp, a: Any, b: Any, budget: Budget) -> Any:
    op = node.op
    try:
        if isinstance(op, ast.Pow) and isinstance(a, int) and isinstance(b, int):
            if b > 0 and abs(a) > 1 and b * math.log2(abs(a)) > 256:
                return math.inf
            return a**b
        if isinstance(op, ast.LShift) and isinstance(a, int) and isinstance(b, int):
            if b > 256 or (a and a.bit_length() + b > MAX_INT_BITS):
                return math.inf
            return a << b
        if isinstance(op, ast.Mult) and (isinstance(a, _SEQ) or isinstance(b, _SEQ)):
            seq: Any = a if isinstance(a, _SEQ) else b
            n: Any = b if seq is a else a
            if not isinstance(n, (int, float)):
                return UNKNOWN
            size = n * max(len(seq), 1)
            if size >= HUGE:
                return math.inf  # the resource rules flag it: no need to build it
            if isinstance(n, float):
                return UNKNOWN
            if n * len(seq) > MAX_FOLD_LEN:
                return _too_big(budget, node, n * len(seq))
            return seq * n
        if (
            isinstance(op, ast.Mult)
            and isinstance(a, int)
            and isinstance(b, int)
            and a.bit_length() + b.bit_length() > MAX_INT_BITS
        ):
            return math.inf if (a > 0) == (b > 0) else -math.inf
        if isinstance(op, ast.Mod) and isinstance(a, (str, bytes)):
            return _percent(node, a, b, budget)
        if (
            isinstance(op, ast.Add)
            and isinstance(a, _SEQ)
            and isinstance(b, _SEQ)
            and len(a) + len(b) > MAX_FOLD_LEN
        ):
            return _too_big(budget, node, len(a) + len(b))
        if isinstance(
            op,
            (
                ast.Add,
                ast.Sub,
                ast.Mult,
                ast.Mod,
                ast.FloorDiv,
                ast.BitOr,
                ast.BitAnd,
                ast.BitXor,
                ast.Div,
            ),
        ):
            fns: dict[type, Callable[[], Any]] = {
                ast.Add: lambda: a + b,
                ast.Sub: lambda: a - b,
                ast.Mult: lambda: a * b,
                ast.Mod: lambda: a % b,
                ast.FloorDiv: lambda: a // b,
                ast.BitOr: lambda: a | b,
                ast.BitAnd: lambda: a & b,
                ast.BitXor: lambda: a ^ b,
                ast.Div: lambda: a / b,
            }
            return fns[type(op)]()
    except (TypeError, ValueError, ZeroDivisionError, OverflowError, MemoryError):
        return UNKNOWN
    return UNKNOWN


_PERCENT_SPEC = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(\*|\d+)?(?:\.(\*|\d+))?")


def _percent(node: ast.BinOp, fmt: str | bytes, args: Any, b: Budget) -> Any:
    """`fmt % args`, bounded before it is built: widths and precisions are sizes too."""
    values = args if isinstance(args, tuple) else (args,)
    if not all(isinstance(v, _PRINTABLE) for v in values):
        return UNKNOWN  # a tuple's repr, a mapping: not worth folding
    text = fmt.decode("latin-1") if isinstance(fmt, bytes) else fmt
    bound, star = len(text), False
    for m in _PERCENT_SPEC.finditer(text):
        for n in m.groups():
            if n == "*":
                star = True
            elif n is not None:
                bound += int(n)
    for v in values:
        if isinstance(v, (str, bytes)):
            bound += 4 * len(v) + 3  # %r of bytes escapes each byte in up to 4 characters
        elif isinstance(v, int) and star:
            bound += abs(v)  # `%*d`: the width is an argument
        else:
            bound += 400  # a number's digits (ints are capped at MAX_INT_BITS, floats ~310)
    if bound > MAX_FOLD_LEN:
        return _too_big(b, node, bound)
    return fmt % args


def _fold_call(node: ast.Call, b: Budget, depth: int) -> Any:
    func = node.func
    args = [_fold(a, b, depth + 1) for a in node.args]
    if any(a is UNKNOWN for a in args) or node.keywords:
        return UNKNOWN
    try:
        if isinstance(func, ast.Name):
            if func.id == "chr" and len(args) == 1:
                return chr(args[0])
            if func.id in ("str", "bytes", "int", "tuple", "list") and len(args) == 1:
                v = args[0]
                if func.id == "str" and isinstance(v, tuple):
                    return UNKNOWN  # a repr of shared elements can be far bigger than they are
                return (
                    tuple(v)
                    if func.id in ("tuple", "list")
                    else {"str": str, "bytes": bytes, "int": int}[func.id](v)
                    if not (func.id == "bytes" and isinstance(v, int))
                    else UNKNOWN
                )
            if func.id == "Path" and len(args) == 1:
                return args[0]
        if isinstance(func, ast.Attribute):
            owner = func.value
            module = dotted(owner)
            if func.attr == "join" and len(args) == 1 and isinstance(owner, ast.Constant):
                sep: Any = owner.value
                items = args[0]
                if not isinstance(sep, str) or not isinstance(items, (str, tuple)):
                    return UNKNOWN
                if not all(isinstance(i, str) for i in items):
                    return UNKNOWN
                size = sum(map(len, items)) + len(sep) * max(len(items) - 1, 0)
                if size > MAX_FOLD_LEN:
                    return _too_big(b, node, size)
                return sep.join(items)
            if func.attr == "join" and module in ("os.path", "posixpath"):
                if not all(isinstance(a, _SCALAR) for a in args):
                    return UNKNOWN
                return "/".join(str(a) for a in args)
            if (
                func.attr in ("b64decode", "standard_b64decode", "urlsafe_b64decode", "decodebytes")
                and module == "base64"
            ):
                data = args[0]
                return base64.b64decode(data + ("==" if isinstance(data, str) else b"=="))
            if func.attr in ("unhexlify", "a2b_hex") or func.attr == "fromhex":
                return binascii.unhexlify(args[0])
            if func.attr == "decode" and len(args) <= 2:
                v = _fold(owner, b, depth + 1)
                if isinstance(v, bytes):
                    return v.decode(*[a for a in args if isinstance(a, str)][:1] or ["utf-8"])
                if module == "codecs" and len(args) == 2 and isinstance(args[0], str):
                    return codecs.decode(args[0], args[1])
            if func.attr == "encode" and len(args) <= 1:
                v = _fold(owner, b, depth + 1)
                return v.encode() if isinstance(v, str) else UNKNOWN
    except (
        ValueError,
        TypeError,
        binascii.Error,
        LookupError,
        UnicodeError,
        OverflowError,
        MemoryError,
    ):
        return UNKNOWN
    return UNKNOWN


def pattern(node: ast.AST, _depth: int = 0) -> str | None:
    """An f-string or concatenation with its unknown parts as `*`: f"/proc/{pid}/x" → /proc/*/x."""
    if _depth > FOLD_DEPTH:
        return None
    if isinstance(node, ast.JoinedStr):
        parts = [fold(v) if isinstance(v, ast.Constant) else UNKNOWN for v in node.values]
        text = "".join(p if isinstance(p, str) else "*" for p in parts)
        return text if text.strip("*") else None
    if isinstance(node, ast.Call) and dotted(node.func) in ("os.path.join", "posixpath.join"):
        parts = [fold(a) for a in node.args]
        text = "/".join(
            p if isinstance(p, str) else pattern(a, _depth + 1) or "*"
            for p, a in zip(parts, node.args, strict=True)
        )
        return text if text.strip("*/") else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = fold(node.left), fold(node.right)
        left = left if isinstance(left, str) else pattern(node.left, _depth + 1) or "*"
        right = right if isinstance(right, str) else pattern(node.right, _depth + 1) or "*"
        text = f"{left}{right}"
        return text if text.strip("*") else None
    return None


def dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{dotted(node.value)}.{node.attr}"
    return ""


def strings(node: ast.AST) -> list[str]:
    v = fold(node)
    if isinstance(v, str):
        return [v]
    if isinstance(v, tuple):
        return [x for x in v if isinstance(x, str)]
    return [
        s.value for s in ast.walk(node) if isinstance(s, ast.Constant) and isinstance(s.value, str)
    ]


def is_main_guard(test: ast.expr) -> bool:
    return isinstance(test, ast.Compare) and "__name__" in src(test) and "__main__" in src(test)


def truthy(test: ast.expr) -> bool:
    v = fold(test)
    return v is not UNKNOWN and bool(v)


def unbounded(loop: ast.AST) -> bool:
    """Whether a loop runs forever (or ≥1000 times); memoised, as every call in it asks."""
    memo, key = limits.current().memo, ("unbounded", loop)
    hit = memo.get(key)
    if hit is None:
        hit = memo[key] = _unbounded(loop)
    return bool(hit)


def _unbounded(loop: ast.AST) -> bool:
    if isinstance(loop, ast.While):
        return truthy(loop.test) and not any(isinstance(n, ast.Break) for n in ast.walk(loop))
    if (
        isinstance(loop, (ast.For, ast.AsyncFor))
        and isinstance(loop.iter, ast.Call)
        and dotted(loop.iter.func) == "range"
        and loop.iter.args
    ):
        n = fold(loop.iter.args[-1])
        return isinstance(n, (int, float)) and n >= 1000
    return False


def leaves(body: list[ast.stmt]) -> bool:
    for st in body:
        for n in ast.walk(st):
            if isinstance(n, (ast.Break, ast.Return, ast.Raise)):
                return True
            if isinstance(n, ast.Call) and dotted(n.func) in (
                "sys.exit",
                "exit",
                "quit",
                "os._exit",
            ):
                return True
    return False


def constant_returns(node: ast.AST) -> bool | None:
    """True/False when every return of a function (or a lambda) is that constant."""
    if isinstance(node, ast.Lambda):
        v = fold(node.body)
        return bool(v) if v is not UNKNOWN and not isinstance(v, Unknown) else None
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    values = set()
    stack: list[ast.AST] = list(node.body)
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(n, ast.Return):
            v = fold(n.value) if n.value is not None else None
            if v is UNKNOWN or v is NotImplemented:
                return None
            values.add(bool(v))
        stack.extend(ast.iter_child_nodes(n))
    return values.pop() if len(values) == 1 else None


def ignores_other(fn: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> bool:
    """An `__eq__` whose result never reads the value it is compared with: equal to all
    (returning `NotImplemented` or a constant False is how honest code says "not comparable")."""
    params = [*fn.args.posonlyargs, *fn.args.args]
    if len(params) < 2 or fn.args.vararg is not None or fn.args.kwarg is not None:
        return False
    other = params[1].arg
    body: list[ast.AST] = [fn.body] if isinstance(fn, ast.Lambda) else list(fn.body)
    returns: list[ast.AST | None] = [fn.body] if isinstance(fn, ast.Lambda) else []
    for node in (n for b in body for n in ast.walk(b)):
        if isinstance(node, ast.Name) and node.id == other:
            return False
        if isinstance(node, ast.Name) and node.id in ("locals", "vars"):
            return False
        if isinstance(node, ast.Return):
            returns.append(node.value)
    for value in returns:
        if value is None:
            return False
        folded = fold(value)
        if folded is NotImplemented or folded is False or folded is None:
            return False
        if isinstance(value, ast.Name) and value.id == "NotImplemented":
            return False
    return bool(returns)


def trivial_test(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    for st in fn.body:
        if isinstance(st, ast.Pass) or (
            isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant)
        ):
            continue
        if isinstance(st, ast.Assert) and truthy(st.test):
            continue
        if isinstance(st, ast.Return) and (st.value is None or fold(st.value) is not UNKNOWN):
            continue
        return False
    return True


def is_skip_mark(name: str) -> bool:
    return name.endswith(
        (
            ".mark.skip",
            ".mark.xfail",
            "unittest.skip",
            ".skipif",
            ".skipIf",
            ".skipUnless",
            "unittest.expectedFailure",
        )
    )


def is_runner(base: str, attr: object) -> bool:
    root = base.split(".")[0].removesuffix("()")
    if root in ("builtins", "__builtins__"):
        return attr in _BUILTIN_TARGETS
    return root in _RUNNER_ROOTS or base.endswith(("TestCase", "TestResult", "TextTestRunner"))


def harness_env(key: object) -> bool:
    if not isinstance(key, str):
        return False
    k = key.upper()
    return k in _HARNESS_ENV_EXACT or k.startswith(_HARNESS_ENV)


def closure(graph: dict[str, set[str]], start: set[str]) -> set[str]:
    seen, todo = set(), list(start)
    while todo:
        n = todo.pop()
        if n not in seen:
            seen.add(n)
            todo.extend(graph.get(n, ()))
    return seen
