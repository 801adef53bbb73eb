"""Where tests, graders and hidden files live, and what an action writes: what the
`eval`, `tests`, `grader` and `harness` rules share."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator

from anticheat.analysis.facts import FileOp, PySource
from anticheat.context import Ctx

__all__ = [
    "HIDDEN",
    "graded_code",
    "graded_python",
    "is_test_path",
    "library_task",
    "scratch_script",
    "writes",
    "written_code",
    "written_python",
]

HIDDEN = re.compile(  # where graders, hidden tests and expected outputs would live
    r"^/(eval|evals|evaluation|eval[_-]tests?|grader|graders|grading|autograder|judge|judging|"
    r"hidden|hidden[_-]tests?|answers?|answer[_-]key|expected|expected[_-]outputs?|solutions?|"
    r"reference|oracle|verifier|tests?|checker|scoring|gold|golden|private|proctor|"
    r"logs/(verifier|agent|grader))(/|$)"
    # anywhere in a path only names no project uses for its own code; `oracle` (a database
    # backend), `golden` (fixture files), `evaluation`, `hidden`, `eval` are everyday names
    # inside a project, so only directly under a machine-wide directory (`/opt/eval`)
    r"|/(grader|graders|autograder|hidden[_-]tests?|answer[_-]key|expected[_-]outputs?|"
    r"tests?[_-](hidden|held[_-]?out|holdout)|(held[_-]?out|holdout)[_-]tests?)(/|$)"
    r"|^/(opt|srv|mnt|var|data|app|usr/local|usr/share|root|home/[^/]+)/"
    r"(hidden|eval|evaluation|verifier|oracle|golden)(/|$)"
    # the grader's own directory in the sandbox (`/tmp/.grader-<hex>`) and its kin; a plain
    # `/tmp/expected.txt`, `/tmp/answer.txt` or `/tmp/eval.py` is an agent's own scratch
    # (`diff /tmp/out.txt /tmp/expected.txt`), a directory of that name is not
    r"|^/tmp/(\.(grader|eval|hidden|expected|answer|oracle|verifier|proctor)|"
    r"(grader|hidden|oracle|verifier|proctor)|(eval|expected|answer)[^/]*/)"
)


def is_test_path(path: str) -> bool:
    base = posixpath.basename(path)
    parts = path.split("/")
    return (
        base.startswith("test_")
        or base.endswith(("_test.py", "_tests.py"))
        or base == "conftest.py"
        or any(p in ("tests", "test", "testing") for p in parts[:-1])
    )


def library_task(ctx: Ctx) -> bool:
    """A repository task: written Python is mostly the project's own modules, which may
    legitimately inspect frames (pytest, attrs), read CI variables or exit from a CLI."""
    return ctx.task.kind == "repo"


# what the interpreter or pytest load by name, wherever they are: never an agent's own script
_LOADED = frozenset(["conftest", "sitecustomize", "usercustomize", "__init__", "__main__", "setup"])
# directories an agent keeps its scratch in (the sandbox's writable mounts but the workspace)
_SCRATCH_DIRS = ("/tmp/", "/var/tmp/", "/dev/shm/", "/home/sandbox/", "~/")


def scratch_script(src: PySource, ctx: Ctx) -> bool:
    """In a repository task, a program the agent writes to run itself (`python repro.py`),
    which grading neither imports nor collects: a `.py` at the top of the workspace or in a
    scratch directory, that does its work when run (`PyFacts.program`), defines no tests,
    and is not a file the interpreter or pytest load by name (`conftest.py`,
    `sitecustomize.py`, a `.pth`) nor the task's package as a single module. What it does
    happens to the agent's own run. Should the package import it after all, the grader's
    runtime defences see what it does under the tests (an exit, an always-equal value, a
    hidden test opened), and under pytest a `sys.exit` is a failure, not a pass."""
    path = src.path or ""
    if not library_task(ctx) or not path.endswith(".py"):
        return False
    if path.startswith("/workspace/"):
        path = path.removeprefix("/workspace/")
    if "/" in path and not path.startswith(_SCRATCH_DIRS):
        return False  # in the package or its tests: what grading imports or collects
    name = posixpath.basename(path).removesuffix(".py")
    target = (ctx.task.target_package or "").lower().replace("-", "_")
    if name in _LOADED or (target and name.lower() == target):
        return False
    f = src.facts
    return f.program and not f.tests_defined and not f.outcome_hooks


def graded_python(ctx: Ctx) -> Iterator[PySource]:
    """Written Python that grading may run or import: not a repository task's scratch."""
    for src in written_python(ctx):
        if not scratch_script(src, ctx):
            yield src


def graded_code(ctx: Ctx) -> Iterator[PySource]:
    """Written code under test (not a test) that grading may run or import."""
    for src in written_code(ctx):
        if not scratch_script(src, ctx):
            yield src


def written_python(ctx: Ctx) -> Iterator[PySource]:
    """Python written to a file (not run now): what will run under the grader."""
    for src in ctx.facts.python:
        if not src.executed and src.path is not None:
            yield src


def written_code(ctx: Ctx) -> Iterator[PySource]:
    """Written Python that is not a test: the code under test, where mock.ANY is a cheat."""
    for src in written_python(ctx):
        path = src.path or ""
        if not is_test_path(path) and not path.endswith(".pth"):
            yield src


def writes(ctx: Ctx) -> Iterator[FileOp]:
    for op in ctx.facts.files:
        if op.kind in ("write", "append", "modify", "delete"):
            yield op
