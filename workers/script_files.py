"""The text of the scripts an action runs, read from the sandbox just before it runs.

The rule filter names them (`Facts.runs`: `bash x.sh`, `python t.py`, `./run`, `make`); what
they hold is whatever earlier actions left there, by any tool, so it is read now, in one
runner exec for all of them, and screened as if the action had written it.

    {path: text}   the file, as it is now
    {path: None}   there, but not readable in full: too big, a link, not a regular file,
                   or the runner could not answer (the rule filter reviews the action)
    (absent)       no such file: nothing of it runs

Each file is read from its own directory (`Read(root=dirname)`), so no path component of
the agent's workspace is touched on the way; a directory listing tells a missing file from
one that is there but could not be opened (a symbolic link, say).
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Iterable
from typing import Any

from anticheat.analysis.limits import MAX_PY_SOURCE
from anticheat.analysis.scripts import WRITABLE
from workers.actions import ACTION_ENV, SHELL_STATE
from workers.sandbox.protocol import WORKSPACE, Listing, ListingResult, Op, Read, RunnerError
from workers.sandbox.sandbox import RunnerBroken, Sandbox

__all__ = ["SCRIPT_BYTES", "read_scripts"]

log = logging.getLogger(__name__)

# Largest script screened whole: the rule filter's cap on one Python source (bash past its
# own smaller cap is screened by its head and reviewed, as a bash action would be).
SCRIPT_BYTES = MAX_PY_SOURCE
READ_TIMEOUT_S = 10.0
HOME = ACTION_ENV["HOME"]


def read_scripts(sandbox: Sandbox, paths: Iterable[str]) -> dict[str, str | None]:
    """The current text of `paths` (as the analysis names them: relative to the shell's
    working directory, absolute, or `~/…`), by path; see the module docstring."""
    wanted = list(dict.fromkeys(paths))
    if not wanted:
        return {}
    relative = [p for p in wanted if not p.startswith(("/", "~"))]
    cwd_op = Read(root=SHELL_STATE, paths=["cwd"], max_bytes=4096, keep_going=True)
    # guess the workspace for the relative ones; a second exec only when the shell is elsewhere
    first = {p: _absolute(p, WORKSPACE) for p in wanted}
    try:
        found, reply_cwd = _read(sandbox, first, cwd_op if relative else None)
        cwd = _cwd(reply_cwd)
        if relative and cwd != WORKSPACE:
            moved = {p: _absolute(p, cwd) for p in relative}
            again, cwd_ok = _read(sandbox, moved, Listing(root=cwd, keep_going=True))
            if cwd_ok is not None:  # the shell goes back to the workspace when it cannot cd
                for p in relative:
                    found.pop(p, None)
                found.update(again)
    except RunnerBroken as exc:  # the code under test broke the runner: nothing was read
        log.info("episode %s: scripts could not be read: %s", sandbox.episode_id, exc)
        return dict.fromkeys(wanted)
    return found


def _absolute(path: str, cwd: str) -> str | None:
    if path == "~" or path.startswith("~/"):
        full = HOME + path[1:]
    else:
        full = posixpath.normpath(posixpath.join(cwd, path))
    roots = [HOME if w == "~" else w for w in WRITABLE]
    if not any(full == r or full.startswith(r + "/") for r in roots):
        return None  # the read-only image: nothing the agent wrote
    return full


def _cwd(result: str | None) -> str:
    """The persistent shell's directory, as `workers.actions.shell_command` restores it."""
    if not result:
        return WORKSPACE
    text = result.rstrip("\n")  # what `$(cat …)` gives
    return posixpath.normpath(posixpath.join(WORKSPACE, text)) if text else WORKSPACE


def _read(
    sandbox: Sandbox, where: dict[str, str | None], extra: Op[Any] | None
) -> tuple[dict[str, str | None], Any]:
    """Read each file from its directory; `extra`'s outcome comes back beside them (the
    text of a Read, a Listing's result, or None when it raised)."""
    reads: dict[str, Read] = {}
    listings: dict[str, Listing] = {}
    for path, full in where.items():
        if full is None or full in (WORKSPACE, HOME):
            continue
        directory, name = posixpath.split(full)
        reads[path] = Read(
            root=directory, paths=[name], max_bytes=SCRIPT_BYTES + 1, keep_going=True
        )
        listings.setdefault(directory, Listing(root=directory, keep_going=True))
    ops: list[Op[Any]] = [*reads.values(), *listings.values()]
    if extra is not None:
        ops.append(extra)
    if not ops:
        return {}, None
    reply = sandbox.program(ops, timeout_s=READ_TIMEOUT_S)
    found: dict[str, str | None] = {}
    for path, op in reads.items():
        name = op.paths[0]
        result = reply.get(op)
        if isinstance(result, RunnerError) or result is None:
            if result is not None and result.exception == "IsADirectoryError":
                continue  # a directory runs its __main__.py, named on its own
            found[path] = None
            continue
        text = result.files.get(name)
        if text is None and _listed(reply.get(listings[op.root]), name):
            found[path] = None  # there, but not a regular file we could open
        if text is not None:
            found[path] = _whole(text)
    outcome: Any = None
    if isinstance(extra, Read):
        got = reply.result(extra)
        outcome = got.files.get(extra.paths[0]) if got is not None else None
    elif extra is not None:
        outcome = reply.result(extra)
    return found, outcome


def _listed(listing: ListingResult | RunnerError | None, name: str) -> bool:
    """Whether `name` is in its directory; a directory that is not there holds nothing."""
    if isinstance(listing, ListingResult):
        return name in listing.stdout.split("\n")[1:]
    return listing is None or listing.exception not in ("FileNotFoundError", "NotADirectoryError")


def _whole(text: str) -> str | None:
    """The text if it was read in full (a compiled program's head is enough: not a script)."""
    if "\0" in text[:4096]:
        return text[:4096]
    if len(text) > SCRIPT_BYTES or len(text.encode("utf-8", "surrogatepass")) > SCRIPT_BYTES:
        return None
    return text
