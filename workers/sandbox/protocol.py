"""The runner protocol: the operations a worker asks of the in-sandbox runner, and its answers.

Shared by both sides: the worker imports this module, and its source is streamed into the
sandbox ahead of the runner's (`assets/runner.py`, see `sandbox.runner_source`), so the
runner decodes and answers with these very classes. Standard library only, Python >= 3.11,
nothing imported that the runner would not need anyway.

A program is a list of operations run in order in one `docker exec`. On the wire:

    request  {"nonce": str, "ops": [{"kind": Op.kind, "id": str, **fields}, ...]}
    reply    {"nonce": str, "results": {id: {"kind": Result.kind, **fields}},
              "error": RunnerError fields | null}

Every operation has one result type (`Op[R]`); a worker looks results up by the operation
it sent (`Results.get(op)`), never by position. An operation that raises stops the program
with a `RunnerError` in `error`, unless it is `keep_going` (a solution's action that fails
must not skip the grading): then the `RunnerError` is its result and the program goes on.
A `Run` with `check` that exits non-zero stops the program too (without an error).
"""

from __future__ import annotations

import errno
import json
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Generic, TypeVar, cast, dataclass_transform

WORKSPACE = "/workspace"
# the runner's exit status when it runs out of memory before it can reply
EXIT_NO_MEMORY = 3
# What the commands of one program may put in its reply (their stdout and stderr, as the
# reply carries them: escaped), so that the reply stays within what a worker reads of it
# whatever they print; a JUnit report or marker comes on top, within its `report_bytes`.
REPLY_OUTPUT_BYTES = 40 << 20
_CLIP_STEPS = (1 << 16, 1 << 12, 1 << 8, 1 << 4, 1)


class ProtocolError(ValueError):
    """A request or reply that does not follow this protocol."""


@dataclass_transform(kw_only_default=True, frozen_default=True)
class Record:
    """A frozen, keyword-only record, as a frozen `kw_only` dataclass would be.

    Not `dataclasses` itself: the runner defines these classes in every exec, and the
    dataclasses machinery (its import and the code it generates per class) would add some
    15 ms to every program; this costs well under one. Fields are the annotated names
    (ClassVars excepted); a list or dict default is copied for each record.
    """

    _fields: ClassVar[tuple[str, ...]] = ()
    _defaults: ClassVar[dict[str, Any]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # not inspect.get_annotations: importing inspect is what this class avoids
        annotations = cls.__dict__.get("__annotations__", {})  # noqa: RUF063
        own = [
            name
            for name, annotation in annotations.items()
            if not str(annotation).startswith("ClassVar")
        ]
        cls._fields = (*cls._fields, *(n for n in own if n not in cls._fields))
        cls._defaults = {**cls._defaults, **{n: cls.__dict__[n] for n in own if n in cls.__dict__}}

    def __init__(self, **values: Any) -> None:
        unknown = set(values).difference(self._fields)
        if unknown:
            raise TypeError(f"{type(self).__name__} has no field {min(unknown)!r}")
        for name in self._fields:
            if name in values:
                value = values[name]
            elif name in self._defaults:
                value = self._defaults[name]
                if isinstance(value, dict | list):
                    value = value.copy()
            else:
                raise TypeError(f"{type(self).__name__} needs {name!r}")
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen")

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and all(
            getattr(self, name) == getattr(other, name) for name in self._fields
        )

    __hash__ = object.__hash__  # by identity: a program tells its operations apart so

    def __repr__(self) -> str:
        values = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields)
        return f"{type(self).__name__}({values})"

    def wire(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self._fields}


def clip(text: str, limit: int) -> tuple[str, int]:
    """The longest start of `text` that takes at most `limit` bytes in a reply, and the
    bytes it takes. A reply escapes a control character (or the U+FFFD an invalid byte of
    UTF-8 was decoded as) in six, so a cap on what a command printed does not cap it."""
    # an escape depends on its character alone: count piece by piece (never the whole text
    # escaped at once, six times its size), then in ever smaller pieces where it stops fitting
    size = end = 0
    for step in _CLIP_STEPS:
        while end < len(text):
            piece = text[end : end + step]
            cost = len(json.dumps(piece)) - 2
            if size + cost > limit:
                break
            size, end = size + cost, end + len(piece)
    return text[:end], size


# ---------------------------------------------------------------------------- results


class Result(Record):
    kind: ClassVar[str]


class WriteResult(Result):
    kind = "write"
    written: int


class RemoveResult(Result):
    kind = "remove"
    removed: int


class UntarResult(Result):
    kind = "untar"
    members: int


