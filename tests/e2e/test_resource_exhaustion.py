"""The code under test exhausts what its sandbox has: the episode still ends with a typed
verdict and reward 0 (`reward: null` is only ever our own infrastructure's failure), in
one-shot and interactive mode; an honest solution that leaves a background process behind
is still graded."""

from __future__ import annotations

from typing import Any

import httpx

from tests.e2e.helpers import episode, run
from tests.e2e.test_interactive import FIXED, bash, finish, repo, start, task  # noqa: F401

ADD = "def add(a, b):\n    return a + b\n"
WRONG = "def add(a, b):\n    return a - b\n"
TYPED = {"failed", "runtime_error", "oom", "timeout"}
BOMB = (
    "printf 'import os\\nwhile True:\\n    try:\\n        os.fork()\\n    except OSError:\\n"
    "        pass\\n' > /tmp/bomb.py; setsid python3 /tmp/bomb.py >/dev/null 2>&1 "
    "</dev/null & sleep 1; echo started"
)
FILL_TMPFS = "head -c 400m /dev/zero > /tmp/fill; head -c 64m /dev/zero > /dev/shm/fill; true"
EMPTY_FILES = (
    "python3 -c \"import os\nos.mkdir('/tmp/many')\nfor i in range(450000):\n"
    "    open('/tmp/many/%d' % i, 'w').close()\" 2>/dev/null; true"
)


def with_actions(body: dict[str, Any], *commands: str, timeout_s: float = 60) -> dict[str, Any]:
    body["solution"]["actions"] = [
        {"type": "bash", "command": c, "timeout_s": timeout_s} for c in commands
    ]
    return body


def assert_typed_zero(result: dict[str, Any], *likely: str) -> None:
    """Reward 0 with a typed verdict, never null. `likely` are the verdicts the sandbox
    usually ends with; which one it is depends on whether the kernel's OOM killer or the
    runner got there first, so any typed verdict is accepted and the likely ones are
    reported, not asserted."""
    why = (result.get("verdict"), result.get("error"), result.get("reason"))
    assert result["reward"] == 0.0, why
    assert result["verdict"] in TYPED, why
    assert result["status"] == "completed", why
    if likely and result["verdict"] not in likely:
        print(f"ended as {result['verdict']} ({result.get('reason')}), usually {likely}")


# ---------------------------------------------------------------- one-shot


def test_oneshot_forking_leftover_is_graded(http: httpx.Client) -> None:
    body = with_actions(episode(WRONG, pids=64, unscreened=True), BOMB, "echo next")
    result = run(http, body, wait=300)
    assert_typed_zero(result, "failed")  # killed before grading, then graded as wrong


def test_oneshot_honest_background_process_still_passes(http: httpx.Client) -> None:
    body = with_actions(
        episode(ADD, unscreened=True),
        "setsid sleep 600 >/dev/null 2>&1 & nohup sleep 601 >/dev/null 2>&1 &",
    )
    result = run(http, body)
    assert (result["verdict"], result["reward"]) == ("passed", 1.0), result


def test_oneshot_tmpfs_filled_to_the_memory_limit(http: httpx.Client) -> None:
    result = run(
        http, with_actions(episode(WRONG, memory_mb=256, disk_mb=512, unscreened=True), FILL_TMPFS)
    )
    # graded after the scratch mounts are emptied (failed), or the OOM killer took the
    # runner first: oom when the engine saw the limit hit, runtime_error when it did not
    assert_typed_zero(result, "oom", "failed", "runtime_error")
    if result["verdict"] == "oom":
        assert "memory" in result["reason"]


def test_oneshot_many_empty_files(http: httpx.Client) -> None:
    body = with_actions(episode(WRONG, memory_mb=256, unscreened=True), EMPTY_FILES)
    result = run(http, body, wait=300)
    assert_typed_zero(result, "oom", "failed")


def test_oneshot_killing_every_process_it_may_reaches_only_its_own(http: httpx.Client) -> None:
    # a one-shot episode's runner is its sandbox's root server, out of the episode's reach:
    # the kill ends the action's own processes, and the episode keeps its merit
    result = run(http, with_actions(episode(ADD, unscreened=True), "kill -9 -1; sleep 1"))
    assert (result["verdict"], result["reward"]) == ("passed", 1.0), result.get("reason")


# ---------------------------------------------------------------- interactive


def wrong_episode(http: httpx.Client, repo: dict[str, str], **limits: Any) -> str:
    body = task(repo, disabled=["*"])
    body["task"]["limits"].update(limits)
    return start(http, body)[0]


def test_interactive_forking_leftover_before_next_action_and_finish(
    http: httpx.Client, repo: dict[str, str]
) -> None:
    episode_id = wrong_episode(http, repo, pids=64)
    assert bash(http, episode_id, BOMB)["output"] == "started\n"
    bash(http, episode_id, "echo next")  # answered (200), whatever the fork did
    assert_typed_zero(finish(http, episode_id), "failed")


def test_interactive_tmpfs_filled_to_the_memory_limit_before_finish(
    http: httpx.Client, repo: dict[str, str]
) -> None:
    episode_id = wrong_episode(http, repo, memory_mb=256, disk_mb=512)
    bash(http, episode_id, FILL_TMPFS)
    # the scratch mounts are emptied before grading, so the tests usually still run; when
    # the kernel's OOM killer took the container's init, it is `oom`
    assert_typed_zero(finish(http, episode_id), "failed", "oom")


def test_interactive_many_empty_files_before_finish(
    http: httpx.Client, repo: dict[str, str]
) -> None:
    episode_id = wrong_episode(http, repo, memory_mb=256)
    bash(http, episode_id, EMPTY_FILES, timeout_s=120)
    assert_typed_zero(finish(http, episode_id), "failed")


def test_interactive_runner_killed_by_an_action(http: httpx.Client, repo: dict[str, str]) -> None:
    episode_id = wrong_episode(http, repo)
    killed = bash(http, episode_id, "kill -9 -1; sleep 1")
    assert killed["exit_code"] != 0 and "killed" in killed["stderr"]
    assert bash(http, episode_id, "echo alive")["output"] == "alive\n"
    assert_typed_zero(finish(http, episode_id), "failed")


def test_a_setsid_child_does_not_outlive_its_actions_timeout(
    http: httpx.Client, repo: dict[str, str]
) -> None:
    episode_id = wrong_episode(http, repo)
    slow = bash(http, episode_id, "setsid sleep 300 & (setsid sleep 301 &) ; sleep 60", timeout_s=2)
    assert slow["timed_out"] is True
    # a background job of an action that ended in time lives on, as in a shell
    bash(http, episode_id, "setsid sleep 400 >/dev/null 2>&1 &")
    left = bash(http, episode_id, "ps -eo args")["output"].splitlines()
    assert "sleep 300" not in left and "sleep 301" not in left
    assert "sleep 400" in left
    assert_typed_zero(finish(http, episode_id), "failed")


def test_interactive_honest_background_process_still_passes(
    http: httpx.Client, repo: dict[str, str]
) -> None:
    episode_id, _ = start(http, task(repo))
    bash(http, episode_id, "python3 -m http.server 8000 >/dev/null 2>&1 &")
    http.post(
        f"/v1/episodes/{episode_id}/actions",
        json={"type": "write_file", "path": "calc.py", "content": FIXED},
    )
    result = finish(http, episode_id)
    assert (result["verdict"], result["reward"]) == ("passed", 1.0), result
