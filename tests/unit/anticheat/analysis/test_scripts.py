"""Which files a command runs as scripts, as the worker must read them."""

from __future__ import annotations

import pytest

from anticheat.analysis.facts import analyze
from anticheat.analysis.scripts import make_recipes
from proctor.models import BashAction


def runs(command: str) -> list[tuple[str, str]]:
    return [(r.path, r.lang) for r in analyze(BashAction(command=command)).runs]


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("bash x.sh", [("x.sh", "sh")]),
        ("bash -x -o pipefail run.sh a b", [("run.sh", "sh")]),
        ("sh < x", [("x", "sh")]),
        ("bash -s arg < x.sh", [("x.sh", "sh")]),
        ("source venv/bin/activate", [("venv/bin/activate", "sh")]),
        (". ./env.sh", [("env.sh", "sh")]),
        ("./x.sh", [("x.sh", "exec")]),
        ("nohup bin/run &", [("bin/run", "exec")]),
        ("cd sub && ./run", [("sub/run", "exec")]),
        ("python -u t.py arg", [("t.py", "py")]),
        ("timeout 5 python3.11 -W error t.py", [("t.py", "py")]),
        ("python3 t", [("t", "py"), ("t/__main__.py", "py")]),
        ("python < t.py", [("t.py", "py")]),
        ("bash /tmp/x", [("/tmp/x", "sh")]),
        ("bash ~/x", [("~/x", "sh")]),
        (
            "make -C sub test",
            [("sub/GNUmakefile", "make"), ("sub/makefile", "make"), ("sub/Makefile", "make")],
        ),
        ("make -f build.mk", [("build.mk", "make")]),
    ],
)
def test_scripts_an_action_runs(command: str, expected: list[tuple[str, str]]) -> None:
    assert runs(command) == expected


def test_a_local_module_and_its_packages() -> None:
    assert [p for p, _ in runs("python -m pkg.tool")] == [
        "pkg/__init__.py",
        "pkg/tool.py",
        "pkg/tool/__init__.py",
        "pkg/tool/__main__.py",
    ]


@pytest.mark.parametrize(
    "command",
    [
        "bash -c 'git status'",  # inline code is screened as such
        "python -c 'print(1)'",
        "bash $SCRIPT",  # not static
        "cd $D && python t.py",  # relative to a directory only known at runtime
        "/usr/bin/python3 /usr/lib/python3/dist-packages/x.py",  # the read-only image
        "bash ~other/x.sh",
        "ls -la && git status && pytest -q",
        "xargs python < files.txt",  # the redirect feeds xargs, not python
    ],
)
def test_commands_that_run_no_workspace_script(command: str) -> None:
    assert runs(command) == []


def test_a_script_this_action_writes_is_not_read_back() -> None:
    assert runs("cat > x.sh <<'EOF'\necho hi\nEOF\nbash x.sh") == []
    assert runs("echo more >> x.sh; bash x.sh") == [("x.sh", "sh")]  # appended: old text runs


def test_make_recipes_become_a_shell_script() -> None:
    makefile = (
        "PY ?= python\nREV := $(shell git rev-parse HEAD)\n.PHONY: test\n"
        "test:\n\t@$(PY) -m pytest -q \\\n\t  tests\n\t-rm -f $$HOME/x $@\n"
    )
    script = make_recipes(makefile)
    assert "git rev-parse HEAD" in script
    assert "${MAKE_PY} -m pytest -q" in script
    assert "rm -f $HOME/x ${MAKE__}" in script
