"""The in-sandbox runner: executes one small program of file and process operations.

This file is not imported by the worker; its source is streamed into `python3 -I -S` inside
the sandbox (see `sandbox.BOOT`), so any image with a Python 3 works and nothing of ours
must be baked in. It reads one JSON request from the rest of stdin and prints one JSON
reply, so a whole episode phase costs one `docker exec`. Standard library only.

It runs as the sandbox user, like the code under test, so it guards itself the ways that
uid allows: it makes itself non-dumpable (no other process may read its memory or write to
its stdout through /proc), it never lets a child hold its stdout, and it tags its reply
with a nonce that only came through its own stdin. It is a child subreaper, so whatever a
command starts (`setsid` and double forks included) stays its descendant and dies with a
command that times out; background jobs of a command that ended in time live on.

In a pooled sandbox the same operations are run by the sandbox's root server for an episode
of a uid of its own (`EPISODE`), with that uid as the server's effective uid meanwhile:
what they start becomes that uid for good (`become_episode`), `killall` kills that uid's
processes, and an archive is extracted by a child that is the uid (tarfile writes through
links; the server could reach its own /proc/self).

A Python program (`Run.python`: the grading bootstrap of the `assert` format) runs in a fork
of the runner instead of a new interpreter, which saves its start-up (~30 ms of CPU). The
fork leaves every frame of the runner first (`Become` unwinds to `launch`), so nothing of
the request is reachable from the program's stack, then becomes what `python3 -I -B` would
be: its own session, stdin from /dev/null, every other file closed, the site directories
on `sys.path`, the script run as `__main__`, the same exit status.

A Python task's program (`Run.program`: `/run_code`'s `python3 main.py`) runs in a root
server as a fork of its zygote (`ZygoteProgram`), which never held a request: the episode's
uid and limits, then what `python3 main.py` is (the script's directory first on `sys.path`,
its absolute `__file__`, stdin from its file, dumpable), without bash and an interpreter's
start-up (~14 ms of CPU a program in a sandbox here, where the fork is ~1).

After the first `killall` the program is in its grading phase: every process of the code
under test should be gone, so a fork that fails for lack of pids kills them again and
retries, and full scratch mounts (/tmp, /dev/shm, which count against the memory limit)
are emptied of the sandbox user's files.

The operations, their results and the wire format are in `workers/sandbox/protocol.py`,
whose source is streamed ahead of this one: its names (Op, Run, RunResult, RunnerError, …)
are this script's globals at run time, imported here only for the type checker.
"""

import os
import selectors
import signal
import sys
import time
from stat import S_ISREG
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # at run time protocol.py's source, streamed ahead of this, defines these
    import subprocess
    from collections.abc import Callable, Iterator

    from workers.sandbox.assets.judge import op_judge
    from workers.sandbox.protocol import (
        REPLY_OUTPUT_BYTES,
        SHARED_FILES,
        WORKSPACE,
        Find,
        FindResult,
        KillAll,
        KillAllResult,
        Listing,
        ListingResult,
        MakeDir,
        MakeDirResult,
        Op,
        Read,
        ReadResult,
        Remove,
        RemoveResult,
        Reply,
        Result,
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
        clip,
        decode_request,
    )

# base64, ctypes, io, subprocess and tarfile are imported where used: this script
# starts once per episode (or per fresh sandbox's server), and most episodes need none of them

PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
READ_CHUNK = 65536
DRAIN_GRACE_S = 0.2
REAP_EVERY_S = 0.5
KILL_ROUNDS = 200
FORK_TRIES = 6
SCRATCH_MOUNTS = ("/tmp", "/mnt", "/dev/shm")
FULL_FRACTION = 0.9  # a scratch mount or the memory cgroup this full is emptied at killall
STATE = {"sealed": False, "site": False}  # site: the site directories are on sys.path
# scripts compiled before this process forked, by source (`compile_ahead`: a pooled server
# compiles a shared script once): `run_main` takes the code instead of compiling it again
COMPILED: dict[bytes, Any] = {}
# Set by a root server that runs the operations for an episode's own uid (a pooled sandbox's
# server, with that uid as its effective uid meanwhile): "uid" and "limits", its rlimits.
# A process started then becomes that uid for good and takes those limits
# (`become_episode`), and `killall` kills that uid's processes. Empty where the runner is
# itself the sandbox user.
EPISODE: dict[str, Any] = {}
EXIT_BECOME = 71  # a child that could not become the episode's uid: it runs nothing
PSEUDO: set[int] = set()  # the devices of /proc and /sys (`pseudo_filesystems`)
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# A root server's zygote (`Zygote`), forked before any episode: what a split run's two
# processes are forked from, so neither holds anything of a request in its memory.
ZYGOTE: list["Zygote"] = []
SPLIT_GRADER = "grader/split_grader.py"  # the shared file the zygote's children run
OUTPUT_LEFT = [0]  # of the program's REPLY_OUTPUT_BYTES (`execute` sets it)
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def harden() -> None:
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def inside(root: str, path: str) -> str:
    full = os.path.normpath(os.path.join(root, path))
    if full != root and not full.startswith(root.rstrip("/") + "/"):
        raise ValueError("path leaves the workspace: " + path)
    # refuse to pass through symlinks the code under test may have planted
    probe = root
    for part in os.path.relpath(full, root).split("/")[:-1]:
        probe = os.path.join(probe, part)
        if os.path.islink(probe):
            os.unlink(probe)
    return full


def clear(path: str) -> None:
    remove_tree(path)


