"""Pooled sandboxes against the real engine: each episode is its own uid, session and
directories, with no capability left; what one episode leaves (processes, files, startup
hooks, IPC objects) never reaches the next; concurrent episodes cannot see, read, signal or
trace each other; the root server that runs an episode's operations as its uid cannot be
signalled, traced or read by it, nor made to read or write its own files through the
episode's symlinks; a sandbox that is not clean after an episode is thrown away.
"""

from __future__ import annotations

import base64
import io
import json
import os
import tarfile
import threading
import uuid
from collections.abc import Iterator

import pytest

from workers.sandbox.engine import DEPLOYMENT_LABEL, Engine, SandboxSpec
from workers.sandbox.protocol import (
    SHARED_FILES,
    KillAll,
    Read,
    ReadResult,
    Run,
    RunResult,
    Untar,
    UntarResult,
    Write,
    share,
)
from workers.sandbox.sandbox import RunnerBroken
from workers.sandbox.server_sandboxes import PooledSandbox, RunnerPool

IMAGE = "proctor/sandbox-python:latest"
# PROCTOR_TEST_RUNTIME=runsc runs them under gVisor (scripts/test.sh does where it works)
RUNTIME = os.environ.get("PROCTOR_TEST_RUNTIME") or None
SPEC = SandboxSpec(image=IMAGE, memory_mb=256, pids=64, pooled=True, runtime=RUNTIME)

pytestmark = pytest.mark.usefixtures("docker_ready")

PROBE = r"""
import json, os
status = {k: v.strip() for k, v in (l.split(":", 1) for l in open("/proc/self/status"))}
others = []
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        uid = int(open("/proc/%s/status" % pid).read().split("Uid:")[1].split()[0])
    except OSError:
        continue
    if uid != os.getuid():
        others.append(uid)
print(json.dumps({
    "uid": os.getuid(), "gid": os.getgid(), "groups": os.getgroups(),
    "sid_is_own": os.getsid(0) != os.getsid(1),
    "cap_eff": status["CapEff"], "cap_prm": status["CapPrm"], "no_new_privs": status["NoNewPrivs"],
    "workspace": oct(os.stat("/workspace").st_mode & 0o777),
    "home": oct(os.stat(os.environ["HOME"]).st_mode & 0o777),
    "tmpdir": oct(os.stat(os.environ["TMPDIR"]).st_mode & 0o777),
    "workspace_files": sorted(os.listdir("/workspace")),
    "home_files": sorted(os.listdir(os.environ["HOME"])),
    "tmp_files": sorted(n for n in os.listdir("/tmp") if n != os.path.basename(os.environ["TMPDIR"])),
    "shm_files": sorted(os.listdir("/dev/shm")),
    "other_uids": sorted(set(others)),
    "environ": sorted(os.environ),
}))
"""


@pytest.fixture
def pool() -> Iterator[RunnerPool]:
    engine = Engine(worker="pooled-test", host="test", deployment=f"test-{uuid.uuid4().hex[:8]}")
    runners = RunnerPool(engine, episodes=50, size=0)
    try:
        yield runners
    finally:
        runners.close()
        for info in engine.managed_containers():
            engine.remove(str(info["Id"]))


def episode(
    pool: RunnerPool, command: str, *, files: dict[str, str] | None = None, timeout_s: float = 20
) -> tuple[PooledSandbox, RunResult]:
    """One episode: its files written, one command run, its processes killed."""
    sandbox, _ = pool.acquire(SPEC, episode_id=uuid.uuid4().hex)
    run = Run(command=command, timeout_s=timeout_s)
    try:
        results = sandbox.program(
            [Write(files=files or {}), run, KillAll()], timeout_s=timeout_s + 5
        )
    finally:
        pool.release(sandbox)
    result = results.result(run)
    assert isinstance(result, RunResult)
    return sandbox, result


def probe(pool: RunnerPool) -> tuple[PooledSandbox, dict[str, object]]:
    sandbox, result = episode(pool, "python3 probe.py", files={"probe.py": PROBE})
    assert result.exit_code == 0, result.stderr
    return sandbox, json.loads(result.stdout)


