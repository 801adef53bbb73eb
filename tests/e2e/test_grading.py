"""Episodes end to end over HTTP: right answers pay, wrong ones and abuse do not."""

from __future__ import annotations

import httpx

from tests.e2e.helpers import TEST_ADD, episode, run

ADD = "def add(a, b):\n    return a + b\n"


def test_correct_solution_earns_reward_one(http: httpx.Client) -> None:
    result = run(http, episode(ADD))
    assert result["status"] == "completed"
    assert result["verdict"] == "passed"
    assert result["reward"] == 1.0
    assert result["passed"] is True
    assert {t["name"] for t in result["tests"]} == {
        "test_solution.py::test_small",
        "test_solution.py::test_zero",
    }
    assert all(t["outcome"] == "passed" for t in result["tests"])
    assert result["sandbox"]["image_digest"].startswith("sha256:")
    timings = result["timings"]
    assert timings["total_s"] >= timings["run_s"] > 0


def test_wrong_solution_earns_zero(http: httpx.Client) -> None:
    result = run(http, episode("def add(a, b):\n    return a - b\n"))
    assert (result["verdict"], result["reward"], result["passed"]) == ("failed", 0.0, False)
    outcomes = {t["name"]: t["outcome"] for t in result["tests"]}
    assert outcomes["test_solution.py::test_small"] == "failed"
    assert outcomes["test_solution.py::test_zero"] == "passed"


def test_partial_scoring_pays_the_fraction(http: httpx.Client) -> None:
    body = episode("def add(a, b):\n    return a - b\n")
    body["task"]["scoring"] = "partial"
    result = run(http, body)
    assert result["verdict"] == "failed"
    assert result["reward"] == 0.5


def test_syntax_error_is_a_compile_error(http: httpx.Client) -> None:
    result = run(http, episode("def add(a, b)\n    return a + b\n"))
    assert result["verdict"] == "compile_error"
    assert result["reward"] == 0.0


def test_infinite_loop_times_out(http: httpx.Client) -> None:
    loop = "def add(a, b):\n    while True:\n        pass\n"
    result = run(http, episode(loop, timeout_s=2, unscreened=True))
    assert result["verdict"] == "timeout"
    assert result["reward"] == 0.0
    assert result["timings"]["run_s"] < 15


def test_memory_bomb_is_oom(http: httpx.Client) -> None:
    bomb = "def add(a, b):\n    x = bytearray(10 * 1024 ** 3)\n    return a + b\n"
    result = run(http, episode(bomb, memory_mb=128, unscreened=True))
    assert result["verdict"] == "oom", result
    assert result["reward"] == 0.0


def test_gradual_memory_growth_is_oom(http: httpx.Client) -> None:
    grow = (
        "def add(a, b):\n    chunks = []\n    while True:\n"
        "        chunks.append(bytearray(16 * 1024 * 1024))\n"
    )
    result = run(http, episode(grow, memory_mb=128, unscreened=True))
    assert result["verdict"] == "oom", result


def test_fork_bomb_is_contained(http: httpx.Client) -> None:
    bomb = (
        "import os\n"
        "def add(a, b):\n"
        "    while True:\n"
        "        try:\n"
        "            os.fork()\n"
        "        except OSError:\n"
        "            pass\n"
    )
    result = run(http, episode(bomb, timeout_s=3, pids=64, unscreened=True))
    assert result["verdict"] in ("timeout", "failed", "runtime_error")
    assert result["reward"] == 0.0
    # the worker survives and serves the next episode normally
    assert run(http, episode(ADD))["reward"] == 1.0


def test_output_flood_is_truncated(http: httpx.Client) -> None:
    flood = "import sys\ndef add(a, b):\n    return a + b\nsys.stdout.write('x' * 50_000_000)\n"
    tests = "import solution\n\ndef test_it():\n    print('y' * 200_000)\n    assert solution.add(1, 1) == 2\n"
    body = episode(flood, tests=tests, output_bytes=4096, unscreened=True)
    body["task"]["tests"]["command"] = "python3 -I -m pytest -q -s test_solution.py"
    result = run(http, body)
    assert result["stdout_truncated"] is True
    assert len(result["stdout"]) <= 4096
    assert result["reward"] == 1.0


