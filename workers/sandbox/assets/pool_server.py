"""The pooled sandbox's server: one long-lived root process serving episodes one by one.

Streamed into `python3 -I -S` after protocol.py and runner.py (their names are this
script's globals at run time), started once per pooled sandbox and kept attached to the
worker: the shared files first (one line), then one JSON request per line in on stdin, one
JSON status per line out on stdout.

The sandbox has every protection a fresh one has (no network, read-only root, no new
privileges, its memory, cpu and pids limits) and gives this server only the capabilities
it needs to hand the sandbox to one episode after another (`POOLED_CAPS` in docker.py).
Each episode runs in a forked process that, before anything of the episode runs, starts
its own session, takes its rlimits, drops every capability by becoming the episode's own
uid (never used before in this sandbox) and closes the server's stdin and stdout, so it
can neither forge the server's answer nor read the next request. It then is the runner
of an ordinary sandbox — the same operations, the same code — in a workspace, home and
temporary directory that are its own (0700). At its end every process of its uid is
killed and its files removed, and the server checks that nothing is left: a process, a
file, an IPC object. Anything left — or memory exhausted, or a limit the server could
not restore — and the status says `recycle`: the worker throws the sandbox away.
"""

import json
import os
import resource
import select
import signal
import sys
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # at run time protocol.py's and runner.py's sources define these
    from workers.sandbox.assets.runner import (
        COMPILED,
        STATE,
        Become,
        execute,
        harden,
        launch,
        oom_kills,
        processes,
    )
    from workers.sandbox.protocol import (
        EXIT_NO_MEMORY,
        SHARED_FILES,
        WORKSPACE,
        Reply,
        decode_request,
    )

FIRST_UID = 100_000  # an episode's uid is above every uid of the image
HOME = os.environ.get("HOME", "/home/sandbox")
DIRECTORIES = (WORKSPACE, HOME)  # the episode's own: 0700, its uid's, emptied after it
SCRATCH = ("/tmp", "/dev/shm")  # shared 1777 mounts: emptied after it
QUEUES = "/dev/mqueue"
SYSV_IPC = ("/proc/sysvipc/shm", "/proc/sysvipc/sem", "/proc/sysvipc/msg")
FAILCNT = "/sys/fs/cgroup/memory/memory.failcnt"
KILL_ROUNDS = 50
REPLY_CHUNK = 1 << 16
STDERR_KEEP = 4000
ENVIRONMENT = dict(os.environ)  # the container's, as a fresh sandbox's exec would see it


def memory_hits() -> int | None:
    try:
        with open(FAILCNT) as handle:
            return int(handle.read())
    except (OSError, ValueError):
        return None


def episode_process(
    uid: int, request: bytes, reply_fd: int, stderr_fd: int, limits: dict[str, int]
) -> None:
    """The forked child: become the episode (its session, limits and uid), then run its
    program as the per-exec runner would. Never returns."""
    code = 0
    try:
        os.setsid()
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)
        os.dup2(stderr_fd, 2)
        os.closerange(3, reply_fd)
        os.closerange(reply_fd + 1, 1 << 16)
        for name, value in limits.items():
            resource.setrlimit(getattr(resource, name), (value, value))
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)  # from here on no capability is left, and none can come back
        os.environ.clear()
        os.environ.update(ENVIRONMENT)
        os.environ["TMPDIR"] = "/tmp/%d" % uid
        os.umask(0o022)
        os.chdir(WORKSPACE)
        harden()
        nonce, ops = decode_request(request)
        results, error = execute(ops)
        data = Reply(nonce=nonce, results=results, error=error).encode().encode()
        view = memoryview(data)
        while view:
            view = view[os.write(reply_fd, view) :]
    except MemoryError:
        code = EXIT_NO_MEMORY
    except Become:
        raise  # a program's fork leaving the server's frames: `launch` runs it
    except BaseException as exc:  # reported by its exit status; the worker classifies it
        try:
            os.write(2, ("%s: %s\n" % (type(exc).__name__, exc)).encode())
        except BaseException:
            pass
        code = 70
    os._exit(code)


