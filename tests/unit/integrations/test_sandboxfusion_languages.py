"""`/run_code` for compiled and other languages: the episode each becomes, and the answer
each outcome maps to, in SandboxFusion's shapes (sandbox/runners/base.py `run_commands` and
sandbox/server/sandbox_api.py `parse_run_status`: a failed compile has a compile_result and
no run_result; an unknown language is a 422 of request validation)."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from pydantic import ValidationError

from proctor.models import EpisodeResult, EpisodeStatus, SandboxInfo, Timings, Verdict
from service.adapters.sandboxfusion import RunCodeRequest, run_code_episode, run_code_response


def test_a_cpp_request_is_an_episode_of_the_cpp_image_with_a_compile_step() -> None:
    request = RunCodeRequest(
        code="int main(){}", language="cpp", stdin="1 2\n", compile_timeout=7, run_timeout=2
    )
    episode = run_code_episode(request)
    task = episode.task
    assert (task.image, task.language) == ("cpp", "cpp")
    assert episode.solution is not None and episode.solution.files == {"main.cpp": "int main(){}"}
    assert task.tests.command == "./main < .proctor-stdin"
    assert (task.limits.compile_timeout_s, task.limits.timeout_s) == (7, 2)


@pytest.mark.parametrize("language", ["go_test", "typescript"])
def test_a_language_sandboxfusion_runs_without_a_compile_step_gets_its_run_timeout(
    language: str,
) -> None:
    # SandboxFusion runs `go test` and `tsx` within run_timeout alone
    request = RunCodeRequest(code="x", language=language, compile_timeout=1, run_timeout=20)
    assert run_code_episode(request).task.limits.compile_timeout_s == 20
    go = RunCodeRequest(code="x", language="go", compile_timeout=1, run_timeout=20)
    assert run_code_episode(go).task.limits.compile_timeout_s == 1


@pytest.mark.parametrize(
    ("language", "image", "source"),
    [
        ("java", "java", "Main.java"),
        ("go", "go", "main.go"),
        ("javascript", "node", "main.js"),
        ("typescript", "node", "main.ts"),
        ("rust", "rust", "main.rs"),
        ("c", "cpp", "main.c"),
        ("csharp", "mono", "Program.cs"),
        ("kotlin_script", "jvm", "main.kts"),
        ("scala", "jvm", "main.scala"),
        ("ruby", "script", "main.rb"),
        ("sql", "script", "main.sql"),
        ("verilog", "script", "main.sv"),
        ("R", "r", "main.R"),
        ("racket", "racket", "main.rkt"),
        ("D_ut", "d", "main.d"),
        ("jest", "jest", "main.test.ts"),
    ],
)
def test_each_language_runs_in_its_family_image(language: str, image: str, source: str) -> None:
    episode = run_code_episode(RunCodeRequest(code="x", language=language))
    assert episode.task.image == image
    assert episode.solution is not None and list(episode.solution.files) == [source]


def test_an_unknown_language_is_a_validation_error_naming_the_known_ones() -> None:
    with pytest.raises(ValidationError, match=r"'cobol' is not supported.*cpp"):
        RunCodeRequest(code="x", language="cobol")


@pytest.mark.parametrize("language", ["julia", "swift", "lean", "cuda", "python_gpu"])
def test_sandboxfusion_languages_that_cannot_run_here_are_not_refused(language: str) -> None:
    # SandboxFusion's own names: `run_code` answers them with a SandboxError saying why
    assert RunCodeRequest(code="x", language=language).language == language


def test_binary_files_go_with_the_tests_and_text_files_into_the_workspace() -> None:
    blob = base64.b64encode(b"\x00\xff\xfe").decode()
    text = base64.b64encode("héllo".encode()).decode()
    episode = run_code_episode(
        RunCodeRequest(code="x", language="cpp", files={"a.bin": blob, "t.txt": text})
    )
    assert episode.task.files == {"t.txt": "héllo"}
    assert episode.task.tests.binary_files == {"a.bin": blob}


def outcome(verdict: Verdict, **fields: Any) -> EpisodeResult:
    base: dict[str, Any] = {
        "id": "ep_1",
        "status": EpisodeStatus.completed,
        "verdict": verdict,
        "reward": 1.0 if verdict is Verdict.passed else 0.0,
        "stdout": "out",
        "stderr": "err",
        "timings": Timings(run_s=1.5, compile_s=1.0),
        "sandbox": SandboxInfo(host="worker-1"),
    }
    return EpisodeResult(**{**base, **fields})


def test_a_failed_compile_has_a_compile_result_and_no_run() -> None:
    answer = run_code_response(
        outcome(Verdict.compile_error, exit_code=1, stdout="", stderr="main.cpp:1: error"),
        compiled=True,
    ).model_dump(mode="json")
    assert answer["status"] == "Failed"
    assert answer["compile_result"] == {
        "status": "Finished",
        "execution_time": 1.0,
        "return_code": 1,
        "stdout": "",
        "stderr": "main.cpp:1: error",
    }
    assert answer["run_result"] is None


def test_a_compiler_out_of_time_is_a_compile_time_limit() -> None:
    answer = run_code_response(
        outcome(Verdict.compile_error, exit_code=None), compiled=True
    ).model_dump(mode="json")
    assert answer["status"] == "Failed"
    assert answer["compile_result"]["status"] == "TimeLimitExceeded"
    assert answer["compile_result"]["return_code"] is None
    assert answer["run_result"] is None


@pytest.mark.parametrize(
    ("result", "status", "run_status", "code"),
    [
        (outcome(Verdict.passed, exit_code=0), "Success", "Finished", 0),
        (outcome(Verdict.failed, exit_code=3), "Failed", "Finished", 3),
        (outcome(Verdict.timeout, exit_code=None), "Failed", "TimeLimitExceeded", None),
    ],
)
def test_a_compiled_program_that_ran_has_both_results(
    result: EpisodeResult, status: str, run_status: str, code: int | None
) -> None:
    answer = run_code_response(result, compiled=True).model_dump(mode="json")
    assert answer["status"] == status
    assert answer["compile_result"]["status"] == "Finished"
    assert answer["compile_result"]["return_code"] == 0
    assert answer["compile_result"]["execution_time"] == 1.0
    assert answer["run_result"]["status"] == run_status
    assert answer["run_result"]["return_code"] == code
    assert answer["run_result"]["execution_time"] == 0.5  # the run alone, compile excluded


def test_fetch_files_are_read_back_after_the_run_and_others_answered_as_missing() -> None:
    episode = run_code_episode(
        RunCodeRequest(
            code="x",
            fetch_files=["a.txt", "/mnt/b", "a.txt", "/etc/passwd", "../up", "/tmp/c/d"],
        )
    )
    # kept as named, once; paths outside the workspace and the episode's scratch mounts are
    # left out (answered as a file that is not there)
    assert episode.task.tests.fetch == ["a.txt", "/mnt/b", "/tmp/c/d"]


def test_a_judged_request_reads_its_fetch_files_back_too() -> None:
    request = RunCodeRequest.model_validate(
        {
            "code": "print(input())",
            "cases": [{"stdin": "1\n", "expected_stdout": "1\n"}],
            "fetch_files": ["out.txt"],
        }
    )
    tests = run_code_episode(request).task.tests
    assert (tests.judge is not None, tests.fetch) == (True, ["out.txt"])


def test_a_fetched_file_is_in_the_answer_by_the_name_the_request_gave() -> None:
    result = EpisodeResult(
        id="e",
        status=EpisodeStatus.completed,
        reward=1.0,
        verdict=Verdict.passed,
        exit_code=0,
        files={"/mnt/b": base64.b64encode(b"sauce").decode()},
    )
    answer = run_code_response(result)
    assert answer.files == {"/mnt/b": "c2F1Y2U="}