def op_write(op: Write) -> WriteResult:
    import base64

    contents = {p: t.encode("utf-8") for p, t in op.files.items()}
    contents.update({p: base64.b64decode(d) for p, d in op.binary.items()})
    contents.update({p: SHARED_FILES[name] for p, name in op.shared.items()})
    for path, data in contents.items():
        full = inside(op.root, path)
        clear(full)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        mode = 0o755 if path in op.executable else 0o644
        fd = os.open(full, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
    return WriteResult(written=len(contents))


def op_remove(op: Remove) -> RemoveResult:
    for path in op.paths:
        clear(inside(op.root, path))
    return RemoveResult(removed=len(op.paths))


def op_untar(op: Untar) -> UntarResult:
    if EPISODE:
        # tarfile writes through a symlink at a member's path, which the episode may have
        # planted: its own uid extracts, not a server that can reach its own /proc/self
        return UntarResult(members=as_episode(lambda: untar(op)))
    return UntarResult(members=untar(op))


def as_episode(work: Callable[[], int]) -> int:
    """`work()` in a child that is the episode's uid (a root server's): its number, or the
    OSError it raised."""
    read_end, write_end = os.pipe()
    pid = retrying(os.fork)
    if pid == 0:
        code = 0
        try:
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):  # the server's stream to the worker among them
                os.dup2(null, fd)
            os.closerange(3, write_end)
            os.closerange(write_end + 1, 1 << 16)
            become_episode()
            answer = b"%d" % work()
        except OSError as exc:
            answer, code = b"%d %s" % (exc.errno or 0, str(exc).encode()), 1
        except BaseException:
            answer, code = b"", EXIT_BECOME
        try:
            os.write(write_end, answer)
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as handle:
        answer = handle.read()
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code == 1:
        number, _, text = answer.decode("utf-8", "replace").partition(" ")
        raise OSError(int(number) or None, text)
    if code != 0:
        raise RuntimeError("the episode's child failed (exit %d)" % code)
    return int(answer)


def untar(op: Untar) -> int:
    import base64
    import io
    import tarfile

    data = base64.b64decode(op.data)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as archive:
        members = []
        for member in archive.getmembers():
            name = os.path.normpath(member.name.lstrip("/"))
            if name.startswith("..") or member.isdev():
                continue
            if (member.issym() or member.islnk()) and (
                os.path.isabs(member.linkname) or ".." in member.linkname.split("/")
            ):
                continue
            member.name = name
            member.mode = (member.mode | 0o600) & 0o777
            members.append(member)
        kwargs = {"filter": "fully_trusted"} if hasattr(tarfile, "data_filter") else {}
        archive.extractall(op.root, members=members, **kwargs)  # type: ignore[arg-type]
    return len(members)


def oom_kills() -> int | None:
    for path, key in (
        ("/sys/fs/cgroup/memory/memory.oom_control", "oom_kill"),
        ("/sys/fs/cgroup/memory.events", "oom_kill"),
    ):
        try:
            with open(path) as handle:
                for line in handle:
                    name, _, value = line.partition(" ")
                    if name == key:
                        return int(value)
        except OSError:
            continue
    return None


def processes() -> dict[int, tuple[int, bytes]]:
    """pid -> (parent pid, state) of every process we can see, from /proc."""
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name, "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        table[int(name)] = (int(fields[1]), fields[0])
    return table


def reap(keep: tuple[int, ...] = ()) -> None:
    """Collect our exited children (orphans come to us as a subreaper), except `keep`:
    a zombie still holds a pid of the sandbox's limit."""
    me = os.getpid()
    for pid, (parent, state) in processes().items():
        if parent == me and state == b"Z" and pid not in keep:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass


def kill_descendants(keep: tuple[int, ...] = ()) -> None:
    """SIGKILL every descendant, whatever session or group it moved to, until none is
    left (a forking one may add children between two rounds)."""
    me = os.getpid()
    for _ in range(KILL_ROUNDS):
        table = processes()
        children: dict[int, list[int]] = {}
        for pid, (parent, _) in table.items():
            children.setdefault(parent, []).append(pid)
        found: list[int] = []
        # the zygote and the short-lived forks it makes are the server's, not the episode's
        todo = [p for p in children.get(me, ()) if p not in {z.pid for z in ZYGOTE}]
        while todo:
            pid = todo.pop()
            found.append(pid)
            todo.extend(children.get(pid, ()))
        alive = [p for p in found if table[p][1] != b"Z"]
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        reap(keep)
        if not alive:
            return
        time.sleep(0.005)


def become_episode() -> None:
    """In a child just forked to start a program: for a root server's episode, take the
    episode's rlimits and its uid for good (no capability is left); nothing otherwise."""
    uid = EPISODE.get("uid")
    if uid is None:
        return
    import resource

    signal.signal(signal.SIGALRM, signal.SIG_DFL)  # the server's deadline is not the program's
    for name, value in EPISODE["limits"].items():
        resource.setrlimit(getattr(resource, name), (value, value))
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)


def killall(empty_scratch: bool = False) -> KillAllResult:
    """SIGKILL every other process of our uid (of the episode's, for a root server), until
    none is left to signal."""
    STATE["sealed"] = True
    uid = EPISODE.get("uid")
    if uid is None:
        kill_others()
    else:
        kill_uid(uid)  # whether it could is checked by the server at the episode's end
    # reap what we can, so pids are free for the next op
    reap_all()
    return KillAllResult(freed=free_scratch(force=empty_scratch))


def kill_others() -> None:
    """SIGKILL every process of our uid but ourselves."""
    for _ in range(KILL_ROUNDS):
        # kill(-1) reaches every process this uid may signal, except ourselves, and needs
        # no new process (the pids limit may be exhausted)
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            break  # nothing left to signal
        reap()
        if not [p for p in processes_of(os.getuid()) if p != os.getpid()]:
            break
        time.sleep(0.005)


