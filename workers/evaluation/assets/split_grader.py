"""Grading across a process boundary: the tests in one process, the solution in another.

This file is not imported by the worker. It is a shared file (`protocol.share`) that a root
server's zygote compiles once, before any episode (`runner.Zygote`); for a split run the
zygote forks two processes from it that never saw a request:

- the **solution**, the episode's uid in /workspace: it imports the solution's modules and
  answers the grader's requests (import, call, attribute, iteration, …), one at a time;
- the **grader**, a uid of its own (group: the episode's, so it can read the workspace but
  the episode can neither signal, trace nor read it): it reads the hidden tests from a pipe
  only it holds, runs them with every workspace module replaced by a proxy, and writes its
  record to another pipe only it holds. The tests are never on disk where the solution's
  uid could read them.

Only plain data crosses between the two (None, bool, int, float, complex, str, bytes,
numpy arrays of numbers, and lists, tuples, sets, frozensets and dicts of them), as tagged
JSON that the grader decodes strictly: an always-equal object, a frame walk into the
tests, a read of the expected values or a forged record are impossible by construction,
not detected. What is not plain data stays in the solution's process and is reached
through a handle (`Remote`), whose `==` is identity: it equals no expected value.

Two shapes of tests run so (`grading.split_shape`): `programs` (the `assert` format: each
test file runs as `__main__`, a pass is every file run to its end) and `functions` (pytest
files of plain `test_*` functions without fixtures or marks: each function is a test case,
as pytest would name and run it). Standard library only.
"""

from __future__ import annotations

import _posixsubprocess
import base64
import builtins
import importlib
import importlib.abc
import importlib.machinery
import json
import linecache
import os
import subprocess
import sys
import traceback
import types
from collections.abc import Callable
from typing import Any

WORKSPACE = "/workspace"
MAX_FRAME = 64 << 20  # one message between the two processes
MAX_DEPTH = 200  # nesting of one value
MAX_MESSAGE = 2000  # of an exception's text in the record
MAX_TESTS_BYTES = 256 << 20
HEADER = 4
SYSTEM_EXITS = ("SystemExit", "KeyboardInterrupt", "GeneratorExit")
ARRAY_KINDS = "biufc"  # numpy arrays of these dtype kinds cross as data (booleans, numbers)


class Gone(BaseException):
    """The solution's process ended, or broke the protocol: nothing after it is a pass.
    A `BaseException`, so a test's `except Exception` does not take it for a wrong answer."""


class SolutionError(Exception):
    """The solution raised an exception of a type the grader does not have."""


# -- the wire: length-prefixed JSON frames on a stream socket --------------------------------