class RunResult(Result):
    kind = "run"
    exit_code: int
    timed_out: bool
    duration_s: float
    stdout: str
    stderr: str
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    oom_killed: bool = False
    started_at: float = 0.0  # the runner's monotonic clock
    report: str | None = None  # the JUnit report the command wrote, when one was asked for
    cpu_s: float | None = None  # CPU time (user + system) of its processes, when measured


class KillAllResult(Result):
    kind = "killall"
    freed: list[str] = []  # scratch mounts emptied


class ReadResult(Result):
    kind = "read"
    files: dict[str, str | None]  # None: no such (regular) file


class FindResult(Result):
    kind = "find"
    paths: list[str]


class MakeDirResult(Result):
    kind = "mkdir"
    path: str


class ScrubResult(Result):
    kind = "scrub"
    removed: list[str]


class SnapshotResult(Result):
    kind = "snapshot"
    files: dict[str, str]  # text files
    binary: dict[str, str] = {}  # the others (not UTF-8: images, archives, pickles), base64

    def contents(self) -> dict[str, str | bytes]:
        """Every file read, text as str and the others as bytes."""
        import base64

        return {**self.files, **{p: base64.b64decode(d) for p, d in self.binary.items()}}


class ListingResult(Result):
    kind = "listing"
    stdout: str  # what `pwd; ls -A` prints


class SentResult(Result):
    kind = "sent"
    packets: int | None  # sent by the sandbox's network interfaces so far (None: unreadable)


class RunnerError(Result):
    """An operation raised inside the sandbox: which one, with what exception and errno."""

    kind = "error"
    op: str  # the kind of the operation that raised
    exception: str  # its exception's type name
    detail: str  # its exception's text
    errno: int | None = None  # of an OSError; ENOMEM for a MemoryError

    @classmethod
    def of(cls, op: Op[Any], exc: BaseException) -> RunnerError:
        code = exc.errno if isinstance(exc, OSError) else None
        if isinstance(exc, MemoryError):
            code = errno.ENOMEM
        return cls(op=op.kind, exception=type(exc).__name__, detail=str(exc), errno=code)

    @property
    def message(self) -> str:
        return f"{self.op} failed: {self.exception}: {self.detail}"


# ---------------------------------------------------------------------------- operations

R = TypeVar("R", bound=Result)
R_co = TypeVar("R_co", bound=Result, covariant=True)  # an op's result type


class Op(Record, Generic[R_co]):
    kind: ClassVar[str]
    keep_going: bool = False  # if it raises, its result is the RunnerError; the program goes on


class Write(Op[WriteResult]):
    """Write files (replacing whatever is there, links included)."""

    kind = "write"
    files: dict[str, str] = {}  # path -> text
    binary: dict[str, str] = {}  # path -> base64
    shared: dict[str, str] = {}  # path -> the name of a shared file (`share`)
    root: str = WORKSPACE
    executable: list[str] = []  # paths written with mode 0755 (a cached compile's program)


class Remove(Op[RemoveResult]):
    """Delete files or trees."""

    kind = "remove"
    paths: list[str]
    root: str = WORKSPACE


class Untar(Op[UntarResult]):
    """Unpack a (gzipped) tar archive, without links or devices that leave `root`."""

    kind = "untar"
    data: str  # base64
    root: str = WORKSPACE


class Run(Op[RunResult]):
    """Run `bash -c command` in its own session, with a timeout and capped output."""

    kind = "run"
    command: str
    cwd: str = WORKSPACE
    env: dict[str, str] = {}
    timeout_s: float = 10.0
    output_bytes: int = 65536
    report: str | None = None  # a JUnit report path: PROCTOR_JUNIT_XML, read back after
    report_bytes: int = 8 << 20
    check: bool = False  # a non-zero exit stops the program
    # a Python program (script and arguments) `command` runs as `python3 -I -B …`: the runner
    # runs it in a fork of itself instead, without a new interpreter's start-up
    python: list[str] | None = None
    # a Python program (script and arguments) `command` runs as `python3 …` (the script's
    # directory first on sys.path, stdin from `stdin`, a path in `cwd`): a root server runs
    # it in a fork of its zygote, which never held a request, without an interpreter's
    # start-up; elsewhere `command` runs
    program: list[str] | None = None
    stdin: str | None = None
    # grading across a process boundary (`assets/split_grader.py`, a root server only): the
    # tests, {"files", "binary", "shape"}, go to a grader process of a uid of its own; the
    # solution runs in another, as the episode; `report` is then the grader's record
    split: dict[str, Any] | None = None
    # a compile: stopped only once it has run `cpu_limit_s` of wall clock *and* spent as much
    # CPU time (its processes' user + system), or at `timeout_s` (a backstop for a process
    # that waits on nothing): the time a busy host made it wait is not its own
    cpu_limit_s: float | None = None
    # code-contest judging (`assets/judge.py`): `command` runs once per case of this spec;
    # `report` is then the judge's record
    judge: dict[str, Any] | None = None


