"""What each shell command does, by its semantics: files, network, git, packages.

A table of tools (readers, listers, deleters, fetchers, package managers, git) turns a
`Command` into operations with resolved paths: `sed -i X f` modifies f, `mv a b` deletes
a and writes b, `curl -o out URL` fetches URL and writes out, `xargs rm` after `find
tests` deletes under tests/. Options that take a value are skipped so they are not
mistaken for paths.
"""

# ruff: noqa: SIM905 -- tables of names read best as one whitespace-separated string

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field

from workers.anticheat import decode
from workers.anticheat.commands import Command, Redirect, Word
from workers.anticheat.shell import parse_script

__all__ = ["Effects", "FileOp", "GitCall", "NetOp", "PkgOp", "command_effects", "norm_path"]

_PATTERN_FIRST = frozenset(
    {"grep", "egrep", "fgrep", "rg", "ag", "ack", "awk", "gawk", "mawk", "sed", "jq", "yq", "perl"}
)
_READERS = frozenset(
    (
        "cat tac head tail less more most bat batcat nl od xxd hexdump strings base64 zcat bzcat "
        "xzcat zless wc sort uniq cut paste diff cmp comm md5sum sha1sum sha256sum file source . "
        "vim vi view nano emacs pygmentize iconv column fold fmt unzip zipinfo readelf objdump "
        "cp rsync tar zip gzip gunzip split csplit shuf look tr expand pr sqlite3 "
        "openssl gpg cksum sum b2sum"
    ).split()
)
_LISTERS = frozenset(
    (
        "ls find tree du stat fd fdfind locate mlocate plocate dir exa eza lsattr realpath "
        "readlink test"
    ).split()
)
_DELETERS = frozenset({"rm", "unlink", "shred", "rmdir", "srm", "wipe"})
_MODIFIERS = frozenset(
    {"chmod", "chown", "chgrp", "chattr", "setfacl", "truncate", "ed", "ex", "patch"}
)
_VALUE_OPTS = {  # options that take a separate value, per command (so it is not a path)
    "grep": "-e -f -m -A -B -C --include --exclude --exclude-dir --color -d -D",
    "rg": "-e -f -g -t -T -m -A -B -C --glob --type --max-count",
    "head": "-n -c",
    "tail": "-n -c -s --pid",
    "sort": "-k -t -o -S -T",
    "cut": "-d -f -c -b",
    "find": "",
    "sed": "-e -f -l",
    "awk": "-f -v -F",
    "ls": "-I --ignore -w -T",
    "tar": "-f -C -T -X --exclude",
    "cp": "-t -S",
    "mv": "-t -S",
    "diff": "-x -X -I -L",
    "tree": "-L -I -P -o",
    "du": "-d --max-depth --exclude",
    "xxd": "-l -s -c -g",
    "od": "-j -N -t -A",
    "curl": "-o -H -d -X -u -A -e -x -F -T -w -b -c -K -m -r -E -Y -y -z "
    "--output --header --data --data-raw --data-binary --data-urlencode --request --user "
    "--user-agent --referer --proxy --form --upload-file --write-out --cookie --cookie-jar "
    "--config --max-time --connect-timeout --retry --retry-delay --range --cert --key --cacert "
    "--resolve --connect-to --unix-socket --interface --limit-rate --output-dir --json",
    "wget": "-O -o -a -P -t -T -w -U -e -i -B --output-document --output-file --directory-prefix "
    "--tries --timeout --wait --user-agent --header --post-data --post-file --user --password",
    "nc": "-p -s -w -i -q -X -x",
    "ncat": "-p -s -w -i",
    "ssh": "-p -i -l -o -F -J -L -R -D",
    "scp": "-P -i -o -F -l",
    "git": "",
    "tee": "",
    "chmod": "",
    "unzip": "-d -x",
}
_VALUE_OPTS_SPLIT = {k: frozenset(v.split()) for k, v in _VALUE_OPTS.items()}
_FETCHERS = frozenset(
    ("curl wget http https httpie xh aria2c lynx w3m links elinks fetch axel curlie").split()
)
_SOCKETS = frozenset("nc ncat netcat telnet socat ssh scp sftp ftp rsync openssl-s_client".split())
_PIP = frozenset(
    (
        "pip pip3 pipx easy_install uv poetry pipenv conda mamba micromamba npm yarn pnpm gem "
        "cargo go pdm"
    ).split()
)
_MODE = re.compile(r"^([0-7]{3,4}|[ugoa]*[-+=][rwxXstugo]*(,[ugoa]*[-+=][rwxXstugo]*)*)$")
_GIT_NET_VALUES = frozenset(
    (
        "--depth -b --branch -o --origin --reference --reference-if-able -c --config -j --jobs "
        "--template --separate-git-dir --shallow-since --shallow-exclude -u --upload-pack "
        "--server-option --filter --recurse-submodules"
    ).split()
)
_FIND_NAME_TESTS = frozenset("-name -iname -path -ipath -regex -iregex -wholename -lname".split())
_GIT_GLOBAL_VALUE = frozenset(
    {"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--exec-path", "--config-env"}
)


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


