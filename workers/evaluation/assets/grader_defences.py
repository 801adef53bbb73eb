"""Runtime defences of a test run: a PEP 578 audit hook armed before any solution code runs.

This file is not imported by the worker: grading writes it into the private grader directory
beside the grader plugin (pytest) or the bootstrap (`assert`), which load it by path and call
`arm()` before the first workspace module is imported. Standard library only.

Why an audit hook: once added, no Python code can remove it, and the run's secret (the
plugin's key, the bootstrap's nonce) then lives only in the hook's closure, which nothing
reaches but `gc` and `ctypes` — whose use by solution code is refused here. The grader's own
code talks to the hook through `sys.audit(CHANNEL, op, ...)`; ops that could help a solution
(a tally, the seal, the completion) count only from the grader's own functions, on the main
thread, with no workspace frame on the stack. Evidence is never secret: it travels inside
the sealed report or the authenticated marker, so a run cannot drop it and still pass.

What it records (the "requester" is the innermost frame of workspace code that is not a test
file grading wrote; stdlib and root-owned site-packages frames between are looked through):
- `open` of a hidden test module, the grader directory or another process's memory — refused;
- frames: `sys._getframe`/`inspect.currentframe`/`inspect.stack`/`traceback.extract_stack`,
  `tb_frame`/`gi_frame`, `sys._current_frames`, `settrace` — refused (function tasks: any;
  repository tasks, whose own code may inspect frames: only a frame of the tests or grader);
- `gc.get_objects`/`get_referrers`/`get_referents`, `ctypes` memory access — refused;
- code made by workspace code (`compile`, `code.replace`, `types.CodeType`; `marshal.loads`
  in function tasks) that claims a file of the image, the tests or the grader — refused: its
  frames would pass for theirs;
- killing its own process, `os._exit`, `os.abort`, `sys.exit` (function tasks) — recorded first;
- builtins or the test framework replaced by code defined in the workspace (checked after
  each test and at the end: attribute assignment raises no audit event);
- always-equal values: every `==` in the tests' asserts goes through `checked_eq`, which fails
  a comparison whose truth rests on an `__eq__` the solution defined and that also holds
  against a fresh sentinel (or a perturbed expected value).

Not seen (no audit event exists, measured on the image's CPython 3.11): `frame.f_back`,
`f_locals`, `f_globals`, `__closure__`, `__globals__`, class attribute assignment. A frame is
only reachable through the audited calls above, so the walk is caught at its first step; a
patch is caught by its effect. A child process starts without the hook.
"""

from __future__ import annotations

import ast
import os
import sys
import threading
import types
from typing import Any

PREFIX = "proctor.grader."
_FRAME_APIS = frozenset(
    {
        ("inspect.py", "currentframe"),
        ("inspect.py", "stack"),
        ("inspect.py", "trace"),
        ("traceback.py", "walk_stack"),
        ("traceback.py", "extract_stack"),
        ("traceback.py", "print_stack"),
        ("traceback.py", "format_stack"),
    }
)
_FRAME_ATTRS = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame"})
_GC = frozenset({"gc.get_objects", "gc.get_referrers", "gc.get_referents"})
_TRACE = frozenset({"sys._current_frames", "sys.settrace", "sys.setprofile"})
_CTYPES_MEMORY = frozenset({"ctypes.string_at", "ctypes.wstring_at", "ctypes.cdata"})
_FATAL = frozenset({1, 2, 3, 6, 9, 15})  # SIGHUP, SIGINT, SIGQUIT, SIGABRT, SIGKILL, SIGTERM
_SCALARS = (int, float, complex, str, bytes, bool, type(None))
_CONTAINERS = (list, tuple, set, frozenset, dict)
_ARRAYS = frozenset({"numpy", "pandas", "torch", "jax", "tensorflow", "sympy", "scipy"})
MAX_EVIDENCE = 50
FINAL_OPS = frozenset({"seal", "finish", "failed", "exit"})  # after one, the run has its record
MAX_VISITS = 10_000
CHANNEL = ""  # set by arm(): the event name the grader's own code uses
_TRUSTED: Any = None  # set by arm(): whether a directory is out of the sandbox user's reach
_TESTS: frozenset[str] = frozenset()  # set by arm(): the test files grading wrote (real paths)


