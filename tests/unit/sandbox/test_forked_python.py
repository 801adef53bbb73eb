"""`Run.python`: the runner runs a Python program in a fork of itself, as `python3 -I -B`
would run it, with nothing of the runner's request reachable from the program's frames.

The runner is streamed into a local `python3 -I -S` here, as into a sandbox (no engine):
what is checked is the process the program gets, not the sandbox around it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from workers.sandbox.protocol import Program, Run, RunResult, Write
from workers.sandbox.sandbox import BOOT, boot_input, runner_source

SECRET = "grader-secret-4f1c"  # in the request only, as the grader's nonce file is


def run_forked(
    tmp_path: Path, program: str, *, timeout_s: float = 10.0, prelude: str = ""
) -> RunResult:
    run = Run(
        command="python3 -I -B main.py one two",
        python=["main.py", "one", "two"],
        cwd=str(tmp_path),
        env={"ONLY": "this"},
        timeout_s=timeout_s,
    )
    ops = [Write(root=str(tmp_path), files={"main.py": program, "nonce.json": SECRET}), run]
    source = runner_source().replace(b"\nlaunch(main)\n", f"\n{prelude}launch(main)\n".encode())
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", BOOT],
        input=boot_input(source) + Program(ops).request("n"),
        capture_output=True,
        timeout=60,
        check=True,
    )
    reply: dict[str, Any] = json.loads(done.stdout)
    result = reply["results"]["1"]
    return RunResult(**{k: v for k, v in result.items() if k != "kind"})


def test_the_program_gets_its_argv_environment_streams_and_session(tmp_path: Path) -> None:
    result = run_forked(
        tmp_path,
        "import os, sys\n"
        "print(sys.argv, os.environ.get('ONLY'), repr(sys.stdin.read()), __name__)\n"
        "print(sorted(os.listdir('/proc/self/fd')), os.getsid(0) == os.getpid())\n"
        "print('to stderr', file=sys.stderr)\n",
    )
    assert result.exit_code == 0, result.stderr
    argv, fds = result.stdout.splitlines()
    assert argv == "['main.py', 'one', 'two'] this '' __main__"
    assert fds == "['0', '1', '2', '3'] True"  # 3: the listing itself
    assert result.stderr == "to stderr\n"


@pytest.mark.parametrize(
    ("ending", "code", "stderr"),
    [
        ("pass", 0, ""),
        ("sys.exit(3)", 3, ""),
        ("sys.exit(None)", 0, ""),
        ("sys.exit('bye')", 1, "bye\n"),
        ("os._exit(7)", 7, ""),
        ("os.kill(os.getpid(), 9)", -9, ""),
    ],
)
def test_it_ends_with_the_status_its_interpreter_would(
    tmp_path: Path, ending: str, code: int, stderr: str
) -> None:
    result = run_forked(tmp_path, f"import os, sys\n{ending}\n")
    assert (result.exit_code, result.stderr) == (code, stderr)


def test_an_exception_is_shown_from_the_program_s_own_frames(tmp_path: Path) -> None:
    result = run_forked(tmp_path, "def f():\n    raise ValueError('no')\nf()\n")
    assert result.exit_code == 1
    # the script's absolute path, as python3 (3.9 on) names `__main__`'s file
    first = f'Traceback (most recent call last):\n  File "{tmp_path}/main.py", line 3'
    assert result.stderr.startswith(first), result.stderr
    assert "proctor-runner" not in result.stderr and "runpy" not in result.stderr
    assert result.stderr.endswith("ValueError: no\n")


def test_atexit_handlers_and_threads_finish_as_at_an_interpreter_s_end(tmp_path: Path) -> None:
    result = run_forked(
        tmp_path,
        "import atexit, threading, time\n"
        "atexit.register(print, 'at exit')\n"
        "threading.Thread(target=lambda: (time.sleep(0.2), print('thread'))).start()\n",
    )
    assert result.stdout == "thread\nat exit\n"


def test_nothing_of_the_request_is_on_the_program_s_stack(tmp_path: Path) -> None:
    # the runner's frames held the request (the grader's files among it): they are gone
    result = run_forked(
        tmp_path,
        "import sys\n"
        "frame, seen = sys._getframe(), []\n"
        "while frame is not None:\n"
        "    seen.append(repr(frame.f_locals))\n"
        "    seen.append(repr({k: v for k, v in frame.f_globals.items() if k != 'seen'}))\n"
        "    frame = frame.f_back\n"
        f"print(len(seen) > 2, any({SECRET[:6]!r} + {SECRET[6:]!r} in s for s in seen))\n",
    )
    assert result.stdout == "True False\n", result.stderr


def test_a_program_that_runs_too_long_is_ended_at_its_timeout(tmp_path: Path) -> None:
    result = run_forked(tmp_path, "while True:\n    pass\n", timeout_s=0.5)
    assert result.timed_out and result.duration_s < 5


def test_a_script_the_runner_holds_compiled_runs_from_that_code_under_its_path(
    tmp_path: Path,
) -> None:
    program = "raise ValueError('compiled here')\n"
    # the held code is told apart from the file's by what it does (a server holds the same)
    held = "def f():\n    raise ValueError('held code')\nf()\n"
    prelude = f"COMPILED[{program.encode()!r}] = compile({held!r}, 'shared.py', 'exec')\n"
    result = run_forked(tmp_path, program, prelude=prelude)
    assert result.exit_code == 1
    assert "ValueError: held code" in result.stderr
    # every frame named for the file
    assert f'File "{tmp_path}/main.py", line 2, in f' in result.stderr
    other = run_forked(tmp_path, "raise ValueError('its own')\n", prelude=prelude)
    assert "ValueError: its own" in other.stderr
