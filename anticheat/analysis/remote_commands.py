"""Commands that reach beyond the sandbox: fetchers, sockets, git remotes, package managers.

`curl`/`wget`/`nc`/`ssh` become network operations with their targets (option values
skipped), `git clone/fetch/pull/ls-remote/remote add` become git calls and remote
fetches, and `pip`/`uv`/`conda`/`npm` … become package operations with their specs and
whether they upgrade, download or only consult the index.
"""

# ruff: noqa: SIM905 -- tables of names read best as one whitespace-separated string

from __future__ import annotations

from anticheat.analysis.bash.syntax import Command, Word
from anticheat.analysis.operations import FileOp, GitCall, NetOp, Operations, PkgOp, norm_path

__all__ = ["DIAGNOSTICS", "FETCHERS", "PACKAGE_MANAGERS", "SOCKETS", "fetch", "git", "packages"]

FETCHERS = frozenset(
    ("curl wget http https httpie xh aria2c lynx w3m links elinks fetch axel curlie").split()
)
SOCKETS = frozenset("nc ncat netcat telnet socat ssh scp sftp ftp rsync openssl-s_client".split())
# network diagnostics: each asks a resolver or a host outside the sandbox about a name
DIAGNOSTICS = frozenset(
    "nslookup dig host drill ping ping6 traceroute traceroute6 tracepath mtr whois arping".split()
)
PACKAGE_MANAGERS = frozenset(
    (
        "pip pip3 pipx easy_install uv poetry pipenv conda mamba micromamba npm yarn pnpm gem "
        "cargo go pdm"
    ).split()
)
# a network tool asked only what it is (`curl --version`, `nc -h`) reaches nothing
_SELF_ONLY = frozenset("--version -V --help -h --manual -M".split())
_RECORD_TYPES = frozenset("A AAAA ANY CNAME MX NS PTR SOA SRV TXT CAA DS DNSKEY AXFR".split())
# where pip, uv and their kin fetch from: an index other than PyPI is a host like any other
_INDEX_OPTS = frozenset(
    "-i --index-url --extra-index-url -f --find-links --index --default-index".split()
)
# installs that do not touch the environment (which holds the task's checkout)
_ELSEWHERE_OPTS = frozenset("-t --target --prefix --root -d --dest --dist-dir".split())
_GIT_NET_VALUES = frozenset(
    (
        "--depth -b --branch -o --origin --reference --reference-if-able -c --config -j --jobs "
        "--template --separate-git-dir --shallow-since --shallow-exclude -u --upload-pack "
        "--server-option --filter --recurse-submodules"
    ).split()
)
_GIT_GLOBAL_VALUE = frozenset(
    {"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--exec-path", "--config-env"}
)


def git(facts: Operations, cmd: Command, via: str) -> None:
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


def fetch(facts: Operations, cmd: Command, operands: list[Word], via: str) -> None:
    name = cmd.name
    if cmd.args and all(w.static and w.text in _SELF_ONLY for w in cmd.args):
        return
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
    elif name in DIAGNOSTICS:
        # `dig @server name`: both are asked; `nslookup name server` too; a record type
        # (`dig name MX`, `host -t`'s value is skipped as an option's) is no host
        named = [w for w in operands if w.text.upper() not in _RECORD_TYPES]
        targets += [w.text.lstrip("@") if w.static else "" for w in named[:2]]
    else:
        targets += [w.text if w.static else "" for w in operands if not w.text.startswith("@")]
    for t in targets or [""]:
        facts.net.append(NetOp(name, t, via))


def packages(facts: Operations, cmd: Command, via: str) -> None:
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
    elsewhere = kind == "download"
    pip_like = manager.startswith(("pip", "uv", "easy_install"))
    indexes: list[tuple[str, str]] = []  # (option, URL): where the packages come from
    skip = False
    for i, t in enumerate(args[1:], 1):
        if skip:
            skip = False
            continue
        option, eq, value = t.partition("=")
        if pip_like and option in _INDEX_OPTS and (eq or i + 1 < len(args)):
            indexes.append((option, value if eq else args[i + 1]))
        elif pip_like and option in _ELSEWHERE_OPTS:
            elsewhere = True  # a fresh copy beside the environment, not an upgrade of it
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
    facts.pkgs.append(PkgOp(manager, kind, tuple(specs), upgrade, via, index, elsewhere))
    for option, url in indexes if index else []:
        facts.net.append(NetOp(f"{manager} {option}", url, via))


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