class Refused(PermissionError):
    """An operation the grader does not allow solution code while the tests run."""


class _Sentinel:
    """Equal to nothing but itself: what an always-equal object is equal to anyway."""

    __slots__ = ()


def arm(
    *,
    secret: bytes,
    trusted: Any,
    grader_dir: str,
    test_files: list[str],
    strict: bool,
    callers: dict[str, tuple[Any, str | None]],
    on_finish: Any,
    launcher: list[Any] | None = None,
) -> str:
    """Install the hook; return the channel the grader's code sends its ops on.

    `trusted(dir)` says whether a directory is out of the sandbox user's reach; `callers`
    maps each op that helps a run (tally, seal, finish) to the code object allowed to send it
    and the name of the function that must have called that one (pluggy's `_multicall`);
    `on_finish(op, secret, evidence, *args)` does the op's work with the secret; `launcher`
    are the frames below the run (the runner's, when it forked to run the bootstrap): a walk
    up the stack ends there.
    """
    global CHANNEL, _TRUSTED, _TESTS
    channel = PREFIX + os.urandom(8).hex()
    CHANNEL, _TRUSTED = channel, trusted
    grader = os.path.realpath(grader_dir).rstrip("/") + "/"
    tests = {os.path.realpath(p) for p in test_files}
    _TESTS = frozenset(tests)
    test_modules = {p for p in tests if _is_test_module(p)}
    ours = {os.path.realpath(__file__)}
    kinds: dict[str, str] = {}
    busy: set[int] = set()
    evidence: list[dict[str, str]] = []
    main = threading.main_thread().ident
    floor = frozenset(map(id, launcher or ()))  # running all along: their ids stay theirs
    done: set[str] = set()
    real_exit, real_abort, real_sys_exit = os._exit, os.abort, sys.exit
    audit, getframe, get_ident = sys.audit, sys._getframe, threading.get_ident

    def kind(filename: str) -> str:
        """'trusted' (stdlib, image), 'grader', 'test' (written by grading) or 'solution'."""
        found = kinds.get(filename)
        if found is None:
            if filename.startswith("<frozen"):
                found = "trusted"
            elif filename.startswith("<"):
                found = "solution"  # exec'd text
            else:
                real = os.path.realpath(filename)
                if real in ours or real.startswith(grader):
                    found = "grader"
                elif real in tests:
                    found = "test"
                elif trusted(os.path.dirname(real)):
                    found = "trusted"
                else:
                    found = "solution"
            kinds[filename] = found
        return found

    def requester(frame: Any) -> tuple[Any, Any]:
        """The innermost non-trusted frame, and the trusted code it called (or None)."""
        via = None
        while frame is not None and id(frame) not in floor:
            code = frame.f_code
            if kind(code.co_filename) != "trusted":
                return frame, via
            via = code
            frame = frame.f_back
        return None, via

    def solution_frame(frame: Any) -> Any:
        who, _ = requester(frame)
        return who if who is not None and kind(who.f_code.co_filename) == "solution" else None

    def note(what: str, detail: str, frame: Any = None) -> None:
        if frame is not None:
            code = frame.f_code
            detail = f"{detail} ({os.path.basename(code.co_filename)}:{frame.f_lineno})"
        item = {"kind": what, "detail": detail[:300]}
        if len(evidence) < MAX_EVIDENCE and item not in evidence:
            evidence.append(item)

    def clean_stack(frame: Any) -> bool:
        while frame is not None and id(frame) not in floor:
            if kind(frame.f_code.co_filename) in ("solution", "test"):
                return False
            frame = frame.f_back
        return True

    def grader_op(op: str, args: tuple[Any, ...], frame: Any) -> None:
        if op == "evidence":
            note(str(args[0]), str(args[1]))
            return
        if op == "check":  # after each test: the cheap part (builtins, the grader's own)
            check_patches(full=bool(args and args[0]))
            return
        if op == "exit":  # os._exit or os.abort from workspace code: the process ends now
            note("early-exit", f"{args[0]} called from workspace code at {args[1]}")
            if args[0] != "sys.exit" and not done & FINAL_OPS:
                done.add("exit")  # the last word: nothing seals after it
                on_finish("exit", secret, list(evidence))
            return
        code, parent = callers.get(op, (None, None))
        if (
            code is None
            or frame is None
            or frame.f_code is not code
            or (parent is not None and getattr(frame.f_back, "f_code", None) is None)
            or (parent is not None and frame.f_back.f_code.co_name != parent)
            or get_ident() != main
            or op in done
            or "exit" in done
            or not clean_stack(frame.f_back)
        ):
            return  # not the grader's own call: ignored
        if op != "tally":
            check_patches(full=True)
            done.add(op)
        on_finish(op, secret, list(evidence), *args)

    def origin(value: Any) -> str:
        """Where a value's code was defined ('solution', 'trusted', …, 'unknown')."""
        for candidate in (value, getattr(value, "__func__", None), type(value)):
            code = getattr(candidate, "__code__", None)
            if code is not None:
                return kind(code.co_filename)
        cls = value if isinstance(value, type) else type(value)
        module = sys.modules.get(getattr(cls, "__module__", "") or "")
        path = getattr(module, "__file__", None)
        return kind(path) if isinstance(path, str) else "unknown"

    def snapshot() -> list[tuple[str, bool, dict[str, Any], dict[str, int]]]:
        """The namespaces a patch would change: builtins and the grader's own first (checked
        after every test), then the test framework's modules and classes (their callables;
        checked at the end, where a patch that made tests pass is still in place)."""
        import builtins

        found = [
            ("builtins", True, builtins.__dict__, {k: id(v) for k, v in vars(builtins).items()})
        ]
        for name, module in list(sys.modules.items()):
            space = getattr(module, "__dict__", None)
            if not isinstance(space, dict):
                continue
            own = space is globals() or name.startswith("_proctor_")
            if not own and name.split(".")[0] not in ("pytest", "_pytest", "pluggy", "unittest"):
                continue
            found.append((name, own, space, _callables(space, own)))
            for key, value in list(space.items()):
                if isinstance(value, type) and getattr(value, "__module__", None) == name:
                    inner = value.__dict__
                    found.append((f"{name}.{key}", own, inner, _callables(inner, own)))  # type: ignore[arg-type]
        found.sort(key=lambda entry: not entry[1])
        return found

    baseline: list[Any] = []

    def check_patches(*, full: bool) -> None:
        for where, own, space, ids in baseline:
            if not (own or full):
                break  # the framework's part comes last
            for key, was in ids.items():
                value = space.get(key, _Sentinel)
                if value is _Sentinel or id(value) == was:
                    continue
                if (own and where != "builtins") or origin(value) == "solution":
                    note("patch", f"{where}.{key} replaced by workspace code")
        for name, module in list(sys.modules.items()):
            space = getattr(module, "__dict__", None)
            if isinstance(space, dict) and space.get("@proctor_eq", checked_eq) is not checked_eq:
                note("patch", f"the grader's comparison in {name} was replaced")

    def exit_guard(real: Any, label: str, recorded: bool) -> Any:
        def guarded(*args: Any) -> Any:
            if recorded:
                who = solution_frame(getframe(1))
                if who is not None:
                    where = f"{os.path.basename(who.f_code.co_filename)}:{who.f_lineno}"
                    audit(channel, "exit", label, where)
            return real(*args)

        guarded.__name__ = getattr(real, "__name__", label)
        return guarded

    def forged_location(event: str, source: Any, filename: Any) -> None:
        """Code made by workspace code must be the workspace's: a file name of the image, the
        tests or the grader would make its frames look like theirs (which the walks above
        look through). The import system compiling a real file of the image is not that."""
        if isinstance(filename, bytes):
            filename = os.fsdecode(filename)
        if not isinstance(filename, str) or kind(filename) == "solution":
            return
        caller = getframe(3)
        code = caller.f_code
        if event == "code.__new__" and kind(code.co_filename) == "trusted":
            return  # the image's own code.replace (`types.coroutine`), its file names kept
        who = solution_frame(caller)
        if who is None:
            return
        if code.co_name == "_call_with_frames_removed" and caller.f_back is not None:
            code = caller.f_back.f_code  # importlib's trampoline: who called it
        if event == "compile" and (
            (code.co_name == "source_to_code" and _same_file(source, filename))
            # pytest's assertion rewriting of a test module it read from that very file
            or (code.co_name == "_rewrite_test" and kind(code.co_filename) == "trusted")
        ):
            return
        note("forged-location", f"workspace code made code that claims {filename}", who)
        raise Refused("code claiming another file is not allowed while the tests run")

    def hook(event: str, args: tuple[Any, ...]) -> None:
        ident = get_ident()
        if ident in busy:
            return
        busy.add(ident)
        try:
            handle(event, args)
        finally:
            busy.discard(ident)

    def handle(event: str, args: tuple[Any, ...]) -> None:
        if event == channel:
            if args:
                grader_op(str(args[0]), tuple(args[1:]), getframe(2))
            return
        if event in ("compile", "code.__new__") and len(args) >= 2:
            forged_location(event, args[0], args[1])
            return
        if event in ("marshal.loads", "marshal.load") and strict:
            caller = getframe(2)
            if caller.f_code.co_filename.startswith("<frozen"):
                return  # the import system loading a cached module
            who = solution_frame(caller)
            if who is not None:
                note("forged-location", f"workspace code unmarshals code ({event})", who)
                raise Refused(f"{event} is not allowed while the tests run")
            return
        if event == "open":
            path = args[0]
            if isinstance(path, bytes):
                path = os.fsdecode(path)
            if not isinstance(path, str):
                return
            real = os.path.realpath(path)
            if not (real in test_modules or real.startswith(grader) or _other_memory(real)):
                return
            who = solution_frame(getframe(2))
            if who is None:
                return
            note("reads-tests", f"workspace code opened {path}", who)
            raise Refused(f"reading {path} is not allowed while the tests run")
        if event in ("sys._getframe", "object.__getattr__"):
            if event == "object.__getattr__":
                if len(args) < 2 or args[1] not in _FRAME_ATTRS:
                    return
                got = getattr(args[0], str(args[1]), None)
            else:
                got = args[0] if args else None
            caller = getframe(2)
            code = caller.f_code
            if kind(code.co_filename) == "trusted" and (
                (os.path.basename(code.co_filename), code.co_name) not in _FRAME_APIS
            ):
                return  # the stdlib or the framework looking at its own callers: no walk
            who, via = requester(caller)
            if who is None or kind(who.f_code.co_filename) != "solution":
                return
            api = via is not None and (
                (os.path.basename(via.co_filename), via.co_name) in _FRAME_APIS
            )
            if not (who is caller or api):
                return  # namedtuple, logging, warnings… looking at their own callers
            target = kind(got.f_code.co_filename) if got is not None else "solution"
            if strict or target != "solution":
                note("frames", "workspace code reached for the call stack", who)
                raise Refused("inspecting the call stack is not allowed while the tests run")
            return
        if event in _GC or (strict and event in _TRACE):
            who = solution_frame(getframe(2))
            if who is not None:
                note("heap" if event in _GC else "frames", event, who)
                raise Refused(f"{event} is not allowed while the tests run")
            return
        if event.startswith("ctypes.") and (event in _CTYPES_MEMORY or strict):
            if event == "ctypes.dlopen":
                return
            who = solution_frame(getframe(2))
            if who is not None:
                note("ctypes", event, who)
                raise Refused(f"{event} is not allowed while the tests run")
            return
        if (
            event == "os.kill"
            and len(args) >= 2
            and args[1] in _FATAL
            and args[0] in (0, os.getpid(), -os.getpgid(0))
        ):
            who = solution_frame(getframe(2))
            if who is not None:
                note("early-exit", f"signal {args[1]} to its own process", who)
                raise Refused("ending the test process is not allowed while the tests run")

    os._exit = exit_guard(real_exit, "os._exit", True)
    os.abort = exit_guard(real_abort, "os.abort", True)
    posix = sys.modules.get("posix")
    if posix is not None:
        posix._exit = os._exit  # type: ignore[attr-defined]
        posix.abort = os.abort  # type: ignore[attr-defined]
    sys.exit = exit_guard(real_sys_exit, "sys.exit", strict)
    baseline.extend(snapshot())
    sys.addaudithook(hook)
    return channel


