"""The in-sandbox runner: executes one small program of file and process operations.

This file is not imported by the worker; its source is streamed into `python3 -I -S` inside
the sandbox (see `sandbox.BOOT`), so any image with a Python 3 works and nothing of ours
must be baked in. It reads one JSON request from the rest of stdin and prints one JSON
reply, so a whole episode phase costs one `docker exec`. Standard library only.

It runs as the sandbox user, like the code under test, so it guards itself the ways that
uid allows: it makes itself non-dumpable (no other process may read its memory or write to
its stdout through /proc), it never lets a child hold its stdout, and it tags its reply
with a nonce that only came through its own stdin.

Request: {"nonce": str, "ops": [op, ...]}; each op is a dict with "op":
    write     {"files": {path: text}, "binary": {path: b64}, "root": dir}
                                                              write files (replacing links)
    remove    {"paths": [path], "root": dir}                 delete files or trees
    untar     {"data": base64 tar(.gz), "root": dir}         unpack an archive
    run       {"command": str, "cwd", "env", "timeout_s", "output_bytes",
               "report": path | null, "check": bool}          run `bash -c command`
    killall   {}                                              SIGKILL every process of our uid
    read      {"paths": [path], "root": dir, "max_bytes"}     read files back
    find      {"names": [basename], "root": dir}              list files with these names
    mkdir     {"path": dir}                                   a fresh private directory
    scrub     {"names": [basename], "keep": [path], "root"}   delete planted config files
    snapshot  {"paths": [path or dir], "root"}               read files to restore later
    listing   {"root": dir}                                   the directory and its entries
Reply: {"nonce": str, "results": [result per op run], "error": str | null}
"""

import json
import os
import selectors
import signal
import subprocess
import sys
import time

# base64, ctypes, io, shutil and tarfile are imported where used: this script starts once
# per episode, and most episodes need none of them

PR_SET_DUMPABLE = 4
READ_CHUNK = 65536
DRAIN_GRACE_S = 0.2


def harden():
    try:
        import ctypes

        ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def inside(root, path):
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


def clear(path):
    if os.path.islink(path) or os.path.isfile(path):
        os.unlink(path)
    elif os.path.isdir(path):
        import shutil

        shutil.rmtree(path, ignore_errors=True)


