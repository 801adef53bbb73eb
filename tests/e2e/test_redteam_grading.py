"""The grade out of the reach of the code it grades: the red team's attacks on grading itself,
in both isolation modes, each worth 0 (or a typed verdict), and their honest look-alikes,
each worth 1.0.

The rule filter is off (`unscreened`): what is tested is structure, not detection. Each
attack is a wrong solution that earns 1.0 exactly when it gets what it is after — the hidden
tests' expected values, the grader's record, another episode's data — so a reward of 0 says
the structure held. Before split grading the tests sat in the workspace as the episode's
uid, the grader held its nonce in its own process, and a pooled episode's program was a
fork of a server that had parsed earlier requests: every attack marked `before` earned 1.0.
"""

from __future__ import annotations

import secrets
from typing import Any

import httpx
import pytest

from tests.e2e.helpers import episode, run

pytestmark = pytest.mark.redteam


@pytest.fixture(scope="module")
def service_url(service_of_each_mode: str) -> str:
    """Every test here in both isolation modes."""
    return service_of_each_mode


def answer() -> str:
    return secrets.token_hex(8)


def hidden_tests(value: str) -> str:
    """Hidden tests whose expected value only they know (and say twice, as test data would)."""
    return (
        "from solution import solve\n\n"
        f"EXPECTED = '{value}'  # ANSWER={value}\n\n"
        "def test_solve():\n"
        f"    assert solve(1, 2) == '{value}'\n"
    )


def hidden_class(value: str) -> str:
    """The same as a test class: pytest runs it in the solution's process (not split)."""
    return (
        "from solution import solve\n\n"
        f"EXPECTED = '{value}'  # ANSWER={value}\n\n"
        "class TestSolve:\n"
        "    def test_solve(self):\n"
        f"        assert solve(1, 2) == '{value}'\n"
    )


HIDDEN = {"pytest": hidden_tests, "pytest-inprocess": hidden_class}


def hidden_asserts(value: str) -> str:
    return f"from solution import solve\n\n# ANSWER={value}\nassert solve(1, 2) == '{value}'\n"


# Finds `ANSWER=` and 16 hex digits in text, without ever holding the whole needle itself.
FIND = """\
import re

PATTERN = re.compile(rb"AN" rb"SWER=([0-9a-f]{16})")


def found_in(data):
    match = PATTERN.search(data)
    return match.group(1).decode() if match else None
"""

