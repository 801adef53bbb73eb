"""What the code under test leaves for the grader to read or clean up — a tree thousands of
levels deep, megabytes of control characters and invalid UTF-8, a completion record or report
nested past any parser's recursion limit — ends its episode with a typed verdict and reward
0, never `reward: null` (that is only ever our own infrastructure's failure). `test_pooled`
runs these again on a pooled deployment."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.e2e.helpers import episode, run
from tests.e2e.test_assert_grading import ASSERTS
from tests.e2e.test_interactive import bash, finish, repo, start, task  # noqa: F401

WRONG = "def add(a, b):\n    return a - b\n"
ADD = "def add(a, b):\n    return a + b\n"
TYPED = {"failed", "runtime_error", "oom", "timeout", "cheat"}
OUTPUT_BYTES = 16 << 20  # the largest a deployment allows by default

# 5000 levels of directories named to trip path-based tools (a newline, bytes that are not
# UTF-8, 200 characters), with a symlink loop, a hard link and a directory whose owner took
# its permissions away every few hundred levels
DEEP_TREE = """\
import os, sys
def deep(top):
    names = [b"d", b"new\\nline", b"\\xff\\xfe", b"n" * 200]
    fd = os.open(top, os.O_RDONLY)
    locked = []
    for level in range(5000):
        name = names[level % 4]
        os.mkdir(name, dir_fd=fd)
        below = os.open(name, os.O_RDONLY, dir_fd=fd)
        if level % 500 == 0:
            os.symlink("..", "loop", dir_fd=below)
            with open(os.open("conftest.py", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=below), "w") as f:
                f.write("x")
            os.link("conftest.py", "hard.pth", src_dir_fd=below, dst_dir_fd=below)
        if fd not in locked:
            os.close(fd)
        fd = below
        if level % 700 == 699:
            locked.append(below)
    for held in locked:
        os.chmod(held, 0)
for top in sys.argv[1:]:
    os.makedirs(top, exist_ok=True)
    deep(top)