def test_an_episode_is_a_fresh_uid_with_no_capability_in_directories_of_its_own(
    pool: RunnerPool,
) -> None:
    first_sandbox, first = probe(pool)
    second_sandbox, second = probe(pool)
    assert first_sandbox.container.id == second_sandbox.container.id  # the sandbox was reused
    # what the episode's processes cost is read when the server reaps them
    assert (first_sandbox.episode_faults or 0) > 0
    for seen in (first, second):
        assert isinstance(seen["uid"], int) and seen["uid"] >= 100_000
        assert seen["gid"] == seen["uid"] and seen["groups"] == []
        assert seen["cap_eff"] == seen["cap_prm"] == "0000000000000000"
        assert seen["no_new_privs"] == "1"
        assert seen["sid_is_own"]
        assert seen["workspace"] == seen["home"] == seen["tmpdir"] == "0o700"
        assert seen["workspace_files"] == ["probe.py"]
        assert seen["home_files"] == seen["tmp_files"] == seen["shm_files"] == []
        assert seen["other_uids"] == [0]  # the server and the keeper, root; nobody else
    assert first["uid"] != second["uid"]
    assert first["environ"] == second["environ"]


LEAVE_BEHIND = r"""
set -e
mkdir -p ~/.local/lib/python3.11/site-packages
echo 'import os; open("/tmp/hooked-" + str(os.getuid()), "w").write("x")' \
  > ~/.local/lib/python3.11/site-packages/usercustomize.py
echo 'import usercustomize' > ~/.local/lib/python3.11/site-packages/hook.pth
echo 'raise SystemExit("planted")' > /tmp/sitecustomize.py
echo secret > /dev/shm/left; echo secret > /tmp/left; echo secret > ~/left
mkdir /tmp/locked && echo x > /tmp/locked/f && chmod 000 /tmp/locked
setsid sleep 600 > /dev/null 2>&1 < /dev/null &
nohup python3 -c 'import time; time.sleep(600)' > /dev/null 2>&1 &
echo left
"""


def test_nothing_an_episode_leaves_reaches_the_next(pool: RunnerPool) -> None:
    first, result = episode(pool, LEAVE_BEHIND)
    assert result.stdout.strip() == "left", result.stderr
    second, seen = probe(pool)
    assert second.container.id == first.container.id
    assert seen["other_uids"] == [0]  # the background processes died with their episode
    assert seen["home_files"] == seen["tmp_files"] == seen["shm_files"] == []
    # nothing planted changes what the next episode's python imports
    _, imports = episode(
        pool, "PYTHONPATH=/tmp python3 -c 'import sys; print(sys.flags.no_user_site)'; ls /tmp"
    )
    assert imports.exit_code == 0, imports.stderr
    assert imports.stdout.split()[0] == "0"  # user site is on, and found nothing to run
    assert "hooked" not in imports.stdout


def test_a_sandbox_started_before_a_shared_file_existed_is_replaced_by_one_given_it(
    pool: RunnerPool,
) -> None:
    first, _ = episode(pool, "true")  # started, and kept, before the file is registered
    name = share(f"test/{uuid.uuid4().hex}.txt", b"given once")
    try:
        second, result = episode(pool, "true")
        assert second.container.id == first.container.id and result.exit_code == 0
        assert name not in second.runner.shared
        third, result = episode(pool, "true")  # the second went at its release
        assert third.container.id != first.container.id and result.exit_code == 0
        assert name in third.runner.shared
    finally:
        del SHARED_FILES[name]


def test_an_ipc_object_left_behind_throws_the_sandbox_away(pool: RunnerPool) -> None:
    first, result = episode(pool, "ipcmk -M 4096 && ipcmk -Q")
    assert result.exit_code == 0, result.stderr
    assert first.runner.recycle and "IPC" in first.runner.recycle
    second, _ = probe(pool)
    assert second.container.id != first.container.id