def _callables(space: dict[str, Any], everything: bool) -> dict[str, int]:
    """What of a namespace to watch: every name of ours, the callables of anyone else's
    (a framework's plain data, counters and caches, changes as it runs)."""
    return {k: id(v) for k, v in space.items() if everything or callable(v)}


def _is_test_module(path: str) -> bool:
    base = os.path.basename(path)
    return base.endswith(".py") and (
        base.startswith("test_") or base.endswith("_test.py") or base == "conftest.py"
    )


def _same_file(source: Any, path: str) -> bool:
    """Whether `source` is what the file at `path` holds (the import system's compile)."""
    if not isinstance(source, (bytes, bytearray, str)):
        return False
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError:
        return False
    return (source.encode() if isinstance(source, str) else bytes(source)) == data


def _other_memory(path: str) -> bool:
    if not path.startswith("/proc/"):
        return False
    parts = path.split("/")
    return len(parts) >= 4 and parts[3] in ("mem", "environ", "maps")


# --------------------------------------------------------------------- comparisons

EQ_NAME = "@proctor_eq"  # not an identifier: no test source can name or shadow it


class _Compares(ast.NodeTransformer):
    """`assert a == b` (and `==` anywhere inside an assert) becomes `assert @proctor_eq(a, b)`."""

    def visit_Assert(self, node: ast.Assert) -> ast.Assert:
        node.test = _EqInAssert().visit(node.test)
        return node


