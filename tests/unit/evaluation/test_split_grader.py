"""Split grading's two processes on this machine (forks, a temporary workspace), and what only
plain data may cross: the sandbox runs the same code from its zygote
(`tests/e2e/test_redteam_grading.py` runs it there, under two uids)."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import math
import os
import socket
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

ASSET = Path(__file__).parents[3] / "workers" / "evaluation" / "assets" / "split_grader.py"


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("split_grader_under_test", ASSET)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


sg = load()


def refuse(value: Any) -> Any:
    raise TypeError(type(value).__name__)


def no_handles(number: int) -> Any:
    raise AssertionError("no handle expected")


plain = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text()
    | st.binary()
    | st.complex_numbers(allow_nan=False),
    lambda inner: (
        st.lists(inner)
        | st.tuples(inner, inner)
        | st.frozensets(st.integers() | st.text(), max_size=4)
        | st.sets(st.integers() | st.text(), max_size=4)
        | st.dictionaries(st.text() | st.integers() | st.tuples(st.integers()), inner, max_size=4)
    ),
    max_leaves=20,
)


@given(plain)
def test_plain_data_crosses_as_itself(value: Any) -> None:
    wire = json.loads(json.dumps(sg.encode(value, refuse)))
    back = sg.decode(wire, no_handles)
    assert back == value and type(back) is type(value)


def test_nan_and_infinities_cross() -> None:
    back = sg.decode(json.loads(json.dumps(sg.encode([math.inf, -math.inf], refuse))), no_handles)
    assert back == [math.inf, -math.inf]
    assert math.isnan(sg.decode(json.loads(json.dumps(sg.encode(math.nan, refuse))), no_handles))


@pytest.mark.parametrize(
    "wire",
    [
        {"t": [1], "s": [2]},  # two tags
        {"x": [1]},  # no such tag
        {"t": 1},  # a tag's body that is no list
        {"d": [[1]]},  # a dict item that is no pair
        {"s": [[1]]},  # an unhashable set member
        {"c": ["1", 2]},  # a complex of text
        {"b": "not base64!"},
        {"h": "1"},  # a handle that is no number
    ],
)
def test_anything_but_plain_data_is_refused(wire: Any) -> None:
    with pytest.raises((ValueError, TypeError)):
        sg.decode(wire, no_handles)


def test_nesting_is_bounded_both_ways() -> None:
    deep: list[Any] = []
    for _ in range(sg.MAX_DEPTH + 5):
        deep = [deep]
    with pytest.raises(ValueError):
        sg.encode(deep, refuse)
    wire: Any = 0
    for _ in range(sg.MAX_DEPTH + 5):
        wire = {"t": [wire]}
    with pytest.raises(ValueError):
        sg.decode(wire, no_handles)


def test_the_solution_side_sends_subclasses_as_their_base_and_the_rest_by_handle() -> None:
    import collections
    import enum

    class Colour(enum.IntEnum):
        RED = 1

    class Loud(str):
        def __str__(self) -> str:  # an override is not what crosses
            return "LOUD"

    objects = sg.Objects()
    pair = collections.namedtuple("pair", "a b")(1, 2)
    assert objects.plain(Colour.RED) == 1 and type(objects.plain(Colour.RED)) is int
    assert objects.plain(Loud("quiet")) == "quiet"
    assert objects.plain(pair) == {"t": [1, 2]}
    assert objects.plain(collections.Counter("aa")) == {"d": [["a", 2]]}
    handle = objects.plain(object())
    assert set(handle) == {"h"}


# -- the two processes ------------------------------------------------------------------------


def split_run(
    tmp_path: Path, solution: dict[str, str], tests: dict[str, str], shape: str
) -> tuple[dict[str, Any], str]:
    """The grader and the solution forked here as the zygote forks them in a sandbox (one uid
    for both here): the grader's record and what both printed."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    for name, text in solution.items():
        (workspace / name).write_text(text)
    ours, theirs = socket.socketpair()
    record_r, record_w = os.pipe()
    tests_r, tests_w = os.pipe()
    out_r, out_w = os.pipe()
    children = []
    for role, fds in (
        ("solution", [ours.fileno()]),
        ("grader", [theirs.fileno(), record_w, tests_r]),
    ):
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child's end is os._exit
            try:
                os.dup2(out_w, 1)
                os.dup2(out_w, 2)
                for fd in range(3, 1024):  # as the zygote's children: nothing else open
                    if fd not in fds:
                        with contextlib.suppress(OSError):
                            os.close(fd)
                os.chdir(workspace)
                sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
                sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
                sg.WORKSPACE = str(workspace)
                sg.main(role, fds)
            finally:
                os._exit(70)
        children.append(pid)
    for fd in (record_w, tests_r, out_w):
        os.close(fd)
    ours.close()
    theirs.close()
    with os.fdopen(tests_w, "wb") as handle:
        handle.write(json.dumps({"files": tests, "shape": shape}).encode())
    with os.fdopen(record_r, "rb") as handle:
        record = handle.read()
    os.waitpid(children[1], 0)
    os.kill(children[0], 9)
    os.waitpid(children[0], 0)
    with os.fdopen(out_r, "rb") as handle:
        printed = handle.read().decode(errors="replace")
    return json.loads(record), printed