SPY = r"""
import ctypes, json, os, time
time.sleep(1)
libc = ctypes.CDLL(None)
seen = {"workspace": os.listdir("/workspace"), "shm": os.listdir("/dev/shm")}
seen.update(signalled=[], traced=[], environ=[])
for pid in map(int, filter(str.isdigit, os.listdir("/proc"))):
    try:
        uid = int(open("/proc/%d/status" % pid).read().split("Uid:")[1].split()[0])
    except OSError:
        continue
    if uid == os.getuid():
        continue
    try:
        os.kill(pid, 0)
        seen["signalled"].append(pid)
    except OSError:
        pass
    if libc.ptrace(16, pid, 0, 0) == 0:  # PTRACE_ATTACH
        seen["traced"].append(pid)
    try:
        if b"s3cret" in open("/proc/%d/environ" % pid, "rb").read():
            seen["environ"].append(pid)
    except OSError:
        pass
print(json.dumps(seen))
"""


def test_concurrent_episodes_cannot_see_read_signal_or_trace_each_other(
    pool: RunnerPool,
) -> None:
    started = threading.Event()
    held: dict[str, object] = {}

    def hold() -> None:
        sandbox, _ = pool.acquire(SPEC, episode_id="holder")
        held["container"] = sandbox.container.id
        run = Run(
            command="touch /workspace/secret-file /dev/shm/holder; sleep 4; echo alive",
            timeout_s=20,
            env={"HOLDER_SECRET": "s3cret"},
        )
        started.set()
        try:
            results = sandbox.program([run], timeout_s=25)
        finally:
            pool.release(sandbox)
        held["run"] = results.result(run)

    holder = threading.Thread(target=hold)
    holder.start()
    assert started.wait(30)
    try:
        spy, result = episode(pool, "python3 spy.py", files={"spy.py": SPY})
    finally:
        holder.join(30)
    run = held["run"]
    assert isinstance(run, RunResult) and run.stdout.strip() == "alive"  # untouched
    assert spy.container.id != held["container"]  # concurrent episodes never share one
    seen = json.loads(result.stdout)
    assert seen == {
        "workspace": ["spy.py"],
        "shm": [],
        "signalled": [],
        "traced": [],
        "environ": [],
    }


def test_a_fork_bomb_ends_its_episode_only(pool: RunnerPool) -> None:
    bomb = "python3 -c 'import os\nwhile True:\n  try: os.fork()\n  except OSError: pass' & sleep 2; echo done"
    _, bombed = episode(pool, bomb, timeout_s=5)
    assert bombed.stdout.strip() == "done"
    _, seen = probe(pool)
    assert seen["other_uids"] == [0]


def test_memory_exhausted_is_the_episodes_and_throws_the_sandbox_away(pool: RunnerPool) -> None:
    sandbox, _ = pool.acquire(SPEC, episode_id="hog")
    run = Run(command="python3 -c 'x = bytearray(1 << 30)'", timeout_s=20)
    try:
        try:
            results = sandbox.program([run, KillAll()], timeout_s=25)
            result = results.result(run)
            assert isinstance(result, RunResult)
            assert result.exit_code != 0
        except RunnerBroken as exc:
            assert exc.failure.verdict.value == "oom"
        assert sandbox.runner.recycle
    finally:
        pool.release(sandbox)
    _, seen = probe(pool)
    assert seen["other_uids"] == [0]


def test_a_pooled_sandbox_is_locked_down_like_a_fresh_one(pool: RunnerPool) -> None:
    sandbox, _ = pool.acquire(SPEC, episode_id="labels")
    try:
        info = pool.engine.inspect(sandbox.container.id)
        assert info["Config"]["Labels"][DEPLOYMENT_LABEL] == pool.engine.deployment
        host = info["HostConfig"]
        assert host["ReadonlyRootfs"] and host["NetworkMode"] == "none"
        assert host["CapDrop"] == ["ALL"] and "SYS_ADMIN" not in (host["CapAdd"] or [])
        assert "no-new-privileges" in host["SecurityOpt"]
    finally:
        pool.release(sandbox)