def send(fd: int, message: object) -> None:
    data = json.dumps(message, separators=(",", ":")).encode()
    write_all(fd, len(data).to_bytes(HEADER, "big") + data)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _read_exactly(fd: int, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def receive(fd: int) -> Any:
    size = int.from_bytes(_read_exactly(fd, HEADER), "big")
    if size > MAX_FRAME:
        raise ValueError("a message of %d bytes" % size)
    return json.loads(_read_exactly(fd, size))


# -- plain data ------------------------------------------------------------------------------


def encode(value: Any, other: Callable[[Any], Any], depth: int = 0) -> Any:
    """`value` as tagged JSON; what is not plain data goes to `other` (a handle, or refused)."""
    kind = type(value)
    if value is None or kind is bool or kind is int or kind is float or kind is str:
        return value
    if depth > MAX_DEPTH:
        raise ValueError("a value nested deeper than %d levels cannot cross" % MAX_DEPTH)
    depth += 1
    if kind is list:
        return [encode(v, other, depth) for v in value]
    if kind is tuple:
        return {"t": [encode(v, other, depth) for v in value]}
    if kind is dict:
        return {"d": [[encode(k, other, depth), encode(v, other, depth)] for k, v in value.items()]}
    if kind is set or kind is frozenset:
        return {"s" if kind is set else "f": [encode(v, other, depth) for v in value]}
    if kind is bytes:
        return {"b": base64.b64encode(value).decode()}
    if kind is complex:
        return {"c": [value.real, value.imag]}
    return other(value)


def decode(data: Any, resolve: Callable[[int], Any], depth: int = 0) -> Any:
    """The value of tagged JSON, strictly: anything else is a `ValueError`."""
    kind = type(data)
    if data is None or kind is bool or kind is int or kind is float or kind is str:
        return data
    if depth > MAX_DEPTH + 1:
        raise ValueError("nested too deeply")
    depth += 1
    if kind is list:
        return [decode(v, resolve, depth) for v in data]
    if kind is not dict or len(data) != 1:
        raise ValueError("not plain data")
    ((tag, body),) = data.items()
    if tag == "h" and type(body) is int:
        return resolve(body)
    if tag == "b" and type(body) is str:
        return base64.b64decode(body, validate=True)
    if tag == "n":
        return _array(body)
    if tag == "c" and type(body) is list and len(body) == 2:
        if not all(type(part) in (int, float) for part in body):
            raise ValueError("not a complex number")
        return complex(body[0], body[1])
    if type(body) is not list:
        raise ValueError("not plain data")
    if tag == "t":
        return tuple(decode(v, resolve, depth) for v in body)
    if tag == "s":
        return {decode(v, resolve, depth) for v in body}
    if tag == "f":
        return frozenset(decode(v, resolve, depth) for v in body)
    if tag == "d":
        if not all(type(pair) is list and len(pair) == 2 for pair in body):
            raise ValueError("not a dict's items")
        return {decode(k, resolve, depth): decode(v, resolve, depth) for k, v in body}
    raise ValueError("not plain data")


def array_data(value: Any) -> dict[str, Any] | None:
    """A numpy array of numbers or booleans as tagged data (None: not one)."""
    if type(value).__name__ != "ndarray" or getattr(value.dtype, "kind", "") not in ARRAY_KINDS:
        return None
    array = value.copy(order="C")  # its own bytes, whatever view or strides it had
    return {"n": [array.dtype.str, list(array.shape), base64.b64encode(array.data).decode()]}


def _array(body: Any) -> Any:
    """A numpy array of numbers or booleans, rebuilt from its dtype, shape and bytes (numpy
    is imported only when one crosses; an object or structured dtype never does)."""
    if type(body) is not list or len(body) != 3 or type(body[0]) is not str:
        raise ValueError("not an array")
    import numpy

    dtype = numpy.dtype(body[0])
    shape = body[1]
    if dtype.kind not in ARRAY_KINDS or dtype.fields is not None or type(shape) is not list:
        raise ValueError("not an array of numbers")
    if not all(type(n) is int and n >= 0 for n in shape) or type(body[2]) is not str:
        raise ValueError("not an array's shape")
    data = base64.b64decode(body[2], validate=True)
    return numpy.frombuffer(data, dtype=dtype).reshape(shape).copy()


# -- the solution's side ---------------------------------------------------------------------


class Objects:
    """What the solution's process handed out by handle."""

    def __init__(self) -> None:
        self.table: dict[int, Any] = {}

    def handle(self, value: Any) -> dict[str, int]:
        self.table[id(value)] = value
        return {"h": id(value)}

    def get(self, number: int) -> Any:
        try:
            return self.table[number]
        except KeyError:
            raise ValueError("no such handle") from None

    def plain(self, value: Any) -> Any:
        """A value as the grader gets it: plain data as itself, subclasses of plain types as
        their base type (an IntEnum as its int, a namedtuple as its tuple), a numpy scalar
        as its Python value, anything else by handle."""
        return encode(value, self._other)

    def _other(self, value: Any) -> Any:
        if isinstance(value, bool):
            return bool(value)
        for base in (int, float, str):  # the base type's own conversion, not an override's
            if isinstance(value, base):
                return encode(getattr(base, "__%s__" % base.__name__)(value), self._other)
        if isinstance(value, bytes):
            return encode(bytes(memoryview(value)), self._other)
        if isinstance(value, complex):
            return encode(complex(value.real, value.imag), self._other)
        for container in (tuple, list, dict, set, frozenset):
            if isinstance(value, container):
                return encode(container(value), self._other)
        if type(value).__module__ == "numpy" and getattr(value, "ndim", None) == 0:
            item = value.item()
            if type(item) is not type(value):
                return encode(item, self._other)
        return array_data(value) or self.handle(value)


def _namespace(module: types.ModuleType, objects: Objects) -> dict[str, Any]:
    names = {k: v for k, v in vars(module).items() if not k.startswith("__") or k == "__all__"}
    return {"d": [[name, objects.plain(value)] for name, value in names.items()]}


def _answer(objects: Objects, request: list[Any]) -> Any:
    op, *args = request
    if op == "import":
        return _namespace(importlib.import_module(str(args[0])), objects)
    target = objects.get(args[0])
    if op == "call":
        positional = decode(args[1], objects.get)
        named = decode(args[2], objects.get)
        return objects.plain(target(*positional, **named))
    if op == "getattr":
        return objects.plain(getattr(target, str(args[1])))
    if op == "iter":
        return objects.plain(iter(target))
    if op == "next":
        return objects.plain(next(target))
    if op == "len":
        return len(target)
    if op == "bool":
        return bool(target)
    if op == "getitem":
        return objects.plain(target[decode(args[1], objects.get)])
    if op == "contains":
        return decode(args[1], objects.get) in target
    if op == "isinstance":
        return isinstance(decode(args[1], objects.get), target)
    if op == "issubclass":
        other = decode(args[1], objects.get)
        return isinstance(other, type) and issubclass(other, target)
    if op == "repr":
        return repr(target)
    if op == "str":
        return str(target)
    raise ValueError("no such request: %r" % (op,))


def _failure(exc: BaseException) -> dict[str, Any]:
    names = [cls.__name__ for cls in type(exc).__mro__ if cls.__module__ == "builtins"]
    return {"raise": names, "message": str(exc)[:MAX_MESSAGE]}


def serve_solution(channel: int) -> None:
    """Answer the grader until it hangs up. The solution's own exceptions are shown on its
    stderr (as a test run would show them) and sent back by type; an exit ends the run."""
    sys.path.insert(0, WORKSPACE)
    objects = Objects()
    while True:
        try:
            request = receive(channel)
        except (EOFError, OSError, ValueError):
            os._exit(0)
        try:
            reply: dict[str, Any] = {"ok": _answer(objects, request)}
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) or exc.code is None else 1
            _flush()
            send(channel, {"exit": code})
            os._exit(0)
        except BaseException as exc:  # the solution's, for the grader to see
            if request and request[0] in ("import", "call"):
                _show(exc, WORKSPACE)  # as its own run would have shown it
            reply = _failure(exc)
        _flush()
        try:
            send(channel, reply)
        except (OverflowError, TypeError, ValueError, RecursionError) as exc:
            send(channel, _failure(ValueError("its result cannot cross: %s" % exc)))


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass


