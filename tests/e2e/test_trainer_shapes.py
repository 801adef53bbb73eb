"""Each trainer's requests, as its client builds them, against a running service.

The request shapes are ours, written from the trainers' clients (not their code, which is no
dependency): verl's sandbox_fusion reward and SandboxFusionTool (the same `/run_code` body,
the tool with no stdin), ROLL's code-sandbox reward (extra `expected_stdout`, a trace-id
header, `pytest` for pytest cases), SkyRL's coder1 verifier (posted to
`http://{server}:8080/run_code`, so through the second port), SandboxFusion's minimal body
(SkyRL's code tool), OpenRLHF's remote reward, and TRL's call of a reward function.

`SHAPES` carries the rows of the compatibility table in docs/trainers.md: the table is
rendered from them (`python scripts/trainer_table.py` rewrites it; tests/unit/
test_trainer_table.py fails when it drifts), and each row is a test here.
"""

from __future__ import annotations

import asyncio
import base64
import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from proctor.integrations.trl import make_reward_func
from tests.conftest import claimed_database, free_port, running_service

ADD = "a, b = map(int, input().split())\nprint(a + b)\n"
SUB = "a, b = map(int, input().split())\nprint(a - b)\n"
LOOP = "while True:\n    pass\n"
NUMPY = "import numpy as np\nprint(int(np.array([1, 2, 3]) @ np.array([4, 5, 6])))\n"
ADD_TASK = {"inputs": ["1 2\n", "10 -3\n"], "outputs": ["3\n", "7\n"]}
PROMPT = "<|im_start|>user\nAdd two integers.<|im_end|>\n<|im_start|>assistant\n"


@dataclass(frozen=True)
class Endpoints:
    api: str  # the API's own port
    sandboxfusion: str  # PROCTOR_SANDBOXFUSION_PORT, standing in for SandboxFusion's 8080


@dataclass(frozen=True)
class Shape:
    """One row of the table: a trainer's request and what the trainer reads from the answer."""

    trainer: str
    setting: str  # what a user changes in that trainer
    case: str
    reads: str  # what the trainer's client reads, and the value it must get
    check: Callable[[Endpoints], None]

    @property
    def id(self) -> str:
        return f"{self.trainer} · {self.case}"


# ---------------------------------------------------------------- the trainers' requests


def verl_body(code: str, stdin: str | None, *, timeout: int = 10, language: str = "python") -> Any:
    """verl's `call_sandbox_api`: every field, compile and run timeouts the same."""
    return {
        "compile_timeout": timeout,
        "run_timeout": timeout,
        "code": code,
        "stdin": stdin,
        "memory_limit_MB": 1024,
        "language": language,
        "files": {},
        "fetch_files": [],
    }


def run_code(url: str, body: Any, *, client_timeout: float, **headers: str) -> Any:
    response = httpx.post(f"{url}/run_code", json=body, headers=headers, timeout=client_timeout)
    assert response.status_code == 200, response.text
    return response.json()


def verl(endpoints: Endpoints, code: str, stdin: str | None, timeout: int = 10) -> Any:
    # verl's client waits compile + run + 10 s
    return run_code(
        endpoints.api, verl_body(code, stdin, timeout=timeout), client_timeout=2 * timeout + 10
    )


def roll(
    endpoints: Endpoints, code: str, stdin: str, expected: str, language: str = "python"
) -> Any:
    body = {
        "compile_timeout": 30,
        "run_timeout": 30,
        "code": code,
        "language": language,
        "stdin": stdin,
        "expected_stdout": expected,
    }
    # ROLL's aiohttp session: 90 s in all, 30 s per read
    return run_code(
        endpoints.api, body, client_timeout=30, **{"eagleeye-traceid": str(uuid.uuid4())}
    )


def coder1(
    endpoints: Endpoints,
    code: str,
    stdin: str | None,
    *,
    language: str = "python",
    files: dict[str, str] | None = None,
    timeout: int = 10,
) -> Any:
    """coder1's `code_exec_sandboxfusion`: `http://{server}:8080/run_code`, waiting run + 2 s."""
    body = {
        "language": language,
        "code": code,
        "stdin": stdin,
        "run_timeout": timeout,
        "memory_limit_MB": 1024,
        "files": files or {},
    }
    return run_code(endpoints.sandboxfusion, body, client_timeout=timeout + 2)


def openrlhf(endpoints: Endpoints, queries: list[str], labels: list[Any]) -> Any:
    payload = {
        "query": [PROMPT + q for q in queries],
        "prompts": [PROMPT] * len(queries),
        "labels": labels,
    }
    response = httpx.post(f"{endpoints.api}/openrlhf/reward", json=payload, timeout=180)
    assert response.status_code == 200, response.text
    return response.json()


