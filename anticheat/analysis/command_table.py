"""What each shell command does, by its semantics: files, network, git, packages.

A table of tools (readers, listers, deleters, fetchers, package managers, git) turns a
`Command` into operations with resolved paths: `sed -i X f` modifies f, `mv a b` deletes
a and writes b, `curl -o out URL` fetches URL and writes out, `xargs rm` after `find
tests` deletes under tests/. Options that take a value are skipped so they are not
mistaken for paths.
"""

# ruff: noqa: SIM905 -- tables of names read best as one whitespace-separated string

from __future__ import annotations

import re

from anticheat.analysis import remote_commands
from anticheat.analysis.bash import decoding
from anticheat.analysis.bash.parser import parse_script
from anticheat.analysis.bash.syntax import Command, Redirect, Word
from anticheat.analysis.operations import FileOp, NetOp, Operations, norm_path
from anticheat.analysis.remote_commands import DIAGNOSTICS, FETCHERS, PACKAGE_MANAGERS, SOCKETS

__all__ = ["command_effects"]

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
    "ping": "-c -i -w -W -s -t -I -l -p -Q -M",
    "ping6": "-c -i -w -W -s -t -I -l -p -Q",
    "dig": "-b -c -f -k -p -q -t -x -y",
    "host": "-c -N -R -t -W -m",
    "traceroute": "-m -q -w -p -f -s -i -N -z -g",
    "tracepath": "-l -m -p",
    "mtr": "-c -i -s -a -B -m -f",
    "whois": "-h -p -T -i",
    "arping": "-c -I -w -s -i",
    "drill": "-c -k -p -t",
    "ssh": "-p -i -l -o -F -J -L -R -D",
    "scp": "-P -i -o -F -l",
    "git": "",
    "tee": "",
    "chmod": "",
    "unzip": "-d -x",
}
_VALUE_OPTS_SPLIT = {k: frozenset(v.split()) for k, v in _VALUE_OPTS.items()}
_MODE = re.compile(r"^([0-7]{3,4}|[ugoa]*[-+=][rwxXstugo]*(,[ugoa]*[-+=][rwxXstugo]*)*)$")
_FIND_NAME_TESTS = frozenset("-name -iname -path -ipath -regex -iregex -wholename -lname".split())


def command_effects(facts: Operations, cmd: Command) -> None:
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
        remote_commands.git(facts, cmd, via)
        return
    if name in FETCHERS or name in SOCKETS or name in DIAGNOSTICS:
        remote_commands.fetch(facts, cmd, operands, via)
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
        name in PACKAGE_MANAGERS
        or name.startswith("pip")
        or (
            name.startswith("python")
            and len(args) > 1
            and args[0].text == "-m"
            and args[1].text.startswith(("pip", "uv", "ensurepip"))
        )
    ):
        remote_commands.packages(facts, cmd, via)


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


def _redirect(facts: Operations, cmd: Command, r: Redirect, via: str) -> None:
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
    # `: > f` and `true > f` print nothing: the file is left empty
    content = "" if cmd.name in (":", "true") else decoding.static_output(cmd)
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


def _find(facts: Operations, cmd: Command, via: str) -> None:
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