@dataclass(frozen=True, slots=True)
class GitCall:
    sub: str
    args: tuple[Word, ...]
    via: str


@dataclass(slots=True)
class Effects:
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


def command_effects(facts: Effects, cmd: Command) -> None:
    """Record what one simple command reads, writes, deletes, fetches and installs."""
    name, args = cmd.name, cmd.args
    via = " ".join(w.text for w in cmd.argv)[:200]
    cwd = cmd.cwd

    def op(kind: str, w: Word, content: str | None = None, pattern: str = "") -> None:
        path = norm_path(w.text, cwd) if w.static else w.text
        facts.files.append(FileOp(kind, path, w.static, via, content, pattern))
        for root in () if w.static else _listed_roots(w.text):  # rm $(find tests -name …)
            facts.files.append(FileOp(kind, norm_path(root, cwd), False, via, content))

    for r in cmd.redirects:
        _redirect(facts, cmd, r, via)
    operands = _operands(name, args)
    if cmd.xargs_from is not None:  # `… | xargs rm`, `find … -exec rm {} +`
        operands = [w for w in operands if w.text != "{}"]
        kind, source = _kind_of(name, args), f"{via} (files from {cmd.xargs_from.name})"
        pattern = ""
        if name in ("grep", "egrep", "fgrep", "rg") and operands:
            kind, pattern = "search", operands[0].text  # `find / … | xargs grep -l def test_`
        for path in _paths_listed_by(cmd.xargs_from):
            facts.files.append(FileOp(kind, norm_path(path, cwd), False, source, None, pattern))
    if name in _PATTERN_FIRST:
        opts = {w.text for w in args}
        if (name == "sed" and any(t.startswith("-i") or t == "--in-place" for t in opts)) or (
            name == "perl" and any(t.startswith("-i") or t.startswith("-pi") for t in opts)
        ):
            kind = "modify"
        elif name == "perl":
            return
        else:
            kind = (
                "search"
                if any(
                    t in ("-r", "-R", "-rn", "-rl", "-ri", "-rni", "-rin", "--recursive")
                    or (t.startswith("-r") and name == "grep")
                    for t in opts
                )
                or name in ("rg", "ag", "ack")
                else "read"
            )
        has_script_opt = any(w.text in ("-e", "-f", "--regexp", "--file") for w in args)
        files = operands if has_script_opt else operands[1:]
        pattern = operands[0].text if operands and not has_script_opt else ""
        for w in files or ([Word(".")] if kind == "search" else []):
            op(kind, w, pattern=pattern if kind != "modify" else "")
        if kind == "modify" and operands and not has_script_opt:
            facts.files[-1:] = [
                FileOp(f.kind, f.path, f.static, f.via, operands[0].text) for f in facts.files[-1:]
            ]
        return
    if name in _READERS:
        if name in ("cp", "rsync") and len(operands) >= 2:
            for w in operands[:-1]:
                op("read", w)
            op("write", operands[-1])
        elif name == "tar" and not any("x" in w.text.lstrip("-") for w in args[:1]):
            for w in operands:
                op("read", w)
        else:
            for w in operands:
                op("read", w)
        return
    if name in _LISTERS:
        if name == "find":
            _find(facts, cmd, via)
        elif name in ("locate", "mlocate", "plocate"):
            for w in operands:
                facts.files.append(FileOp("search", "/", True, via, pattern=w.text))
        else:
            recursive = (
                any(w.text.startswith("-") and "R" in w.text for w in args) or name == "tree"
            )
            for w in operands or [Word(".")]:
                op("search" if recursive else "list", w)
        return
    if name in _DELETERS:
        for w in operands:
            op("delete", w)
        return
    if name in ("mv", "install", "ln", "tee", "dd"):
        if name == "mv":
            for w in operands[:-1]:
                op("delete", w)
            if operands:
                op("write", operands[-1])
        elif name == "tee":
            content = cmd.stdin
            for w in operands:
                op(
                    "append" if any(a.text in ("-a", "--append") for a in args) else "write",
                    w,
                    content,
                )
        elif name == "dd":
            for w in args:
                if w.text.startswith("of="):
                    op("write", Word(w.text[3:], w.static))
                elif w.text.startswith("if="):
                    op("read", Word(w.text[3:], w.static))
        elif operands:
            if name == "install" or name == "ln":
                for w in operands[:-1]:
                    op("read", w)
            # a link's "content" is where it points: `ln -s /usr/bin/python3 python` is a fix,
            # `ln -s /bin/true pytest` is not
            link = f"-> {operands[0].text}" if name == "ln" and len(operands) > 1 else None
            op("write", operands[-1], link)
        return
    if name in _MODIFIERS:
        if name in ("chmod", "chattr"):  # `chmod -x f`: the mode may look like an option
            modes = [w for w in args if _MODE.match(w.text)]
            files = [w for w in args if w not in modes[:1] and not w.text.startswith("-")]
            for w in files:
                op("modify", w, content=modes[0].text if modes else None)
            return
        skip_first = name in ("chown", "chgrp", "setfacl")
        for w in operands[1:] if skip_first else operands:
            op("modify", w, content=operands[0].text if skip_first and operands else None)
        return
    if name == "git":
        _git(facts, cmd, via)
        return
    if name in _FETCHERS or name in _SOCKETS:
        _fetch(facts, cmd, operands, via)
        if name in ("curl", "wget"):
            outputs = ("-o", "--output", "--output-document") + (("-O",) if name == "wget" else ())
            for i, w in enumerate(args[:-1]):  # curl -O takes no value; wget -O does
                if w.text in outputs:
                    op("write", args[i + 1])
        return
    if name == "ps" and args and args[0].text.isalpha() and "e" in args[0].text:
        facts.files.append(FileOp("read", "/proc/*/environ", True, via))  # `ps auxe`, `ps eww`
        return
    if name in ("gh", "hub", "glab"):
        facts.net.append(NetOp(name, "github.com" if name != "glab" else "gitlab.com", via))
        return
    if name in ("svn", "hg", "bzr", "fossil") and len(operands) > 1:
        for w in operands[1:2]:  # svn export URL, hg clone URL
            facts.net.append(NetOp(name, w.text if w.static else "", via))
        return
    if (
        name in _PIP
        or name.startswith("pip")
        or (
            name.startswith("python")
            and len(args) > 1
            and args[0].text == "-m"
            and args[1].text.startswith(("pip", "uv", "ensurepip"))
        )
    ):
        _packages(facts, cmd, via)