def kill_uid(uid: int) -> bool:
    """SIGKILL every process of `uid` from a root server (a subreaper, whose descendants they
    all are); whether none is left. A forked killer that becomes the uid reaches them all
    with one kill(-1) per round, however fast they fork; the server's own kill(-1) would
    reach root's processes too (an exec'd sandbox's keeper, the server's other children)."""
    reap_all()
    if not processes_of(uid):
        return True  # none alive, and only a process of the uid could start another
    for _ in range(KILL_ROUNDS):
        try:
            killer = os.fork()
        except BlockingIOError:  # the pids limit is full: what we see, one by one
            killer = None
            for pid in processes_of(uid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        if killer == 0:
            try:
                os.setresuid(uid, uid, uid)
                for _ in range(KILL_ROUNDS):
                    os.kill(-1, signal.SIGKILL)
            except BaseException:
                pass
            os._exit(0)
        if killer is not None:
            os.waitpid(killer, 0)
        reap_all()  # orphans come to us (a subreaper): collect them before counting
        if not processes_of(uid):
            return True
        time.sleep(0.002)
    return False


def reap_all() -> None:
    """Collect every exited child, so its pid is free."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def processes_of(uid: int) -> list[int]:
    """The live (not zombie) processes of a uid (a process's status says its uid even when
    it made itself non-dumpable, which hands its other /proc entries to root)."""
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


def memory_pressure() -> bool:
    """Whether the sandbox's memory cgroup is nearly full (tmpfs pages and inodes count;
    the page cache the kernel can drop does not)."""
    v1 = "/sys/fs/cgroup/memory/memory."
    for usage, limit, stat in (
        (v1 + "usage_in_bytes", v1 + "limit_in_bytes", v1 + "stat"),
        (
            "/sys/fs/cgroup/memory.current",
            "/sys/fs/cgroup/memory.max",
            "/sys/fs/cgroup/memory.stat",
        ),
    ):
        try:
            with open(usage) as handle:
                used = int(handle.read())
            with open(limit) as handle:
                text = handle.read().strip()
            with open(stat) as handle:
                for line in handle:
                    name, _, value = line.partition(" ")
                    if name in ("total_inactive_file", "inactive_file"):
                        used -= int(value)
                        break
        except (OSError, ValueError):
            continue
        return text.isdigit() and used > FULL_FRACTION * int(text)
    return False


def scratch_full(mount: str) -> bool:
    try:
        stat = os.statvfs(mount)
    except OSError:
        return False
    blocks = stat.f_blocks and stat.f_bavail < (1 - FULL_FRACTION) * stat.f_blocks
    inodes = stat.f_files and stat.f_favail < (1 - FULL_FRACTION) * stat.f_files
    return bool(blocks or inodes)


def free_scratch(force: bool = False) -> list[str]:
    """Empty the scratch mounts of our uid's files when they (or memory) are full: the
    graded workspace is /workspace, and a full /tmp would fail the grading phase."""
    pressure = force or memory_pressure()
    freed = []
    for mount in SCRATCH_MOUNTS:
        if not (pressure or scratch_full(mount)):
            continue
        try:
            names = os.listdir(mount)
        except OSError:
            continue
        for name in names:
            path = os.path.join(mount, name)
            try:
                if os.lstat(path).st_uid != os.geteuid():
                    continue
            except OSError:
                continue
            remove_tree(path)
        freed.append(mount)
    return freed


def remove_tree(path: str) -> None:
    """Delete a file or a tree as far as we may (what cannot go stays, as with `rmtree`'s
    `ignore_errors`), also where the code under test took its own permissions away.

    Not `shutil.rmtree`: the code under test may nest directories thousands of levels
    deep, past Python's recursion limit, PATH_MAX and the open files limit. So no
    recursion, names relative to the directory at hand, two descriptors open at a time
    (the way back up is `..`, checked to be the directory we came from), and no symlink
    followed."""
    parent, name = os.path.split(os.path.normpath(path))
    try:
        base = os.open(parent or ".", os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        remove_at(base, name)
    finally:
        os.close(base)


def remove_at(base: int, name: str) -> None:
    """`remove_tree` of `name` in the directory `base` (left open)."""
    try:
        os.unlink(name, dir_fd=base)
        return
    except IsADirectoryError:
        pass
    except OSError:
        return  # gone, or not ours to delete
    opened = enter(base, name)
    if opened is None:
        rmdir_at(base, name)
        return
    fd, own = opened
    # a directory's name, the identity of the one it is in and its own, its subdirectories left
    stack = [(name, identity(base), own, emptied(fd))]
    while stack:
        current, parent_id, own_id, pending = stack[-1]
        if pending:
            child = pending.pop()
            if rmdir_at(fd, child):  # empty already: no need to go in
                continue
            opened = enter(fd, child)
            if opened is not None:
                stack.append((child, own_id, opened[1], emptied(opened[0])))
                os.close(fd)
                fd = opened[0]
            continue
        stack.pop()
        up = base
        if stack:
            try:
                up = os.open("..", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            except OSError:
                up = -1
        os.close(fd)
        fd = up
        if fd < 0 or (fd != base and identity(fd) != parent_id):  # moved meanwhile: stop
            if fd >= 0:
                os.close(fd)
            return
        rmdir_at(fd, current)


def identity(fd: int) -> tuple[int, int]:
    info = os.fstat(fd)
    return info.st_dev, info.st_ino


def enter(parent: int, name: str) -> tuple[int, tuple[int, int]] | None:
    """The directory `name` in `parent`, opened and made ours to empty (its owner may have
    taken its permissions away), with its identity; None when it cannot be, or is not a
    directory (a symlink is never followed)."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
    try:
        fd = os.open(name, flags, dir_fd=parent)
    except PermissionError:
        try:
            os.chmod(name, 0o700, dir_fd=parent)
            fd = os.open(name, flags, dir_fd=parent)
        except OSError:
            return None
    except OSError:
        return None
    info = os.fstat(fd)
    if info.st_mode & 0o700 != 0o700:  # readable, not writable: nothing in it would go
        try:
            os.fchmod(fd, 0o700)
        except OSError:
            pass
    return fd, (info.st_dev, info.st_ino)


def emptied(fd: int) -> list[str]:
    """Delete what is in the directory `fd` but directories; the names of those."""
    try:
        with os.scandir(fd) as entries:
            found = [(e.name, e.is_dir(follow_symlinks=False)) for e in entries]
    except OSError:
        return []
    directories = []
    for name, is_dir in found:
        if is_dir:
            directories.append(name)
            continue
        try:
            os.unlink(name, dir_fd=fd)
        except IsADirectoryError:
            directories.append(name)
        except OSError:
            pass
    return directories


def rmdir_at(parent: int, name: str) -> bool:
    try:
        os.rmdir(name, dir_fd=parent)
    except OSError:
        return False
    return True


def retrying(spawn: Callable[[], Any]) -> Any:
    """`spawn()`, riding out a moment of pids exhaustion (and in the grading phase, ending it:
    a fork that fails there means a process of the code under test survived)."""
    for attempt in range(FORK_TRIES):
        try:
            return spawn()
        except BlockingIOError:
            if attempt == FORK_TRIES - 1:
                raise
            if STATE["sealed"]:
                killall()
            time.sleep(0.05 * (attempt + 1))
    raise AssertionError("unreachable")