class KillAll(Op[KillAllResult]):
    """SIGKILL every other process of the sandbox user; empty full /tmp and /dev/shm."""

    kind = "killall"
    empty_scratch: bool = False  # empty them even when they are not full


class Read(Op[ReadResult]):
    """Read files back (at most `max_bytes` each)."""

    kind = "read"
    paths: list[str]
    root: str = WORKSPACE
    max_bytes: int = 1 << 20


class Find(Op[FindResult]):
    """List the files with these basenames (`*.pth`: by suffix) outside `.git`."""

    kind = "find"
    names: list[str]
    root: str = WORKSPACE


class MakeDir(Op[MakeDirResult]):
    """Make a fresh directory only the sandbox user can enter (it must not exist)."""

    kind = "mkdir"
    path: str


class Scrub(Op[ScrubResult]):
    """Delete planted files with these names, except the paths in `keep`."""

    kind = "scrub"
    names: list[str]
    keep: list[str] = []
    root: str = WORKSPACE


class Snapshot(Op[SnapshotResult]):
    """Read files (directories recursively, `.git` excluded) to restore them later; a file
    over `max_bytes` is left out (cut short, it would be restored broken)."""

    kind = "snapshot"
    paths: list[str]
    root: str = WORKSPACE
    max_bytes: int = 4 << 20
    files_only: bool = False  # a directory among `paths` is left out, not walked


class Listing(Op[ListingResult]):
    """The directory and its entries, as `pwd; ls -A` would print them."""

    kind = "listing"
    root: str = WORKSPACE


class Sent(Op[SentResult]):
    """How many packets the sandbox has sent (its interfaces' counters; loopback aside): a
    sandbox whose count did not move contacted nothing, so its honeypot log is not read.
    The counters are the kernel's, read-only to the code under test."""

    kind = "sent"


OPS: dict[str, type[Op[Any]]] = {
    cls.kind: cls
    for cls in (
        Write,
        Remove,
        Untar,
        Run,
        KillAll,
        Read,
        Find,
        MakeDir,
        Scrub,
        Snapshot,
        Listing,
        Sent,
    )
}
RESULTS: dict[str, type[Result]] = {
    cls.kind: cls
    for cls in (
        WriteResult,
        RemoveResult,
        UntarResult,
        RunResult,
        KillAllResult,
        ReadResult,
        FindResult,
        MakeDirResult,
        ScrubResult,
        SnapshotResult,
        ListingResult,
        SentResult,
        RunnerError,
    )
}


def to_wire(item: Op[Any] | Result) -> dict[str, Any]:
    return {"kind": item.kind, **item.wire()}


def _from_wire(table: Mapping[str, type[Any]], data: object) -> Any:
    if not isinstance(data, dict):
        raise ProtocolError(f"not an object: {data!r:.100}")
    values = dict(data)
    cls = table.get(values.pop("kind", None))
    if cls is None:
        raise ProtocolError(f"unknown kind: {data.get('kind')!r:.100}")
    values.pop("id", None)
    try:
        return cls(**values)
    except TypeError as exc:
        raise ProtocolError(f"{cls.__name__}: {exc}") from exc


def op_from_wire(data: object) -> Op[Any]:
    op: Op[Any] = _from_wire(OPS, data)
    return op


def result_from_wire(data: object) -> Result:
    result: Result = _from_wire(RESULTS, data)
    return result


def error_from_wire(data: object) -> RunnerError | None:
    if data is None:
        return None
    error = result_from_wire(data)
    if not isinstance(error, RunnerError):
        raise ProtocolError(f"not a RunnerError: {error!r:.100}")
    return error


# ---------------------------------------------------------------------------- shared files

# Files every episode writes and that are the same for all (the grader's bootstrap and
# defences, ~85 kB an episode): by name → content. On the worker, what it can give a runner;
# in a sandbox, what its runner was given when it started (a pooled sandbox's server is given
# them once). A `Write` names them in `shared`; a request carries a shared file's content only
# when the runner does not have it (`Program.request`).
SHARED_FILES: dict[str, bytes] = {}


def share(name: str, content: bytes) -> str:
    """Register a shared file (the same content every time: it is given to a runner once)."""
    if SHARED_FILES.setdefault(name, content) != content:
        raise ValueError(f"shared file {name!r} registered twice with different content")
    return name


