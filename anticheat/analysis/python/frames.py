"""Code that takes its caller's frame and uses it: to read the caller's source (where a
test's expected values are written) or to patch the objects the caller holds.

Taking a frame is ordinary in libraries (`sys._getframe(1).f_globals['__name__']` names a
module, pydantic resolves annotations in the caller's `f_locals`); what a solution has no
honest use for is what it does with it. A value is followed through one scope's
assignments as it goes from a frame (`sys._getframe(n≥1)`, `….f_back`, `inspect.stack()`,
`traceback.extract_stack()`, …) to its namespaces (`f_locals`, `f_globals`) and the
values in them; the uses recorded are a frame-derived path opened or given to a source
reader (`open`, `linecache`, `inspect.getsource`, `tokenize.open`, `Path.read_text`),
and an attribute set on a value taken from a caller's namespace.
"""

# ruff: noqa: SIM905 -- tables of names read best as one whitespace-separated string

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from enum import IntEnum

from anticheat.analysis.python.folding import fold, src

__all__ = ["CallerUse", "caller_uses"]

Resolve = Callable[[ast.AST | None], str | None]


class _Taint(IntEnum):
    none = 0
    frame = 1  # a frame of a caller, or what it says about its code (f_code, co_filename)
    namespace = 2  # a caller's f_locals / f_globals
    value = 3  # an object found in a caller's namespace


# calls that hand out the frames above the running one (`_getframe` only with n ≠ 0)
FRAME_SOURCES = frozenset(
    {
        "sys._getframe",
        "inspect.stack",
        "inspect.getouterframes",
        "inspect.trace",
        "traceback.extract_stack",
        "traceback.walk_stack",
        "sys._current_frames",
    }
)
# what reads a file's text, given its name or a code object
_READERS = frozenset(
    {
        "open",
        "io.open",
        "builtins.open",
        "codecs.open",
        "os.open",
        "tokenize.open",
        "linecache.getline",
        "linecache.getlines",
        "linecache.updatecache",
        "inspect.getsource",
        "inspect.getsourcelines",
        "inspect.findsource",
        "inspect.getcomments",
    }
)
_PATH_READS = frozenset({"read_text", "read_bytes", "open"})
# calls whose result carries what their argument says (a path, a namespace)
_PASS_THROUGH = frozenset(
    {
        "str",
        "type",
        "dict",
        "list",
        "tuple",
        "vars",
        "getattr",
        "os.fspath",
        "pathlib.Path",
        "Path",
        "inspect.getfile",
        "inspect.getsourcefile",
        "inspect.getabsfile",
        "inspect.getframeinfo",
    }
)
_LOOKUPS = frozenset({"get", "pop", "setdefault", "values", "items", "__getitem__", "copy"})
# what a frame lets be set, and the naming metadata libraries fix up on the objects of a
# caller's module (`value.__module__ = 'pkg'`): neither changes what the caller does
_NOT_PATCHES = frozenset(
    (
        "f_trace f_lineno f_trace_lines f_trace_opcodes __module__ __qualname__ __name__ __doc__"
    ).split()
)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


class CallerUse:
    """What one use of a caller's frame does: `source` (reads it) or `patch`."""

    __slots__ = ("detail", "kind")

    def __init__(self, kind: str, detail: str) -> None:
        self.kind, self.detail = kind, detail


def caller_uses(tree: ast.Module, resolve: Resolve) -> list[CallerUse]:
    """Every caller-frame use in the module, each scope with its own assignments (a nested
    function sees its enclosing scope's names)."""
    out: list[CallerUse] = []
    _scope(tree.body, {}, resolve, out)
    return out


def _scope(
    body: list[ast.stmt], outer: dict[str, _Taint], resolve: Resolve, out: list[CallerUse]
) -> None:
    env = dict(outer)
    nodes = list(_own_nodes(body))
    if any(env.values()) or any(_is_source(n, resolve) for n in nodes):
        for _ in range(2):  # twice: a name may be bound from one bound later in the text
            for node in nodes:
                _bind(node, env, resolve)
        for node in nodes:
            _sink(node, env, resolve, out)
    for node in nodes:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            _scope(node.body, env, resolve, out)
        elif isinstance(node, ast.Lambda):
            _scope([ast.Return(node.body)], env, resolve, out)
        elif isinstance(node, ast.ClassDef):
            _scope(node.body, env, resolve, out)


def _own_nodes(body: list[ast.stmt]) -> Iterator[ast.AST]:
    """The nodes of a scope, nested scopes given as themselves but not entered."""
    stack: list[ast.AST] = list(reversed(body))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, _SCOPES):
            stack.extend(reversed(list(ast.iter_child_nodes(node))))


_SOURCE_ATTRS = frozenset(name.rsplit(".", 1)[1] for name in FRAME_SOURCES)