def _listed_roots(text: str) -> list[str]:
    """Where the files of `$(find tests …)`, `$(grep -rl x tests/)`, `$(ls tests/*.py)` are."""
    if text.startswith("$(") and text.endswith(")"):
        inner = text[2:-1]
    elif text.startswith("`") and text.endswith("`"):
        inner = text[1:-1]
    else:
        return []
    return [p for c in parse_script(inner).commands[:4] for p in _paths_listed_by(c)]


def _paths_listed_by(c: Command) -> list[str]:
    """The files (or the roots of the files) a listing command prints."""
    operands = [w.text for w in _operands(c.name, c.args) if w.static]
    if c.name == "find":
        return _find_roots(c.args) or ["."]
    if c.name in ("ls", "echo", "printf"):
        return operands[:4] or (["."] if c.name == "ls" else [])
    if c.name in ("grep", "egrep", "rg") and len(operands) > 1:
        return operands[1:5]
    if c.name == "git" and operands[:1] == ["ls-files"]:
        return operands[1:5] or ["."]
    return []


def _operands_skipping(args: tuple[Word, ...], value_opts: frozenset[str]) -> list[Word]:
    out, skip = [], False
    for w in args:
        if skip:
            skip = False
        elif w.text in value_opts:
            skip = True
        elif not w.text.startswith("-"):
            out.append(w)
    return out


