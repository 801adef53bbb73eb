"""The grading phase as runner operations: seal, copy the hidden tests in, run them.

By the time these operations run every process of the code under test has been killed,
files it planted to steer pytest or the interpreter are removed (a conftest.py that forces
passes, a sitecustomize.py, a `.pth`, a distribution's `entry_points.txt` registering a
pytest plugin), and the task's own versions of protected files are written back. A file the
agent added under a protected directory runs beside the hidden tests (a new regression test
is honest work), or under policy `new_protected_files: remove` is deleted first. The test
run gets a fresh HOME, no user site-packages, no script directory or cwd on `sys.path`
(`PYTHONSAFEPATH`, junit runs only: an exit-code script may import its neighbours), and
pytest options from the environment (`PYTEST_ADDOPTS`), so the report lands where we look
and the configuration is the task's.

Plugin autoloading is off (`PYTEST_DISABLE_PLUGIN_AUTOLOAD`): pytest would otherwise load
entry points of any distribution on `sys.path`, the workspace included. The grader plugin
(`assets/grader_plugin.py`, written into the private grader directory under a random module name
and loaded first with `-p`) loads the image's own plugins in its place, from root-owned
read-only directories only, and seals the report with this run's key (`report_seal.py`). Limits of
that: one pytest session per grading command (a second finds no key, and its report no
seal); plugins a task names in its own `addopts` load before the grader, and if they come
from the workspace the run fails (load them from a conftest.py, which runs after it).

Both formats arm the runtime defences (`assets/grader_defences.py`, written beside them) before
any solution code is imported: a PEP 578 audit hook that refuses and records solution code
opening the hidden tests, walking into the tests' frames, scanning the heap, killing its own
process, and replacing builtins or the test framework, plus a trusted `==` for the tests'
asserts that fails an always-equal value. Their evidence comes back inside the seal (pytest)
or the authenticated marker (`assert`) and makes the episode a cheat. Function tasks are
strict (any frame access); a repository's own code may inspect its own frames or exit.

The `assert` format skips pytest (its start-up is 150-250 ms an episode): the same phase,
then the test files run as plain programs under a bootstrap (`assets/assert_bootstrap.py`)
that takes a per-run nonce from the grader directory before any solution code runs and
writes it back, to the run's `report` path, only after the last program returned. The
bootstrap runs in a fork of the in-sandbox runner (`Run.python`), with no interpreter to
start, and the defences come with their bytecode (`report_seal.defences_bytecode`): the grading
of a HumanEval problem costs the sandbox ~20 ms of CPU where a `python3` start alone is ~17.
The grader's files that are alike in every episode (bootstrap, plugin, defences) are shared
files (`protocol.share`): a pooled sandbox is given them once, not with every episode.

A task in a compiled language (`task.language`, `core.languages`) compiles in its own run
just before the tests, after the seal, within `limits.compile_timeout_s` of its own time
(`compile_step`) and the output cap like any run; a compile that reads only its source runs
before the tests' text files are written (`TESTS_AFTER_COMPILE`). When it failed, its result
is the one scored (`compile_error`); the test run after it finds nothing to run and fails at
once (it is not skipped, so a grader that reads only the tests' result still scores the code
0, never our failure).
"""

from __future__ import annotations

import ast
import json
import re
import secrets
import shlex
from base64 import b64encode
from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

from core.defaults import COMPILE_WALL_FACTOR, COMPILE_WALL_SLACK_S
from core.languages import LANGUAGES
from proctor.models import NewProtectedFiles, TaskSpec, TestFormat
from workers.evaluation import marker
from workers.evaluation.fetch import fetch_op
from workers.evaluation.judging import judged_run
from workers.evaluation.report_seal import (
    DEFENCES_NAME,
    defences_bytecode,
    defences_source,
    new_run,
    plugin_source,
)
from workers.sandbox.protocol import (
    WORKSPACE,
    KillAll,
    MakeDir,
    Op,
    Results,
    Run,
    Scrub,
    Snapshot,
    Write,
    share,
)


