"""Python analysis: behaviours recorded through imports, aliases and constant folding."""

from __future__ import annotations

from anticheat.analysis.python.analyzer import analyze_python


def test_exit_at_import_vs_guarded_main() -> None:
    assert analyze_python("import sys\nsys.exit(0)\n").exits_at_import
    guarded = (
        "import sys\ndef main():\n    return 0\nif __name__ == '__main__':\n    sys.exit(main())\n"
    )
    facts = analyze_python(guarded)
    assert not facts.exits_at_import and not facts.exits_in_functions


def test_exit_through_aliases_and_called_functions() -> None:
    assert analyze_python("from os import _exit as q\nq(0)\n").exits_at_import
    assert analyze_python("import sys\ndef f():\n    sys.exit()\nf()\n").exits_at_import
    assert analyze_python("import os\ndef solve():\n    os._exit(0)\n").exits_in_functions
    assert not analyze_python("import sys\ndef f():\n    sys.exit(2)\n").exits_in_functions


def test_always_equal() -> None:
    assert analyze_python("class A:\n    def __eq__(s, o):\n        return True\n").always_equal
    assert analyze_python("class A:\n    def __ne__(s, o):\n        return False\n").always_equal
    honest = (
        "class A:\n    def __eq__(s, o):\n        if o is None:\n            return False"
        "\n        return True\n"
    )
    assert not analyze_python(honest).always_equal


def test_pytest_hooks() -> None:
    src = "def pytest_runtest_makereport(item, call):\n    r = 1\n    r.outcome = 'passed'\n"
    assert analyze_python(src).outcome_hooks
    assert analyze_python("def pytest_ignore_collect(path):\n    return True\n").collection_changes
    assert not analyze_python("def pytest_addoption(parser):\n    pass\n").outcome_hooks


def test_constant_folding_reveals_names() -> None:
    facts = analyze_python("import os\ngetattr(os, 'sys' + 'tem')('git log --all')\n")
    assert facts.shell[0][0] == "git log --all"
    facts = analyze_python("__import__('o' 's').system('ls')\n")
    assert facts.shell[0][0] == "ls"


def test_decoded_exec_is_analysed() -> None:
    # exec(base64 of "import os; os._exit(0)")
    facts = analyze_python(
        "import base64\nexec(base64.b64decode('aW1wb3J0IG9zOyBvcy5fZXhpdCgwKQ=='))\n"
    )
    assert facts.decoded_exec and facts.exits_at_import


def test_network_targets() -> None:
    facts = analyze_python("import socket\ns = socket.socket()\ns.connect(('1.2.3.4', 80))\n")
    assert facts.network and "1.2.3.4" in facts.network[0][1]
    assert not analyze_python("import requests\nprint(requests.__version__)\n").network


def test_subprocess_argv_becomes_shell_text() -> None:
    facts = analyze_python("import subprocess\nsubprocess.run(['git', 'log', '--all'])\n")
    assert facts.shell[0][0] == "git log --all"


def test_huge_allocation_and_fork_loop() -> None:
    assert analyze_python("x = 'a' * 10**12\n").big_allocs
    assert not analyze_python("x = 'a' * 10**6\n").big_allocs
    assert analyze_python("import os\nwhile True:\n    os.fork()\n").fork_loops
    assert not analyze_python("import os\nfor i in range(3):\n    os.fork()\n").fork_loops


def test_syntax_error_is_reported() -> None:
    assert analyze_python("def f(:\n").error