class Become(BaseException):
    """Raised in a child forked to run a Python program (`Forked`): it unwinds every frame
    of the runner — they hold the request, the grader's files among it — up to `launch`,
    which runs the program from a stack with nothing of the request on it."""

    def __init__(self, argv: list[str], cwd: str, env: dict[str, str], out: int, err: int):
        super().__init__()
        self.program = (argv, cwd, env, out, err)


class Forked:
    """A Python program run in a fork of this runner, as `python3 -I -B argv…` would run it
    but without an interpreter's start-up (~30 ms of CPU an episode). It gives `op_run`
    what a Popen would: pid, stdout, stderr, poll(), wait()."""

    def __init__(self, argv: list[str], cwd: str, env: dict[str, str]) -> None:
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        try:
            pid = retrying(os.fork)
        except BaseException:
            for fd in (out_r, out_w, err_r, err_w):
                os.close(fd)
            raise
        if pid == 0:
            try:
                become_episode()
            except BaseException:
                os._exit(EXIT_BECOME)  # this child runs the program as the episode, or nothing
            raise Become(argv, cwd, env, out_w, err_w)
        os.close(out_w)
        os.close(err_w)
        self.pid = pid
        self.returncode: int | None = None
        self.stdout = os.fdopen(out_r, "rb", buffering=0)
        self.stderr = os.fdopen(err_r, "rb", buffering=0)

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                self.returncode = 255  # reaped elsewhere: its status is unknown, not a pass
                return self.returncode
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if timeout is None:
            while self.poll() is None:
                try:
                    _, status = os.waitpid(self.pid, 0)
                    self.returncode = os.waitstatus_to_exitcode(status)
                except ChildProcessError:
                    self.returncode = 255
            return self.returncode or 0
        end, delay = time.monotonic() + timeout, 0.0005
        while (code := self.poll()) is None:
            if time.monotonic() >= end:
                raise TimeoutError("%d still running after %ss" % (self.pid, timeout))
            time.sleep(delay)
            delay = min(delay * 2, 0.05)
        return code


class Zygote:
    """A child of the root server forked before it read any request: a split run's grader
    and solution are forked from it (through a fork that exits at once, so they become the
    server's children, a subreaper's), with nothing of any request in their memory.

    Its requests are tiny (a role, uids, limits, a directory, an environment, descriptors
    passed with SCM_RIGHTS): the tests reach the grader through a pipe, never through it."""

    def __init__(self) -> None:
        import socket

        self.socket, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:
            self.socket.close()
            code = 0
            try:
                serve_zygote(theirs)
            except BaseException:
                code = 70
            os._exit(code)
        theirs.close()
        self.pid = pid

    def spawn(
        self,
        role: str,
        uid: int,
        gid: int,
        env: dict[str, str],
        fds: list[int],
        *,
        real_uid: int | None = None,
        program: dict[str, Any] | None = None,
    ) -> int:
        """The pid of a new process of `role`, already the uid (effective and saved; its real
        uid `real_uid` when given), with `fds` as 1, 2, 3… (a `program`: its argv, cwd and
        stdin, with `fds` its stdout and stderr)"""
        import json
        import socket

        message = {
            "role": role,
            "uid": uid,
            "real_uid": uid if real_uid is None else real_uid,
            "gid": gid,
            "limits": EPISODE["limits"],
            "env": env,
            "program": program,
        }
        socket.send_fds(self.socket, [json.dumps(message).encode()], fds)
        answer = self.socket.recv(64)
        if not answer or not answer.lstrip(b"-").isdigit() or int(answer) <= 0:
            raise RuntimeError("the zygote could not start the %s (%r)" % (role, answer))
        return int(answer)


def serve_zygote(sock: Any) -> None:
    """The zygote's loop: for each request, a process that is the server's child (so the
    server reaps and kills it like its others): a sibling of ours (`sibling_fork`), else
    forked through a middle fork that exits (`fork_through_middle`)."""
    import fcntl  # noqa: F401 - for every process it forks
    import json
    import resource  # noqa: F401
    import socket

    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # the server's stream to the worker among them
        os.dup2(null, fd)
    keep = sock.fileno()
    os.closerange(3, keep)
    os.closerange(keep + 1, 1 << 16)
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    sibling = sibling_fork()
    split: dict[str, Any] = {"__name__": "split_grader", "__builtins__": __builtins__}
    source = SHARED_FILES.get(SPLIT_GRADER)
    if source is not None:  # else every split run fails to start: our failure, said so
        exec(compile(source, "split_grader", "exec", dont_inherit=True), split)
    while True:
        data, fds, _, _ = socket.recv_fds(sock, 1 << 20, 16)
        if not data:
            return  # the server is gone
        spec = json.loads(data)
        if "main" not in split:
            for fd in fds:
                os.close(fd)
            sock.send(b"-1")
            continue
        pid = sibling() if sibling is not None else -1
        if pid < 0:  # no sibling fork here: the process is reparented through a middle one
            pid = fork_through_middle()
        if pid == 0:
            sock.close()
            if spec["role"] == "program":
                become_program(spec, fds)
            become_split(spec, fds, split["main"])
        for fd in fds:
            os.close(fd)
        sock.send(b"%d" % pid if pid > 0 else b"-1")


def fork_through_middle() -> int:
    """A fork whose child is the server's, not ours: forked by a fork that exits at once
    (the server is a subreaper). Like `os.fork`: 0 in the child; in the parent, the child's
    pid once the server is its parent (-1: it failed)."""
    read_end, write_end = os.pipe()
    middle = os.fork()
    if middle == 0:
        os.close(read_end)
        pid = os.fork()
        if pid == 0:
            os.close(write_end)
            return 0
        os.write(write_end, b"%d" % pid)
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as handle:
        answer = handle.read()
    os.waitpid(middle, 0)  # reparented to the server by now
    return int(answer) if answer.isdigit() else -1


# clone(2)'s number and CLONE_PARENT: the child's parent is ours (the server), at the price of
# one fork where the middle fork costs two forks and an exit (~3 ms of an episode's ~20 ms of
# sandbox CPU here, mostly page tables copied and torn down)
CLONE_NUMBERS = {"x86_64": 56, "aarch64": 220}
CLONE_PARENT = 0x00008000


