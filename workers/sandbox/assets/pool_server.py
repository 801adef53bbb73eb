"""The pooled sandbox's server: one long-lived root process serving episodes one by one.

Streamed into `python3 -I -S` after protocol.py and runner.py (their names are this
script's globals at run time), started once per pooled sandbox and kept attached to the
worker: the shared files first (one line), then one JSON request per line in on stdin, one
JSON status per line out on stdout.

The sandbox has every protection a fresh one has (no network, read-only root, no new
privileges, its memory, cpu and pids limits) and gives this server only the capabilities
it needs to hand the sandbox to one episode after another (`POOLED_CAPS` in
workers/sandbox/engine/constants.py).
Each episode is a uid never used before in this sandbox, with a workspace, home and
temporary directory of its own (0700). The server runs the episode's operations itself —
the runner's, the same code — with that uid as its effective uid meanwhile (no capability
is effective then), so they can do what the episode's own runner could and no more; a
program they start is a fork that, before anything of the episode runs, takes the
episode's rlimits and becomes its uid for good, in a session of its own, with nothing of
the server's open. Nothing of the uid can signal, trace or read the server (its real and
saved uid stay root, and it is not dumpable), which saves an episode the fork of a
process of its own. The operations have the episode's time: an alarm ends them.

At its end every process of its uid is killed and its files removed, and the server checks
that nothing is left: a process, a file, an IPC object. Anything left — or memory
exhausted, or its own heap grown by what an episode read — and the status says `recycle`:
the worker throws the sandbox away.
"""