def op_write(op):
    import base64

    root = op.get("root", "/workspace")
    contents = {p: t.encode("utf-8") for p, t in op.get("files", {}).items()}
    contents.update({p: base64.b64decode(d) for p, d in op.get("binary", {}).items()})
    for path, data in contents.items():
        full = inside(root, path)
        clear(full)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        fd = os.open(full, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
    return {"written": len(contents)}


def op_remove(op):
    root = op.get("root", "/workspace")
    for path in op["paths"]:
        clear(inside(root, path))
    return {"removed": len(op["paths"])}


def op_untar(op):
    import base64
    import io
    import tarfile

    root = op.get("root", "/workspace")
    data = base64.b64decode(op["data"])
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
        archive.extractall(root, members=members, **kwargs)
    return {"members": len(members)}


def oom_kills():
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


def killall():
    # kill(-1) reaches every process this uid may signal, except ourselves
    try:
        os.kill(-1, signal.SIGKILL)
    except ProcessLookupError:
        pass
    # reap what we can, so pids are free for the next op
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break


def op_run(op):
    cap = int(op.get("output_bytes", 65536))
    env = {**os.environ, **(op.get("env") or {})}
    env.setdefault("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
    report = op.get("report")
    if report:
        clear(report)
        env["PROCTOR_JUNIT_XML"] = report
    before = oom_kills()
    started = time.monotonic()
    deadline = started + float(op.get("timeout_s", 10))
    proc = subprocess.Popen(
        ["bash", "-c", op["command"]],
        cwd=op.get("cwd", "/workspace"),
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        close_fds=True,
    )
    captured = {"stdout": bytearray(), "stderr": bytearray()}
    seen = {"stdout": 0, "stderr": 0}
    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ, "stdout")
    selector.register(proc.stderr, selectors.EVENT_READ, "stderr")
    timed_out = False
    exited_at = None
    while selector.get_map():
        now = time.monotonic()
        if proc.poll() is not None and exited_at is None:
            exited_at = now
        if exited_at is not None and now - exited_at > DRAIN_GRACE_S:
            break  # a daemonised grandchild holds the pipe; stop waiting for it
        if now >= deadline:
            timed_out = proc.poll() is None
            break
        for key, _ in selector.select(timeout=min(0.05, deadline - now)):
            chunk = os.read(key.fileobj.fileno(), READ_CHUNK)
            if not chunk:
                selector.unregister(key.fileobj)
                continue
            seen[key.data] += len(chunk)
            room = cap - len(captured[key.data])
            if room > 0:
                captured[key.data] += chunk[:room]
    if not timed_out:
        # the pipes can close a moment before the process exits: wait for it, not longer
        try:
            proc.wait(timeout=max(deadline - time.monotonic(), 0.0))
        except subprocess.TimeoutExpired:
            timed_out = True
    if timed_out:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    code = proc.wait()
    selector.close()
    proc.stdout.close()
    proc.stderr.close()
    after = oom_kills()
    result = {
        "exit_code": code,
        "timed_out": timed_out,
        "duration_s": round(time.monotonic() - started, 4),
        "stdout": captured["stdout"].decode("utf-8", "replace"),
        "stderr": captured["stderr"].decode("utf-8", "replace"),
        "stdout_truncated": seen["stdout"] > cap,
        "stderr_truncated": seen["stderr"] > cap,
        "oom_killed": before is not None and after is not None and after > before,
        "started_at": started,
    }
    if report:
        result["report"] = read_file(report, int(op.get("report_bytes", 8 << 20)))
    return result


def read_file(path, max_bytes):
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        return handle.read(max_bytes).decode("utf-8", "replace")


def op_read(op):
    root = op.get("root", "/workspace")
    limit = int(op.get("max_bytes", 1 << 20))
    return {"files": {p: read_file(inside(root, p), limit) for p in op["paths"]}}


def op_find(op):
    root = op.get("root", "/workspace")
    names = set(op["names"])
    found = []
    for directory, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in files:
            if name in names or any(name.endswith(n[1:]) for n in names if n.startswith("*")):
                found.append(os.path.relpath(os.path.join(directory, name), root))
    return {"paths": sorted(found)}


def op_scrub(op):
    """Remove files the code under test may have planted to steer the test run."""
    root = op.get("root", "/workspace")
    keep = set(op.get("keep", ()))
    removed = [p for p in op_find(op)["paths"] if p not in keep]
    for path in removed:
        clear(os.path.join(root, path))
    return {"removed": removed}


def op_snapshot(op):
    """Read files (directories recursively, .git excluded) so they can be restored later."""
    root = op.get("root", "/workspace")
    limit = int(op.get("max_bytes", 4 << 20))
    files = {}
    for path in op["paths"]:
        full = inside(root, path.rstrip("/"))
        if os.path.isdir(full) and not os.path.islink(full):
            for directory, dirs, names in os.walk(full):
                dirs[:] = [d for d in dirs if d not in (".git", "__pycache__", ".pytest_cache")]
                for name in names:
                    if name.endswith((".pyc", ".pyo")):
                        continue
                    absolute = os.path.join(directory, name)
                    content = read_file(absolute, limit)
                    if content is not None:
                        files[os.path.relpath(absolute, root)] = content
        else:
            content = read_file(full, limit)
            if content is not None:
                files[os.path.relpath(full, root)] = content
    return {"files": files}


def op_listing(op):
    """What `pwd; ls -A` prints, without starting a shell for it."""
    root = op.get("root", "/workspace")
    return {"stdout": root + "\n" + "".join(n + "\n" for n in sorted(os.listdir(root)))}


def op_mkdir(op):
    os.makedirs(op["path"], mode=0o700, exist_ok=False)
    return {"path": op["path"]}


OPS = {
    "write": op_write,
    "remove": op_remove,
    "untar": op_untar,
    "run": op_run,
    "killall": lambda op: killall() or {},
    "read": op_read,
    "find": op_find,
    "mkdir": op_mkdir,
    "scrub": op_scrub,
    "snapshot": op_snapshot,
    "listing": op_listing,
}


def main():
    harden()
    request = json.loads(sys.stdin.buffer.read())
    results = []
    error = None
    for op in request["ops"]:
        try:
            result = OPS[op["op"]](op)
        except Exception as exc:  # reported to the worker, which decides what it means
            error = "%s failed: %s: %s" % (op["op"], type(exc).__name__, exc)
            break
        results.append(result)
        if op.get("check") and result.get("exit_code") != 0:
            break
    reply = json.dumps({"nonce": request["nonce"], "results": results, "error": error})
    sys.stdout.write(reply)
    sys.stdout.flush()


main()
