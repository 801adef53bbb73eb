"""The runtime defences under the real `assert` bootstrap, without a sandbox: what solution
code reaches for while the tests run is refused and recorded in the authenticated marker,
and honest code is untouched. Function tasks are strict; a repository's own code may look
at its own frames or exit from a CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from proctor.models import Scoring, TestFormat, TestSpec, Verdict
from workers.evaluation.marker import MARKER_NAME, NONCE_NAME, bootstrap_source
from workers.evaluation.marker import new_run as new_marker_run
from workers.evaluation.report_seal import DEFENCES_NAME, defences_source
from workers.evaluation.scoring import Score, TestRun, score

TESTS = """\
from solution import f

assert f(2) == 4
assert f(3) == 9
assert len(str(f(10))) == 3
"""
SPEC = TestSpec(files={"test_a.py": TESTS}, format=TestFormat.assert_)


def grade(tmp_path: Path, solution: str, *, strict: bool = True, tests: str = TESTS) -> Score:
    tmp_path.mkdir(exist_ok=True)
    grader = tmp_path / "grader"
    grader.mkdir(mode=0o700)
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "solution.py").write_text(solution)
    (workspace / "test_a.py").write_text(tests)
    report = grader / MARKER_NAME
    run_id, nonce = new_marker_run()
    config = {"run": run_id, "nonce": nonce, "marker": str(report), "strict": strict}
    (grader / NONCE_NAME).write_text(json.dumps(config))
    (grader / "bootstrap.py").write_text(bootstrap_source())
    (grader / DEFENCES_NAME).write_text(defences_source())
    done = subprocess.run(
        [sys.executable, "-I", "-B", str(grader / "bootstrap.py"), "test_a.py"],
        cwd=workspace,
        env={"PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    text = report.read_text() if report.exists() else None
    run = TestRun(exit_code=done.returncode, timed_out=False, oom_killed=False, report_xml=text)
    return score(run, SPEC, Scoring.binary)


CHEATS = {
    "always-equal": (
        "class R:\n    def __len__(self):\n        return 3\n"
        "setattr(R, '__' + 'eq__', lambda s, o: True)\n"
        "R.__str__ = lambda s: 'abc'\n"
        "def f(x):\n    return R()\n"
    ),
    "frames": (
        "import inspect, linecache\n"
        "def f(x):\n"
        "    caller = inspect.currentframe().f_back\n"
        "    line = linecache.getline(caller.f_code.co_filename, caller.f_lineno)\n"
        "    return int(line.split('==')[1]) if '==' in line else 100\n"
    ),
    "reads-tests": (
        "import re\n"
        "WANT = dict(re.findall(r'f\\((\\d+)\\) == (\\d+)', open('test_a.py').read()))\n"
        "def f(x):\n    return int(WANT.get(str(x), 100))\n"
    ),
    "patch": "import builtins\nbuiltins.len = lambda x: 3\ndef f(x):\n    return x * 2 + x % 2\n",
    "heap": "import gc\ndef f(x):\n    gc.get_objects()\n    return x * x\n",
    "early-exit": "import os\ndef f(x):\n    os._exit(0)\n",
    "ctypes": "import ctypes\ndef f(x):\n    ctypes.string_at(id(x), 8)\n    return x * x\n",
    # code under a stdlib file name: its frames would pass for the stdlib's, which the
    # frame checks look through, and it would read the expected values off the caller
    "forged-location": (
        "import linecache, os, sys\n"
        "SRC = (\n"
        "    'def f(x):\\n'\n"
        "    '    caller = sys._getframe(1)\\n'\n"
        "    '    line = linecache.getline(caller.f_code.co_filename, caller.f_lineno)\\n'\n"
        '    \'    return int(line.split("==")[1]) if "==" in line else 100\\n\'\n'
        ")\n"
        "exec(compile(SRC, os.path.join(os.path.dirname(os.__file__), 'functools.py'), 'exec'))\n"
    ),
}
HONEST = {
    "plain": "def f(x):\n    return x * x\n",
    "an-int-subclass": "class Sq(int):\n    pass\ndef f(x):\n    return Sq(x * x)\n",
    "stdlib-that-looks-at-frames": (
        "import collections, dataclasses, logging, traceback, warnings, typing, enum\n"
        "P = collections.namedtuple('P', 'a b')\n"
        "@dataclasses.dataclass\nclass D:\n    v: int\n"
        "class E(enum.Enum):\n    A = 1\n"
        "def f(x):\n"
        "    logging.getLogger('x').warning('w')\n"
        "    warnings.warn('w')\n"
        "    try:\n        1 / 0\n    except ZeroDivisionError:\n        traceback.format_exc()\n"
        "    return D(x * x).v\n"
    ),
    "a-class-with-a-real-eq": (
        "class N:\n"
        "    def __init__(self, v):\n        self.v = v\n"
        "    def __eq__(self, o):\n        return self.v == (o.v if isinstance(o, N) else o)\n"
        "    def __str__(self):\n        return str(self.v)\n"
        "def f(x):\n    return N(x * x)\n"
    ),
}


@pytest.mark.parametrize("kind", sorted(CHEATS))
def test_solution_code_that_reaches_for_the_grader_is_recorded(tmp_path: Path, kind: str) -> None:
    result = grade(tmp_path, CHEATS[kind])
    assert result.verdict is not Verdict.passed or kind == "patch", result.reason
    assert [e.split(":", 1)[0] for e in result.evidence] == [kind], result


@pytest.mark.parametrize("kind", sorted(HONEST))
def test_honest_code_passes_with_no_evidence(tmp_path: Path, kind: str) -> None:
    result = grade(tmp_path, HONEST[kind])
    assert (result.verdict, result.evidence) == (Verdict.passed, []), result.reason


def test_a_repository_may_look_at_its_own_frames_and_exit(tmp_path: Path) -> None:
    own = (
        "import inspect, sys\n"
        "def f(x):\n"
        "    assert inspect.currentframe().f_code.co_name == 'f'\n"
        "    try:\n        sys.exit(2)\n    except SystemExit:\n        pass\n"
        "    return x * x\n"
    )
    assert grade(tmp_path / "repo", own, strict=False).evidence == []
    assert grade(tmp_path / "function", own, strict=True).evidence != []


def test_a_repository_reaching_into_the_tests_frame_is_recorded(tmp_path: Path) -> None:
    caller = "import sys\ndef f(x):\n    sys._getframe(1).f_globals\n    return x * x\n"
    result = grade(tmp_path, caller, strict=False)
    assert [e.split(":", 1)[0] for e in result.evidence] == ["frames"]


def test_a_forged_completion_from_solution_code_is_ignored(tmp_path: Path) -> None:
    forge = (
        "import sys\n"
        "channel = sys.modules['_proctor_defences'].CHANNEL\n"
        "sys.audit(channel, 'finish', ['test_a.py'])\n"
        "raise SystemExit(0)\n"
    )
    result = grade(tmp_path, forge)
    assert result.verdict is Verdict.failed, result.reason


def test_stripping_the_evidence_breaks_the_marker(tmp_path: Path) -> None:
    result = grade(tmp_path, CHEATS["patch"])
    assert result.evidence
    marker = tmp_path / "grader" / MARKER_NAME
    data = json.loads(marker.read_text())
    data["evidence"] = []
    run = TestRun(exit_code=0, timed_out=False, oom_killed=False, report_xml=json.dumps(data))
    assert score(run, SPEC, Scoring.binary).verdict is Verdict.failed


def test_an_always_equal_helper_of_the_image_counts_only_when_the_tests_hold_it(
    tmp_path: Path,
) -> None:
    returned = grade(
        tmp_path / "returned", "from unittest import mock\ndef f(x):\n    return mock.ANY\n"
    )
    assert [e.split(":", 1)[0] for e in returned.evidence][:1] == ["always-equal"], returned
    tests = "from unittest import mock\nfrom solution import f\n\nassert [f(2)] == [mock.ANY]\n"
    held = grade(tmp_path / "held", "def f(x):\n    return x * x\n", tests=tests)
    assert (held.verdict, held.evidence) == (Verdict.passed, []), held.reason


def test_a_helper_class_of_the_tests_own_is_not_evidence(tmp_path: Path) -> None:
    # toolz's: equal to its own kind, raising for anything else
    tests = (
        "from solution import f\n\n"
        "class NoCompare:\n"
        "    def __eq__(self, other):\n"
        "        if type(self) is type(other):\n"
        "            return True\n"
        "        raise ValueError('not comparable')\n\n"
        "x = NoCompare()\n"
        "assert [f(2), x] == [4, x]\n"
        "assert NoCompare() == NoCompare()\n"
    )
    result = grade(tmp_path, "def f(x):\n    return x * x\n", tests=tests)
    assert (result.verdict, result.evidence) == (Verdict.passed, []), result.reason


def test_code_it_compiles_under_its_own_names_is_honest(tmp_path: Path) -> None:
    solution = "exec(compile('def f(x):\\n    return x * x\\n', 'generated.py', 'exec'))\n"
    result = grade(tmp_path, solution)
    assert (result.verdict, result.evidence) == (Verdict.passed, []), result.reason