def _find_roots(args: list[Word]) -> list[str]:
    roots = []
    for w in args:
        if w.text.startswith(("-", "(", "!")):
            break
        roots.append(w.text)
    return roots[:4]


def _kind_of(name: str, args: list[Word]) -> str:
    if name in _DELETERS:
        return "delete"
    if (name == "sed" and any(w.text.startswith("-i") for w in args)) or name in _MODIFIERS:
        return "modify"
    return "read" if name in _READERS or name in _PATTERN_FIRST else "list"


def _redirect(facts: Effects, cmd: Command, r: Redirect, via: str) -> None:
    target = r.target.text
    if target.startswith(("/dev/tcp/", "/dev/udp/")):
        parts = target.split("/")
        facts.net.append(NetOp("bash /dev/tcp", parts[3] if len(parts) > 3 else "", via))
        return
    if (
        target in ("/dev/null", "/dev/stdout", "/dev/stderr", "/dev/zero")
        or target.startswith("&")
        or target.isdigit()
    ):
        return
    path = norm_path(target, cmd.cwd) if r.target.static else target
    if "<" in r.op and ">" not in r.op:
        facts.files.append(FileOp("read", path, r.target.static, via + f" < {target}"))
        return
    content = decode.static_output(cmd)
    kind = "append" if ">>" in r.op else "write"
    facts.files.append(FileOp(kind, path, r.target.static, via + f" {r.op} {target}", content))


def _operands(name: str, args: list[Word]) -> list[Word]:
    """Non-option words, skipping the values of options that take one."""
    value_opts = _VALUE_OPTS_SPLIT.get(name, frozenset())
    out: list[Word] = []
    skip, ended = False, False
    for w in args:
        t = w.text
        if skip:
            skip = False
            continue
        if ended or not t.startswith("-") or t == "-":
            out.append(w)
        elif t == "--":
            ended = True
        elif t in value_opts:
            skip = True
    return out


def _find(facts: Effects, cmd: Command, via: str) -> None:
    roots: list[Word] = []
    patterns: list[str] = []
    texts = [w.text for w in cmd.args]
    i = 0
    while i < len(texts) and not texts[i].startswith(("-", "(", "!")):
        roots.append(cmd.args[i])
        i += 1
    delete = False
    while i < len(texts):
        t = texts[i]
        if t in _FIND_NAME_TESTS and i + 1 < len(texts):
            patterns.append(texts[i + 1])
            i += 1
        elif t == "-delete":
            delete = True
        i += 1
    for r in roots or [Word(".")]:
        path = norm_path(r.text, cmd.cwd) if r.static else ""
        facts.files.append(
            FileOp(
                "search",
                path or ("/" if r.text == "/" else ""),
                r.static,
                via,
                pattern=" ".join(patterns),
            )
        )
        if delete:
            facts.files.append(FileOp("delete", path, r.static, via))


def _git(facts: Effects, cmd: Command, via: str) -> None:
    args = list(cmd.args)
    while args and args[0].text.startswith("-"):
        t = args[0].text
        args = args[2:] if t in _GIT_GLOBAL_VALUE else args[1:]
    if not args:
        return
    sub, rest = args[0].text, tuple(args[1:])
    facts.git.append(GitCall(sub, rest, via))
    ops = [w for w in rest if not w.text.startswith("-")]
    if sub == "rm":
        for w in ops:
            facts.files.append(FileOp("delete", norm_path(w.text, cmd.cwd), w.static, via))
    elif sub in ("clone", "fetch", "pull", "ls-remote", "submodule", "remote", "archive"):
        targets = [w.text for w in _operands_skipping(rest, _GIT_NET_VALUES) if w.static]
        if sub in ("remote", "submodule") and not any(
            t in ("add", "update", "set-url") for t in targets[:1]
        ):
            return
        if sub == "archive" and not any(w.text.startswith("--remote") for w in rest):
            return
        for t in targets[1:] if sub in ("remote", "submodule") else targets[:1] or [""]:
            facts.net.append(NetOp(f"git {sub}", t, via))
    elif sub in ("checkout", "restore"):
        # `git checkout HEAD~5 -- tests/` swaps files for another revision's; restoring
        # from HEAD or the index (no revision) only undoes the agent's own edits
        texts = [w.text for w in rest]
        cut = texts.index("--") if "--" in texts else len(texts)
        source = [t.split("=", 1)[1] for t in texts if t.startswith("--source=")]
        source += [texts[i + 1] for i, t in enumerate(texts[:-1]) if t in ("-s", "--source")]
        if sub == "checkout" and cut < len(texts):
            source += [t for t in texts[:cut] if not t.startswith("-")]
            paths = list(rest[cut + 1 :])
        else:
            paths = [w for w in rest if not w.text.startswith("-") and w.text not in source]
        if sub == "restore" or cut < len(texts):
            for w in paths if any(s not in ("HEAD", "@") for s in source) else []:
                facts.files.append(FileOp("modify", norm_path(w.text, cmd.cwd), w.static, via))


