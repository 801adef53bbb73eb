"""The sandbox's data cannot turn a reply into our failure: a command's output is cut to fit
its reply as the reply carries it (escaped), a reply the worker cannot take whole is the
sandbox's doing (a typed verdict), and so is anything a runner's reply or a pooled server's
answer holds that does not parse — `SandboxError` (`reward: null`) is never the outcome."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proctor.models import Verdict
from workers.sandbox.engine import Container, ExecResult, SandboxError, SandboxSpec, Usage
from workers.sandbox.protocol import Program, Reply, Run, RunResult, clip
from workers.sandbox.sandbox import (
    BOOT,
    RUNNER_MAX_REPLY,
    RunnerBroken,
    Sandbox,
    boot_input,
    runner_input,
    runner_source,
)
from workers.sandbox.server_sandboxes import PooledRunner, PooledSandbox, ReplyTooLarge

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
HOSTILE_TEXT = st.text(
    alphabet=st.one_of(
        st.characters(max_codepoint=0x1F), st.sampled_from('"\\\ufffd\U0001f600é'), st.characters()
    ),
    max_size=300,
)


def encoded(text: str) -> int:
    return len(json.dumps(text)) - 2


@FUZZ
@given(HOSTILE_TEXT, st.integers(min_value=0, max_value=2000))
def test_clip_is_the_longest_start_that_fits(text: str, limit: int) -> None:
    kept, size = clip(text, limit)
    assert text.startswith(kept)
    assert size == encoded(kept) <= limit
    if len(kept) < len(text):
        assert encoded(text[: len(kept) + 1]) > limit


def test_clip_of_a_long_text_counts_by_piece_and_character() -> None:
    text = "a" * 100_000 + "\x01" * 100_000 + "\ufffd" * 10
    kept, size = clip(text, 100_000 + 6 * 12_345 + 5)
    assert kept == "a" * 100_000 + "\x01" * 12_345 and size == 100_000 + 6 * 12_345
    assert clip(text, 10**9) == (text, 100_000 + 6 * 100_010)


def runner_reply(ops: list[Run], *, entry: str = "launch(main)") -> dict[str, Any]:
    """The reply of the real runner, run here, to `ops`."""
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", BOOT],
        input=boot_input(runner_source(entry)) + Program(ops).request("n"),
        capture_output=True,
        timeout=60,
        check=True,
    )
    reply: dict[str, Any] = json.loads(done.stdout)
    return reply


PRINT = (
    "import sys; sys.stdout.buffer.write(bytes(range(32)) * 4000); "
    "sys.stderr.buffer.write(bytes(range(128, 256)) * 1000)"
)


def printing(tmp_path: Path) -> Run:
    return Run(command=f"{sys.executable} -c '{PRINT}'", cwd=str(tmp_path), output_bytes=10_000)


def test_control_characters_and_invalid_utf8_are_cut_to_the_cap_as_escaped(
    tmp_path: Path,
) -> None:
    reply = runner_reply([printing(tmp_path)])
    result = reply["results"]["0"]
    assert encoded(result["stdout"]) <= 10_000 and result["stdout"].startswith("\x00\x01")
    assert encoded(result["stderr"]) <= 10_000 and result["stderr"].startswith("\ufffd")
    assert result["stdout_truncated"] and result["stderr_truncated"]


def test_the_commands_of_a_program_share_one_output_budget(tmp_path: Path) -> None:
    ops = [printing(tmp_path) for _ in range(3)]
    reply = runner_reply(ops, entry="REPLY_OUTPUT_BYTES = 25_000\nlaunch(main)")
    sizes = [encoded(r["stdout"]) + encoded(r["stderr"]) for r in reply["results"].values()]
    assert sum(sizes) <= 25_000 and sizes[-1] < 10_000
    assert all(r["exit_code"] == 0 for r in reply["results"].values())


# ---------------------------------------------------------------- a fresh sandbox's reply


class Engine:
    """An engine whose exec answers with `stdout` (`{nonce}` replaced by the request's)."""

    def __init__(self, stdout: bytes, *, truncated: bool = False, code: int = 0) -> None:
        self.stdout, self.truncated, self.code = stdout, truncated, code

    def exec(self, container_id: str, argv: list[str], **kwargs: Any) -> ExecResult:
        nonce = json.loads(kwargs["stdin"][len(runner_input()) :])["nonce"]
        stdout = self.stdout.replace(b"{nonce}", nonce.encode())
        return ExecResult(
            exit_code=None,
            stdout=stdout[:RUNNER_MAX_REPLY],
            stderr=b"",
            timed_out=False,
            duration_s=0.1,
            stdout_truncated=self.truncated or len(stdout) > RUNNER_MAX_REPLY,
            exec_id="e",
        )

    def exit_code_of(self, exec_id: str) -> int:
        return self.code

    def usage(self, container_id: str) -> Usage:
        return Usage(running=True, oom_killed=False, pids=3, memory=1 << 20, memory_limit=1 << 30)


CONTAINER = Container(id="c" * 64, name="proctor-test", spec=SandboxSpec(image="x"))
OP = Run(command="true")


def outcome(sandbox: Sandbox) -> Verdict | None:
    """None: the reply was taken; else the verdict of its failure (`infra_error`: ours)."""
    try:
        sandbox.program([OP], timeout_s=1)
    except RunnerBroken as exc:
        return exc.failure.verdict
    except SandboxError:
        return Verdict.infra_error
    return None


def hostile_reply(stdout: str, stderr: str, report: str | None) -> bytes:
    result = RunResult(
        exit_code=0, timed_out=False, duration_s=0.1, stdout=stdout, stderr=stderr, report=report
    )
    return Reply(nonce="{nonce}", results={"0": result}).encode().encode()


@FUZZ
@given(HOSTILE_TEXT, HOSTILE_TEXT, st.none() | HOSTILE_TEXT, st.integers(min_value=0))
def test_a_reply_cut_anywhere_is_never_our_failure(
    stdout: str, stderr: str, report: str | None, cut: int
) -> None:
    whole = hostile_reply(stdout, stderr, report)
    cut %= len(whole) + 1
    truncated = cut < len(whole)  # the engine stopped reading it at its limit
    sandbox = Sandbox(Engine(whole[:cut], truncated=truncated), CONTAINER, episode_id="ep")  # type: ignore[arg-type]
    verdict = outcome(sandbox)
    assert verdict is (Verdict.runtime_error if truncated else None)


NESTED = b"[" * 100_000 + b"]" * 100_000


@pytest.mark.parametrize(
    "stdout",
    [
        NESTED,
        b'{"nonce": "{nonce}", "results": ' + NESTED + b"}",
        b'{"nonce": "{nonce}", "results": {}, "error": ' + NESTED + b"}",
        b'{"nonce": "other", "results": {}}',
        b"\xff\xfe" * 1000,
    ],
    ids=["nested", "nested-results", "nested-error", "forged", "not-utf8"],
)
def test_a_reply_that_does_not_parse_is_typed_when_the_runner_was_killed(stdout: bytes) -> None:
    killed = Sandbox(Engine(stdout, code=137), CONTAINER, episode_id="ep")  # type: ignore[arg-type]
    assert outcome(killed) is Verdict.runtime_error


def test_a_reply_past_the_limit_is_the_sandboxs_output() -> None:
    big = hostile_reply("\x01" * (RUNNER_MAX_REPLY // 5), "", None)
    assert outcome(Sandbox(Engine(big), CONTAINER, episode_id="ep")) is Verdict.runtime_error  # type: ignore[arg-type]


# ---------------------------------------------------------------- a pooled server's answer


class Stream:
    """A pooled server's stream that answers with `status` (or raises it)."""

    stderr = bytearray()

    def __init__(self, status: dict[str, Any] | Exception) -> None:
        self.status = status
        self.nonce = ""

    def send(self, message: dict[str, Any]) -> None:
        self.nonce = json.loads(message["request"])["nonce"]

    def receive(self, deadline: float) -> dict[str, Any]:
        if isinstance(self.status, Exception):
            raise self.status
        reply = str(self.status.get("reply", "")).replace("{nonce}", self.nonce)
        return {**self.status, "reply": reply}


def pooled_outcome(status: dict[str, Any] | Exception) -> Verdict | None:
    runner = PooledRunner(container=CONTAINER, stream=Stream(status))  # type: ignore[arg-type]
    return outcome(PooledSandbox(Engine(b""), runner, episode_id="ep"))  # type: ignore[arg-type]


@FUZZ
@given(HOSTILE_TEXT, HOSTILE_TEXT, st.integers(min_value=0))
def test_a_pooled_reply_cut_anywhere_is_never_our_failure(
    stdout: str, stderr: str, cut: int
) -> None:
    whole = hostile_reply(stdout, stderr, None).decode()
    cut %= len(whole) + 1
    verdict = pooled_outcome({"reply": whole[:cut], "exit_code": 0 if cut == len(whole) else 137})
    assert verdict is (None if cut == len(whole) else Verdict.runtime_error)


@pytest.mark.parametrize(
    "status",
    [
        {"reply": NESTED.decode(), "exit_code": 137},
        {"reply": '{"nonce": "{nonce}", "results": ' + NESTED.decode() + "}", "exit_code": 137},
        ReplyTooLarge("over"),
    ],
    ids=["nested", "nested-results", "too-large"],
)
def test_a_pooled_answer_that_does_not_parse_is_typed(status: dict[str, Any] | Exception) -> None:
    assert pooled_outcome(status) is Verdict.runtime_error