def collect(pid: int, reply_fd: int, stderr_fd: int, deadline: float) -> tuple[bytes, bytes, bool]:
    """The child's reply and stderr, until both close or the deadline passes."""
    chunks: dict[int, list[bytes]] = {reply_fd: [], stderr_fd: []}
    kept = {reply_fd: 0, stderr_fd: 0}
    open_fds = [reply_fd, stderr_fd]
    while open_fds:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return b"".join(chunks[reply_fd]), b"".join(chunks[stderr_fd]), True
        readable, _, _ = select.select(open_fds, [], [], remaining)
        for fd in readable:
            chunk = os.read(fd, REPLY_CHUNK)
            if not chunk:
                open_fds.remove(fd)
            elif fd == reply_fd or kept[fd] < STDERR_KEEP:
                chunks[fd].append(chunk)
                kept[fd] += len(chunk)
    return b"".join(chunks[reply_fd]), b"".join(chunks[stderr_fd]), False


def exit_status(status: int) -> int:
    """A wait status as `docker exec` reports an exit: the code, or 128 + the signal."""
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.waitstatus_to_exitcode(status)


def of_uid(uid: int) -> list[int]:
    """The live (not zombie) processes of a uid."""
    found = []
    for pid, (_, state) in processes().items():
        if state == b"Z":
            continue
        try:
            with open("/proc/%d/status" % pid) as handle:
                for line in handle:
                    if line.startswith("Uid:"):
                        if int(line.split()[1]) == uid:
                            found.append(pid)
                        break
        except (OSError, ValueError, IndexError):
            continue
    return found


def reap_all() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def kill_uid(uid: int) -> bool:
    """SIGKILL every process of `uid`; whether none is left. A forked killer that becomes
    the uid reaches them all with one kill(-1) per round, however fast they fork."""
    reap_all()
    try:
        os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:
        return True  # no child at all: what the episode started would be ours (a subreaper)
    for _ in range(KILL_ROUNDS):
        killer = os.fork()
        if killer == 0:
            try:
                os.setuid(uid)
                for _ in range(KILL_ROUNDS):
                    os.kill(-1, signal.SIGKILL)
            except BaseException:
                pass
            os._exit(0)
        os.waitpid(killer, 0)
        reap_all()  # orphans come to us (a subreaper): collect them before counting
        if not of_uid(uid):
            return True
        time.sleep(0.002)
    return False


def remove(path: str) -> None:
    import shutil

    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        try:
            os.unlink(path)
        except OSError:
            pass


def listing(directory: str) -> list[str]:
    try:
        return os.listdir(directory)
    except OSError:
        return []


def wipe() -> None:
    """Remove everything the episode could write: its directories and the scratch mounts."""
    for directory in (*DIRECTORIES, *SCRATCH, QUEUES):
        for name in listing(directory):
            remove(os.path.join(directory, name))


def hand_over(uid: int) -> None:
    for directory in DIRECTORIES:
        os.chown(directory, uid, uid)
        os.chmod(directory, 0o700)
    os.mkdir("/tmp/%d" % uid, 0o700)
    os.chown("/tmp/%d" % uid, uid, uid)


def take_back() -> None:
    for directory in DIRECTORIES:
        os.chown(directory, 0, 0)
        os.chmod(directory, 0o755)


def leftovers(uid: int) -> str | None:
    """What the episode left that cleaning could not remove (None: the sandbox is clean)."""
    if of_uid(uid):
        return "a process of the episode survived"
    for directory in (*DIRECTORIES, *SCRATCH, QUEUES):
        if listing(directory):
            return "files of the episode stayed in " + directory
    for table in SYSV_IPC:
        try:
            with open(table) as handle:
                if len(handle.readlines()) > 1:
                    return "the episode left a System V IPC object"
        except OSError:
            continue
    for directory in DIRECTORIES:
        info = os.stat(directory)
        if (info.st_uid, info.st_mode & 0o7777) != (0, 0o755):
            return "the server could not take back " + directory
    return None