def split_grader_source() -> bytes:
    """The split grader's source, for the sandbox's zygote (it is never imported here)."""
    return (Path(__file__).with_name("assets") / "split_grader.py").read_bytes()


def _grader_file(name: str, content: str | bytes) -> str:
    return share(f"grader/{name}", content.encode() if isinstance(content, str) else content)


# The grader's files that are alike in every episode, as shared files: registered when this
# module is imported, so that a pooled sandbox started afterwards is given them once.
DEFENCES = {DEFENCES_NAME: _grader_file(DEFENCES_NAME, defences_source())} | {
    path: _grader_file(path, data) for path, data in defences_bytecode().items()
}
BOOTSTRAP = _grader_file("assert_bootstrap.py", marker.bootstrap_source())
PLUGIN = _grader_file("grader_plugin.py", plugin_source())
SPLIT_GRADER = _grader_file("split_grader.py", split_grader_source())

# Files that change how Python or pytest behave when merely present in the tree. A
# distribution's metadata registers code through its `entry_points.txt` (the `*.dist-info`
# or `*.egg-info` directory around it is inert without one); `.pth` and `.egg-link` files
# (and the `__editable__` finders they name) act only in site directories, never the tree,
# but have no business in it either.
STEERING_FILES = (
    "conftest.py",
    "sitecustomize.py",
    "usercustomize.py",
    "*.pth",
    "*.egg-link",
    "*.pyc",  # a cached module (pytest's rewritten tests among them) is rebuilt from source
    "entry_points.txt",
    "pytest.ini",
    ".pytest.ini",
    "pytest.toml",
    ".pytest.toml",
    "tox.ini",
    "setup.cfg",
    "pyproject.toml",
)
CONFIG_FILES = frozenset(
    {
        "pytest.ini",
        ".pytest.ini",
        "pytest.toml",
        ".pytest.toml",
        "tox.ini",
        "setup.cfg",
        "pyproject.toml",
    }
)
# languages whose compile reads only its named source (and the binary files: jars): their
# tests' text files are written after it (`_sealed_run`)
TESTS_AFTER_COMPILE = frozenset({"cpp", "c", "rust", "go", "java"})
REPORT_NAME = "report.xml"
EVERY_NAME = "*"  # a scrub's names match by suffix when they start with `*`: this is every file


class SplitShape(StrEnum):
    """Tests that run out of the solution's reach (`assets/split_grader.py`)."""

    programs = "programs"  # the `assert` format: each file runs to its end
    functions = "functions"  # pytest files of plain `test*` functions


@dataclass(frozen=True, slots=True)
class GradingPlan:
    ops: list[Op[Any]]
    test: Run  # the hidden tests' run, one of `ops`: its result is the one scored
    timeout_s: float
    compile: Run | None = None  # the compile run before it (compiled languages): if it
    # failed, its result is the one scored
    split: SplitShape | None = None  # graded across a process boundary: the report is the
    # grader's record, from a pipe only it holds
    fetch: Snapshot | None = None  # the last of `ops`: the files read back (`TestSpec.fetch`)

    def removed(self, reply: Results) -> list[str]:
        """The files the agent added under protected directories that grading deleted
        (policy `new_protected_files: remove`), as workspace paths: a steering file planted
        there (removed first, under either policy) among them, the caches tools write aside."""
        scrubs = [op for op in self.ops if isinstance(op, Scrub)]
        directories = tuple(
            op.root.removeprefix(WORKSPACE).strip("/") + "/"
            for op in scrubs
            if op.names == [EVERY_NAME]
        )
        paths: set[str] = set()
        for op in scrubs if directories else []:
            if (done := reply.result(op)) is None:
                continue
            if op.names == [EVERY_NAME]:
                paths.update(
                    op.root.removeprefix(WORKSPACE).strip("/") + "/" + p for p in done.removed
                )
            else:  # the steering scrub's paths are the workspace's already
                paths.update(p for p in done.removed if p.startswith(directories))
        return sorted(p for p in paths if not _is_cache(p))