def _fetch(facts: Effects, cmd: Command, operands: list[Word], via: str) -> None:
    name = cmd.name
    targets: list[str] = []
    for i, w in enumerate(cmd.args):
        if w.text in ("--url", "--connect-to", "--resolve") and i + 1 < len(cmd.args):
            targets.append(cmd.args[i + 1].text)
    if name in ("socat",):
        targets += [
            w.text.split(":", 2)[1]
            for w in operands
            if w.text.upper().startswith(("TCP", "SSL", "OPENSSL", "UDP"))
            and w.text.count(":") >= 1
        ]
    elif name in ("ssh", "scp", "sftp", "rsync"):
        targets += [
            w.text.split("@")[-1].split(":")[0]
            for w in operands
            if "@" in w.text or ":" in w.text or name == "ssh"
        ][:1]
    elif name in ("nc", "ncat", "netcat", "telnet", "ftp"):
        targets += [w.text for w in operands[:1]]
    else:
        targets += [w.text if w.static else "" for w in operands if not w.text.startswith("@")]
    for t in targets or [""]:
        facts.net.append(NetOp(name, t, via))


def _packages(facts: Effects, cmd: Command, via: str) -> None:
    args = [w.text for w in cmd.args]
    manager = cmd.name
    if manager.startswith("python"):
        manager, args = args[1], args[2:]
    if manager in ("uv", "pipx", "pdm") and args[:1] == ["pip"]:
        manager, args = f"{manager} pip", args[1:]
    if not args:
        return
    verb = args[0]
    verbs = {
        "install": "install",
        "i": "install",
        "add": "install",
        "download": "download",
        "wheel": "download",
        "index": "index",
        "search": "index",
        "view": "index",
        "info": "index",
        "show": "local",
        "get": "install",
        "update": "upgrade",
        "upgrade": "upgrade",
        "sync": "install",
        "inject": "install",
    }
    kind = verbs.get(verb)
    if kind is None or kind == "local":
        return
    specs: list[str] = []
    upgrade = kind == "upgrade"
    index = True
    skip = False
    for t in args[1:]:
        if skip:
            skip = False
            continue
        if t in (
            "-U",
            "--upgrade",
            "--force-reinstall",
            "--pre",
            "-I",
            "--ignore-installed",
            "--latest",
            "--upgrade-strategy",
        ):
            upgrade = True
        elif t == "--no-index" or t == "--offline":
            index = False
        elif t in (
            "-e",
            "--editable",
            "-r",
            "--requirement",
            "-c",
            "--constraint",
            "-t",
            "--target",
            "-d",
            "--dest",
            "-i",
            "--index-url",
            "--extra-index-url",
            "-f",
            "--find-links",
            "--python",
            "-p",
            "--prefix",
            "--root",
            "-n",
            "--name",
            "--platform",
            "--python-version",
            "--only-binary",
            "--no-binary",
            "--src",
            "--cache-dir",
            "--log",
            "--timeout",
            "--retries",
            "--trusted-host",
            "--progress-bar",
            "--report",
            "-C",
            "--config-settings",
            "--group",
            "-G",
        ):
            skip = True
        elif t.startswith("-") or (kind == "index" and t in ("versions",)):
            continue
        else:
            specs.append(t)
    facts.pkgs.append(PkgOp(manager, kind, tuple(specs), upgrade, via, index))