def _carrying(data: dict[str, Any], present: frozenset[str]) -> dict[str, Any]:
    """A wire `Write` with the shared files the runner does not have carried inline."""
    missing = {p: n for p, n in data["shared"].items() if n not in present}
    if not missing:
        return data
    binary = {**data["binary"], **{p: shared_base64(n) for p, n in missing.items()}}
    shared = {p: n for p, n in data["shared"].items() if p not in missing}
    return {**data, "binary": binary, "shared": shared}


_SHARED_BASE64: dict[str, str] = {}  # encoded once: a request or a server's start carries them


def shared_base64(name: str) -> str:
    encoded = _SHARED_BASE64.get(name)
    if encoded is None:
        import base64

        encoded = _SHARED_BASE64[name] = base64.b64encode(SHARED_FILES[name]).decode()
    return encoded


# ---------------------------------------------------------------------------- programs


def commands_time_s(ops: Sequence[Op[Any]]) -> float:
    """The time the operations may take between them: their commands' timeouts."""
    return sum(op.timeout_s for op in ops if isinstance(op, Run))


class Program:
    """The operations of one exec; each gets an id on the wire, and its result by that id."""

    def __init__(self, ops: Sequence[Op[Any]]) -> None:
        self.ops = list(ops)
        self._ids = {id(op): str(number) for number, op in enumerate(self.ops)}
        if len(self._ids) != len(self.ops):
            raise ValueError("an operation appears twice in one program")

    def id_of(self, op: Op[Any]) -> str:
        try:
            return self._ids[id(op)]
        except KeyError:
            raise KeyError(f"{op.kind} is not an operation of this program") from None

    def request(self, nonce: str, shared: frozenset[str] = frozenset()) -> bytes:
        """The request, for a runner that holds the `shared` files (by name)."""
        ops = []
        for op in self.ops:
            data = {**to_wire(op), "id": self._ids[id(op)]}
            if isinstance(op, Write) and op.shared:
                data = _carrying(data, shared)
            ops.append(data)
        return json.dumps({"nonce": nonce, "ops": ops}).encode()


def decode_request(data: bytes) -> tuple[str, list[tuple[str, Op[Any]]]]:
    """The runner's side: the nonce and the (id, operation) pairs to run in order."""
    request = json.loads(data)
    if not isinstance(request, dict) or not isinstance(request.get("ops"), list):
        raise ProtocolError("a request is an object with a list of ops")
    return str(request["nonce"]), [(str(o.get("id")), op_from_wire(o)) for o in request["ops"]]


class Reply(Record):
    nonce: str
    results: dict[str, Result] = {}  # op id -> its result
    error: RunnerError | None = None  # the error that stopped the program

    def encode(self) -> str:
        return json.dumps(
            {
                "nonce": self.nonce,
                "results": {key: to_wire(value) for key, value in self.results.items()},
                "error": None if self.error is None else to_wire(self.error),
            }
        )

    @classmethod
    def decode(cls, data: object) -> Reply:
        """The worker's side: a reply parsed from JSON (ProtocolError when it is not one)."""
        if not isinstance(data, dict) or not isinstance(data.get("results"), dict):
            raise ProtocolError("a reply is an object with a map of results")
        return cls(
            nonce=str(data.get("nonce")),
            results={str(k): result_from_wire(v) for k, v in data["results"].items()},
            error=error_from_wire(data.get("error")),
        )


class Results:
    """A program's reply, read by the operations that were sent."""

    def __init__(self, program: Program, reply: Reply) -> None:
        self.program = program
        self.reply = reply

    @property
    def error(self) -> RunnerError | None:
        """The error that stopped the program, if one did."""
        return self.reply.error

    def get(self, op: Op[R]) -> R | RunnerError | None:
        """What `op` gave: its result, its error (`keep_going`), or None if it did not run."""
        result = self.reply.results.get(self.program.id_of(op))
        if result is None or isinstance(result, RunnerError):
            return result
        if result.kind != op.kind:
            raise ProtocolError(f"a {op.kind} operation answered with a {result.kind} result")
        return cast(R, result)  # of the op's result type: its kind says so

    def result(self, op: Op[R]) -> R | None:
        """`op`'s result when it ran and did not raise."""
        result = self.get(op)
        return None if isinstance(result, RunnerError) else result

    def ran(self, op: Op[Any]) -> bool:
        return self.program.id_of(op) in self.reply.results

    def sent(self, before: Sent, after: Sent) -> int | None:
        """Packets the sandbox sent between two `Sent` operations (None: not known)."""
        first, last = self.result(before), self.result(after)
        if first is None or last is None or first.packets is None or last.packets is None:
            return None
        return last.packets - first.packets