def sibling_fork() -> "Callable[[], int] | None":
    """A fork whose child is the server's (clone with CLONE_PARENT, through libc's syscall
    and CPython's own fork hooks, as `os.fork` does), or None where this machine has none."""
    import ctypes
    import platform

    number = CLONE_NUMBERS.get(platform.machine())
    if number is None:
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    syscall = libc.syscall
    syscall.restype = ctypes.c_long
    api = ctypes.pythonapi  # called with the GIL held, as os.fork calls them
    flags = ctypes.c_long(CLONE_PARENT | signal.SIGCHLD)
    null = ctypes.c_long(0)

    def fork() -> int:
        """The child's pid (0 in the child), -1 when the kernel refuses (a seccomp filter)."""
        api.PyOS_BeforeFork()
        pid = int(syscall(ctypes.c_long(number), flags, null, null, null, null))
        if pid == 0:
            api.PyOS_AfterFork_Child()
        else:
            api.PyOS_AfterFork_Parent()
        return pid

    return fork if honours_clone_parent(fork) else None


def honours_clone_parent(fork: "Callable[[], int]") -> bool:
    """Whether `fork`'s child is our parent's: gVisor takes the flag and ignores it (the
    child is ours, and the server could never reap or wait for it). Tried once, on a
    child that waits for us and then exits."""
    read_end, write_end = os.pipe()
    pid = fork()
    if pid == 0:
        os.close(write_end)
        os.read(read_end, 1)
        os._exit(0)
    os.close(read_end)
    try:
        with open("/proc/%d/stat" % pid, "rb") as handle:
            parent = int(handle.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        parent = -1
    os.close(write_end)
    if pid > 0 and parent != os.getppid():
        try:
            os.waitpid(pid, 0)  # ours after all (or unknown): reaped here
        except ChildProcessError:
            pass
        return False
    return pid > 0


def become_split(spec: dict[str, Any], fds: list[int], main: Any) -> None:
    """In a process the zygote forked: take the episode's limits, the descriptors, the uid
    for good, and run the role; never returns."""
    code = 70
    try:
        import fcntl
        import resource

        os.setsid()
        for name, value in spec["limits"].items():
            resource.setrlimit(getattr(resource, name), (value, value))
        # out of the way of 0..n first, whatever their numbers
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 100) for fd in fds]
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        for target, fd in enumerate(high, start=1):
            os.dup2(fd, target, inheritable=target <= 2)
        os.closerange(len(high) + 1, 1 << 16)
        os.setresgid(spec["gid"], spec["gid"], spec["gid"])
        # from root to another uid: the kernel makes the process non-dumpable (its memory,
        # environment and descriptors closed to /proc and ptrace), as the grader must be.
        # The grader's real uid is the episode's: what it starts drops to it, no privilege
        # needed (split_grader.confine_children), so no program the tests start is the
        # grader's uid, which reads the tests' data files
        os.setresuid(spec.get("real_uid", spec["uid"]), spec["uid"], spec["uid"])
        os.chdir(WORKSPACE)
        os.environ.clear()
        os.environ.update(spec["env"])
        standard_streams([spec["role"]])
        code = 0
        main(spec["role"], list(range(3, len(high) + 1)))
    except SystemExit as exc:
        code = exit_status_of(exc)
    except BaseException:
        try:
            import traceback

            traceback.print_exc()
        except BaseException:
            pass
        code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except BaseException:
            pass
        os._exit(code)


def become_program(spec: dict[str, Any], fds: list[int]) -> None:
    """In a process the zygote forked: take the episode's limits and uid for good, then be
    `python3 argv…` (`run_python`); never returns."""
    code = 70
    try:
        import resource

        for name, value in spec["limits"].items():
            resource.setrlimit(getattr(resource, name), (value, value))
        os.setresgid(spec["gid"], spec["gid"], spec["gid"])
        os.setresuid(spec["uid"], spec["uid"], spec["uid"])
        # dumpable again, as a program python3 started is (its own /proc/self/mem, fd…):
        # nothing of a request or of another uid is in this memory, a fork of the zygote's
        import ctypes

        ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
        program = spec["program"]
        code = run_python(
            program["argv"],
            program["cwd"],
            spec["env"],
            fds[0],
            fds[1],
            stdin=program["stdin"],
            script_path=True,
        )
    except BaseException as exc:  # ours, before the program ran: said on its stderr
        try:
            os.write(fds[1] if len(fds) > 1 else 2, ("proctor runner: %s\n" % exc).encode())
        except BaseException:
            pass
    finally:
        os._exit(code)


class ZygoteProgram(Forked):
    """A Python program (`Run.program`) in a fork of the zygote: `python3 argv…` as the
    episode, from memory that never held a request, without an interpreter's start-up
    (~14 ms of CPU in a sandbox where a fork is ~1). It gives `op_run` what a Popen would."""

    def __init__(self, op: Run, env: dict[str, str]) -> None:  # Forked.__init__ forks: not here
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        uid = EPISODE["uid"]
        program = {"argv": op.program, "cwd": op.cwd, "stdin": op.stdin}
        try:
            self.pid = ZYGOTE[0].spawn("program", uid, uid, env, [out_w, err_w], program=program)
        except BaseException:
            for fd in (out_r, err_r):
                os.close(fd)
            raise
        finally:
            for fd in (out_w, err_w):
                os.close(fd)
        self.returncode: int | None = None
        self.stdout = os.fdopen(out_r, "rb", buffering=0)
        self.stderr = os.fdopen(err_r, "rb", buffering=0)


