"""SandboxFusion compatibility: verl's sandbox_fusion client against `/run_code`, end to end.

`VerlClient` below does what verl's client does (verl/utils/reward_score/sandbox_fusion/
utils.py, `call_sandbox_api` and `_process_single_case`, as of verl b178a3c): the same JSON
body and headers, a request timeout of compile + run + 10 s, up to 3 attempts retrying only
on 504 (sleeping 1 s, then 2 s), and the same reading of the answer: True (right), False
(wrong output), -1 (API or sandbox error), -2 (runtime error), -3 (timeout), -4 (compile
error). For `fn_name` cases it sends a wrapper program that behaves like verl's: it reads
one JSON argument per stdin line, calls the function (or the `Solution` method) and prints
the result. verl itself is not a dependency, so the model is here, kept to its behaviour.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

VERL_ATTEMPTS = 3
VERL_API_TIMEOUT_S = 10
VERL_PRELUDE = (
    "from string import *\nfrom re import *\nfrom collections import *\nfrom heapq import *\n"
    "from math import *\nfrom itertools import *\nfrom functools import *\nfrom typing import *\n"
    "import sys\nimport json\n"
)


class VerlClient:
    """verl's sandbox_fusion client, as it builds requests and reads answers."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.sleeps: list[float] = []

    def call(
        self,
        code: str,
        stdin: str | None,
        *,
        timeout: int = 10,
        memory_limit_mb: int = 1024,
        language: str = "python",
    ) -> tuple[dict[str, Any] | None, str | None]:
        payload = json.dumps(
            {
                "compile_timeout": timeout,
                "run_timeout": timeout,
                "code": code,
                "stdin": stdin,
                "memory_limit_MB": memory_limit_mb,
                "language": language,
                "files": {},
                "fetch_files": [],
            }
        )
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        last_error = None
        for attempt in range(VERL_ATTEMPTS):
            try:
                response = httpx.post(
                    self.url,
                    headers=headers,
                    content=payload.encode(),
                    timeout=timeout + timeout + VERL_API_TIMEOUT_S,
                )
                if response.status_code == 504:
                    last_error = f"Gateway Timeout (504) on attempt {attempt + 1}"
                    if attempt < VERL_ATTEMPTS - 1:
                        self.sleeps.append(1.0 * (attempt + 1))
                        time.sleep(1.0 * (attempt + 1))
                    continue
                response.raise_for_status()
                return response.json(), None
            except httpx.HTTPError as exc:
                return None, f"API Request Error: {exc}"
        return None, f"API Call Failed: {last_error}"

    def case(
        self,
        code: str,
        stdin: str | None,
        expected: str | None,
        *,
        timeout: int = 10,
        memory_limit_mb: int = 1024,
        fn_name: str | None = None,
        language: str = "python",
    ) -> tuple[Any, dict[str, Any]]:
        if fn_name:
            code = fn_wrapper(code, fn_name)
        response, error = self.call(
            code, stdin, timeout=timeout, memory_limit_mb=memory_limit_mb, language=language
        )
        meta: dict[str, Any] = {"api_response": response, "error": error}
        if error or response is None:
            return -1, meta
        compile_result, run = response.get("compile_result"), response.get("run_result")
        status = response.get("status")
        if status == "SandboxError":
            return -1, meta
        if status == "Failed":
            compile_status = compile_result.get("status") if compile_result else None
            if compile_status in ("Error", "TimeLimitExceeded") or (
                compile_status == "Finished" and compile_result.get("return_code") != 0
            ):
                return -4, meta
            if not run:
                return -1, meta
            if run["status"] == "TimeLimitExceeded":
                return -3, meta
            if run["status"] == "Error" or run.get("return_code") != 0:
                return -2, meta
            return -1, meta
        if status == "Success":
            if not run or run["status"] != "Finished":
                return -1, meta
            actual = run.get("stdout") or ""
            return expected is None or actual.rstrip("\n") == str(expected).rstrip("\n"), meta
        return -1, meta

    def check_correctness(
        self, in_outs: dict[str, Any], generation: str, timeout: int = 10
    ) -> list[Any]:
        """verl's check_correctness: every case in parallel, results in order."""
        inputs, outputs = in_outs["inputs"], in_outs["outputs"]
        with ThreadPoolExecutor(max_workers=8) as pool:
            futures = [
                pool.submit(
                    self.case, generation, i, o, timeout=timeout, fn_name=in_outs.get("fn_name")
                )
                for i, o in zip(inputs, outputs, strict=True)
            ]
            return [f.result()[0] for f in futures]


def fn_wrapper(generation: str, fn_name: str) -> str:
    """A program that behaves like verl's call-based wrapper around the generation."""
    return f"""{VERL_PRELUDE}
{generation}

def _run():
    raw = sys.stdin.read()
    args = [json.loads(line) for line in raw.split("\\n")] if raw.strip() else []
    if {fn_name!r} in globals():
        target = globals()[{fn_name!r}]
    else:
        target = getattr(globals()["Solution"](), {fn_name!r})
    result = target(*args)
    if isinstance(result, (dict, list, tuple)) or result is None or isinstance(result, bool):
        print(json.dumps(result))
    else:
        print(str(result))

if __name__ == "__main__":
    _run()
"""


@pytest.fixture
def verl(service_url: str) -> VerlClient:
    return VerlClient(f"{service_url}/run_code")


def test_ping_answers_like_sandboxfusion(http: httpx.Client) -> None:
    response = http.get("/v1/ping")
    assert response.status_code == 200
    assert response.json() == "pong"


