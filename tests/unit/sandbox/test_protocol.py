"""The runner protocol: every operation and result survives JSON, results are found by the
operation that asked, and an operation's failure is a RunnerError, not a string."""

from __future__ import annotations

import errno
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from workers.sandbox import protocol
from workers.sandbox.protocol import (
    Find,
    FindResult,
    KillAll,
    KillAllResult,
    Listing,
    ListingResult,
    MakeDir,
    MakeDirResult,
    Op,
    Program,
    ProtocolError,
    Read,
    ReadResult,
    Remove,
    RemoveResult,
    Reply,
    Result,
    Results,
    Run,
    RunnerError,
    RunResult,
    Scrub,
    ScrubResult,
    Sent,
    SentResult,
    Snapshot,
    SnapshotResult,
    Untar,
    UntarResult,
    Write,
    WriteResult,
    commands_time_s,
    decode_request,
)
from workers.sandbox.sandbox import BOOT, boot_input, runner_source

OPS: list[Op[Any]] = [
    Write(files={"a.py": "x = 1\n"}, binary={"b.bin": "AAE="}, root="/tmp"),
    Remove(paths=["a.py", "dir/"]),
    Untar(data="H4sI"),
    Run(
        command="pytest -q",
        cwd="/workspace/src",
        env={"HOME": "/tmp/h"},
        timeout_s=2.5,
        output_bytes=100,
        report="/tmp/g/report.xml",
        check=True,
        keep_going=True,
    ),
    KillAll(empty_scratch=True),
    Read(paths=["a.py"], max_bytes=10),
    Find(names=["conftest.py", "*.pth"]),
    MakeDir(path="/tmp/.grader-1"),
    Scrub(names=["conftest.py"], keep=["tests/conftest.py"]),
    Snapshot(paths=["tests/"], max_bytes=5),
    Listing(root="/workspace"),
    Sent(),
]
RESULTS: list[Result] = [
    WriteResult(written=2),
    RemoveResult(removed=2),
    UntarResult(members=7),
    RunResult(
        exit_code=1,
        timed_out=False,
        duration_s=0.25,
        stdout="F\n",
        stderr="",
        stdout_truncated=True,
        oom_killed=True,
        started_at=12.5,
        report="<xml/>",
    ),
    KillAllResult(freed=["/tmp"]),
    ReadResult(files={"a.py": "x", "gone.py": None}),
    FindResult(paths=["conftest.py"]),
    MakeDirResult(path="/tmp/.grader-1"),
    ScrubResult(removed=["conftest.py"]),
    SnapshotResult(files={"tests/test_a.py": "def test(): pass\n"}),
    ListingResult(stdout="/workspace\na.py\n"),
    SentResult(packets=3),
    RunnerError(op="run", exception="BlockingIOError", detail="fork", errno=errno.EAGAIN),
]


def test_every_operation_and_result_kind_is_covered() -> None:
    assert {op.kind for op in OPS} == set(protocol.OPS)
    assert {result.kind for result in RESULTS} == set(protocol.RESULTS)


@pytest.mark.parametrize("op", OPS, ids=lambda op: op.kind)
def test_an_operation_round_trips_through_json(op: Op[Any]) -> None:
    wire = json.loads(json.dumps(protocol.to_wire(op)))
    assert wire["kind"] == op.kind
    assert protocol.op_from_wire(wire) == op


@pytest.mark.parametrize("result", RESULTS, ids=lambda result: result.kind)
def test_a_result_round_trips_through_json(result: Result) -> None:
    assert protocol.result_from_wire(json.loads(json.dumps(protocol.to_wire(result)))) == result


def test_a_request_carries_every_operation_with_its_own_id() -> None:
    program = Program(OPS)
    nonce, ops = decode_request(program.request("n0"))
    assert nonce == "n0"
    assert [op for _, op in ops] == OPS
    assert [op_id for op_id, _ in ops] == [program.id_of(op) for op in OPS]
    assert len({op_id for op_id, _ in ops}) == len(OPS)


def test_results_are_found_by_the_operation_that_asked() -> None:
    first, second = Run(command="echo 1"), Run(command="echo 1")  # equal, not the same
    not_run = Listing()
    program = Program([first, second, not_run])
    ran = RunResult(exit_code=0, timed_out=False, duration_s=0.1, stdout="1\n", stderr="")
    failed = RunnerError(
        op="run", exception="BlockingIOError", detail="no pids", errno=errno.EAGAIN
    )
    stopped = RunnerError(
        op="listing", exception="PermissionError", detail="denied", errno=errno.EACCES
    )
    reply = Reply(
        nonce="n", results={program.id_of(first): ran, program.id_of(second): failed}, error=stopped
    )
    results = Results(program, Reply.decode(json.loads(reply.encode())))
    assert results.get(first) == ran and results.result(first) == ran
    assert results.get(second) == failed and results.result(second) is None
    assert results.get(not_run) is None and not results.ran(not_run)
    assert results.error == stopped
    with pytest.raises(KeyError):
        results.get(Listing())  # not an operation of this program


def test_a_result_of_the_wrong_kind_is_a_protocol_error() -> None:
    op = Run(command="true")
    program = Program([op])
    reply = Reply(nonce="n", results={program.id_of(op): ListingResult(stdout="/\n")})
    with pytest.raises(ProtocolError):
        Results(program, reply).get(op)