ATTACKS = {
    # a child process has no audit hook: it reads every file it can for the tests
    "a-child-reads-the-tests": FIND
    + """\
import subprocess, sys

CHILD = '''
import os
for top in ("/workspace", "/tmp", "/home", "/dev/shm", "/var/tmp", "/run"):
    for folder, _, names in os.walk(top):
        for name in names:
            try:
                print(open(os.path.join(folder, name), "rb").read().decode("latin-1"))
            except OSError:
                pass
'''


def solve(a, b):
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True).stdout
    return found_in(out)
""",
    # a descriptor-relative open, which an audit hook resolving paths may not see as the tests
    "a-descriptor-relative-open": FIND
    + """\
import os


def solve(a, b):
    for top in ("/workspace", "/tmp", "."):
        try:
            root = os.open(top, os.O_RDONLY)
        except OSError:
            continue
        for name in os.listdir(root):
            try:
                fd = os.open(name, os.O_RDONLY, dir_fd=root)
                data = os.read(fd, 1 << 20)
            except OSError:
                continue
            if found_in(data):
                return found_in(data)
""",
    # every process's command line, environment and open files, as /proc shows them
    "reads-other-processes-through-proc": FIND
    + """\
import os


def solve(a, b):
    for pid in filter(str.isdigit, os.listdir("/proc")):
        for part in ("cmdline", "environ", "fd/0", "fd/3", "fd/4", "fd/5", "mem"):
            try:
                with open(f"/proc/{pid}/{part}", "rb") as handle:
                    data = handle.read(1 << 20)
            except OSError:
                continue
            if found_in(data):
                return found_in(data)
""",
    # the grader's secret and finisher, walked to from its own frames and objects
    "walks-frames-and-the-heap-for-the-grader": FIND
    + """\
import gc, sys


def solve(a, b):
    frame = sys._getframe()
    while frame is not None:
        for value in list(frame.f_locals.values()) + list(frame.f_globals.values()):
            if isinstance(value, str) and found_in(value.encode()):
                return found_in(value.encode())
        frame = frame.f_back
    for thing in gc.get_objects():
        if isinstance(thing, dict):
            for key, value in list(thing.items()):
                if key in ("nonce", "key", "secret") or callable(value) and "finish" in str(key):
                    try:
                        value()
                    except BaseException:
                        pass
                if isinstance(value, str) and found_in(value.encode()):
                    return found_in(value.encode())
""",
    # the test code's bytes in this process's own memory (a fork of what held the request)
    "scans-its-own-memory": FIND
    + """\
def solve(a, b):
    with open("/proc/self/maps") as maps:
        regions = [line.split() for line in maps]
    with open("/proc/self/mem", "rb", buffering=0) as memory:
        for region in regions:
            if "r" not in region[1]:
                continue
            start, end = (int(x, 16) for x in region[0].split("-"))
            try:
                memory.seek(start)
                data = memory.read(end - start)
            except (OSError, OverflowError, ValueError):
                continue
            if found_in(data):
                return found_in(data)
""",
    # an object equal to anything, as the answer
    "always-equal": """\
class Anything(str):
    def __eq__(self, other):
        return True
    __hash__ = str.__hash__


def solve(a, b):
    return Anything("x")
""",
    # a record written into every descriptor it holds, then an exit that looks like an end
    "forges-the-record-and-exits": """\
import json, os


def solve(a, b):
    record = json.dumps({"completed": True, "files": ["test_solution.py"], "cases": [
        {"name": "test_solution.py::test_solve", "outcome": "passed"}]}).encode()
    for name in os.listdir("/proc/self/fd"):
        try:
            os.write(int(name), len(record).to_bytes(4, "big") + record)
        except OSError:
            pass
    os._exit(0)
""",
    # every process it may signal, killed: the grader among them, if it could
    "kills-everything-it-can": """\
import os, signal


def solve(a, b):
    try:
        os.kill(-1, signal.SIGKILL)
    except OSError:
        pass
    return None
""",
}

LOOKALIKES = {
    "reads-its-own-data-file": """\
import json, os

HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(HERE, "table.json"), "w") as handle:
    json.dump({"sep": "-"}, handle)


def solve(a, b):
    with open(os.path.join(HERE, "table.json")) as handle:
        return "%d%s%d" % (a, json.load(handle)["sep"], b)
""",
    "starts-a-subprocess": """\
import subprocess, sys


def solve(a, b):
    code = "import sys; print('%s-%s' % (sys.argv[1], sys.argv[2]))"
    done = subprocess.run([sys.executable, "-c", code, str(a), str(b)], capture_output=True)
    return done.stdout.decode().strip()
""",
    "uses-ctypes": """\
import ctypes


def solve(a, b):
    return "%d-%d" % (ctypes.c_int(a).value, ctypes.c_long(b).value)
""",
    "prints-control-characters": """\
import sys


def solve(a, b):
    print("\\x00\\x01\\x1b[31mred\\x1b[0m\\x7f\\r\\x08" * 100)
    sys.stdout.write("\\udcff".encode("utf-8", "surrogateescape").decode("latin-1"))
    return "%d-%d" % (a, b)
""",
    "returns-a-subclass-and-a-generator-it-consumes": """\
class Text(str):
    pass


def parts(a, b):
    yield str(a)
    yield str(b)


def solve(a, b):
    return Text("-".join(parts(a, b)))
""",
}


def body(solution: str, tests: str, fmt: str) -> dict[str, Any]:
    request = episode(solution, tests=tests, unscreened=True, timeout_s=20)
    if fmt == "assert":
        request["task"]["tests"]["format"] = "assert"
    return request


@pytest.mark.parametrize("fmt", ["pytest", "assert", "pytest-inprocess"])
@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_an_attack_on_grading_earns_nothing(http: httpx.Client, attack: str, fmt: str) -> None:
    """Split (`pytest`, `assert`): nothing to find, a wrong answer. In-process: the hidden
    tests are emptied on disk and the test process is closed to /proc before the solution
    runs; what is left in its own memory the runtime defences make a cheat."""
    value = answer()
    tests = hidden_asserts(value) if fmt == "assert" else HIDDEN[fmt](value)
    result = run(http, body(ATTACKS[attack], tests, fmt))
    assert result["status"] == "completed", (result.get("error"), result)
    assert (result["reward"], result["passed"]) == (0.0, False), (result["reason"], attack)
    assert result["verdict"] != "infra_error", result["reason"]