def _is_source(node: ast.AST, resolve: Resolve) -> bool:
    if isinstance(node, ast.Attribute):
        return node.attr == "f_back"
    if not isinstance(node, ast.Call):
        return False
    func = node.func  # an attribute names its function; a bare name may be an alias
    if isinstance(func, ast.Attribute) and func.attr not in _SOURCE_ATTRS:
        return False
    return _frame_call(node, resolve)


def _frame_call(node: ast.Call, resolve: Resolve) -> bool:
    name = resolve(node.func)
    if name == "sys._getframe":
        return bool(node.args) and fold(node.args[0]) not in (0, False)
    return name in FRAME_SOURCES


def _bind(node: ast.AST, env: dict[str, _Taint], resolve: Resolve) -> None:
    if isinstance(node, ast.Assign):
        t = _taint(node.value, env, resolve)
        for target in node.targets:
            _store(target, t, env)
    elif isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.NamedExpr)) and node.value:
        _store(node.target, _taint(node.value, env, resolve), env)
    elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
        t = _taint(node.iter, env, resolve)
        _store(node.target, _Taint.value if t is _Taint.namespace else t, env)
    elif isinstance(node, ast.withitem) and node.optional_vars is not None:
        _store(node.optional_vars, _taint(node.context_expr, env, resolve), env)


def _store(target: ast.AST, t: _Taint, env: dict[str, _Taint]) -> None:
    if isinstance(target, ast.Name):
        if t or target.id in env:
            env[target.id] = max(t, env.get(target.id, _Taint.none))
    elif isinstance(target, (ast.Tuple, ast.List)):
        for elt in target.elts:
            _store(elt, t, env)
    elif isinstance(target, ast.Starred):
        _store(target.value, t, env)


def _taint(node: ast.AST | None, env: dict[str, _Taint], resolve: Resolve) -> _Taint:
    if node is None:
        return _Taint.none
    if isinstance(node, ast.Name):
        return env.get(node.id, _Taint.none)
    if isinstance(node, ast.Attribute):
        if node.attr == "f_back":
            return _Taint.frame
        base = _taint(node.value, env, resolve)
        if base is _Taint.frame and node.attr in ("f_locals", "f_globals"):
            return _Taint.namespace
        return base
    if isinstance(node, ast.Subscript):
        base = _taint(node.value, env, resolve)
        return _Taint.value if base is _Taint.namespace else base
    if isinstance(node, ast.Call):
        if _frame_call(node, resolve):
            return _Taint.frame
        func = node.func
        if isinstance(func, ast.Attribute):
            base = _taint(func.value, env, resolve)
            if base:
                if base is _Taint.namespace:
                    return _Taint.value if func.attr in _LOOKUPS else _Taint.none
                return base
        name = resolve(func)
        if name in _PASS_THROUGH or (name or "").startswith("os.path."):
            return max((_taint(a, env, resolve) for a in node.args), default=_Taint.none)
        return _Taint.none
    if isinstance(node, (ast.BinOp, ast.BoolOp, ast.IfExp, ast.JoinedStr, ast.FormattedValue)):
        parts = [c for c in ast.iter_child_nodes(node) if isinstance(c, ast.expr)]
        return max((_taint(p, env, resolve) for p in parts), default=_Taint.none)
    if isinstance(node, ast.NamedExpr):
        return _taint(node.value, env, resolve)
    return _Taint.none


def _sink(node: ast.AST, env: dict[str, _Taint], resolve: Resolve, out: list[CallerUse]) -> None:
    if isinstance(node, ast.Call):
        func = node.func
        name = resolve(func)
        args = [*node.args, *(k.value for k in node.keywords)]
        if name in _READERS and any(_taint(a, env, resolve) for a in args):
            out.append(CallerUse("source", f"reads its caller's source: {src(node)}"))
        elif (
            isinstance(func, ast.Attribute)
            and func.attr in _PATH_READS
            and _taint(func.value, env, resolve) is _Taint.frame
            and isinstance(func.value, (ast.Call, ast.Name))
        ):
            out.append(CallerUse("source", f"reads its caller's source file: {src(node)}"))
        elif (
            name in ("setattr", "delattr", "object.__setattr__")
            and node.args
            and _taint(node.args[0], env, resolve) is _Taint.value
        ):
            out.append(CallerUse("patch", f"patches an object its caller holds: {src(node)}"))
    elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
        targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
        for t in targets:
            if (
                isinstance(t, ast.Attribute)
                and t.attr not in _NOT_PATCHES
                and _taint(t.value, env, resolve) is _Taint.value
            ):
                out.append(
                    CallerUse("patch", f"sets an attribute of an object its caller holds: {src(t)}")
                )
