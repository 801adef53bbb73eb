"""The operations an action performs, as the rules see them: file, network, git, package."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field

from anticheat.analysis.bash.syntax import Word

__all__ = ["FileOp", "GitCall", "NetOp", "Operations", "PkgOp", "norm_path"]


@dataclass(frozen=True, slots=True)
class FileOp:
    kind: str  # read | list | search | write | append | modify | delete
    path: str  # normalised; may hold globs; '' when not static
    static: bool
    via: str  # what does it, for the evidence
    content: str | None = None  # for write/append, when known
    pattern: str = ""  # for search: the names being looked for
    protected_ok: bool = False  # a write the agent may do to a protected path (new file)


@dataclass(frozen=True, slots=True)
class NetOp:
    tool: str
    target: str  # a URL, host or address; '' when not static
    via: str
    written: str | None = None  # the file, when it is code written now to run later


@dataclass(frozen=True, slots=True)
class PkgOp:
    manager: str
    verb: str  # install | download | index | wheel | add | info
    specs: tuple[str, ...]
    upgrade: bool
    via: str
    index: bool = True  # talks to a package index (not --no-index)
    elsewhere: bool = False  # into a directory of its own (--target, --prefix, download -d)


@dataclass(frozen=True, slots=True)
class GitCall:
    sub: str
    args: tuple[Word, ...]
    via: str


@dataclass(slots=True)
class Operations:
    """Operations of an action, in the order they were found."""

    files: list[FileOp] = field(default_factory=list)
    net: list[NetOp] = field(default_factory=list)
    pkgs: list[PkgOp] = field(default_factory=list)
    git: list[GitCall] = field(default_factory=list)


def norm_path(path: str, cwd: str | None = "") -> str:
    if not path:
        return ""
    if not path.startswith(("/", "~")) and cwd:
        path = posixpath.join(cwd, path)
    path = posixpath.normpath(path)
    return "" if path == "." else path.removeprefix("./")