# -- the grader's side -----------------------------------------------------------------------


class Link:
    """The grader's end of the channel: one request, one answer."""

    def __init__(self, channel: int) -> None:
        self.channel = channel
        self.gone = ""  # why the solution's process is no longer there

    def ask(self, op: str, *args: Any) -> Any:
        if self.gone:
            raise Gone(self.gone)
        try:
            send(self.channel, [op, *args])
            answer = receive(self.channel)
        except (EOFError, OSError) as exc:
            self.gone = "the solution's process ended during a call (%s)" % type(exc).__name__
            raise Gone(self.gone) from None
        except (ValueError, RecursionError):
            self.gone = "the solution's process answered out of protocol"
            raise Gone(self.gone) from None
        if type(answer) is not dict or len(answer) not in (1, 2):
            self.gone = "the solution's process answered out of protocol"
            raise Gone(self.gone)
        if "exit" in answer:
            self.gone = "the solution exited (%r) during a call" % (answer["exit"],)
            raise Gone(self.gone)
        if "raise" in answer:
            raised = _exception(answer.get("raise"), answer.get("message"))
            if isinstance(raised, StopIteration | StopAsyncIteration) and op != "next":
                # only an iterator's end may end the tests' loop (`all(map(candidate, …))`
                # would pass on an empty run): elsewhere it is an error, as PEP 479 has it
                raised = RuntimeError("the solution raised %s" % type(raised).__name__)
            raise raised
        try:
            return decode(answer.get("ok"), self.remote)
        except (ValueError, TypeError, RecursionError, KeyError) as exc:
            self.gone = "the solution's process answered out of protocol (%s)" % exc
            raise Gone(self.gone) from None

    def remote(self, number: int) -> Remote:
        return Remote(self, number)

    def argument(self, value: Any) -> Any:
        if type(value) is Remote and value._link is self:
            return {"h": value._number}
        array = array_data(value)
        if array is not None:
            return array
        raise TypeError("a %s cannot be passed to the solution's process" % type(value).__name__)


