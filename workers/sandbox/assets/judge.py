"""The in-sandbox half of code-contest judging: one program, many stdin cases, one reply.

Streamed after `runner.py` (`sandbox.runner_source`), whose names (RunResult, killall,
kill_descendants, become_episode, oom_kills, clip, retrying, …) are this script's globals at
run time; imported here only for the type checker. A `Run` with `judge` set is run by
`op_judge` instead of once: the worker's `workers/evaluation/judging.py` builds it and reads
its record.

For each case the program (`Run.command`, built once before) starts in its own session with
the case's stdin in a memfd (no file another process could open), its stdout and stderr in
pipes only this runner holds, the stack limit asked for, and an OOM score that makes it,
not the runner, the kernel's choice when the memory cgroup is full. It ends at the case's
time limit, at its stdout's output limit (killed at once: `output_limit`), or when it
exits; a SIGKILL the memory cgroup's OOM count explains is `oom`. What it left running is
killed before the next case starts.

The expected outputs are not here at all with the built-in comparisons (the worker compares
what the record carries). With a checker they come in the request, so in this process's
memory, which no process of the code under test can read (the runner is non-dumpable, or a
root server), and reach the disk only after the last case ran and `killall` left no process
of the code under test alive: then the checker is written to a fresh 0700 directory,
compiled once and run per case as `checker input output answer`.
"""

import json
import os
import selectors
import signal
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from workers.sandbox.assets.runner import (
        EPISODE,
        PATH,
        READ_CHUNK,
        become_episode,
        kill_descendants,
        killall,
        oom_kills,
        reap,
        remove_tree,
        retrying,
    )
    from workers.sandbox.protocol import Run, RunResult, clip

JUDGE_STDERR_BYTES = 4096  # of each case's stderr, for its message and the memory signatures
CHECKER_MESSAGE_BYTES = 2048
OOM_SCORE = b"1000"  # the kernel kills the case's process first when the cgroup is full
SIGKILLED = -signal.SIGKILL


def judge_case(
    command: str,
    cwd: str,
    env: dict[str, str],
    stdin: bytes,
    *,
    timeout_s: float,
    output_bytes: int,
    stack_bytes: int | None,
) -> dict[str, Any]:
    """Run `command` once on `stdin`: its status (`exited`, `timeout`, `oom`, `output_limit`),
    exit code, wall and CPU seconds, stdout (within `output_bytes`) and the start of stderr."""
    import subprocess as sp

    data = os.memfd_create("stdin", 0)
    try:
        view = memoryview(stdin)
        while view:
            view = view[os.write(data, view) :]
        os.lseek(data, 0, os.SEEK_SET)

        def prepare() -> None:  # in the child, before the exec
            become_episode()
            if stack_bytes is not None:
                import resource

                hard = resource.getrlimit(resource.RLIMIT_STACK)[1]
                unlimited = hard == resource.RLIM_INFINITY
                stack = stack_bytes if unlimited else min(stack_bytes, hard)
                resource.setrlimit(resource.RLIMIT_STACK, (stack, hard))
            try:
                with open("/proc/self/oom_score_adj", "wb") as handle:
                    handle.write(OOM_SCORE)
            except OSError:
                pass

        before = oom_kills()
        started = time.monotonic()
        proc = retrying(
            lambda: sp.Popen(
                ["bash", "-c", command],
                cwd=cwd,
                env=env,
                stdin=data,
                stdout=sp.PIPE,
                stderr=sp.PIPE,
                start_new_session=True,
                close_fds=True,
                preexec_fn=prepare,
            )
        )
    finally:
        os.close(data)
    assert proc.stdout is not None and proc.stderr is not None
    deadline = started + timeout_s
    out, err = bytearray(), bytearray()
    seen = 0
    status = "exited"
    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ, "stdout")
    selector.register(proc.stderr, selectors.EVENT_READ, "stderr")
    rusage = None
    code: int | None = None
    exited_at = None
    while True:
        now = time.monotonic()
        if code is None:
            pid, wait_status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                code, rusage = os.waitstatus_to_exitcode(wait_status), usage
                proc.returncode = code
                exited_at = now
        if exited_at is not None and (not selector.get_map() or now - exited_at > 0.2):
            break  # drained, or a daemonised grandchild holds the pipes
        if code is None and now >= deadline:
            status = "timeout"
            break
        if not selector.get_map():  # both pipes closed: the exit is a moment away
            time.sleep(min(0.0005, max(deadline - now, 0.0)))
            continue
        for key, _ in selector.select(timeout=max(min(0.02, deadline - now), 0.0)):
            chunk = os.read(key.fd, READ_CHUNK)
            if not chunk:
                selector.unregister(key.fileobj)
                continue
            if key.data == "stderr":
                err += chunk[: max(JUDGE_STDERR_BYTES - len(err), 0)]
                continue
            seen += len(chunk)
            out += chunk[: max(output_bytes - len(out), 0)]
        if seen > output_bytes and code is None:
            status = "output_limit"
            break
    ended = time.monotonic()
    if code is None:  # out of time or over the output limit: the whole session goes
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        _, wait_status, rusage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(wait_status)
    kill_descendants()  # what the case left running, whatever session it moved to
    selector.close()
    proc.stdout.close()
    proc.stderr.close()
    after = oom_kills()
    # uncounted (no cgroup count readable): a SIGKILL we did not send
    killed = status == "exited" and code == SIGKILLED
    if killed and (before is None or after is None or after > before):
        status = "oom"
    if status == "exited" and seen > output_bytes:
        status = "output_limit"
    cpu = (rusage.ru_utime + rusage.ru_stime) if rusage is not None else None
    return {
        "status": status,
        "exit_code": code,
        "time_s": round(ended - started, 4),
        "cpu_s": None if cpu is None else round(cpu, 4),
        "stdout": clip(out.decode("utf-8", "replace"), output_bytes)[0],
        "stderr": clip(err.decode("utf-8", "replace"), JUDGE_STDERR_BYTES)[0],
    }