def _is_cache(path: str) -> bool:
    parts = path.split("/")
    return path.endswith(".pyc") or "__pycache__" in parts or ".pytest_cache" in parts


def test_programs(task: TaskSpec) -> list[str]:
    return sorted(p for p in task.tests.files if p.endswith(".py"))


def default_command(task: TaskSpec) -> str:
    lang = LANGUAGES.get(task.language or "")
    if lang is not None and lang.image != "python":
        return lang.run
    paths = " ".join(map(shlex.quote, test_programs(task)))
    return f"python3 -I -m pytest -q {paths}".strip()


def grading_plan(
    task: TaskSpec,
    *,
    keep: set[str],
    restore: Mapping[str, str | bytes],
    split: bool = False,
) -> GradingPlan:
    """Operations that seal the workspace and run the hidden tests.

    `keep` are steering-file paths that belong to the task (they stay); `restore` maps
    protected paths to the content the task gave them (written back over any edit). With
    `split` (the sandbox has a root server) tests of a `split_shape` run out of the
    solution's reach. The files the task fetches are read back last.
    """
    plan = _grading_plan(task, keep=keep, restore=restore, split=split)
    fetch = fetch_op(task)
    return plan if fetch is None else replace(plan, ops=[*plan.ops, fetch], fetch=fetch)


def _grading_plan(
    task: TaskSpec,
    *,
    keep: set[str],
    restore: Mapping[str, str | bytes],
    split: bool,
) -> GradingPlan:
    if task.tests.format is TestFormat.cases:
        return _judge_plan(task, keep=keep, restore=restore)
    shape = split_shape(task) if split else None
    if shape is not None:
        return _split_plan(task, shape, keep=keep, restore=restore)
    grader = f"/tmp/.grader-{secrets.token_hex(8)}"
    if task.tests.format is TestFormat.assert_:
        return _assert_plan(task, grader, keep=keep, restore=restore)
    report = f"{grader}/{REPORT_NAME}"
    plugin = f"_proctor_grader_{secrets.token_hex(8)}"  # unguessable: nothing can shadow it
    run, key = new_run()
    command = task.tests.command or default_command(task)
    task_has_config = any(p.rsplit("/", 1)[-1] in CONFIG_FILES for p in keep | set(restore))
    # with no configuration of the task's own, pytest reads only ours: nothing in the tree
    config = "" if task_has_config else f"-c {grader}/pytest.ini "
    env = {
        "HOME": f"{grader}/home",
        "LANG": "C.UTF-8",
        "PYTHONNOUSERSITE": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        # pytest puts the grader's directory on sys.path before it imports `-p` plugins
        "PYTEST_ADDOPTS": (
            f"-p {plugin} {config}--junitxml={report} -o junit_family=xunit1 "
            f"-p no:cacheprovider --rootdir=/workspace "
            f"-o 'pythonpath={grader}/plugin /workspace'"
        ),
    }
    if task.tests.format is TestFormat.junit:
        env["PYTHONSAFEPATH"] = "1"
    # files grading itself writes: the grader plugin may see them imported before it arms
    written = sorted(f"/workspace/{p}" for p in {*task.tests.files, *restore})
    secret = json.dumps(
        {
            "run": run,
            "key": key.hex(),
            "report": report,
            "trusted_files": written,
            "hidden": hidden_tests(task),
            "strict": task.repo is None,
        }
    )
    limits = task.limits
    program = python_program(task, command) if split else None
    test = Run(
        command=command,
        env=env,
        timeout_s=limits.timeout_s,
        output_bytes=limits.output_bytes,
        report=report if task.tests.format is TestFormat.junit else None,
        program=program[0] if program else None,
        stdin=program[1] if program else None,
    )
    grader_files = {"pytest.ini": "[pytest]\n", "key.json": secret}
    shared = {f"plugin/{plugin}.py": PLUGIN, **DEFENCES}
    compile_run = compile_step(task, env)
    ops = _sealed_run(
        task,
        grader,
        grader_files,
        shared,
        test,
        keep=keep,
        restore=restore,
        compile_run=compile_run,
    )
    return GradingPlan(ops=ops, test=test, timeout_s=limits.timeout_s, compile=compile_run)