def test_network_is_unreachable(http: httpx.Client) -> None:
    tests = """\
import socket
import pytest

@pytest.mark.parametrize("address", [("1.1.1.1", 53), ("8.8.8.8", 443), ("127.0.0.1", 6379),
                                     ("172.17.0.1", 2375)])
def test_cannot_connect(address):
    with pytest.raises(OSError):
        socket.create_connection(address, timeout=2)
"""
    result = run(http, episode(ADD, tests=tests, unscreened=True))
    if result["sandbox"]["network"] == "none":  # nothing answers any connection
        assert result["verdict"] == "passed", result["tests"]
    else:  # only the honeypot answers (it takes every address), and every attempt is on record
        # as an attempt: the test's own dials reach the honeypot, so it fails on its merit
        assert result["verdict"] == "failed", result
        assert all(e["level"] == "attempt" for e in result["cheat"]["evidence"])
        details = " ".join(e["detail"] for e in result["cheat"]["evidence"])
        for address in ("1.1.1.1", "8.8.8.8", "172.17.0.1"):
            assert address in details, result["cheat"]


def test_writes_outside_the_workspace_fail(http: httpx.Client) -> None:
    tests = """\
import os
import pytest

@pytest.mark.parametrize("path", ["/etc/passwd", "/usr/lib/x", "/x", "/root/x", "/var/x"])
def test_cannot_write(path):
    with pytest.raises(OSError):
        with open(path, "w") as f:
            f.write("x")

def test_runs_as_non_root():
    assert os.getuid() != 0

def test_can_write_in_workspace():
    with open("/workspace/scratch.txt", "w") as f:
        f.write("ok")
"""
    result = run(http, episode(ADD, tests=tests, unscreened=True))
    assert result["verdict"] == "passed", result["tests"]


def test_exit_zero_at_import_does_not_pass(http: httpx.Client) -> None:
    for body in ("import os\nos._exit(0)\n", "import sys\nsys.exit(0)\n"):
        # the sandbox alone: no report from a run that never finished
        result = run(http, episode(body, unscreened=True))
        assert (result["reward"], result["passed"]) == (0.0, False), result
        # with the rule filter: flagged as the cheat it is
        result = run(http, episode(body))
        assert (result["verdict"], result["reward"]) == ("cheat", 0.0), result
        assert result["cheat"]["detected"] is True


def test_planted_conftest_does_not_force_a_pass(http: httpx.Client) -> None:
    conftest = """\
import pytest

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    report.outcome = "passed"
"""
    for unscreened, verdict in ((True, "failed"), (False, "cheat")):
        body = episode("def add(a, b):\n    return 0\n", unscreened=unscreened)
        body["solution"]["files"]["conftest.py"] = conftest
        result = run(http, body)
        assert (result["verdict"], result["reward"]) == (verdict, 0.0), result


def test_planted_report_does_not_count(http: httpx.Client) -> None:
    fake = (
        "import glob, os\n"
        'REPORT = \'<testsuites><testsuite><testcase classname="test_solution" name="test_small"/>'
        "</testsuite></testsuites>'\n"
        "path = os.environ.get('PROCTOR_JUNIT_XML')\n"
        "if path:\n"
        "    open(path, 'w').write(REPORT)\n"
        "os._exit(0)\n"
    )
    result = run(http, episode(fake))
    # code in the test process can forge anything in it; the rule filter sees it doing so
    assert (result["verdict"], result["reward"]) == ("cheat", 0.0), result


def test_exit_code_format(http: httpx.Client) -> None:
    body = episode(ADD)
    body["task"]["tests"] = {
        "files": {"check.py": "from solution import add\nassert add(2, 2) == 4\n"},
        "command": "python3 check.py",
        "format": "exit_code",
    }
    result = run(http, body)
    assert (result["verdict"], result["reward"], result["exit_code"]) == ("passed", 1.0, 0)


def test_episodes_run_pooled_unless_the_task_asks_for_a_container(http: httpx.Client) -> None:
    """The default deployment pools (`PROCTOR_ISOLATION`); a task may ask for more."""
    pooled = run(http, episode(ADD))
    assert (pooled["verdict"], pooled["sandbox"]["isolation"]) == ("passed", "pooled")
    body = episode(ADD)
    body["task"]["isolation"] = "container"
    own = run(http, body)
    assert (own["verdict"], own["sandbox"]["isolation"]) == ("passed", "container")


CLASS_TESTS = """\
from solution import add


class TestAdd:
    def test_small(self):
        assert add(1, 2) == 3
"""


def test_a_failed_comparison_reads_as_the_tests_wrote_it(http: httpx.Client) -> None:
    """Split grading (plain test functions) and pytest in the solution's process (a test
    class) both show the test's own `==`, never the grader's trusted comparison."""
    wrong = "def add(a, b):\n    return a - b\n"
    for tests in (TEST_ADD, CLASS_TESTS):
        result = run(http, episode(wrong, tests=tests))
        assert result["verdict"] == "failed"
        (failed,) = [t for t in result["tests"] if t["outcome"] == "failed"]
        message = failed["message"]
        assert "proctor" not in message and "== 3" in message and "add(1, 2)" in message
