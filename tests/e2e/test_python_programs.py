"""A Python program on `/run_code` as `python3 main.py` runs it, in a root server's fork of its
zygote (no interpreter start-up, memory that never held a request): its files beside it on
`sys.path`, its stdin, `__name__`, `__file__`, argv, exit status, uncaught exception as the
interpreter prints it, atexit handlers and non-daemon threads at its end, the episode's uid,
its limits — in both isolation modes (a fresh container's root server, a pooled one's). What
each test expects is what `/usr/bin/python3 main.py` answers."""

from __future__ import annotations

import base64
from typing import Any

import httpx
import pytest


@pytest.fixture(scope="module")
def service_url(service_of_each_mode: str) -> str:
    """Every test here in both isolation modes."""
    return service_of_each_mode


MAIN = """\
import atexit, os, sys, threading
import helper

atexit.register(lambda: print("atexit ran"))
done = threading.Event()
threading.Thread(target=lambda: (done.wait(), print("thread ran"))).start()
print(__name__, __file__, sys.argv, sys.path[0], os.getcwd())
print("uid is root:", os.getuid() == 0)
print("helper says", helper.VALUE, "stdin says", sys.stdin.read().strip())
sys.stdout.flush()
done.set()  # the interpreter's end waits for the thread, then runs atexit
raise SystemExit(3)
"""


def run_code(url: str, code: str, **fields: Any) -> dict[str, Any]:
    body = {"code": code, "language": "python", "run_timeout": 10, **fields}
    answer: dict[str, Any] = httpx.post(f"{url}/run_code", json=body, timeout=180).json()
    return answer


def helper_file(value: str) -> dict[str, str]:
    return {"helper.py": base64.b64encode(f"VALUE = {value!r}\n".encode()).decode()}


def test_a_program_runs_as_python3_main_py(service_url: str) -> None:
    answer = run_code(service_url, MAIN, stdin="forty-two\n", files=helper_file("near"))
    run = answer["run_result"]
    assert (answer["status"], run["status"], run["return_code"]) == ("Failed", "Finished", 3)
    assert run["stdout"].splitlines() == [
        "__main__ /workspace/main.py ['main.py'] /workspace /workspace",
        "uid is root: False",
        "helper says near stdin says forty-two",
        "thread ran",
        "atexit ran",
    ], run


def test_an_uncaught_exception_is_shown_as_the_interpreter_shows_it(service_url: str) -> None:
    code = "def f():\n    raise ValueError('boom')\n\nprint('partial')\nf()\n"
    run = run_code(service_url, code)["run_result"]
    assert (run["status"], run["return_code"], run["stdout"]) == ("Finished", 1, "partial\n")
    assert run["stderr"] == (
        "Traceback (most recent call last):\n"
        '  File "/workspace/main.py", line 5, in <module>\n'
        "    f()\n"
        '  File "/workspace/main.py", line 2, in f\n'
        "    raise ValueError('boom')\n"
        "ValueError: boom\n"
    ), run["stderr"]


@pytest.mark.parametrize(
    ("code", "timeout", "status"),
    [
        ("while True:\n    pass\n", 2, "TimeLimitExceeded"),
        ("blocks = [bytearray(16 << 20) for _ in range(64)]\n", 30, "MemoryLimitExceeded"),
    ],
)
def test_a_program_keeps_its_limits(service_url: str, code: str, timeout: int, status: str) -> None:
    run = run_code(service_url, code, run_timeout=timeout, memory_limit_MB=256)["run_result"]
    assert run["status"] == status, run


# a marker an earlier program holds, and a pattern that finds it without holding it itself
MARKER = "proctor-marker-6561726c696572"
PATTERN = "rb'proctor-marke[r]-6561726c696572'"


def test_a_program_finds_nothing_of_an_earlier_request_in_its_memory(service_url: str) -> None:
    """Each program holds a marker in its memory; the next scans its own memory for it."""
    plant = f"keep = [{MARKER!r} * 4 for _ in range(1000)]\nprint(len(keep))\n"
    scan = (
        "import re\n"
        f"pattern = re.compile({PATTERN})\n"
        "found = 0\n"
        "mem = open('/proc/self/mem', 'rb', 0)\n"
        "for line in open('/proc/self/maps').read().splitlines():\n"
        "    span, perms = line.split()[:2]\n"
        "    if 'r' not in perms or '[v' in line:\n"
        "        continue\n"
        "    lo, hi = (int(x, 16) for x in span.split('-'))\n"
        "    try:\n"
        "        mem.seek(lo)\n"
        "        found += len(pattern.findall(mem.read(hi - lo)))\n"
        "    except (OSError, ValueError, OverflowError):\n"
        "        pass\n"
        "print('found', found)\n"
    )
    for _ in range(3):
        assert run_code(service_url, plant)["run_result"]["stdout"] == "1000\n"
        run = run_code(service_url, scan)["run_result"]
        assert run["stdout"] == "found 0\n", run["stderr"]