def test_stdin_stdout_cases_pass_and_fail(verl: VerlClient) -> None:
    program = "a, b = map(int, input().split())\nprint(a + b)\n"
    cases = {"inputs": ["1 2\n", "40 2\n"], "outputs": ["3\n", "42\n"]}
    assert verl.check_correctness(cases, program) == [True, True]
    result, meta = verl.case("print(int(input()) * 2)\n", "5\n", "11\n")
    assert result is False
    response = meta["api_response"]
    assert response["status"] == "Success"
    assert response["message"] == ""
    assert response["compile_result"] is None
    run = response["run_result"]
    assert (run["status"], run["return_code"], run["stdout"]) == ("Finished", 0, "10\n")
    assert run["execution_time"] > 0
    assert response["files"] == {}


def test_call_based_cases_through_the_wrapper(verl: VerlClient) -> None:
    generation = (
        "class Solution:\n"
        "    def twoSum(self, nums: List[int], target: int) -> List[int]:\n"
        "        seen = {}\n"
        "        for i, n in enumerate(nums):\n"
        "            if target - n in seen:\n"
        "                return [seen[target - n], i]\n"
        "            seen[n] = i\n"
    )
    cases = {
        "inputs": ["[2, 7, 11, 15]\n9", "[3, 2, 4]\n6"],
        "outputs": ["[0, 1]", "[0, 2]"],
        "fn_name": "twoSum",
    }
    assert verl.check_correctness(cases, generation) == [True, False]


def test_runtime_errors_are_failed_runs(verl: VerlClient) -> None:
    result, meta = verl.case("import sys\nprint('partial')\nraise ValueError('boom')\n", None, "x")
    assert result == -2
    response = meta["api_response"]
    run = response["run_result"]
    assert (response["status"], run["status"], run["return_code"]) == ("Failed", "Finished", 1)
    assert "ValueError: boom" in run["stderr"]
    assert run["stdout"] == "partial\n"


def test_a_program_over_its_time_limit_is_time_limit_exceeded(verl: VerlClient) -> None:
    started = time.monotonic()
    result, meta = verl.case("while True:\n    pass\n", None, None, timeout=1)
    elapsed = time.monotonic() - started
    assert result == -3
    run = meta["api_response"]["run_result"]
    assert (run["status"], run["return_code"]) == ("TimeLimitExceeded", None)
    assert elapsed < 1 + 1 + VERL_API_TIMEOUT_S  # answered before verl's client gave up


def test_memory_over_the_limit_fails_the_run(verl: VerlClient) -> None:
    hog = "blocks = [bytearray(16 << 20) for _ in range(32)]\nprint(len(blocks))\n"
    result, meta = verl.case(hog, None, "32", memory_limit_mb=64)
    assert result == -2, meta
    assert meta["api_response"]["run_result"]["return_code"] != 0


def test_an_unknown_language_is_refused_not_retried(verl: VerlClient) -> None:
    # SandboxFusion's `language` is an enum: an unknown one is a 422, which verl does not retry
    result, meta = verl.case("x", None, None, language="cobol")
    assert result == -1
    assert meta["api_response"] is None and "422" in meta["error"]
    assert verl.sleeps == []


def test_a_cpp_compile_error_reads_as_one_in_verl(verl: VerlClient) -> None:
    result, meta = verl.case("int main() { return nope; }", None, None, language="cpp")
    assert result == -4, meta
    assert "nope" in meta["api_response"]["compile_result"]["stderr"]


class _FlakyGateway:
    """A reverse proxy on loopback that answers the first request 504, then forwards."""

    def __init__(self, upstream: str) -> None:
        self.requests = 0
        gateway = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                gateway.requests += 1
                if gateway.requests == 1:
                    self.send_response(504)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                reply = httpx.post(
                    upstream + self.path,
                    content=body,
                    timeout=60,
                    headers={"Content-Type": self.headers["Content-Type"]},
                )
                self.send_response(reply.status_code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply.content)))
                self.end_headers()
                self.wfile.write(reply.content)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> _FlakyGateway:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


@pytest.fixture
def flaky_gateway(service_url: str) -> Iterator[_FlakyGateway]:
    with _FlakyGateway(service_url) as gateway:
        yield gateway


def test_verl_retries_a_gateway_timeout_and_gets_the_answer(flaky_gateway: _FlakyGateway) -> None:
    client = VerlClient(f"{flaky_gateway.url}/run_code")
    result, _ = client.case("print(input()[::-1])\n", "abc\n", "cba\n")
    assert result is True
    assert flaky_gateway.requests == 2
    assert client.sleeps == [1.0]


def test_two_equal_programs_are_two_runs_and_a_keyed_retry_is_one(
    http: httpx.Client,
) -> None:
    # SandboxFusion runs every call: two equal samples are two measurements
    body = {"code": "import os\nprint(os.urandom(8).hex())\n", "language": "python"}
    first, second = (http.post("/run_code", json=body).json() for _ in range(2))
    assert first["status"] == second["status"] == "Success"
    assert first["run_result"]["stdout"] != second["run_result"]["stdout"]
    # a retry that sends its call's key gets that call's run back
    key = {"Idempotency-Key": f"run-code-{time.time_ns()}"}
    keyed, retried = (http.post("/run_code", json=body, headers=key).json() for _ in range(2))
    assert keyed["run_result"]["stdout"] == retried["run_result"]["stdout"]
    # and content dedup, asked for in the URL, as before
    shared = [
        http.post("/run_code", params={"share_identical": "true"}, json=body).json()
        for _ in range(2)
    ]
    assert shared[0]["run_result"]["stdout"] == shared[1]["run_result"]["stdout"]