def _exception(names: object, message: object) -> BaseException:
    """The solution's exception as the grader's own builtin type nearest to it."""
    text = message if isinstance(message, str) else ""
    for name in names if isinstance(names, list) else []:
        if name in SYSTEM_EXITS:
            return Gone("the solution raised %s" % name)
        cls = getattr(builtins, str(name), None)
        if isinstance(cls, type) and issubclass(cls, Exception):
            try:
                return cls(text) if text else cls()
            except TypeError:  # a builtin type with other arguments (UnicodeDecodeError)
                continue
    return SolutionError(text)


class Remote:
    """A value that stays in the solution's process. Its `==` and hash are identity."""

    __slots__ = ("_link", "_number")

    def __init__(self, link: Link, number: int) -> None:
        self._link = link
        self._number = number

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        link = self._link
        positional = encode(list(args), link.argument)
        named = encode(kwargs, link.argument)
        return link.ask("call", self._number, positional, named)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name not in ("__name__", "__qualname__", "__doc__"):
            raise AttributeError(name)
        return self._link.ask("getattr", self._number, name)

    def __iter__(self) -> Any:
        return self._link.ask("iter", self._number)

    def __next__(self) -> Any:
        return self._link.ask("next", self._number)

    def __len__(self) -> int:
        return int(self._link.ask("len", self._number))

    def __bool__(self) -> bool:
        return self._link.ask("bool", self._number) is True

    def __getitem__(self, key: Any) -> Any:
        return self._link.ask("getitem", self._number, encode(key, self._link.argument))

    def __contains__(self, item: Any) -> bool:
        return self._link.ask("contains", self._number, encode(item, self._link.argument)) is True

    def __instancecheck__(self, instance: Any) -> bool:
        """`isinstance(x, SolutionClass)`: asked of the solution's process."""
        return (
            self._link.ask("isinstance", self._number, encode(instance, self._link.argument))
            is True
        )

    def __subclasscheck__(self, subclass: Any) -> bool:
        return (
            self._link.ask("issubclass", self._number, encode(subclass, self._link.argument))
            is True
        )

    def __repr__(self) -> str:
        try:
            return str(self._link.ask("repr", self._number))
        except BaseException:
            return "<the solution's object>"

    def __str__(self) -> str:
        try:
            return str(self._link.ask("str", self._number))
        except BaseException:
            return "<the solution's object>"


