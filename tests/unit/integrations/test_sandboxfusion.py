"""SandboxFusion's `/run_code` ↔ Proctor episodes: the conversions both ways, and auth.

The spellings and the status table are SandboxFusion's (sandbox/server/sandbox_api.py and
sandbox/runners/types.py, 469de08); the routes themselves run end to end in
tests/e2e/test_sandboxfusion_compat.py.
"""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import pytest
from fastapi.security import HTTPAuthorizationCredentials

from core.config import Settings
from proctor.models import (
    EpisodeResult,
    EpisodeStatus,
    SandboxInfo,
    TestFormat,
    Timings,
    Verdict,
)
from service.adapters.sandboxfusion import (
    RunCodeRequest,
    UnsupportedRequest,
    run_code_episode,
    run_code_response,
)
from service.deps import Resources, adapter_auth
from service.errors import Unauthorized


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def test_a_request_as_verl_sends_it_becomes_a_one_shot_episode() -> None:
    request = RunCodeRequest.model_validate(
        {
            "compile_timeout": 10,
            "run_timeout": 3,
            "code": "print(input())",
            "stdin": "hi\n",
            "memory_limit_MB": 256,
            "language": "python",
            "files": {},
            "fetch_files": [],
        }
    )
    episode = run_code_episode(request)
    assert episode.solution is not None
    assert episode.solution.files == {"main.py": "print(input())"}
    tests = episode.task.tests
    assert tests.format is TestFormat.exit_code
    assert tests.command == "python3 main.py < .proctor-stdin"
    assert tests.files == {".proctor-stdin": "hi\n"}  # written only when the program runs
    assert (episode.task.limits.timeout_s, episode.task.limits.memory_mb) == (3, 256)


def test_defaults_files_and_languages() -> None:
    request = RunCodeRequest(
        code="cat data.txt", language="bash", files={"data.txt": b64("x"), "skipped": None}
    )
    episode = run_code_episode(request)
    assert episode.task.files == {"data.txt": "x"}
    assert episode.task.tests.command == "bash main.sh"  # no stdin: nothing redirected
    assert episode.task.limits.memory_mb == 1024  # -1: no limit asked, ours applies
    assert RunCodeRequest(code="x").language == "python"


def test_a_file_that_is_not_base64_is_unsupported() -> None:
    with pytest.raises(UnsupportedRequest, match="not base64"):
        run_code_episode(RunCodeRequest(code="x", files={"x": "not base64!"}))


def result(verdict: Verdict, **fields: Any) -> EpisodeResult:
    finished = verdict is not Verdict.infra_error
    base: dict[str, Any] = {
        "id": "ep_1",
        "status": EpisodeStatus.completed if finished else EpisodeStatus.failed,
        "verdict": verdict,
        "reward": (1.0 if verdict is Verdict.passed else 0.0) if finished else None,
        "stdout": "out",
        "stderr": "err",
        "timings": Timings(run_s=0.5),
        "sandbox": SandboxInfo(host="worker-1"),
    }
    return EpisodeResult(**{**base, **fields})


@pytest.mark.parametrize(
    ("outcome", "status", "run_status", "code"),
    [
        (result(Verdict.passed, exit_code=0), "Success", "Finished", 0),
        (result(Verdict.failed, exit_code=1), "Failed", "Finished", 1),
        (result(Verdict.oom, exit_code=137), "Failed", "MemoryLimitExceeded", 137),
        (result(Verdict.timeout, exit_code=None), "Failed", "TimeLimitExceeded", None),
        (result(Verdict.cheat, exit_code=0), "Failed", "Finished", 1),
    ],
)
def test_results_map_to_sandboxfusion_statuses(
    outcome: EpisodeResult, status: str, run_status: str, code: int | None
) -> None:
    response = run_code_response(outcome).model_dump(mode="json")
    assert response["status"] == status
    assert response["message"] == ""
    assert response["compile_result"] is None
    assert response["run_result"] == {
        "status": run_status,
        "execution_time": 0.5,
        "return_code": code,
        "stdout": "out",
        "stderr": "err",
    }
    assert response["executor_pod_name"] == "worker-1"
    assert response["files"] == {}


def test_infrastructure_failures_are_sandbox_errors() -> None:
    for outcome in (result(Verdict.infra_error, error="docker is down"), OSError("docker is down")):
        response = run_code_response(outcome)
        assert response.status == "SandboxError"
        assert response.message == "docker is down"
        assert response.run_result is None


def resources_with_tokens(*tokens: str) -> Resources:
    settings = Settings(api_tokens=list(tokens))
    return Resources(
        settings=settings,
        redis=None,
        aredis=None,
        store=None,  # type: ignore[arg-type]
        queue=None,
        events=None,
        replies=None,
        images=None,
    )  # type: ignore[arg-type]


def test_adapters_take_the_token_from_the_url_when_no_header_is_sent() -> None:
    resources = resources_with_tokens("s3cret")
    asyncio.run(adapter_auth(resources, None, token="s3cret"))
    asyncio.run(
        adapter_auth(resources, HTTPAuthorizationCredentials(scheme="Bearer", credentials="s3cret"))
    )
    with pytest.raises(Unauthorized):
        asyncio.run(adapter_auth(resources, None, token="wrong"))
    with pytest.raises(Unauthorized):
        asyncio.run(adapter_auth(resources, None))
    asyncio.run(adapter_auth(resources_with_tokens(), None))  # no tokens configured: open