def trl(endpoints: Endpoints, completions: list[Any]) -> list[float | None]:
    """GRPOTrainer's call: prompts, completions, completion ids, every other dataset column
    by name, the trainer state, and its logging hooks."""
    reward = make_reward_func(endpoints.api)
    logged: dict[str, Any] = {}

    async def call() -> list[float | None]:
        return await reward(
            prompts=["Add two integers."] * len(completions),
            completions=completions,
            completion_ids=[[1, 2, 3]] * len(completions),
            task=[json.dumps(ADD_TASK)] * len(completions),
            trainer_state=None,
            log_extra=logged.__setitem__,
            log_metric=logged.__setitem__,
        )

    rewards = asyncio.run(call())
    assert len(logged["proctor_verdict"]) == len(completions)
    return rewards


def fenced(code: str) -> str:
    return f"```python\n{code}```"


# ---------------------------------------------------------------- the checks


def verl_right(e: Endpoints) -> None:
    answer = verl(e, ADD, "1 2\n")
    assert (answer["status"], answer["run_result"]["stdout"]) == ("Success", "3\n")


def verl_wrong(e: Endpoints) -> None:
    answer = verl(e, SUB, "1 2\n")
    assert (answer["status"], answer["run_result"]["stdout"]) == ("Success", "-1\n")


def verl_loop(e: Endpoints) -> None:
    answer = verl(e, LOOP, "", timeout=2)
    assert (answer["status"], answer["run_result"]["status"]) == ("Failed", "TimeLimitExceeded")


def verl_runtime_error(e: Endpoints) -> None:
    answer = verl(e, "raise SystemExit(3)\n", "")
    assert (answer["status"], answer["run_result"]["status"]) == ("Failed", "Finished")
    assert answer["run_result"]["return_code"] == 3


def verl_numpy(e: Endpoints) -> None:
    answer = verl(e, NUMPY, None)
    assert (answer["status"], answer["run_result"]["stdout"]) == ("Success", "32\n"), answer


def verl_tool(e: Endpoints) -> None:
    answer = run_code(
        e.api, verl_body("print(sum(range(10)))\n", None, timeout=30), client_timeout=70
    )
    assert answer["run_result"]["stdout"] == "45\n"
    assert answer["run_result"]["stderr"] == ""


def roll_stdio(e: Endpoints) -> None:
    answer = roll(e, ADD, "10 -3\n", "7")
    assert (answer["status"], answer["run_result"]["stdout"].strip()) == ("Success", "7")


def roll_pytest(e: Endpoints) -> None:
    code = "def add(a, b):\n    return a + b\n\ndef test_add():\n    assert add(1, 2) == 3\n"
    assert roll(e, code, "", "", language="pytest")["status"] == "Success"


def roll_failed(e: Endpoints) -> None:
    answer = roll(e, "import json\njson.loads('{')\n", "", "")
    assert answer["status"] == "Failed"
    last = answer["run_result"]["stderr"].strip().split("\n")[-1].split(":")[0]
    assert last == "json.decoder.JSONDecodeError"


def coder1_right(e: Endpoints) -> None:
    answer = coder1(e, ADD, "1 2\n")
    assert (answer["status"], answer["run_result"]["stdout"]) == ("Success", "3\n")


def coder1_wrong(e: Endpoints) -> None:
    answer = coder1(e, "raise ValueError\n", "1 2\n")
    assert answer["status"] == "Failed"
    assert "ValueError" in answer["run_result"]["stderr"]


def coder1_pytest(e: Endpoints) -> None:
    """Its pytest mode: the solution as `files["solution.py"]`, the tests as the code."""
    solution = base64.b64encode(b"def add(a, b):\n    return a + b\n").decode()
    tests = "from solution import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n"
    answer = coder1(e, tests, None, language="pytest", files={"solution.py": solution})
    assert answer["status"] == "Success", answer


def minimal(e: Endpoints) -> None:
    answer = run_code(
        e.api, {"code": 'print("Hello, world!")', "language": "python"}, client_timeout=30
    )
    assert (answer["status"], answer["run_result"]["stdout"]) == ("Success", "Hello, world!\n")


def minimal_javascript(e: Endpoints) -> None:
    body = {"code": "console.log([1, 2, 3].map((x) => x * 2).join(' '))", "language": "javascript"}
    answer = run_code(e.api, body, client_timeout=30)
    assert (answer["status"], answer["run_result"]["stdout"]) == ("Success", "2 4 6\n"), answer


def openrlhf_right_wrong(e: Endpoints) -> None:
    body = openrlhf(e, [fenced(ADD) + "<|im_end|>", fenced(SUB)], [json.dumps(ADD_TASK)] * 2)
    assert (body["rewards"], body["scores"]) == ([1.0, 0.0], [1.0, 0.0])
    assert body["extra_logs"]["passed"] == [1.0, 0.0]
    assert body["extra_logs"]["timeout"] == [0.0, 0.0]