class Modules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports for the tests: their own `.py` files from memory, and the workspace's modules
    as proxies of the solution's process. The grader's own `sys.path` (the standard library,
    the image's packages) comes first: the solution cannot shadow what the tests import."""

    def __init__(self, link: Link, sources: dict[str, str], root: str) -> None:
        self.link = link
        self.sources = sources  # module name -> test file path
        self.root = root

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name in self.sources:
            origin = os.path.join(self.root, self.sources[name])
            return importlib.machinery.ModuleSpec(name, self, origin=origin)
        if path is None and _in_workspace(name):
            return importlib.machinery.ModuleSpec(name, self, origin=WORKSPACE)
        return None

    def create_module(self, spec: Any) -> None:
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        name = module.__name__
        if name in self.sources:
            path = self.sources[name]
            module.__file__ = os.path.join(self.root, path)
            exec(TESTS.code(path), module.__dict__)
            return
        namespace = self.link.ask("import", name)
        if type(namespace) is dict:
            module.__dict__.update(namespace)


def _in_workspace(name: str) -> bool:
    top = name.partition(".")[0]
    for candidate in (top + ".py", top):
        try:
            os.stat(os.path.join(WORKSPACE, candidate))
            return True
        except OSError:
            continue
    return False


class Tests:
    """The hidden tests, read from the grader's pipe: sources by path, compiled on demand,
    shown in tracebacks (`linecache`) though they are on no disk the solution can read."""

    def __init__(self, files: dict[str, str], root: str) -> None:
        self.files = files
        self.root = root

    def code(self, path: str) -> types.CodeType:
        source = self.files[path]
        full = os.path.join(self.root, path)
        linecache.cache[full] = (len(source), None, source.splitlines(True), full)
        return compile(source, full, "exec", dont_inherit=True)


TESTS = Tests({}, "")


def _take_tests(fd: int) -> dict[str, Any]:
    chunks, size = [], 0
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_TESTS_BYTES:
            raise ValueError("the tests are too large")
    os.close(fd)
    data: dict[str, Any] = json.loads(b"".join(chunks))
    return data


def _place_data(files: dict[str, str], binary: dict[str, str], root: str) -> None:
    """The tests' data files (not their programs) in the grader's own 0700 directory."""
    os.mkdir(root, 0o700)
    for path, content in [*files.items(), *binary.items()]:
        if path.endswith(".py") and path in files:
            continue
        full = os.path.normpath(os.path.join(root, path))
        if not full.startswith(root + "/"):
            continue
        os.makedirs(os.path.dirname(full), 0o700, exist_ok=True)
        data = base64.b64decode(content) if path in binary else content.encode()
        with open(full, "wb") as handle:
            handle.write(data)


def _described(exc: BaseException, root: str) -> tuple[str, str]:
    """Its type's name, and its text with where the tests raised it."""
    text = str(exc) + _where(exc, root)
    return type(exc).__name__, text.strip()[:MAX_MESSAGE]


def _frames_under(exc: BaseException, root: str) -> list[traceback.FrameSummary]:
    return [f for f in traceback.extract_tb(exc.__traceback__) if f.filename.startswith(root + "/")]


def _show(exc: BaseException, root: str) -> None:
    """The traceback of the frames under `root` only (the tests', or the solution's: not
    ours), on stderr, as the program's own interpreter would show it."""
    frames = _frames_under(exc, root)
    lines = (
        ["Traceback (most recent call last):\n", *traceback.format_list(frames)] if frames else []
    )
    lines += traceback.format_exception_only(type(exc), exc)
    sys.stderr.write("".join(lines))


def _where(exc: BaseException, root: str) -> str:
    """Where in the tests it was raised: `file:line: source`."""
    frames = _frames_under(exc, root)
    if not frames:
        return ""
    last = frames[-1]
    return " at %s:%s: %s" % (
        last.filename[len(root) + 1 :],
        last.lineno,
        (last.line or "").strip(),
    )


def _joined(kind: str, message: str) -> str:
    return "%s: %s" % (kind, message) if message else kind


def _as_main(path: str, root: str) -> None:
    module = types.ModuleType("__main__")
    module.__file__ = os.path.join(root, path)
    module.__builtins__ = builtins  # type: ignore[attr-defined]
    sys.modules["__main__"] = module
    sys.argv = [path]
    exec(TESTS.code(path), module.__dict__)


def grade_programs(programs: list[str], root: str, link: Link) -> dict[str, Any]:
    """Each test file as `__main__`, in order: completed when the last one returned."""
    for path in programs:
        try:
            _as_main(path, root)
        except BaseException as exc:  # SystemExit too: a test program's exit is no pass
            _show(exc, root)
            name, message = _described(exc, root)
            return {"completed": False, "file": path, "exception": name, "message": message}
        if link.gone:  # the solution's process ended and a test swallowed the error
            return {"completed": False, "file": path, "exception": "Gone", "message": link.gone}
    return {"completed": True, "files": programs}


def grade_functions(programs: list[str], root: str, link: Link) -> dict[str, Any]:
    """pytest's way with plain test functions: each `test*` function of each file, in the
    order they are defined, one case named `file::function`; a module that fails to import
    is an error case of its own (pytest's collection error)."""
    cases: list[dict[str, Any]] = []
    for path in programs:
        name = path[:-3].replace("/", ".")
        module = types.ModuleType(name)
        module.__file__ = os.path.join(root, path)
        sys.modules[name] = module
        try:
            exec(TESTS.code(path), module.__dict__)
        except BaseException as exc:
            _show(exc, root)
            kind, message = _described(exc, root)
            cases.append(
                {
                    "name": path,
                    "outcome": "error",
                    "message": _joined(kind, message),
                    "collection": True,
                }
            )
            continue
        functions = [
            f
            for n, f in vars(module).items()
            if n.startswith("test") and isinstance(f, types.FunctionType) and f.__module__ == name
        ]
        functions.sort(key=lambda f: f.__code__.co_firstlineno)
        for function in functions:
            cases.append(_case(path, function, root, link))
    for case in cases:
        print("%s %s" % (case["name"], case["outcome"].upper()))
    return {"cases": cases, "gone": link.gone}


def _case(path: str, function: Callable[[], Any], root: str, link: Link) -> dict[str, Any]:
    case = {"name": "%s::%s" % (path, function.__name__), "outcome": "passed", "message": None}
    try:
        function()
    except BaseException as exc:
        skipped = type(exc).__name__ == "Skipped" and type(exc).__module__ == "_pytest.outcomes"
        if not skipped:
            _show(exc, root)
        kind, message = _described(exc, root)
        case.update(outcome="skipped" if skipped else "failed", message=_joined(kind, message))
    if link.gone and case["outcome"] == "passed":
        case.update(outcome="failed", message=link.gone)
    return case


# -- the programs the tests start ------------------------------------------------------------

# `_posixsubprocess.fork_exec`'s `uid` argument by its number of arguments: 3.9-3.10 (21),
# 3.11 (22; 23 with the vfork switch some builds backported), 3.12-3.13 (23)
FORK_EXEC_UID = {21: 18, 22: 19, 23: 19}


def confine_children() -> None:
    """Every process the tests start runs as the episode's uid, never the grader's (which
    reads the tests' data files): the grader's real uid is the episode's, so a child drops
    to it with no privilege, and the kernel keeps it there. Each way CPython starts a
    process: a fork (`os.fork`, `forkpty`, `pty`, `os.spawn*`, `multiprocessing`'s fork),
    `subprocess` (and `os.popen`, asyncio), `_posixsubprocess` itself (`multiprocessing`'s
    spawn and forkserver), `posix_spawn` and `os.system`. The tests are not the adversary:
    what they start is, and it never holds the grader's uid."""
    real = os.getuid()
    if real == os.geteuid():
        return  # the grader's uid is its real one: nobody to drop to

    def drop() -> None:
        os.setresuid(real, real, real)

    os.register_at_fork(after_in_child=drop)

    popen_init = subprocess.Popen.__init__

    def init(self: subprocess.Popen[Any], *args: Any, **kwargs: Any) -> None:
        kwargs["user"] = real  # setreuid(real, real) in the child, before its exec
        popen_init(self, *args, **kwargs)

    subprocess.Popen.__init__ = init  # type: ignore[method-assign]

    fork_exec = _posixsubprocess.fork_exec

    def confined_fork_exec(*args: Any) -> int:
        index = FORK_EXEC_UID.get(len(args))
        if index is None:  # an interpreter this file does not know: no child as the grader
            raise OSError("the grader starts no process of an unknown fork_exec")
        confined: Any = fork_exec  # its arguments differ by version
        return int(confined(*args[:index], real, *args[index + 1 :]))

    _posixsubprocess.fork_exec = confined_fork_exec  # subprocess holds its own: user= above

    spawn, spawnp = os.posix_spawn, os.posix_spawnp

    def posix_spawn(path: Any, argv: Any, env: Any, **kwargs: Any) -> int:
        return spawn(path, argv, env, **{**kwargs, "resetids": True})  # euid := real uid

    def posix_spawnp(path: Any, argv: Any, env: Any, **kwargs: Any) -> int:
        return spawnp(path, argv, env, **{**kwargs, "resetids": True})

    def system(command: Any) -> int:
        code = subprocess.call(command, shell=True)
        return -code if code < 0 else code << 8  # a wait status, as os.system's

    os.posix_spawn, os.posix_spawnp, os.system = posix_spawn, posix_spawnp, system


def grade(channel: int, record: int, tests_fd: int) -> None:
    """The grader process: the tests from their pipe, run against the solution's process,
    the record to the record pipe. Nothing of the solution runs in this process."""
    data = _take_tests(tests_fd)
    files: dict[str, str] = data["files"]
    root = "/tmp/.tests-%s" % os.urandom(8).hex()
    _place_data(files, data.get("binary", {}), root)
    confine_children()
    programs = sorted(p for p in files if p.endswith(".py"))
    TESTS.files, TESTS.root = files, root
    link = Link(channel)
    modules = {p[:-3].replace("/", "."): p for p in programs}
    sys.meta_path.insert(0, Modules(link, modules, root))
    sys.path = [p for p in sys.path if p and p not in (WORKSPACE, os.getcwd())]
    shape = data.get("shape")
    if shape == "functions":
        outcome = grade_functions(programs, root, link)
    else:
        outcome = grade_programs(programs, root, link)
    _flush()
    write_all(record, json.dumps(outcome).encode())
    os.close(record)
    os._exit(0)


def main(role: str, fds: list[int]) -> None:
    """A zygote's child: `solution` (channel) or `grader` (channel, record, tests)."""
    sys.set_int_max_str_digits(0)  # as in the solution's own interpreter: no digit limit
    if role == "solution":
        serve_solution(fds[0])
    else:
        grade(fds[0], fds[1], fds[2])


__all__ = ["main"]