ADD = {"solution.py": "def add(a, b):\n    return a + b\n"}
ASSERTS = {"test_solution.py": "from solution import add\nassert add(1, 2) == 3\n"}
FUNCTIONS = {
    "test_solution.py": (
        "import solution as _s\n"
        "globals().update({k: v for k, v in vars(_s).items() if not k.startswith('__')})\n\n"
        "def test_small():\n    assert add(1, 2) == 3\n\n"
        "def test_none():\n    assert add(None, None) is None\n"
    )
}


def test_programs_complete_when_every_file_ran(tmp_path: Path) -> None:
    record, _ = split_run(tmp_path, ADD, ASSERTS, "programs")
    assert record == {"completed": True, "files": ["test_solution.py"]}


def test_functions_report_a_case_each_as_pytest_names_them(tmp_path: Path) -> None:
    record, printed = split_run(tmp_path, ADD, FUNCTIONS, "functions")
    outcomes = [(c["name"], c["outcome"]) for c in record["cases"]]
    assert outcomes == [
        ("test_solution.py::test_small", "passed"),
        ("test_solution.py::test_none", "failed"),  # None + None raises in the solution
    ]
    assert "TypeError" in record["cases"][1]["message"]
    assert "unsupported operand" in printed  # the solution's traceback, on its stderr


@pytest.mark.parametrize(
    "solution",
    [
        "class E:\n    def __eq__(self, o):\n        return True\ndef add(a, b):\n    return E()\n",
        "class E(int):\n    def __eq__(self, o):\n        return True\ndef add(a, b):\n    return E(0)\n",
        "import os\ndef add(a, b):\n    os._exit(0)\n",
        "import sys\ndef add(a, b):\n    sys.exit(0)\n",
        "import sys\nsys.exit(0)\n",
        "import os, json\n"
        "def add(a, b):\n"
        "    for fd in range(3, 20):\n"
        "        try:\n"
        "            os.write(fd, b'{\"completed\": true}')\n"
        "        except OSError:\n"
        "            pass\n"
        "    return 0\n",
    ],
    ids=[
        "always-equal",
        "always-equal-int",
        "os-exit",
        "sys-exit",
        "exit-at-import",
        "forged-record",
    ],
)
def test_what_would_fool_an_in_process_grader_fails(tmp_path: Path, solution: str) -> None:
    record, _ = split_run(tmp_path, {"solution.py": solution}, ASSERTS, "programs")
    assert record["completed"] is False


def test_a_stop_iteration_from_a_call_ends_no_loop_of_the_tests(tmp_path: Path) -> None:
    solution = {"solution.py": "def check(x):\n    raise StopIteration\n"}
    tests = {"test_solution.py": "from solution import check\nassert all(map(check, [1, 2]))\n"}
    record, _ = split_run(tmp_path, solution, tests, "programs")
    assert (record["completed"], record["exception"]) == (False, "RuntimeError")


def test_the_tests_data_files_are_the_graders_own(tmp_path: Path) -> None:
    tests = {
        "test_solution.py": (
            "import json, os\nfrom solution import add\n"
            "data = json.load(open(os.path.join(os.path.dirname(__file__), 'cases.json')))\n"
            "for a, b, want in data:\n    assert add(a, b) == want\n"
        ),
        "cases.json": "[[1, 2, 3], [5, 5, 10]]",
    }
    record, _ = split_run(tmp_path, ADD, tests, "programs")
    assert record["completed"] is True
    assert not (tmp_path / "workspace" / "cases.json").exists()
    assert not (tmp_path / "workspace" / "test_solution.py").exists()


def test_results_that_are_no_plain_data_stay_in_the_solution(tmp_path: Path) -> None:
    solution = {
        "solution.py": (
            "class Box:\n"
            "    def __init__(self, v):\n        self.v = v\n"
            "    def get(self):\n        return self.v\n"
            "def make(v):\n    return Box(v)\n"
            "def count(n):\n    return (i for i in range(n))\n"
        )
    }
    tests = {
        "test_solution.py": (
            "from solution import make, count\n"
            "box = make([1, 2])\n"
            "assert box.get() == [1, 2] and box.v == [1, 2]\n"
            "assert box != [1, 2]\n"
            "assert list(count(3)) == [0, 1, 2]\n"
        )
    }
    record, _ = split_run(tmp_path, solution, tests, "programs")
    assert record["completed"] is True, record


def test_isinstance_of_a_class_of_the_solution_is_asked_of_its_process(tmp_path: Path) -> None:
    solution = {
        "solution.py": (
            "class Stack:\n"
            "    def __init__(self):\n        self.items = []\n"
            "    def push(self, x):\n        self.items.append(x)\n"
            "    def pop(self):\n        return self.items.pop()\n"
            "class Sub(Stack):\n    pass\n"
        )
    }
    tests = {
        "test_solution.py": (
            "from solution import Stack, Sub\n"
            "s = Stack()\ns.push(3)\n"
            "assert isinstance(s, Stack) and isinstance(Sub(), Stack)\n"
            "assert not isinstance(3, Stack) and issubclass(Sub, Stack)\n"
            "assert s.pop() == 3\n"
        )
    }
    record, _ = split_run(tmp_path, solution, tests, "programs")
    assert record["completed"] is True, record