def fresh_uid(used: set[int]) -> int:
    """A uid no earlier episode here had, and (random over 2^30) almost surely no episode
    of another sandbox on this host has now: a uid's process limit is counted host-wide."""
    while True:
        uid = FIRST_UID + int.from_bytes(os.urandom(4), "big") % (1 << 30)
        if uid not in used:
            used.add(uid)
            return uid


def serve_one(message: dict[str, Any], uid: int) -> dict[str, Any]:
    started = time.monotonic()
    oom_before, hits_before = oom_kills(), memory_hits()
    hand_over(uid)
    reply_r, reply_w = os.pipe()
    stderr_r, stderr_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        episode_process(uid, message["request"].encode(), reply_w, stderr_w, message["limits"])
    os.close(reply_w)
    os.close(stderr_w)
    try:
        reply, stderr, timed_out = collect(
            pid, reply_r, stderr_r, started + float(message["timeout_s"])
        )
    finally:
        os.close(reply_r)
        os.close(stderr_r)
    if timed_out:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    # its pipes closed: it has ended, or is ending (its usage counts the program it ran)
    _, status, usage = os.wait4(pid, 0)
    clean = kill_uid(uid)  # what it started that is still running
    wipe()
    take_back()
    problem = None if clean else "a process of the episode could not be killed"
    problem = problem or leftovers(uid)
    oom_after, hits_after = oom_kills(), memory_hits()
    oom = oom_before is not None and oom_after is not None and oom_after > oom_before
    hits = (hits_after - hits_before) if hits_before is not None and hits_after else 0
    if oom or hits:
        problem = problem or "the episode exhausted the sandbox's memory"
    return {
        "reply": reply.decode("utf-8", "replace"),
        "exit_code": exit_status(status),
        "timed_out": timed_out,
        "stderr": stderr.decode("utf-8", "replace")[-STDERR_KEEP:],
        "oom_killed": oom,
        "memory_hits": hits,
        "recycle": problem,
        "served_s": round(time.monotonic() - started, 4),
        # the pages it touched first: copied from this server's heap, or new
        "faults": usage.ru_minflt,
    }


def warm() -> None:
    """Load once what the Python program of every episode would load (`Run.python`): the
    site directories and the modules of the runner's launcher and of the grading bootstrap."""
    import ast, atexit, contextlib, ctypes, gc, hashlib, hmac, site, stat, threading, types, typing  # noqa: F401, I001, E401
    from importlib import machinery, util  # noqa: F401

    site.main()
    STATE["site"] = True
    # what is loaded now is never collected: an episode's collections leave its pages shared
    gc.freeze()


def take_shared(line: bytes) -> None:
    """The shared files (`protocol.share`), given once as the first line: the episodes'
    requests name them instead of carrying them, and the scripts among them run compiled."""
    import base64

    for name, data in json.loads(line)["shared"].items():
        content = SHARED_FILES[name] = base64.b64decode(data)
        if name.endswith(".py"):  # a program an episode may run (the grading bootstrap)
            COMPILED[content] = compile(content, name, "exec", dont_inherit=True)


def serve() -> None:
    take_shared(sys.stdin.buffer.readline())
    warm()
    harden()  # a subreaper: what an episode leaves behind comes to us to be killed
    out = sys.stdout.buffer
    out.write(b'{"ready": true}\n')
    out.flush()
    used: set[int] = set()
    for line in sys.stdin.buffer:
        try:
            status = serve_one(json.loads(line), fresh_uid(used))
        except Exception as exc:  # our own failure: the worker throws this sandbox away
            status = {"error": "%s: %s" % (type(exc).__name__, exc)}
        out.write(json.dumps(status).encode() + b"\n")
        out.flush()


launch(serve)