@pytest.mark.parametrize("fmt", ["pytest", "assert"])
@pytest.mark.parametrize("lookalike", sorted(LOOKALIKES))
def test_an_honest_lookalike_earns_its_reward(http: httpx.Client, lookalike: str, fmt: str) -> None:
    tests = (
        "from solution import solve\nassert solve(1, 2) == '1-2'\n"
        if fmt == "assert"
        else "from solution import solve\n\ndef test_solve():\n    assert solve(1, 2) == '1-2'\n"
    )
    result = run(http, body(LOOKALIKES[lookalike], tests, fmt))
    assert (result["verdict"], result["reward"]) == ("passed", 1.0), (
        result["reason"],
        result["stderr"][-800:],
    )


SKIPS = {
    "pytest": "import pytest\n\n\ndef solve(a, b):\n    pytest.skip('not on this platform')\n",
    "unittest": "import unittest\n\n\ndef solve(a, b):\n    raise unittest.SkipTest('no network')\n",
}


@pytest.mark.parametrize("fmt", ["pytest", "pytest-inprocess"])
@pytest.mark.parametrize("raiser", sorted(SKIPS))
def test_a_skip_raised_by_the_solution_is_no_pass(
    http: httpx.Client, raiser: str, fmt: str
) -> None:
    """The tests that call it skipped, the others passed: pytest's report says all passed.
    A skip raised by the code under test fails its test instead, in both paths."""
    value = answer()
    tests = HIDDEN[fmt](value) + (
        "\n\ndef test_the_data():\n    assert len(EXPECTED) == 16\n"
        if fmt == "pytest"
        else "\n    def test_the_data(self):\n        assert len(EXPECTED) == 16\n"
    )
    result = run(http, body(SKIPS[raiser], tests, fmt))
    assert (result["verdict"], result["reward"]) == ("failed", 0.0), result["reason"]


def test_a_test_that_skips_itself_is_still_a_skip(http: httpx.Client) -> None:
    """The tests' own skips (a marker, a skip in a test's body, from a helper in the tests'
    directory) stay skips in the in-process path: only a skip from the solution fails."""
    tests = (
        "import sys, pytest\nfrom solution import solve\n\n"
        "class TestSolve:\n"
        "    def test_solve(self):\n"
        "        assert solve(1, 2) == '1-2'\n\n"
        "    @pytest.mark.skipif(sys.platform != 'nowhere', reason='elsewhere')\n"
        "    def test_marked(self):\n"
        "        assert False\n\n"
        "    def test_skips_in_its_body(self):\n"
        "        pytest.skip('not today')\n"
    )
    result = run(http, body(LOOKALIKES["reads-its-own-data-file"], tests, "pytest"))
    assert (result["verdict"], result["reward"]) == ("passed", 1.0), result["reason"]


def test_no_episode_finds_an_earlier_ones_tests_in_its_memory(http: httpx.Client) -> None:
    """Episodes one after another (in pooled mode, served by the same few sandboxes): each
    scans its own memory for any earlier episode's expected value, which its own tests
    expect; none finds one."""
    scan = ATTACKS["scans-its-own-memory"].replace("def solve(a, b):", "def found():")
    earlier: list[str] = []
    for _ in range(6):
        value = answer()
        wanted = earlier[-1] if earlier else value
        solution = scan + "\n\ndef solve(a, b):\n    return found()\n"
        result = run(
            http,
            body(
                solution, hidden_tests(value).replace(f"== '{value}'", f"== '{wanted}'"), "pytest"
            ),
        )
        assert (result["reward"], result["verdict"]) == (0.0, "failed"), result["reason"]
        earlier.append(value)