def _judge_plan(
    task: TaskSpec, *, keep: set[str], restore: Mapping[str, str | bytes]
) -> GradingPlan:
    """Code-contest judging (`judging.py`): sealed as any run, compiled once, every case."""
    grader = f"/tmp/.grader-{secrets.token_hex(8)}"
    env = {"HOME": f"{grader}/home", "LANG": "C.UTF-8"}
    run = judged_run(
        task,
        sealing(task, keep=keep, restore=restore),
        grader=grader,
        env=env,
        compiled=compile_step(task, env),
        checker_dir=f"/tmp/.checker-{secrets.token_hex(8)}",
    )
    return GradingPlan(
        ops=run.ops, test=run.test, timeout_s=run.test.timeout_s, compile=run.compile
    )


def hidden_tests(task: TaskSpec) -> list[str]:
    """The hidden test files pytest rewrites (`test_*.py`, `*_test.py`, `conftest.py`), as
    sandbox paths: in-process, the grader plugin reads them and empties them on disk before
    any code of the solution runs (`assets/grader_plugin.py: _hide`), so no process the
    solution starts can read them."""
    patterns = ("test_*.py", "*_test.py", "conftest.py")
    return sorted(
        f"/workspace/{path}"
        for path in task.tests.files
        if any(fnmatch(path.rsplit("/", 1)[-1], pattern) for pattern in patterns)
    )


def compile_step(task: TaskSpec, env: dict[str, str]) -> Run | None:
    """The compile run of a task in a compiled language. Its limit counts the compiler's own
    time: it is stopped once it has both run and spent CPU for `compile_timeout_s`, so the
    time a busy host kept it waiting (for a core, for a cold disk) is not held against the
    code; a compile that waits on nothing is stopped at a multiple of it (docs/isolation.md,
    *Compile time*)."""
    lang = LANGUAGES.get(task.language or "")
    if lang is None or lang.compile is None:
        return None
    limit = task.limits.compile_timeout_s
    return Run(
        command=lang.compile,
        env={"HOME": env["HOME"], "LANG": "C.UTF-8"},
        timeout_s=limit * COMPILE_WALL_FACTOR + COMPILE_WALL_SLACK_S,
        cpu_limit_s=limit,
        output_bytes=task.limits.output_bytes,
    )


def _assert_plan(
    task: TaskSpec, grader: str, *, keep: set[str], restore: Mapping[str, str | bytes]
) -> GradingPlan:
    """The `assert` format: the test files run as plain programs under the bootstrap, which
    writes the run's nonce to the marker only after the last one returned (`marker.py`)."""
    path = f"{grader}/{marker.MARKER_NAME}"
    run, nonce = marker.new_run()
    bootstrap = f"{grader}/_proctor_bootstrap_{secrets.token_hex(8)}.py"
    programs = " ".join(map(shlex.quote, test_programs(task)))
    limits = task.limits
    test = Run(
        # -I: no user site, no PYTHON* variables, nothing of the cwd on sys.path at start-up
        command=f"python3 -I -B {bootstrap} {programs}".strip(),
        python=[bootstrap, *test_programs(task)],  # run so, in a fork of the runner
        env={"HOME": f"{grader}/home", "LANG": "C.UTF-8"},
        timeout_s=limits.timeout_s,
        output_bytes=limits.output_bytes,
        report=path,
    )
    config = {"run": run, "nonce": nonce, "marker": path, "strict": task.repo is None}
    grader_files = {marker.NONCE_NAME: json.dumps(config)}
    shared = {bootstrap.rsplit("/", 1)[1]: BOOTSTRAP, **DEFENCES}
    ops = _sealed_run(task, grader, grader_files, shared, test, keep=keep, restore=restore)
    return GradingPlan(ops=ops, test=test, timeout_s=limits.timeout_s)