print("deep")
"""


def deep_tree_command(*tops: str) -> str:
    return f"python3 - {' '.join(tops)} <<'EOF'\n{DEEP_TREE}EOF"


def with_actions(body: dict[str, Any], *commands: str) -> dict[str, Any]:
    body["solution"]["actions"] = [
        {"type": "bash", "command": c, "timeout_s": 60} for c in commands
    ]
    return body


def assert_typed_zero(result: dict[str, Any], *likely: str) -> None:
    why = (result.get("verdict"), result.get("error"), result.get("reason"))
    assert result["status"] == "completed", why
    assert result["reward"] == 0.0, why
    assert result["verdict"] in TYPED, why
    if likely:
        assert result["verdict"] in likely, why


def test_a_tree_thousands_of_levels_deep_is_graded(http: httpx.Client) -> None:
    tops = ('"${TMPDIR:-/tmp}/t"', "/workspace/w", '"$HOME/h"', "/dev/shm/s")
    body = with_actions(episode(WRONG, unscreened=True), deep_tree_command(*tops))
    result = run(http, body, wait=300)
    assert result["steps"][0]["observation"]["output"] == "deep\n", result["steps"][0]
    assert_typed_zero(result, "failed")


def test_a_deep_tree_made_while_the_tests_run_is_cleaned_up(http: httpx.Client) -> None:
    # made by the solution as the tests import it: the clean-up after grading meets it
    solution = (
        "import subprocess, sys\n"
        f"subprocess.run([sys.executable, '-c', {DEEP_TREE!r}, '/tmp/t', '/workspace/w'])\n" + WRONG
    )
    assert_typed_zero(run(http, episode(solution, unscreened=True), wait=300), "failed")
    # the same sandbox (a pooled one is reused when it is clean) grades the next episode
    honest = run(http, episode(ADD))
    assert (honest["verdict"], honest["reward"]) == ("passed", 1.0), honest.get("reason")


CONTROL = "import sys\nsys.stdout.buffer.write(bytes(range(32)) * ({size} // 32))\n"
INVALID = "import sys\nsys.stderr.buffer.write(bytes(range(128, 256)) * ({size} // 128))\n"


# with room to spare, the reply outgrew what a worker reads (infra_error); in the default
# memory, the server holding it was OOM-killed (oom): both were the reply's doing, not the code's
@pytest.mark.parametrize("memory_mb", [512, 2048])
def test_megabytes_of_control_characters_and_invalid_utf8(
    http: httpx.Client, memory_mb: int
) -> None:
    size = 12 << 20  # escaped in JSON, six times that
    printing = f"python3 -c '{CONTROL.format(size=size)}{INVALID.format(size=size)}'"
    solution = CONTROL.format(size=size) + INVALID.format(size=size) + WRONG
    body = episode(solution, unscreened=True, output_bytes=OUTPUT_BYTES, memory_mb=memory_mb)
    body = with_actions(body, printing, printing)
    result = run(http, body, wait=300)
    assert_typed_zero(result, "failed")
    observation = result["steps"][0]["observation"]
    assert observation["output"].startswith("\x00\x01\x02")
    assert observation["stderr"].startswith("\ufffd\ufffd")


def test_one_megabyte_of_control_characters_under_default_limits(http: httpx.Client) -> None:
    size = 1 << 20
    solution = CONTROL.format(size=size) + INVALID.format(size=size) + WRONG
    printing = f"python3 -c '{CONTROL.format(size=size)}'"
    result = run(http, with_actions(episode(solution, unscreened=True), printing))
    assert_typed_zero(result, "failed")
    assert result["steps"][0]["observation"]["truncated"] is True


# a document written where the grader reads the run's record, then the test process
# killed before it could write its own: by a child, out of the reach of the grader's audit
# hook (which refuses the test process itself opening that file)
NESTED = "[" * 200_000 + "]" * 200_000
KILLED_AFTER_WRITING = (
    "import subprocess\n"
    "subprocess.run(\n"
    "    ['sh', '-c', 'cat > \"$PROCTOR_JUNIT_XML\"; kill -9 $PPID; sleep 5'],\n"
    "    input={document!r}.encode('utf-8', 'surrogateescape'),\n"
    ")\n" + WRONG
)
DOCUMENTS = {
    "nested-json": NESTED,
    "nested-record": '{"run": "r", "exception": "E", "file": ' + NESTED + "}",
    "nested-files": '{"run": "r", "mac": "0", "files": ' + NESTED + "}",
    "wrong-types": '{"run": "r", "exception": 1, "file": {"a": [1]}, "evidence": [{"kind": [[]]}]}',
    "truncated": '{"run": "r", "exception": "E", "message": "' + "\x01" * 1000,
    # lone surrogates: text with no UTF-8, in what the result reports of the failure
    "surrogates": (
        '{"run": "r", "exception": "E\\udcff", "file": "\\udcff.py", "message": "\\ud800", '
        '"evidence": [{"kind": "k\\udcff", "detail": "\\udfff"}]}'
    ),
}


@pytest.mark.parametrize("document", list(DOCUMENTS.values()), ids=list(DOCUMENTS))
def test_a_hostile_completion_record_fails_the_run(http: httpx.Client, document: str) -> None:
    body = episode(KILLED_AFTER_WRITING.format(document=document), tests=ASSERTS, unscreened=True)
    body["task"]["tests"]["format"] = "assert"
    assert_typed_zero(run(http, body))


REPORTS = {
    "nested-xml": "<testsuite>" + "<a>" * 200_000 + "</a>" * 200_000 + "</testsuite>",
    "nested-seal": '<testsuite/>\n<!-- proctor-seal {"run": ' + NESTED + "} " + "0" * 64 + " -->\n",
}


@pytest.mark.parametrize("report", list(REPORTS.values()), ids=list(REPORTS))
def test_a_hostile_junit_report_fails_the_run(http: httpx.Client, report: str) -> None:
    assert_typed_zero(run(http, episode(KILLED_AFTER_WRITING.format(document=report))))


# ---------------------------------------------------------------- interactive (a fresh
# container's own runner, one exec per action)


def interactive(http: httpx.Client, repo: dict[str, str], **limits: Any) -> str:
    body = task(repo, disabled=["*"])
    body["task"]["limits"].update(limits)
    return start(http, body)[0]


def test_interactive_deep_trees_then_finish(http: httpx.Client, repo: dict[str, str]) -> None:
    episode_id = interactive(http, repo)
    command = deep_tree_command("/tmp/t", "/workspace/w", "/workspace/tests/d")
    assert bash(http, episode_id, command, timeout_s=60)["output"] == "deep\n"
    assert bash(http, episode_id, "echo alive")["output"] == "alive\n"
    # pytest collects the tests directory, down the tree as far as paths reach: on a busy
    # host that can take it past its time limit
    assert_typed_zero(finish(http, episode_id), "failed", "timeout")


def test_interactive_megabytes_of_control_characters(
    http: httpx.Client, repo: dict[str, str]
) -> None:
    episode_id = interactive(http, repo, output_bytes=OUTPUT_BYTES, memory_mb=2048)
    size = 12 << 20
    printing = f"python3 -c '{CONTROL.format(size=size)}{INVALID.format(size=size)}'"
    observation = bash(http, episode_id, printing, timeout_s=60)
    assert observation["truncated"] and observation["output"].startswith("\x00\x01")
    assert_typed_zero(finish(http, episode_id), "failed")