class Split(Forked):
    """A split run (`Run.split`): the grader and the solution forked from the zygote, the
    tests written into the grader's pipe; it gives `op_run` what a Popen would, plus the
    grader's record. The grader's effective uid is its own, which neither the episode's
    processes nor the server acting as the episode can trace or read; its real uid is the
    episode's, so they can signal it, which can only end the run a failure."""

    def __init__(self, op: Run, env: dict[str, str]) -> None:  # Forked.__init__ forks: not here
        import json
        import socket

        if not ZYGOTE or "grader_uid" not in EPISODE:
            raise RuntimeError("a split run needs a root server")
        uid, grader = EPISODE["uid"], EPISODE["grader_uid"]
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        record_r, record_w = os.pipe()
        tests_r, tests_w = os.pipe()
        ours, theirs = socket.socketpair()
        os.chmod(WORKSPACE, 0o750)  # the grader reads it through the episode's group
        zygote = ZYGOTE[0]
        self.solution = self.pid = 0
        try:
            self.solution = zygote.spawn("solution", uid, uid, env, [out_w, err_w, ours.fileno()])
            self.pid = zygote.spawn(
                "grader",
                grader,
                uid,
                env,
                [out_w, err_w, theirs.fileno(), record_w, tests_r],
                real_uid=uid,
            )
        finally:
            for fd in (out_w, err_w, record_w, tests_r):
                os.close(fd)
            ours.close()
            theirs.close()
        self.returncode: int | None = None
        self.stdout = os.fdopen(out_r, "rb", buffering=0)
        self.stderr = os.fdopen(err_r, "rb", buffering=0)
        self.record = os.fdopen(record_r, "rb", buffering=0)
        tests = json.dumps(op.split).encode()
        try:
            with os.fdopen(tests_w, "wb") as handle:
                handle.write(tests)
        except OSError:  # the grader is gone already: its status says why
            pass

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                self.returncode = 255
                return self.returncode
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
                self.kill()  # the solution answers nobody now
        return self.returncode

    def kill(self) -> None:
        """SIGKILL both processes' groups (as root for a moment: the grader is not ours)."""
        as_root(self._kill_groups)

    def _kill_groups(self) -> None:
        for pid in (self.pid, self.solution):
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass


def launch(entry: Callable[[], None]) -> None:
    """Run the runner's entry; in a child forked to run a Python program, run it once the
    runner's frames are gone (`Become`), and end with its exit status."""
    try:
        entry()
        return
    except Become as become:
        program = become.program
    code = 70
    try:
        code = run_python(*program)
    except BaseException as exc:  # ours, before the program ran: said on its stderr
        try:
            os.write(2, ("proctor runner: %s: %s\n" % (type(exc).__name__, exc)).encode())
        except BaseException:
            pass
    finally:
        os._exit(code)


def run_python(
    argv: list[str],
    cwd: str,
    env: dict[str, str],
    out: int,
    err: int,
    *,
    stdin: str | None = None,
    script_path: bool = False,
) -> int:
    """Become `python3 -I -B argv…` (own session, stdin from /dev/null, every other file
    closed, the site directories `-S` left out) and run it; its exit status. `stdin`: a
    file (in `cwd`) to read instead, opened as the program's uid, as a shell's `<` would;
    `script_path`: the script's directory first on `sys.path`, as `python3 argv…` has it."""
    import atexit
    import site

    os.setsid()
    os.chdir(cwd)
    try:
        source = os.open(stdin if stdin is not None else os.devnull, os.O_RDONLY)
    except OSError as exc:
        os.write(err, ("bash: %s: %s\n" % (stdin, exc.strerror)).encode())
        return 1
    for fd, target in ((source, 0), (out, 1), (err, 2)):
        os.dup2(fd, target)
    for name in os.listdir("/proc/self/fd"):
        if int(name) > 2:
            try:
                os.close(int(name))
            except OSError:
                pass
    os.environ.clear()
    os.environ.update(env)
    standard_streams(argv)
    if not STATE["site"]:
        site.main()
    script = os.path.abspath(argv[0])  # `__file__` and tracebacks name it so, as python3's
    if script_path:
        sys.path.insert(0, os.path.dirname(script))
    code = 0
    try:
        run_main(script)
    except SystemExit as exc:
        code = exit_status_of(exc)
    except BaseException as exc:
        tb = exc.__traceback__  # from the program's first frame on, as its interpreter shows it
        while tb is not None and tb.tb_frame.f_code.co_filename != script:
            tb = tb.tb_next
        exc = exc.with_traceback(tb or exc.__traceback__)
        sys.excepthook(type(exc), exc, exc.__traceback__)
        code = 1
    try:
        threading = sys.modules.get("threading")
        if threading is not None:
            threading._shutdown()  # as the interpreter's end does
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        pass
    return code


def standard_streams(argv: list[str]) -> None:
    """A forked program's own standard streams on 0, 1 and 2, as its interpreter would open
    them (never closed: the process ends with the program), its argv, no bytecode written."""
    streams = {
        "stdin": open(0, encoding="utf-8", closefd=False),  # noqa: SIM115
        "stdout": open(1, "w", encoding="utf-8", closefd=False),  # noqa: SIM115
        "stderr": open(  # noqa: SIM115
            2, "w", buffering=1, encoding="utf-8", errors="backslashreplace", closefd=False
        ),
    }
    for name, stream in streams.items():
        setattr(sys, name, stream)
        setattr(sys, "__%s__" % name, stream)
    sys.argv = list(argv)
    sys.dont_write_bytecode = True


def compile_ahead(path: str) -> None:
    """Compile a shared script (the grading bootstrap) before forking to run it, so every
    later fork of this process finds it compiled; anything else the fork compiles itself
    (never source the code under test wrote, in a root server)."""
    source = read_bytes(path, 1 << 22)
    if source is not None and source not in COMPILED and source in SHARED_FILES.values():
        COMPILED[source] = compile(source, path, "exec", dont_inherit=True)


def run_main(path: str) -> None:
    """Run a script as `__main__`, as `python3 path` does (what runpy does for a file, without
    its imports)."""
    import builtins
    import types
    from importlib.machinery import SourceFileLoader

    with open(path, "rb") as handle:
        source = handle.read()
    code = COMPILED.get(source)
    if code is None:
        code = compile(source, path, "exec", dont_inherit=True)
    else:  # this process's own copy (a fork): named for the file, as compiling it would
        import _imp

        _imp._fix_co_filename(code, path)  # type: ignore[attr-defined]
    module = types.ModuleType("__main__")
    module.__dict__.update(
        __file__=path,
        __cached__=None,
        __builtins__=builtins,
        __loader__=SourceFileLoader("__main__", path),
        __spec__=None,
        __package__=None,
    )
    sys.modules["__main__"] = module
    exec(code, module.__dict__)