class _EqInAssert(ast.NodeTransformer):
    def visit_Compare(self, node: ast.Compare) -> ast.expr:
        self.generic_visit(node)
        if len(node.ops) != 1 or not isinstance(node.ops[0], ast.Eq):
            return node
        call = ast.Call(
            func=ast.Name(id=EQ_NAME, ctx=ast.Load()),
            args=[node.left, node.comparators[0]],
            keywords=[],
        )
        return ast.copy_location(call, node)


def rewrite_compares(tree: ast.Module, module: str | None = None) -> ast.Module:
    """Route the asserts' comparisons through `checked_eq`; with `module`, bind it by an
    import placed after the docstring and `__future__` imports (pytest's test modules)."""
    _Compares().visit(tree)
    if module is not None:
        at = 0
        for at, stmt in enumerate(tree.body):
            doc = at == 0 and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
            future = isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__"
            if not (doc or future):
                break
        else:
            at = len(tree.body)
        bind = ast.ImportFrom(module=module, names=[ast.alias("checked_eq", EQ_NAME)], level=0)
        tree.body.insert(at, bind)
    ast.fix_missing_locations(tree)
    return tree


def explain_as_comparison(rewriter: Any) -> None:
    """Make pytest's assertion rewriter explain `@proctor_eq(a, b)` as the `a == b` it was:
    a failure then reads `assert 3 == 4` (with pytest's diff of the two values), not the
    wrapper. The comparison is still the trusted one: the rewriter's own `a == b` is
    replaced by the call; where that cannot be done (another pytest's rewriter), the call
    is explained as a call, as before."""
    original = rewriter.visit_Call

    def visit_Call(self: Any, call: ast.Call) -> Any:
        func = call.func
        if not (
            isinstance(func, ast.Name)
            and func.id == EQ_NAME
            and len(call.args) == 2
            and not call.keywords
        ):
            return original(self, call)
        statements = self.statements
        mark = len(statements)
        compare = ast.Compare(left=call.args[0], ops=[ast.Eq()], comparators=[call.args[1]])
        result = self.visit_Compare(ast.copy_location(compare, call))
        # the operands' statements come first, then the comparison's own `x = l == r`
        for statement in reversed(statements[mark:]):
            value = getattr(statement, "value", None)
            if (
                isinstance(statement, ast.Assign)
                and isinstance(value, ast.Compare)
                and len(value.ops) == 1
                and isinstance(value.ops[0], ast.Eq)
            ):
                trusted = ast.Call(
                    func=ast.Name(id=EQ_NAME, ctx=ast.Load()),
                    args=[value.left, value.comparators[0]],
                    keywords=[],
                )
                statement.value = ast.copy_location(trusted, value)
                return result
        del statements[mark:]  # never an untrusted `==`: explained as the call it is
        return original(self, call)

    rewriter.visit_Call = visit_Call