# Left running by an episode's first command while the server runs its next operations as
# its uid: it keeps trying to signal, trace and read every root process (the server, the
# keeper), and records what it managed
NAGGER = r"""
import ctypes, json, os, time
libc = ctypes.CDLL(None)
got = {"signalled": [], "traced": [], "read": []}


def root(pid):
    # the real uid: the server acting for us has ours as its effective uid
    try:
        return int(open("/proc/%d/status" % pid).read().split("Uid:")[1].split()[0]) == 0
    except (OSError, IndexError, ValueError):
        return False


end = time.time() + 3
while time.time() < end:
    for pid in map(int, filter(str.isdigit, os.listdir("/proc"))):
        if not root(pid):
            continue
        try:
            os.kill(pid, 0)
            if root(pid):  # not a child of the server that became an episode's meanwhile
                got["signalled"].append(pid)
        except OSError:
            pass
        if libc.ptrace(16, pid, 0, 0) == 0:  # PTRACE_ATTACH
            got["traced"].append(pid)
        for entry in ("environ", "mem", "fd/1"):
            try:
                open("/proc/%d/%s" % (pid, entry), "rb").close()
                got["read"].append("%d/%s" % (pid, entry))
            except OSError:
                pass
    open("/workspace/nagged.json", "w").write(json.dumps(got))
"""


def test_the_server_acting_as_an_episode_cannot_be_signalled_traced_or_read_by_it(
    pool: RunnerPool,
) -> None:
    sandbox, _ = pool.acquire(SPEC, episode_id=uuid.uuid4().hex)
    start = Run(command="python3 nagger.py > /dev/null 2>&1 & sleep 0.5", timeout_s=20)
    # the server's own operations as the episode's uid, while the nagger runs
    busy = [Write(files={f"busy/{i}.txt": "x" * 1000}) for i in range(200)]
    wait = Run(command="sleep 3.5; cat nagged.json", timeout_s=20)
    try:
        results = sandbox.program(
            [Write(files={"nagger.py": NAGGER}), start, *busy, wait, KillAll()], timeout_s=30
        )
    finally:
        pool.release(sandbox)
    got = results.result(wait)
    assert isinstance(got, RunResult) and got.exit_code == 0, got
    assert json.loads(got.stdout) == {"signalled": [], "traced": [], "read": []}
    assert sandbox.runner.recycle is None  # the server answered, and found the sandbox clean


def tar_of(files: dict[str, bytes]) -> str:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, data in files.items():
            member = tarfile.TarInfo(name)
            member.size = len(data)
            archive.addfile(member, io.BytesIO(data))
    return base64.b64encode(buffer.getvalue()).decode()


def test_the_episodes_symlinks_lead_the_server_to_nothing_of_its_own(pool: RunnerPool) -> None:
    plant = Run(
        command="ln -s /proc/self /tmp/server; mkdir pkg; ln -s /proc/self/fd/1 pkg/out.txt",
        timeout_s=20,
    )
    read = Read(root="/tmp/server", paths=["environ", "status", "cmdline"])
    # a forged status line, should the extraction write through the link to the server's
    # stream to the worker
    forged = b'{"error": "forged"}\n'
    untar = Untar(data=tar_of({"pkg/out.txt": forged}))
    sandbox, _ = pool.acquire(SPEC, episode_id=uuid.uuid4().hex)
    try:
        results = sandbox.program([plant, read, untar, KillAll()], timeout_s=30)
    finally:
        pool.release(sandbox)
    assert isinstance(results.result(plant), RunResult)
    read_back = results.result(read)
    assert isinstance(read_back, ReadResult)
    assert read_back.files == {"environ": None, "status": None, "cmdline": None}
    assert isinstance(results.result(untar), UntarResult)
    assert sandbox.runner.recycle is None
    following, _ = probe(pool)  # the server's stream carries on, in the same sandbox
    assert following.container.id == sandbox.container.id


def test_operations_past_the_episodes_deadline_end_as_its_timeout(pool: RunnerPool) -> None:
    sandbox, _ = pool.acquire(SPEC, episode_id=uuid.uuid4().hex)
    try:
        with pytest.raises(RunnerBroken) as broken:
            # the run's own limit is beyond the episode's: the server's alarm ends it
            sandbox.program([Run(command="sleep 60", timeout_s=60)], timeout_s=2)
    finally:
        pool.release(sandbox)
    assert broken.value.failure.verdict.value == "timeout"
    following, seen = probe(pool)  # the sleep was killed, and the sandbox serves on
    assert following.container.id == sandbox.container.id
    assert seen["other_uids"] == [0]