import json
import os
import resource
import signal
import sys
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # at run time protocol.py's and runner.py's sources define these
    from workers.sandbox.assets.runner import (
        EPISODE,
        STATE,
        ZYGOTE,
        Become,
        Zygote,
        execute,
        harden,
        kill_uid,
        launch,
        oom_kills,
        processes_of,
        remove_tree,
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
SCRATCH = ("/tmp", "/mnt", "/dev/shm")  # shared 1777 mounts: emptied after it
QUEUES = "/dev/mqueue"
SYSV_IPC = ("/proc/sysvipc/shm", "/proc/sysvipc/sem", "/proc/sysvipc/msg")
FAILCNT = "/sys/fs/cgroup/memory/memory.failcnt"
STDERR_KEEP = 4000
SERVER_MAX_MB = 24  # beyond this the server is replaced (it has POOLED_SERVER_MB in all)
PAGE = os.sysconf("SC_PAGE_SIZE")
ENVIRONMENT = dict(os.environ)  # the container's, as a fresh sandbox's exec would see it


def memory_hits() -> int | None:
    try:
        with open(FAILCNT) as handle:
            return int(handle.read())
    except (OSError, ValueError):
        return None


def resident_mb() -> float:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * PAGE / (1 << 20)


class Overrun(BaseException):
    """The episode's operations outlasted its time: raised in this server by its alarm. Not
    an `Exception`, so no handler of an operation takes it for the operation's own error."""


ARMED = [False]  # whether the alarm may still raise `Overrun`


def on_alarm(signum: int, frame: object) -> None:
    if ARMED[0]:
        ARMED[0] = False
        raise Overrun()


def run_episode(uid: int, request: bytes, timeout_s: float) -> tuple[bytes, int, str, bool]:
    """Run the episode's operations with its uid as this server's effective uid (so they can
    do what the episode's own runner could, no more) by the deadline: its reply, or none and
    an exit status as its own runner's would be, our complaint, whether it ran out of time."""
    ARMED[0] = True
    signal.setitimer(signal.ITIMER_REAL, max(timeout_s, 0.001))
    os.setegid(uid)
    os.seteuid(uid)
    try:
        try:
            nonce, ops = decode_request(request)
            results, error = execute(ops)
            reply = Reply(nonce=nonce, results=results, error=error).encode().encode()
            outcome = (reply, 0, "", False)
        finally:
            ARMED[0] = False
            signal.setitimer(signal.ITIMER_REAL, 0)
    except Become:
        raise  # a child forked to run a program, already the episode's: it leaves for `launch`
    except Overrun:
        outcome = (b"", 0, "", True)
    except MemoryError:
        outcome = (b"", EXIT_NO_MEMORY, "", False)
    except BaseException as exc:  # ours: the worker classifies it from the status
        outcome = (b"", 70, "%s: %s" % (type(exc).__name__, exc), False)
    os.seteuid(0)
    os.setegid(0)
    return outcome


def listing(directory: str) -> list[str]:
    try:
        return os.listdir(directory)
    except OSError:
        return []


def wipe() -> None:
    """Remove everything the episode could write: its directories and the scratch mounts."""
    for directory in (*DIRECTORIES, *SCRATCH, QUEUES):
        for name in listing(directory):
            remove_tree(os.path.join(directory, name))  # no recursion: trees of any depth


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
    if processes_of(uid):
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


def serve_one(message: dict[str, Any], uid: int, grader: int) -> dict[str, Any]:
    """One episode as `uid`; a split run's grader (`Split`) is `grader`, a uid of its own."""
    started = time.monotonic()
    oom_before, hits_before = oom_kills(), memory_hits()
    faults_before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt
    hand_over(uid)
    EPISODE.update(uid=uid, grader_uid=grader, limits=message["limits"])
    STATE["sealed"] = False
    os.environ.clear()
    os.environ.update(ENVIRONMENT, TMPDIR="/tmp/%d" % uid)
    reply, code, complaint, timed_out = run_episode(
        uid, message["request"].encode(), started + float(message["timeout_s"]) - time.monotonic()
    )
    EPISODE.clear()
    clean = all([kill_uid(uid), kill_uid(grader)])  # what it started, still running
    wipe()
    take_back()
    problem = None if clean else "a process of the episode could not be killed"
    problem = problem or leftovers(uid) or leftovers(grader)
    oom_after, hits_after = oom_kills(), memory_hits()
    oom = oom_before is not None and oom_after is not None and oom_after > oom_before
    hits = (hits_after - hits_before) if hits_before is not None and hits_after else 0
    if oom or hits:
        problem = problem or "the episode exhausted the sandbox's memory"
    if resident_mb() > SERVER_MAX_MB:  # what its operations read stays in its heap
        problem = problem or "the server grew past %d MiB" % SERVER_MAX_MB
    return {
        "reply": reply.decode("utf-8", "replace"),
        "exit_code": code,
        "timed_out": timed_out,
        "stderr": complaint[-STDERR_KEEP:],
        "oom_killed": oom,
        "memory_hits": hits,
        "recycle": problem,
        "served_s": round(time.monotonic() - started, 4),
        # the pages its processes touched first: copied from this server's heap, or new
        "faults": resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt - faults_before,
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
    requests name them instead of carrying them (a script among them is compiled the first
    time an episode runs it, and kept: `compile_ahead`)."""
    import base64

    for name, data in json.loads(line)["shared"].items():
        SHARED_FILES[name] = base64.b64decode(data)


def serve() -> None:
    take_shared(sys.stdin.buffer.readline())
    warm()
    harden()  # a subreaper: what an episode leaves behind comes to us to be killed
    os.setgroups([])  # root's groups would go with it into an episode's effective uid
    os.umask(0o022)
    # forked before any request: a split run's processes come from memory that never held one
    ZYGOTE.append(Zygote())
    signal.signal(signal.SIGALRM, on_alarm)
    out = sys.stdout.buffer
    out.write(b'{"ready": true}\n')
    out.flush()
    used: set[int] = set()
    for line in sys.stdin.buffer:
        try:
            status = serve_one(json.loads(line), fresh_uid(used), fresh_uid(used))
        except Exception as exc:  # our own failure: the worker throws this sandbox away
            status = {"error": "%s: %s" % (type(exc).__name__, exc)}
        out.write(json.dumps(status).encode() + b"\n")
        out.flush()


launch(serve)