def checked_eq(left: Any, right: Any) -> Any:
    """`left == right`, failed when its truth rests on an equality the solution controls."""
    result = left == right
    if type(result) is not bool:
        root = (type(result).__module__ or "").split(".")[0]
        if root in _ARRAYS:
            return result
        try:
            truth = bool(result)
        except Exception:
            return result
    else:
        truth = result
    if not truth:
        return result
    for bad in (_suspect(left, right), _suspect(right, left)):
        # the test module's namespace says which helpers the tests hold themselves
        if bad is not None and not _exempt(bad, sys._getframe(1).f_globals):
            name = type(bad).__qualname__
            found = f"a {name} equal to values it is not (its __eq__ holds for anything)"
            sys.audit(CHANNEL, "evidence", "always-equal", found)
            return False
    return result


def _suspect(value: Any, other: Any) -> Any:
    """An always-equal value in `value` (itself or inside it), or None."""
    budget = [MAX_VISITS]
    bad = _always_equal(value, budget, 0)
    if bad is None and type(value) not in _SCALARS + _CONTAINERS:
        perturbed = _perturb(other)
        if perturbed is not _Sentinel and _truthy(lambda: value == perturbed):
            bad = value
    return bad


def _always_equal(value: Any, budget: list[int], depth: int) -> Any:
    budget[0] -= 1
    if budget[0] < 0 or depth > 6:
        return None
    kind = type(value)
    if kind in _SCALARS:
        return None
    if kind in _CONTAINERS:
        items = value.items() if kind is dict else value
        for item in list(items):
            for part in item if kind is dict else (item,):
                found = _always_equal(part, budget, depth + 1)
                if found is not None:
                    return found
        return None
    probe = _Sentinel()
    if _truthy(lambda: value == probe) or _falsy(lambda: value != probe):
        return value
    return None


