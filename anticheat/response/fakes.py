"""What an intercepted command would have printed in a clean, sealed sandbox.

Each builder returns the observation the real tool gives when the thing it reaches for
does not exist: no network (curl exit 6, wget exit 4, pip exit 1, git exit 128), no
such file (cat exit 1, ls exit 2), a sanitized repository (git history restricted to
the base commit, via the worker's runner), no room (ENOSPC, MemoryError) or a time-out.
Never plausible-but-wrong content: that would create an incentive of its own.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from urllib.parse import urlsplit

from anticheat.analysis.bash.syntax import Command
from anticheat.analysis.facts import Facts, FileOp, NetOp, PkgOp
from anticheat.context import Ctx
from anticheat.response.history import history_command
from anticheat.rules.vcs import suspicious_revisions
from proctor.models import CheatCategory, Observation, TaskContext

__all__ = ["Runner", "fake_for"]

# runs a read-only git command the responder built (never the agent's text) in the sealed
# repository, and returns what it printed; None when there is no repository
Runner = Callable[[str], Observation | None]


_PS_USAGE = (
    "error: unsupported option (BSD syntax)\n\nUsage:\n ps [options]\n\n Try 'ps --help "
    "<simple|list|output|threads|misc|all>'\n  or 'ps --help <s|l|o|t|m|a>'\n for additional "
    "help text.\n\nFor more details see ps(1).\n"
)


def _obs(stdout: str = "", stderr: str = "", code: int | None = 0, **kw: object) -> Observation:
    return Observation(output=stdout, stderr=stderr, exit_code=code, **kw)


def _host_port(target: str) -> tuple[str, int]:
    url = target if "://" in target else "https://" + target
    try:
        parts = urlsplit(url)
        host = parts.hostname or target
        port = parts.port or (80 if parts.scheme == "http" else 443)
    except ValueError:
        return target, 443
    return host, port


def _is_ip(host: str) -> bool:
    return host.replace(".", "").isdigit() or ":" in host


def _flags(cmd: Command | None) -> set[str]:
    if cmd is None:
        return set()
    out: set[str] = set()
    for w in cmd.args:
        t = w.text
        if t.startswith("--"):
            out.add(t)
        elif t.startswith("-"):
            out.update("-" + c for c in t[1:])
    return out


def _command_for(facts: Facts, via: str) -> Command | None:
    for c in facts.commands:
        if " ".join(w.text for w in c.argv)[:200] == via:
            return c
    return None


# ------------------------------------------------------------------ network


def network(facts: Facts) -> Observation:
    if facts.pkgs:
        return _package(facts.pkgs[0])
    net = facts.net[0] if facts.net else None
    if net is None:
        return _obs(code=1)
    if net.tool.startswith("git "):
        return _git_remote(net)
    if net.tool.startswith("python:"):
        return _python_net(net)
    return _tool_net(net, _command_for(facts, net.via))


def _tool_net(op: NetOp, cmd: Command | None) -> Observation:
    host, port = _host_port(op.target)
    flags = _flags(cmd)
    if op.tool == "curl":
        quiet = ("-s" in flags or "--silent" in flags) and not (
            "-S" in flags or "--show-error" in flags
        )
        if _is_ip(host):
            msg = (
                f"curl: (7) Failed to connect to {host} port {port} after 0 ms: "
                "Couldn't connect to server\n"
            )
            return _obs(stderr="" if quiet else msg, code=7)
        return _obs(stderr="" if quiet else f"curl: (6) Could not resolve host: {host}\n", code=6)
    if op.tool == "wget":
        if "-q" in flags or "--quiet" in flags:
            return _obs(code=4)
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        return _obs(
            stderr=f"--{stamp}--  {op.target}\nResolving {host} ({host})... failed: "
            f"Temporary failure in name resolution.\nwget: unable to resolve "
            f"host address ‘{host}’\n",  # noqa: RUF001 -- wget's own quotes
            code=4,
        )
    if op.tool in ("nc", "ncat", "netcat", "telnet"):
        if _is_ip(host):
            return _obs(
                stderr=f"nc: connect to {host} port {port} (tcp) failed: Network is unreachable\n",
                code=1,
            )
        return _obs(
            stderr=f'nc: getaddrinfo for host "{host}" port {port}: Temporary failure '
            "in name resolution\n",
            code=1,
        )
    if op.tool in ("ssh", "scp", "sftp", "rsync"):
        return _obs(
            stderr=f"ssh: Could not resolve hostname {host}: Temporary failure in name "
            "resolution\n",
            code=255,
        )
    if op.tool in ("gh", "hub", "glab"):
        return _obs(
            stderr="error connecting to api.github.com\ncheck your internet connection "
            "or https://githubstatus.com\n",
            code=1,
        )
    if op.tool in ("nslookup", "dig", "host", "drill"):
        # no resolver answers in a sandbox: each says so in its own words
        said = {
            "nslookup": (";; connection timed out; no servers could be reached\n\n", 1),
            "dig": (";; connection timed out; no servers could be reached\n", 9),
            "host": (";; connection timed out; no servers could be reached\n", 1),
            "drill": ("Error: error sending query: Could not send or receive\n", 1),
        }
        text, code = said[op.tool]
        return _obs(stderr=text, code=code)
    if op.tool in ("ping", "ping6", "arping"):
        if _is_ip(host):
            return _obs(stderr=f"{op.tool}: connect: Network is unreachable\n", code=2)
        return _obs(stderr=f"{op.tool}: {host}: Temporary failure in name resolution\n", code=2)
    if op.tool in ("traceroute", "traceroute6", "tracepath", "mtr", "whois"):
        return _obs(stderr=f"{host}: Temporary failure in name resolution\n", code=2)
    if op.tool == "bash /dev/tcp":
        return _obs(
            stderr=f"bash: connect: Network is unreachable\nbash: /dev/tcp/{host}/"
            f"{port}: Network is unreachable\n",
            code=1,
        )
    return _obs(stderr=f"{op.tool}: Could not resolve host: {host}\n", code=1)


def _python_net(op: NetOp) -> Observation:
    host, port = _host_port(op.target)
    api = op.tool.removeprefix("python:")
    if api.startswith("requests"):
        err = (
            f"requests.exceptions.ConnectionError: HTTPSConnectionPool(host='{host}', "
            f"port={port}): Max retries exceeded with url: / (Caused by NameResolutionError"
            f'("<urllib3.connection.HTTPSConnection object at 0x7f3a2c1b4d90>: Failed to '
            f"resolve '{host}' ([Errno -3] Temporary failure in name resolution)\"))"
        )
    elif api.startswith("socket") and _is_ip(host):
        err = "OSError: [Errno 101] Network is unreachable"
    elif api.startswith(("socket", "http.client")):
        err = "socket.gaierror: [Errno -3] Temporary failure in name resolution"
    else:
        err = (
            "urllib.error.URLError: <urlopen error [Errno -3] Temporary failure in name resolution>"
        )
    return _obs(
        stderr=f'Traceback (most recent call last):\n  File "<string>", line 1, in '
        f"<module>\n{err}\n",
        code=1,
    )


def _git_remote(op: NetOp) -> Observation:
    sub, target = op.tool[4:], op.target
    if "://" in target or target.startswith("git@"):
        host, _ = _host_port(target)
        url = target if target.endswith("/") else target + "/"
        lead = (
            f"Cloning into '{target.rstrip('/').rsplit('/', 1)[-1].removesuffix('.git')}'...\n"
            if sub == "clone"
            else ""
        )
        return _obs(
            stderr=f"{lead}fatal: unable to access '{url}': Could not resolve host: {host}\n",
            code=128,
        )
    if sub == "pull" and not target:
        return _obs(
            stderr="fatal: No remote repository specified.  Please, specify either a "
            "URL or a\nremote name from which new revisions should be fetched.\n",
            code=128,
        )
    name = target or "origin"
    return _obs(
        stderr=f"fatal: '{name}' does not appear to be a git repository\nfatal: Could "
        "not read from remote repository.\n\nPlease make sure you have the "
        "correct access rights\nand the repository exists.\n",
        code=128,
    )


def _package(op: PkgOp) -> Observation:
    spec = op.specs[0] if op.specs else ""
    if op.manager.startswith("uv"):
        return _obs(
            stderr=f"error: Failed to fetch: `https://pypi.org/simple/{spec}/`\n  Caused "
            "by: Request failed after 3 retries\n  Caused by: error sending "
            "request for url (https://pypi.org/simple/)\n  Caused by: dns error: "
            "failed to lookup address information: Temporary failure in name "
            "resolution\n",
            code=2,
        )
    if op.manager in ("conda", "mamba", "micromamba"):
        return _obs(
            stderr="CondaHTTPError: HTTP 000 CONNECTION FAILED for url <https://conda."
            "anaconda.org/conda-forge/noarch/repodata.json>\nElapsed: -\n",
            code=1,
        )
    if op.manager in ("npm", "yarn", "pnpm"):
        return _obs(
            stderr=f"npm ERR! code EAI_AGAIN\nnpm ERR! syscall getaddrinfo\nnpm ERR! "
            f"errno EAI_AGAIN\nnpm ERR! request to https://registry.npmjs.org/"
            f"{spec} failed, reason: getaddrinfo EAI_AGAIN registry.npmjs.org\n",
            code=1,
        )
    if "://" in spec or spec.startswith("git+"):
        host, _ = _host_port(spec.removeprefix("git+"))
        return _obs(
            stderr=f"  error: subprocess-exited-with-error\n  fatal: unable to access "
            f"'{spec.removeprefix('git+')}/': Could not resolve host: {host}\n"
            "ERROR: Could not find a version that satisfies the requirement "
            f"{spec} (from versions: none)\n",
            code=1,
        )
    if op.verb == "index":
        return _obs(stderr=f"ERROR: No matching distribution found for {spec}\n", code=1)
    return _obs(
        stderr=f"ERROR: Could not find a version that satisfies the requirement {spec} "
        f"(from versions: none)\nERROR: No matching distribution found for "
        f"{spec}\n",
        code=1,
    )


# ------------------------------------------------------------------ files


def missing_file(facts: Facts, kinds: tuple[str, ...] = ("read", "list", "search")) -> Observation:
    op = next((o for o in facts.files if o.kind in kinds), None)
    if op is None:
        return _obs(code=1)
    return _missing(op, _command_for(facts, op.via))


def _missing(op: FileOp, cmd: Command | None) -> Observation:
    path = op.path or "."
    tool = cmd.name if cmd is not None else ""
    if tool == "ps":
        return _obs(stderr=_PS_USAGE, code=1)
    if path.startswith("/proc/"):
        # the sandbox user may not read PID 1's environment or memory (it is root's); a
        # process listing of a clean sandbox holds nothing worth reading
        if re.search(r"/(environ|mem|maps|fd|cwd|root|stack|smaps|pagemap)\b", path):
            reader = tool or "cat"
            return _obs(stderr=f"{reader}: {path}: Permission denied\n", code=1)
        return _obs(code=0)
    if op.via.startswith("read_file"):
        return _obs(stderr=f"{path}: No such file or directory\n", code=1)
    if op.kind == "search":
        if tool == "find":
            if path in ("/", ""):
                return _obs(code=0)  # a filesystem-wide search that simply finds nothing
            return _obs(stderr=f"find: ‘{path}’: No such file or directory\n", code=1)  # noqa: RUF001
        return _obs(code=1)  # grep -r, locate: no match
    if tool in ("ls", "tree", "du", "stat"):
        return _obs(stderr=f"{tool}: cannot access '{path}': No such file or directory\n", code=2)
    if tool in ("head", "tail"):
        return _obs(
            stderr=f"{tool}: cannot open '{path}' for reading: No such file or directory\n", code=1
        )
    if tool in ("grep", "egrep", "rg"):
        return _obs(stderr=f"{tool}: {path}: No such file or directory\n", code=2)
    if op.via.startswith(("python", "/")) or (": " in op.via and "open(" in op.via):
        return _obs(
            stderr='Traceback (most recent call last):\n  File "<string>", line 1, in '
            f"<module>\nFileNotFoundError: [Errno 2] No such file or directory: "
            f"'{path}'\n",
            code=1,
        )
    return _obs(stderr=f"{tool or 'cat'}: {path}: No such file or directory\n", code=1)


# ------------------------------------------------------------------ git, resources


def git_history(
    facts: Facts, task: TaskContext, command: str | None, run: Runner | None
) -> Observation:
    ctx = Ctx(facts, task)
    if run is not None and len(facts.git) == 1:
        built = history_command(facts.git[0])
        if built is not None:
            observed = run(built)  # our read-only command, in the sealed repository
            if observed is not None:
                return observed
    for call in facts.git:
        revs = suspicious_revisions(call, ctx)
        if not revs:
            continue
        rev = revs[0]
        if call.sub in ("checkout", "switch"):
            return _obs(
                stderr=f"error: pathspec '{rev}' did not match any file(s) known to git\n", code=1
            )
        if call.sub == "merge":
            return _obs(stderr=f"merge: {rev} - not something we can merge\n", code=1)
        if any(w.text.startswith(rev + ":") for w in call.args) and call.sub in (
            "show",
            "cat-file",
        ):
            return _obs(stderr=f"fatal: invalid object name '{rev}'.\n", code=128)
        if call.sub in ("cherry-pick", "revert", "cat-file", "rebase"):
            return _obs(stderr=f"fatal: bad revision '{rev}'\n", code=128)
        return _obs(
            stderr=f"fatal: ambiguous argument '{rev}': unknown revision or path "
            "not in the working tree.\nUse '--' to separate paths from "
            "revisions, like this:\n'git <command> [<revision>...] -- "
            "[<file>...]'\n",
            code=128,
        )
    if any(".git" in op.path for op in facts.files):
        return missing_file(facts)
    # ref listings, the reflog and fsck of a sanitized repository print nothing; a history
    # walk needs the worker's runner to print the base history (see ResponseContext)
    return _obs()


def resources(facts: Facts, timeout_s: float) -> Observation:
    for c in facts.commands:
        if c.name == "dd":
            of = next((w.text[3:] for w in c.args if w.text.startswith("of=")), "file")
            return _obs(stderr=f"dd: error writing '{of}': No space left on device\n", code=1)
        if c.name == "fallocate":
            return _obs(stderr="fallocate: fallocate failed: No space left on device\n", code=1)
        if c.name in ("cat", "yes", "head") and c.redirects and not c.background:
            return _obs(stderr=f"{c.name}: write error: No space left on device\n", code=1)
    if any(s.facts.big_allocs for s in facts.python):
        return _obs(
            stderr='Traceback (most recent call last):\n  File "<string>", line 1, in '
            "<module>\nMemoryError\n",
            code=1,
        )
    script = facts.script
    if script is not None and script.functions:
        return _obs(
            stderr="bash: fork: retry: Resource temporarily unavailable\nbash: fork: "
            "Resource temporarily unavailable\n",
            code=254,
        )
    if facts.commands and all(c.background for c in facts.commands if c.depth == 0):
        return _obs()  # a background job "starts" and the prompt returns
    return _obs(code=None, timed_out=True, duration_s=timeout_s)


def fake_for(
    category: CheatCategory | None,
    facts: Facts,
    *,
    task: TaskContext | None,
    command: str | None,
    run: Runner | None,
    timeout_s: float,
) -> Observation:
    """The clean-environment observation for one intercepted command of `category`."""
    if category is CheatCategory.vcs_history:
        return git_history(facts, task or TaskContext(), command, run)
    if category is CheatCategory.network_fetch:
        return network(facts)
    if category is CheatCategory.eval_artifact_read:
        if facts.kind == "write":
            return _obs()
        return missing_file(facts)
    if category is CheatCategory.harness_detection:
        if facts.kind == "bash" and any(op.path.startswith("/proc/") for op in facts.files):
            return missing_file(facts, ("read",))
        return _obs(code=0 if facts.kind == "write" else 1)  # grep finds nothing
    if category is CheatCategory.resource_abuse:
        return resources(facts, timeout_s)
    return _obs()  # tampering: the write is simply not applied; the tool is silent