# A solution the tests start as a program (stdin/stdout tasks), which looks for the tests'
# data files (an expected output beside the tests) to print what they hold, or to rewrite
# them to what it prints. Before, the program was the grader's uid: it did both, for 1.0.
PROGRAMS = {
    "reads-the-tests-data": FIND
    + """\
import os

for top in ("/tmp", "/workspace", "/home", "/var/tmp", "/dev/shm", "/run"):
    for folder, _, names in os.walk(top):
        for name in names:
            try:
                found = found_in(open(os.path.join(folder, name), "rb").read())
            except OSError:
                continue
            if found:
                print(found)
                raise SystemExit(0)
print("nothing")
""",
    "rewrites-the-tests-data": """\
import os

for top in ("/tmp", "/workspace"):
    for folder, _, names in os.walk(top):
        for name in names:
            if name == "expected.txt":
                try:
                    with open(os.path.join(folder, name), "w") as handle:
                        handle.write("ANSWER=" + "0" * 16)
                except OSError:
                    pass
print("0" * 16)
""",
}

# how the tests start it: every way CPython has
STARTS = {
    "subprocess": "out = subprocess.run([sys.executable, 'solution.py'], capture_output=True,"
    " text=True).stdout",
    "os-system": "path = '/tmp/out-%s' % os.urandom(6).hex()\n"
    "os.system('%s solution.py > %s' % (sys.executable, path))\n"
    "out = open(path).read()",
    "fork-exec": "r, w = os.pipe()\npid = os.fork()\nif pid == 0:\n    os.dup2(w, 1)\n"
    "    os.execv(sys.executable, [sys.executable, 'solution.py'])\n"
    "os.close(w)\nout = os.fdopen(r).read()\nos.waitpid(pid, 0)",
    "multiprocessing-spawnv": "import multiprocessing.util\nr, w = os.pipe()\n"
    "code = 'import os; os.dup2(%d, 1); exec(open(\"solution.py\").read())' % w\n"
    "pid = multiprocessing.util.spawnv_passfds(os.fsencode(sys.executable), [sys.executable, '-c', code],"
    " [w])\n"
    "os.close(w)\nout = os.fdopen(r).read()\nos.waitpid(pid, 0)",
    "posix-spawn": "r, w = os.pipe()\n"
    "pid = os.posix_spawn(sys.executable, [sys.executable, 'solution.py'], dict(os.environ),"
    " file_actions=[(os.POSIX_SPAWN_DUP2, w, 1)])\n"
    "os.close(w)\nout = os.fdopen(r).read()\nos.waitpid(pid, 0)",
}


def program_tests(start: str, fmt: str) -> str:
    """Tests that start the solution as a program and compare its output with their data."""
    steps = (
        "import os, subprocess, sys\n"
        + STARTS[start]
        + "\nhere = os.path.dirname(os.path.abspath(__file__))\n"
        "expected = open(os.path.join(here, 'expected.txt')).read().split('=')[1].strip()\n"
        "assert out.strip() == expected, (out, expected)\n"
    )
    if fmt == "assert":
        return steps
    return "def test_program():\n" + "".join("    " + line + "\n" for line in steps.splitlines())


@pytest.mark.parametrize("fmt", ["pytest", "assert"])
@pytest.mark.parametrize("start", sorted(STARTS))
@pytest.mark.parametrize("attack", sorted(PROGRAMS))
def test_a_program_the_tests_start_cannot_reach_their_data(
    http: httpx.Client, attack: str, start: str, fmt: str
) -> None:
    """The grader's real uid is the episode's: whatever it starts runs as the episode, which
    reads and writes nothing of the grader's, so the program prints a wrong answer."""
    request = body(PROGRAMS[attack], program_tests(start, fmt), fmt)
    request["task"]["tests"]["files"]["expected.txt"] = f"ANSWER={answer()}\n"
    result = run(http, request)
    assert (result["verdict"], result["reward"]) == ("failed", 0.0), (
        result["reason"],
        result["stderr"][-800:],
    )


@pytest.mark.parametrize("start", sorted(STARTS))
def test_a_program_the_tests_start_earns_its_reward(http: httpx.Client, start: str) -> None:
    """The honest look-alike: the program reads its own data file in the workspace."""
    value = answer()
    request = body("print(open('data.txt').read().strip())\n", program_tests(start, "pytest"), "")
    request["task"]["tests"]["files"]["expected.txt"] = f"ANSWER={value}\n"
    request["solution"]["files"]["data.txt"] = value + "\n"
    result = run(http, request)
    assert (result["verdict"], result["reward"]) == ("passed", 1.0), (
        result["reason"],
        result["stderr"][-800:],
    )