def exit_status_of(exc: SystemExit) -> int:
    """The status `sys.exit(value)` ends an interpreter with (a message is printed, status 1)."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code & 0xFF
    print(exc.code, file=sys.stderr)
    return 1


def op_run(op: Run) -> RunResult:
    if op.judge is not None:
        return op_judge(op)
    cap = op.output_bytes
    env = {**os.environ, **op.env}
    env.setdefault("PATH", PATH)
    if op.report:
        clear(op.report)
        env["PROCTOR_JUNIT_XML"] = op.report
    before = oom_kills()
    import resource  # not up front: a Python program's episode has its runs forked

    cpu_before = children_cpu_s(resource)
    started = time.monotonic()
    deadline = started + op.timeout_s
    cpu_limit, cpu_checked = op.cpu_limit_s, 0.0
    proc: Forked | Split | subprocess.Popen[bytes]
    expired: tuple[type[Exception], ...] = (TimeoutError,)  # Forked's and Split's wait
    if op.split is not None:
        proc = Split(op, env)
    elif op.program and ZYGOTE and "uid" in EPISODE:
        proc = retrying(lambda: ZygoteProgram(op, env))
    elif op.python:
        compile_ahead(os.path.join(op.cwd, op.python[0]))
        proc = Forked(op.python, op.cwd, env)
    else:
        import subprocess as sp  # not imported up front: a Python program's episode needs none

        expired += (sp.TimeoutExpired,)
        proc = retrying(
            lambda: sp.Popen(
                ["bash", "-c", op.command],
                cwd=op.cwd,
                env=env,
                stdin=sp.DEVNULL,
                stdout=sp.PIPE,
                stderr=sp.PIPE,
                start_new_session=True,
                close_fds=True,
                preexec_fn=become_episode if EPISODE else None,  # a server has no threads
            )
        )
    assert proc.stdout is not None and proc.stderr is not None
    caps = {"stdout": cap, "stderr": cap, "record": op.report_bytes}
    captured = {"stdout": bytearray(), "stderr": bytearray(), "record": bytearray()}
    seen = {"stdout": 0, "stderr": 0, "record": 0}
    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ, "stdout")
    selector.register(proc.stderr, selectors.EVENT_READ, "stderr")
    if isinstance(proc, Split):  # read as it comes: the grader's write must not block
        selector.register(proc.record, selectors.EVENT_READ, "record")
    timed_out = False
    exited_at = None
    reaped_at = started
    while selector.get_map():
        now = time.monotonic()
        if now - reaped_at > REAP_EVERY_S:
            reap(keep=(proc.pid,))
            reaped_at = now
        if proc.poll() is not None and exited_at is None:
            exited_at = now
        if exited_at is not None and now - exited_at > DRAIN_GRACE_S:
            break  # a daemonised grandchild holds the pipe; stop waiting for it
        if now >= deadline:
            timed_out = proc.poll() is None
            break
        if cpu_limit is not None and now - started > cpu_limit and now >= cpu_checked + 0.05:
            cpu_checked = now
            if session_cpu_s(proc.pid) + children_cpu_s(resource) - cpu_before > cpu_limit:
                timed_out = proc.poll() is None
                break
        for key, _ in selector.select(timeout=min(0.05, deadline - now)):
            chunk = os.read(key.fd, READ_CHUNK)
            if not chunk:
                selector.unregister(key.fileobj)
                continue
            seen[key.data] += len(chunk)
            room = caps[key.data] - len(captured[key.data])
            if room > 0:
                captured[key.data] += chunk[:room]
    if not timed_out:
        # the pipes can close a moment before the process exits: wait for it, not longer
        try:
            proc.wait(timeout=max(deadline - time.monotonic(), 0.0))
        except expired:
            timed_out = True
    if timed_out and isinstance(proc, Split):
        proc.kill()
        as_root(lambda: kill_descendants(keep=(proc.pid,)))  # the grader's are not ours
    elif timed_out:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        # what escaped the group (setsid, double forks) is still our descendant
        kill_descendants(keep=(proc.pid,))
    code = proc.wait()
    reap()
    cpu_s = children_cpu_s(resource) - cpu_before
    selector.close()
    proc.stdout.close()
    proc.stderr.close()
    if isinstance(proc, Split):
        proc.record.close()
        proc.kill()  # the solution, and whatever the grader left: the record is complete
    after = oom_kills()
    # each stream within `cap` and the program's output budget as the reply carries them
    texts, cut = {}, {}
    for name in ("stdout", "stderr"):
        text = captured[name].decode("utf-8", "replace")
        texts[name], size = clip(text, min(cap, OUTPUT_LEFT[0]))
        OUTPUT_LEFT[0] -= size
        cut[name] = seen[name] > cap or len(texts[name]) < len(text)
    if op.split is not None:  # the grader's record, from the pipe only it held
        report: str | None = captured["record"].decode("utf-8", "replace")
    else:
        report = read_file(op.report, op.report_bytes) if op.report else None
    return RunResult(
        exit_code=code,
        timed_out=timed_out,
        duration_s=round(time.monotonic() - started, 4),
        stdout=texts["stdout"],
        stderr=texts["stderr"],
        stdout_truncated=cut["stdout"],
        stderr_truncated=cut["stderr"],
        oom_killed=before is not None and after is not None and after > before,
        started_at=started,
        report=None if report is None else clip(report, op.report_bytes)[0],
        cpu_s=round(cpu_s, 4),
    )


def children_cpu_s(resource: Any) -> float:
    """The CPU time of every child this runner has reaped (orphans come to it: a subreaper)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return float(usage.ru_utime + usage.ru_stime)


def session_cpu_s(session: int) -> float:
    """The CPU time of the live processes of a session, with that of the children they
    reaped: a compile's processes, from /proc (a compiler does not leave its session)."""
    ticks = 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name, "rb") as handle:
                stat = handle.read()
        except OSError:  # gone meanwhile, or not ours to read
            continue
        fields = stat[stat.rindex(b")") + 2 :].split()
        # after the name: state, ppid, pgrp, session … utime, stime, cutime, cstime (14-17)
        if int(fields[3]) == session:
            ticks += sum(int(value) for value in fields[11:15])
    return ticks / CLOCK_TICKS


def as_root(work: Callable[[], None]) -> None:
    """`work()` with root as the effective uid for a moment (a root server acting for an
    episode: to signal the processes of its grader's uid, which are not the episode's)."""
    euid = os.geteuid()
    if euid == 0 or os.getuid() != 0:
        work()
        return
    os.seteuid(0)
    try:
        work()
    finally:
        os.seteuid(euid)