# `python3 script.py [< file]`: what a Python program's run is (`core.languages`, SandboxFusion's
# `/run_code`), nothing a shell must read
PYTHON_PROGRAM = re.compile(r"python3 ([\w.-]+\.py)(?: < ([\w.-]+))?")


def python_program(task: TaskSpec, command: str) -> tuple[list[str], str | None] | None:
    """A Python task's program run as a root server runs it without an interpreter's
    start-up (`Run.program`: its argv, and the file on its stdin), or None."""
    if task.tests.format is not TestFormat.exit_code or task.language != "python":
        return None
    match = PYTHON_PROGRAM.fullmatch(command)
    return ([match.group(1)], match.group(2)) if match else None


def split_shape(task: TaskSpec) -> SplitShape | None:
    """How a task's tests run out of the solution's reach, if they can: a function task
    (no repository) in Python, in the `assert` format, or in pytest files whose tests are
    plain functions (no fixtures, marks, classes or conftest: `plain_test_module`) on the
    standard library's image (`SPLIT_IMAGE`)."""
    lang = LANGUAGES.get(task.language or "")
    if task.repo is not None or (lang is not None and lang.image != "python"):
        return None
    if task.tests.format is TestFormat.assert_:
        return SplitShape.programs
    if task.image != SPLIT_IMAGE:
        # pytest in-process: an image with numpy, pandas… returns arrays and frames, which
        # its tests compare as objects (`np.allclose`, `.equals`): not plain data
        return None
    if task.tests.format is not TestFormat.junit or task.tests.command is not None:
        return None
    programs = test_programs(task)
    if not programs or any(p.rsplit("/", 1)[-1] == "conftest.py" for p in programs):
        return None
    if all(plain_test_module(task.tests.files[p]) for p in programs):
        return SplitShape.functions
    return None


# the image whose plain test modules are graded split: the standard library's, whose results
# are plain data (lists, dicts, numbers…)
SPLIT_IMAGE = "python"
# what a plain test module may use of pytest: both work in the grader without pytest's runner
PLAIN_PYTEST = frozenset({"raises", "approx"})
# pytest's hooks by name: a module that has one needs pytest itself
PYTEST_HOOKS = frozenset(
    {
        "setup_module",
        "teardown_module",
        "setup_function",
        "teardown_function",
        "setUpModule",
        "tearDownModule",
        "setup",
        "teardown",
    }
)