def test_an_operation_may_appear_once_in_a_program() -> None:
    op = KillAll()
    with pytest.raises(ValueError, match="twice"):
        Program([op, op])


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable"), errno.EAGAIN),
        (MemoryError(), errno.ENOMEM),
        (ValueError("path leaves the workspace: ../x"), None),
    ],
)
def test_a_failed_operation_is_a_typed_runner_error(exc: BaseException, code: int | None) -> None:
    error = RunnerError.of(Write(files={}), exc)
    assert isinstance(error, RunnerError)
    assert (error.op, error.exception, error.errno) == ("write", type(exc).__name__, code)
    assert error.message.startswith(f"write failed: {type(exc).__name__}")
    wire = json.loads(Reply(nonce="n", error=error).encode())
    assert Reply.decode(wire).error == error


@pytest.mark.parametrize(
    "wire",
    [
        [],
        {"kind": "nope"},
        {"kind": "run"},
        {"kind": "listing", "stdout": "/", "extra": 1},
    ],
)
def test_a_malformed_result_is_a_protocol_error(wire: object) -> None:
    with pytest.raises(ProtocolError):
        protocol.result_from_wire(wire)


def test_a_reply_error_must_be_a_runner_error() -> None:
    with pytest.raises(ProtocolError):
        Reply.decode({"nonce": "n", "results": {}, "error": {"kind": "listing", "stdout": ""}})


def test_records_are_frozen_and_their_defaults_are_their_own() -> None:
    first, second = Write(), Write()
    first.files["a"] = "changed"
    assert second.files == {}
    with pytest.raises(AttributeError):
        first.root = "/"  # type: ignore[misc]
    with pytest.raises(TypeError):
        Run()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Listing(rot="/")  # type: ignore[call-arg]


def test_the_time_of_a_program_is_its_commands_timeouts() -> None:
    assert (
        commands_time_s([Run(command="a", timeout_s=2), KillAll(), Run(command="b", timeout_s=3.5)])
        == 5.5
    )


def test_the_runner_streamed_into_the_sandbox_shares_the_protocol_source() -> None:
    source = runner_source().decode()
    protocol_source = Path(protocol.__file__).read_text(encoding="utf-8")
    assert source.startswith(protocol_source)
    compile(source, "proctor-runner", "exec")  # the two form one valid script
    # the type checker's imports (under TYPE_CHECKING) of the parts streamed together
    typing_only = ("    from workers.sandbox.protocol import", "    from workers.sandbox.assets.")
    for line in typing_only:
        source = source.replace(line, "")
    assert "from workers" not in source


def run_boot(given: bytes, request: bytes) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", BOOT],
        input=given + request,
        capture_output=True,
        timeout=60,
        check=True,
    )
    reply: dict[str, Any] = json.loads(done.stdout)
    return reply


def test_the_runner_runs_as_compiled_where_the_bytecode_matches_and_from_source_elsewhere(
    tmp_path: Path,
) -> None:
    (tmp_path / "seen.txt").write_text("")
    program = Program([Listing(root=str(tmp_path))])
    expected = {"kind": "listing", "stdout": f"{tmp_path}\nseen.txt\n"}
    source = runner_source()
    compiled = boot_input(source)
    header, rest = compiled.split(b"\n", 1)
    magic, size, _ = header.split()
    code = rest[: int(size)]
    assert run_boot(compiled, program.request("n"))["results"]["0"] == expected
    # this interpreter's magic number: the code runs, the source is not compiled (broken here)
    broken = b"%s %s 3\n" % (magic, size) + code + b"?!("
    assert run_boot(broken, program.request("n"))["results"]["0"] == expected
    # another interpreter's: the code is not loaded (garbled here), the source is compiled
    foreign = b"0000 3 %d\n" % len(source) + b"\xff" * 3 + source
    assert run_boot(foreign, program.request("n"))["results"]["0"] == expected
    assert boot_input(source, magic=b"\x00\x00").startswith(b"0000 ")
    with pytest.raises(subprocess.CalledProcessError):  # neither runs: the runner never starts
        run_boot(b"0000 3 3\n" + b"\xff" * 3 + b"?!(", program.request("n"))


def test_a_shared_file_travels_by_name_only_to_a_runner_that_holds_it(tmp_path: Path) -> None:
    name = protocol.share("test/shared.bin", b"\x00shared content\xff" * 100)
    assert protocol.share(name, b"\x00shared content\xff" * 100) == name  # again, alike
    with pytest.raises(ValueError, match="different content"):
        protocol.share(name, b"other")
    write = Write(root=str(tmp_path), files={"own.txt": "own"}, shared={"a/copy.bin": name})
    program = Program([write])

    held = json.loads(program.request("n", frozenset({name})))["ops"][0]
    assert held["shared"] == {"a/copy.bin": name} and held["binary"] == {}
    carried = json.loads(program.request("n"))["ops"][0]
    assert carried["shared"] == {} and "a/copy.bin" in carried["binary"]
    assert len(program.request("n")) > len(program.request("n", frozenset({name}))) + 1000

    # the runner writes a shared file from what it was given, or from the request
    source = runner_source()
    for given, request in (
        (name, program.request("n", frozenset({name}))),
        ("", program.request("n")),
    ):
        preload = f"SHARED_FILES[{given!r}] = {protocol.SHARED_FILES[name]!r}\n" if given else ""
        script = source.replace(b"\nlaunch(main)\n", f"\n{preload}launch(main)\n".encode())
        assert run_boot(boot_input(script), request)["error"] is None
        assert (tmp_path / "a/copy.bin").read_bytes() == protocol.SHARED_FILES[name]
        assert (tmp_path / "own.txt").read_text() == "own"
        (tmp_path / "a/copy.bin").unlink()