def _truthy(compare: Any) -> bool:
    try:
        return bool(compare())
    except Exception:
        return False


def _falsy(compare: Any) -> bool:
    """Whether a comparison answered, and answered no (one that raises said nothing)."""
    try:
        return not compare()
    except Exception:
        return False


def _perturb(other: Any) -> Any:
    kind = type(other)
    if kind is bool:
        return not other
    if kind in (int, float):
        return other + max(1, abs(other))
    if kind is str:
        return other + "\x00proctor"
    if kind is bytes:
        return other + b"\x00proctor"
    if kind in (list, tuple):
        return other + kind([_Sentinel()])
    if kind is dict:
        return {**other, _Sentinel(): None}
    if kind in (set, frozenset):
        return other | {_Sentinel()}
    return _Sentinel


def _exempt(value: Any, namespace: dict[str, Any]) -> bool:
    """Always-equal helpers of the tests' own: a class the tests define (toolz's `NoCompare`),
    or one of the image's (`mock.ANY`) that the test module took into its namespace itself.
    An `__eq__` is the tests' or the image's by its code's file, which workspace code cannot
    forge while the tests run (`forged_location`); the image's are helpers the workspace may
    import too, so they count only when the tests hold them (by name, or in a module they
    imported, one package level down: `mock.ANY`, `unittest.mock.ANY`)."""
    eq = getattr(type(value), "__eq__", None)
    filename = getattr(getattr(eq, "__code__", None), "co_filename", None)
    if not isinstance(filename, str):
        return False
    if os.path.realpath(filename) in _TESTS:
        return True
    if not _image_file(filename):
        return False
    modules = [m for m in namespace.values() if isinstance(m, types.ModuleType)]
    modules += [m for p in modules[:] for m in vars(p).values() if isinstance(m, types.ModuleType)]
    return any(held is value for held in namespace.values()) or any(
        held is value for m in modules for held in vars(m).values()
    )


def _image_file(path: str) -> bool:
    return _TRUSTED is not None and bool(_TRUSTED(os.path.dirname(os.path.realpath(path))))