def run_checker_command(
    command: str, cwd: str, env: dict[str, str], timeout_s: float
) -> dict[str, Any]:
    """A checker's compile or run: exit code (None: out of time) and the start of stderr."""
    import subprocess as sp

    started = time.monotonic()
    proc = retrying(
        lambda: sp.Popen(
            ["bash", "-c", command],
            cwd=cwd,
            env=env,
            stdin=sp.DEVNULL,
            stdout=sp.DEVNULL,
            stderr=sp.PIPE,
            start_new_session=True,
            close_fds=True,
            preexec_fn=become_episode if EPISODE else None,
        )
    )
    try:
        _, err = proc.communicate(timeout=timeout_s)
        code: int | None = proc.returncode
    except sp.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        _, err = proc.communicate()
        code = None
    kill_descendants()
    reap()
    return {
        "exit_code": code,
        "time_s": round(time.monotonic() - started, 4),
        "message": clip(err[:CHECKER_MESSAGE_BYTES].decode("utf-8", "replace"), 4096)[0],
    }


def judge_checker(spec: dict[str, Any], cases: list[dict[str, Any]], stdins: list[str]) -> Any:
    """Once no process of the code under test is left: the checker written to its own fresh
    directory, compiled once, run on each case that exited 0. The compile's outcome when it
    failed (the task's checker does not build), else None."""
    killall(True)
    directory = spec["dir"]
    os.makedirs(directory, mode=0o700, exist_ok=False)
    env = {**os.environ, "HOME": directory, "LANG": "C.UTF-8", "TMPDIR": directory}
    env.setdefault("PATH", PATH)
    try:
        with open(os.path.join(directory, spec["source_name"]), "w", encoding="utf-8") as handle:
            handle.write(spec["source"])
        if spec.get("compile"):
            built = run_checker_command(spec["compile"], directory, env, spec["compile_timeout_s"])
            if built["exit_code"] != 0:
                return built
        for case, stdin, answer in zip(cases, stdins, spec["expected"], strict=True):
            if case["status"] != "exited" or case["exit_code"] != 0:
                continue
            for name, text in (
                ("input.txt", stdin),
                ("output.txt", case["stdout"]),
                ("answer.txt", answer),
            ):
                with open(os.path.join(directory, name), "w", encoding="utf-8") as handle:
                    handle.write(text)
            case["checker"] = run_checker_command(
                spec["run"] + " input.txt output.txt answer.txt",
                directory,
                env,
                spec["timeout_s"],
            )
        return None
    finally:
        remove_tree(directory)


def op_judge(op: Run) -> RunResult:
    """`op.command` once per case of `op.judge`, then the checker, if any: one record."""
    spec: dict[str, Any] = op.judge or {}
    env = {**os.environ, **op.env}
    env.setdefault("PATH", PATH)
    started = time.monotonic()
    stdins: list[str] = spec["stdins"]
    cases: list[dict[str, Any]] = []
    failed = False
    for stdin in stdins:
        if failed and spec.get("stop_on_failure"):
            cases.append({"status": "skipped"})
            continue
        case = judge_case(
            op.command,
            op.cwd,
            env,
            stdin.encode("utf-8"),
            timeout_s=spec["timeout_s"],
            output_bytes=spec["output_bytes"],
            stack_bytes=spec.get("stack_bytes"),
        )
        failed = case["status"] != "exited" or case["exit_code"] != 0
        cases.append(case)
    record: dict[str, Any] = {"cases": cases}
    checker = spec.get("checker")
    if checker is not None:
        record["checker_build"] = judge_checker(checker, cases, stdins)
    return RunResult(
        exit_code=0,
        timed_out=False,
        duration_s=round(time.monotonic() - started, 4),
        stdout="",
        stderr="",
        started_at=started,
        report=json.dumps(record),
    )