def plain_test_module(source: str) -> bool:
    """A pytest module of plain test functions: every `test*` function takes no argument and
    has no decorator, no `Test*` class, no pytest hook, and of pytest only `raises` and
    `approx`. pytest and the split grader run such a module alike (`split_grader`)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    for statement in tree.body:
        if isinstance(statement, ast.AsyncFunctionDef) or (
            isinstance(statement, ast.ClassDef) and statement.name.startswith("Test")
        ):
            return False
        if isinstance(statement, ast.FunctionDef):
            if statement.name in PYTEST_HOOKS:
                return False
            arguments = statement.args
            taken = arguments.posonlyargs + arguments.args + arguments.kwonlyargs
            if statement.name.startswith("test") and (
                statement.decorator_list or taken or arguments.vararg or arguments.kwarg
            ):
                return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in ("pytestmark", "__test__"):
            return False
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "pytest"
            and node.attr not in PLAIN_PYTEST
        ):
            return False
        if (
            isinstance(node, ast.ImportFrom)
            and (node.module or "").split(".")[0] in ("pytest", "_pytest")
            and any(alias.name not in PLAIN_PYTEST for alias in node.names)
        ):
            return False
    return True


def _split_plan(
    task: TaskSpec, shape: SplitShape, *, keep: set[str], restore: Mapping[str, str | bytes]
) -> GradingPlan:
    """Seal the workspace as for any run, then the split run: the tests go to the grader
    through the op itself (never into the workspace), the solution stays where it is."""
    limits = task.limits
    programs = " ".join(map(shlex.quote, test_programs(task)))
    test = Run(
        command=f"split grading ({shape.value}): {programs}",
        env={"LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"},
        timeout_s=limits.timeout_s,
        output_bytes=limits.output_bytes,
        split={
            "files": task.tests.files,
            "binary": task.tests.binary_files,
            "shape": shape.value,
        },
    )
    ops = [*sealing(task, keep=keep, restore=restore), test, KillAll()]
    return GradingPlan(ops=ops, test=test, timeout_s=limits.timeout_s, split=shape)


def sealing(task: TaskSpec, *, keep: set[str], restore: Mapping[str, str | bytes]) -> list[Op[Any]]:
    """Kill what the solution left running, scrub the steering files, write the protected
    files back and (policy `remove`) delete what was added under protected directories."""
    ops: list[Op[Any]] = [
        KillAll(),
        Scrub(names=list(STEERING_FILES), keep=sorted(keep | set(restore))),
    ]
    if restore:
        text = {p: c for p, c in restore.items() if isinstance(c, str)}
        binary = {p: b64encode(c).decode() for p, c in restore.items() if isinstance(c, bytes)}
        ops.append(Write(files=text, binary=binary))
    # after the restore: a protected directory the agent replaced by a link is a directory again
    return ops + added_removal(task, kept=keep | set(restore))


def _sealed_run(
    task: TaskSpec,
    grader: str,
    grader_files: dict[str, str],
    shared: dict[str, str],
    test: Run,
    *,
    keep: set[str],
    restore: Mapping[str, str | bytes],
    compile_run: Run | None = None,
) -> list[Op[Any]]:
    """Kill, scrub and restore, write the tests and the private grader directory (its
    per-run files, and `shared`: those alike in every episode), run."""
    ops = sealing(task, keep=keep, restore=restore)
    # a compile that reads only the code runs before the tests' text files are in: what it
    # saw is the code's (the compile cache's key), whatever stdin a case brings
    after = compile_run is not None and task.language in TESTS_AFTER_COMPILE
    tests = Write(files={} if after else task.tests.files, binary=task.tests.binary_files)
    ops += [
        tests,
        MakeDir(path=grader),
        MakeDir(path=f"{grader}/home"),
        Write(root=grader, files=grader_files, shared=shared),
        *([compile_run] if compile_run is not None else []),
        *([Write(files=task.tests.files)] if after and task.tests.files else []),
        test,
        KillAll(),
    ]
    return ops


def added_removal(task: TaskSpec, *, kept: set[str]) -> list[Scrub]:
    """Under policy `remove`, one scrub per protected directory that deletes every file in it
    but the task's own (`kept`: its restored and steering files); the hidden tests are written
    after it. Under `grade` (the default) an added file runs beside the hidden tests."""
    if task.policy.new_protected_files is not NewProtectedFiles.remove:
        return []
    directories = sorted({p for p in task.protected_paths if p.endswith("/")})
    return [
        Scrub(
            names=[EVERY_NAME],
            keep=sorted(p.removeprefix(d) for p in kept if p.startswith(d)),
            root=f"{WORKSPACE}/{d.rstrip('/')}",
        )
        for d in directories
    ]


def steering_paths(paths: set[str] | dict[str, str]) -> set[str]:
    """The task-given paths that look like steering files (those are legitimately there)."""
    names = {n for n in STEERING_FILES if not n.startswith("*")}
    suffixes = tuple(n[1:] for n in STEERING_FILES if n.startswith("*"))
    return {p for p in paths if p.rsplit("/", 1)[-1] in names or p.endswith(suffixes)}


def is_protected(path: str, protected: list[str]) -> bool:
    """A path the task protects: named exactly, or under a protected directory (`tests/`)."""
    return any(path == p or (p.endswith("/") and path.startswith(p)) for p in protected)