def openrlhf_case_time_limit(e: Endpoints) -> None:
    body = openrlhf(e, [fenced(LOOP)], [json.dumps({"inputs": ["1 2\n"], "outputs": ["3\n"]})])
    assert body["rewards"] == [0.0]
    assert body["extra_logs"]["timeout"] == [1.0]
    assert body["extra_logs"]["infra_error"] == [0.0]


def trl_standard(e: Endpoints) -> None:
    assert trl(e, [fenced(ADD), fenced(SUB)]) == [1.0, 0.0]


def trl_conversational(e: Endpoints) -> None:
    assert trl(e, [[{"role": "assistant", "content": fenced(ADD)}]]) == [1.0]


# what a user sets in each trainer (HOST: where Proctor runs)
VERL = "`reward_model.sandbox_fusion.url=http://HOST:8000/run_code`"
TOOL = "tool config: `sandbox_fusion_url: http://HOST:8000/run_code`"
ROLL = "the code-sandbox reward's sandbox URL: `http://HOST:8000/run_code`"
CODER1 = "`SANDBOX_FUSION_SERVERS=HOST`; Proctor: `PROCTOR_SANDBOXFUSION_PORT=8080`"
SKYRL = "its SandboxFusion URL: `http://HOST:8000/run_code`"
RLHF = "`--remote_rm_url http://HOST:8000/openrlhf/reward`"
TRL = "`reward_funcs=[proctor_reward]`, `PROCTOR_URL=http://HOST:8000`"

SHAPES = (
    Shape("verl reward", VERL, "stdin, right output", "`Success`, stdout `3`", verl_right),
    Shape("verl reward", VERL, "wrong output", "`Success`, stdout `-1`", verl_wrong),
    Shape("verl reward", VERL, "infinite loop", "`Failed`, `TimeLimitExceeded`", verl_loop),
    Shape("verl reward", VERL, "exit 3", "`Failed`, `Finished`, code 3", verl_runtime_error),
    Shape("verl reward", VERL, "imports numpy", "`Success`, stdout `32`", verl_numpy),
    Shape("verl SandboxFusionTool", TOOL, "no stdin", "stdout `45`, no stderr", verl_tool),
    Shape("ROLL", ROLL, "stdin, `expected_stdout`", "`Success`, stdout `7`", roll_stdio),
    Shape("ROLL", ROLL, "`pytest` case", "`Success`", roll_pytest),
    Shape("ROLL", ROLL, "exception", "`Failed`, stderr's last line", roll_failed),
    Shape("SkyRL coder1", CODER1, "stdin, on port 8080", "`Success`, stdout `3`", coder1_right),
    Shape("SkyRL coder1", CODER1, "exception", "`Failed`, stderr names it", coder1_wrong),
    Shape("SkyRL coder1", CODER1, "`pytest`, solution in `files`", "`Success`", coder1_pytest),
    Shape("SkyRL code tool", SKYRL, "`code` and `language` only", "`Success`, stdout", minimal),
    Shape("SkyRL code tool", SKYRL, "`javascript`", "`Success`, stdout", minimal_javascript),
    Shape("OpenRLHF", RLHF, "right, wrong", "rewards `[1, 0]`", openrlhf_right_wrong),
    Shape(
        "OpenRLHF", RLHF, "case over its limit", "`extra_logs.timeout` 1", openrlhf_case_time_limit
    ),
    Shape("TRL GRPOTrainer", TRL, "standard format", "`[1.0, 0.0]`", trl_standard),
    Shape("TRL GRPOTrainer", TRL, "conversational format", "`[1.0]`", trl_conversational),
)


def table() -> str:
    """The compatibility table of docs/trainers.md, one row per shape."""
    rows = ["| trainer | the setting | request | the trainer reads |", "|---|---|---|---|"]
    rows += [f"| {s.trainer} | {s.setting} | {s.case} | {s.reads} |" for s in SHAPES]
    return "\n".join(rows) + "\n"


# ---------------------------------------------------------------- the tests


@pytest.fixture(scope="module")
def endpoints(docker_ready: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Endpoints]:
    """A service of its own, with the second port (the session's has none), on a Redis
    database of its own (the session's workers would take its episodes)."""
    port = free_port()
    log: Path = tmp_path_factory.mktemp("shapes") / "service.log"
    with (
        claimed_database() as redis_url,
        running_service(redis_url, log, PROCTOR_SANDBOXFUSION_PORT=str(port)) as url,
    ):
        yield Endpoints(api=url, sandboxfusion=f"http://127.0.0.1:{port}")


@pytest.mark.parametrize("shape", SHAPES, ids=[s.id for s in SHAPES])
def test_trainer_request_shape(shape: Shape, endpoints: Endpoints) -> None:
    shape.check(endpoints)