def read_bytes(path: str, max_bytes: int) -> bytes | None:
    """At most `max_bytes` of a regular file (not through a symlink, never blocking on a
    FIFO the code under test planted, never of /proc or /sys: through a directory the code
    under test swapped for a symlink, a root server acting for it would read its own
    /proc/self); None when it is not one or cannot be read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    info = os.fstat(fd)
    if not S_ISREG(info.st_mode) or info.st_dev in pseudo_filesystems():
        os.close(fd)  # before a file object: one of a directory cannot be made
        return None
    with os.fdopen(fd, "rb") as handle:
        return handle.read(max_bytes)


def pseudo_filesystems() -> set[int]:
    """The devices of /proc and /sys, which hold no file the runner reads for the worker."""
    if not PSEUDO:
        for mount in ("/proc", "/sys"):
            try:
                PSEUDO.add(os.stat(mount).st_dev)
            except OSError:
                pass
    return PSEUDO


def read_file(path: str, max_bytes: int) -> str | None:
    data = read_bytes(path, max_bytes)
    return None if data is None else data.decode("utf-8", "replace")


def op_read(op: Read) -> ReadResult:
    return ReadResult(files={p: read_file(inside(op.root, p), op.max_bytes) for p in op.paths})


def walk(top: str, skip: tuple[str, ...] = ()) -> Iterator[tuple[str, list[str]]]:
    """Every directory under `top` (those named in `skip` left out) with the names of its
    entries but directories, as `os.walk` gives them top-down without following symlinks.

    Not `os.walk`: Python 3.11's recurses, and the code under test may nest directories past
    the recursion limit. A directory that cannot be listed (past PATH_MAX among them, where
    no tool that goes by path reaches either) is left out, as `os.walk` leaves it out."""
    pending = [top]
    while pending:
        directory = pending.pop()
        try:
            with os.scandir(directory) as entries:
                found = [(e.name, is_directory(e)) for e in entries]
        except OSError:
            continue
        yield directory, [name for name, is_dir in found if not is_dir]
        below = [name for name, is_dir in found if is_dir and name not in skip]
        pending += [os.path.join(directory, name) for name in reversed(below)]


def is_directory(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


def find(root: str, names: list[str]) -> list[str]:
    wanted = set(names)
    suffixes = tuple(n[1:] for n in names if n.startswith("*"))
    found = []
    for directory, files in walk(root, skip=(".git",)):
        for name in files:
            if name in wanted or (suffixes and name.endswith(suffixes)):
                found.append(os.path.relpath(os.path.join(directory, name), root))
    return sorted(found)


def op_find(op: Find) -> FindResult:
    return FindResult(paths=find(op.root, op.names))


def op_scrub(op: Scrub) -> ScrubResult:
    """Remove files the code under test may have planted to steer the test run."""
    keep = set(op.keep)
    removed = [p for p in find(op.root, op.names) if p not in keep]
    for path in removed:
        clear(os.path.join(op.root, path))
    return ScrubResult(removed=removed)


def op_snapshot(op: Snapshot) -> SnapshotResult:
    """Read files (directories recursively, .git excluded) so they can be restored later."""
    root = op.root
    found = []
    for path in op.paths:
        full = inside(root, path.rstrip("/"))
        if op.files_only:
            found.append(full)
        elif os.path.isdir(full) and not os.path.islink(full):
            for directory, names in walk(full, skip=(".git", "__pycache__", ".pytest_cache")):
                kept = [n for n in names if not n.endswith((".pyc", ".pyo"))]
                found += [os.path.join(directory, n) for n in kept]
        else:
            found.append(full)
    files, binary = {}, {}
    for absolute in found:
        data = read_bytes(absolute, op.max_bytes + 1)
        if data is None or len(data) > op.max_bytes:
            continue
        name = os.path.relpath(absolute, root)
        try:
            files[name] = data.decode("utf-8")
        except UnicodeDecodeError:
            import base64

            binary[name] = base64.b64encode(data).decode()
    return SnapshotResult(files=files, binary=binary)


def op_listing(op: Listing) -> ListingResult:
    """What `pwd; ls -A` prints, without starting a shell for it."""
    names = sorted(os.listdir(op.root))
    return ListingResult(stdout=op.root + "\n" + "".join(n + "\n" for n in names))


def op_mkdir(op: MakeDir) -> MakeDirResult:
    os.makedirs(op.path, mode=0o700, exist_ok=False)
    return MakeDirResult(path=op.path)


def op_sent(op: Sent) -> SentResult:
    total = 0
    try:
        for name in os.listdir("/sys/class/net"):
            if name == "lo":
                continue
            with open("/sys/class/net/%s/statistics/tx_packets" % name) as handle:
                total += int(handle.read())
    except (OSError, ValueError):
        return SentResult(packets=None)
    return SentResult(packets=total)


def op_killall(op: KillAll) -> KillAllResult:
    return killall(empty_scratch=op.empty_scratch)


HANDLERS: dict[str, Callable[[Any], Result]] = {
    "write": op_write,
    "remove": op_remove,
    "untar": op_untar,
    "run": op_run,
    "killall": op_killall,
    "read": op_read,
    "find": op_find,
    "mkdir": op_mkdir,
    "scrub": op_scrub,
    "snapshot": op_snapshot,
    "listing": op_listing,
    "sent": op_sent,
}


def execute(ops: list[tuple[str, Op[Any]]]) -> tuple[dict[str, Result], RunnerError | None]:
    """Run the operations in order: their results by id, and the error that stopped them."""
    results: dict[str, Result] = {}
    OUTPUT_LEFT[0] = REPLY_OUTPUT_BYTES
    for op_id, op in ops:
        try:
            result = HANDLERS[op.kind](op)
        except Exception as exc:  # reported to the worker, which decides what it means
            error = RunnerError.of(op, exc)
            if not op.keep_going:
                return results, error
            result = error
        results[op_id] = result
        if (
            isinstance(op, Run)
            and op.check
            and isinstance(result, RunResult)
            and (result.exit_code != 0)
        ):
            break
    return results, None


def main() -> None:
    harden()
    nonce, ops = decode_request(sys.stdin.buffer.read())
    results, error = execute(ops)
    sys.stdout.write(Reply(nonce=nonce, results=results, error=error).encode())
    sys.stdout.flush()
