"""What the calls and definitions in analysed Python do (the effects half of `analyzer`).

Files opened, network endpoints reached, subprocesses started, huge allocations, probes
for the test harness, pytest hooks that rewrite outcomes or hide tests, and which exits
run at import time: recorded into `PyFacts` as evidence the rules can quote.
"""

# ruff: noqa: SIM905 -- tables of names read best as one whitespace-separated string

from __future__ import annotations

import ast
import math
import shlex

from anticheat.analysis.python.facts import PyFacts
from anticheat.analysis.python.folding import (
    HUGE,
    closure,
    constant_returns,
    fold,
    harness_env,
    is_skip_mark,
    pattern,
    src,
    strings,
)

__all__ = ["DECODERS", "EXITS", "HARNESS_MODULES", "CallEffects"]

EXITS = {"sys.exit", "exit", "quit", "os._exit", "posix._exit", "builtins.exit", "os.abort"}
MAIN_NAMES = frozenset({"main", "_main", "cli", "run", "entrypoint", "entry_point"})
HARNESS_MODULES = frozenset(
    ("pytest _pytest unittest doctest nose py.test conftest pytest_timeout xdist").split()
)
_NET_EXACT = frozenset(
    (
        "urllib.request.urlopen urllib.request.urlretrieve urllib.urlopen urllib2.urlopen "
        "socket.create_connection socket.getaddrinfo socket.gethostbyname webbrowser.open "
        "xmlrpc.client.ServerProxy http.client.HTTPConnection http.client.HTTPSConnection "
        "ftplib.FTP ftplib.FTP_TLS smtplib.SMTP smtplib.SMTP_SSL telnetlib.Telnet "
        "websockets.connect websocket.create_connection asyncio.open_connection "
        "urllib.request.build_opener().open"
    ).split()
)
_NET_ROOTS = frozenset(
    (
        "requests httpx aiohttp urllib3 http socket paramiko pycurl websocket websockets urllib"
    ).split()
)
_NET_VERBS = frozenset(
    (
        "get post put patch delete head options request urlopen connect connect_ex stream send "
        "fetch open sendto"
    ).split()
)
_SHELL = {
    "os.system": True,
    "os.popen": True,
    "subprocess.getoutput": True,
    "subprocess.getstatusoutput": True,
    "commands.getoutput": True,
    "asyncio.create_subprocess_shell": True,
    "subprocess.run": False,
    "subprocess.call": False,
    "subprocess.check_call": False,
    "subprocess.check_output": False,
    "subprocess.Popen": False,
    "pty.spawn": False,
    "asyncio.create_subprocess_exec": False,
    **dict.fromkeys(
        (
            "os.execv os.execve os.execvp os.execvpe os.execl os.execle os.execlp os.execlpe "
            "os.spawnv os.spawnve os.spawnvp os.spawnvpe os.spawnl os.spawnle os.spawnlp "
            "os.spawnlpe os.posix_spawn os.posix_spawnp"
        ).split(),
        False,
    ),
}
# a word of an argv list only known at run time, as the shell would see it
_RUNTIME_WORD = '"$PYARG"'
DECODERS = tuple(
    (
        "base64. binascii. codecs.decode zlib.decompress bytes.fromhex marshal.loads "
        "gzip.decompress lzma.decompress bz2.decompress"
    ).split()
)
_CONFIG_HOOKS = frozenset(
    (
        "pytest_configure pytest_cmdline_main pytest_load_initial_conftests pytest_cmdline_preparse"
    ).split()
)
_OPEN_READ = ("read_text", "read_bytes", "iterdir", "glob", "rglob", "open")
_OPEN_WRITE = ("write_text", "write_bytes", "touch", "mkdir", "symlink_to", "hardlink_to")
_OPEN_DELETE = ("unlink", "rmdir", "rename", "replace")


class CallEffects:
    """Mixed into the analyser: it provides `f`, `resolve` and the call-graph fields."""

    f: PyFacts
    func_exits: dict[str, list[tuple[str, bool, object]]]
    calls_from: dict[str, set[str]]
    forking: set[str]
    consts: dict[str, str]  # names bound once, to a constant string
    seqs: dict[str, ast.expr]  # names bound once, to a list or tuple display
    path_vars: dict[str, ast.expr]  # names bound once, to a `Path(…)` or `Path / "x"`

    def resolve(self, node: ast.AST | None, _d: int = 0) -> str | None:
        raise NotImplementedError

    def resolve_deco(self, node: ast.AST) -> str:
        raise NotImplementedError

    def compare(self, node: ast.Compare) -> None:
        parts = [node.left, *node.comparators]
        consts = [fold(p) for p in parts]
        # `name in ('pytest', 'py.test')`: each member of a constant tuple is compared
        strs = [
            s
            for c in consts
            for s in (c if isinstance(c, (tuple, list, frozenset)) else (c,))
            if isinstance(s, str)
        ]
        if not strs:
            return
        others = " ".join(
            src(p)
            for p, c in zip(parts, consts, strict=True)
            if not isinstance(c, (str, tuple, list, frozenset))
        )
        names = {self.resolve(p) for p in parts}
        if names & {"sys.modules", "os.environ"} and any(
            s in HARNESS_MODULES or harness_env(s) for s in strs
        ):
            self.f.harness_probes.append(f"checks for the test harness: {src(node)}")
        elif any(
            s.lower() in ("pytest", "py.test", "_pytest", "unittest", "conftest") for s in strs
        ) or (
            any("test" in s.lower() for s in strs)
            and any(
                k in others
                for k in (
                    "argv",
                    "filename",
                    "co_filename",
                    "stack",
                    "f_code",
                    "getppid",
                    "cmdline",
                    "__file__",
                    "f_back",
                )
            )
        ):
            self.f.harness_probes.append(f"checks how it is being run: {src(node)}")

    def pytest_hook(self, st: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        name = st.name
        nodes = list(ast.walk(st))
        assigned = {
            t.attr
            for n in nodes
            if isinstance(n, (ast.Assign, ast.AugAssign))
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
            if isinstance(t, ast.Attribute)
        }
        called = {self.resolve(n.func) or "" for n in nodes if isinstance(n, ast.Call)}
        attrs_called = {
            n.func.attr
            for n in nodes
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
        }
        returns_true = constant_returns(st) is True or any(
            isinstance(n, ast.Return) and n.value is not None and fold(n.value) is True
            for n in nodes
        )
        skips = any(c in ("pytest.skip", "pytest.xfail", "pytest.skip.Exception") for c in called)
        if name in (
            "pytest_runtest_makereport",
            "pytest_report_teststatus",
            "pytest_runtest_logreport",
            "pytest_runtest_logfinish",
        ):
            if (
                assigned & {"outcome", "longrepr", "wasxfail", "passed", "failed"}
                or attrs_called & {"force_result", "force_exception"}
                or any(
                    isinstance(n, ast.Return)
                    and n.value is not None
                    and "passed" in str(fold(n.value))
                    for n in nodes
                )
            ):
                self.f.outcome_hooks.append(f"`{name}` rewrites test outcomes")
        elif name in (
            "pytest_pyfunc_call",
            "pytest_runtest_call",
            "pytest_runtest_protocol",
            "pytest_runtest_setup",
            "pytest_runtestloop",
        ):
            if returns_true or skips or attrs_called & {"force_result"}:
                self.f.outcome_hooks.append(f"`{name}` stops tests from running")
        elif name in (
            "pytest_collection_modifyitems",
            "pytest_deselected",
            "pytest_collection_finish",
            "pytest_collection",
        ):
            destructive = (
                any(
                    isinstance(n, ast.Subscript) and isinstance(n.ctx, (ast.Store, ast.Del))
                    for n in nodes
                )
                or attrs_called & {"clear", "remove", "pop", "pytest_deselected"}
                or skips
                or any(
                    isinstance(n, ast.Call)
                    and isinstance(n.func, ast.Attribute)
                    and n.func.attr == "add_marker"
                    and any(is_skip_mark(self.resolve_deco(a)) for a in n.args)
                    for n in nodes
                )
            )
            if destructive or returns_true:
                self.f.collection_changes.append(f"`{name}` removes or skips collected tests")
        elif name in ("pytest_ignore_collect", "pytest_collect_file", "pytest_pycollect_makeitem"):
            if returns_true:  # `return path.name == "setup.py"` is housekeeping, `True` hides
                self.f.collection_changes.append(f"`{name}` hides test files from collection")
        elif name in ("pytest_sessionfinish", "pytest_unconfigure", "pytest_terminal_summary"):
            if "exitstatus" in assigned or "testsfailed" in assigned:
                self.f.outcome_hooks.append(f"`{name}` overwrites the session's exit status")
        elif name in _CONFIG_HOOKS and (
            assigned & {"keyword", "deselect", "ignore", "ignore_glob", "markexpr", "args"}
            or any(
                "--deselect" in str(fold(n)) or fold(n) == "-k"
                for n in nodes
                if isinstance(n, ast.Constant)
            )
        ):
            self.f.collection_changes.append(f"`{name}` changes which tests run")

    def files_and_net(self, name: str, node: ast.Call, how: object, fn: str | None) -> None:
        args = node.args
        first = self.text_of(args[0]) if args else None
        path = first if isinstance(first, str) else pattern(args[0]) if args else None
        if path is not None and path.startswith("/proc/") and not path.startswith("/proc/self"):
            self.f.harness_probes.append(f"reads {path!r} to see who runs it")
        if name in ("open", "io.open", "codecs.open", "os.open"):
            mode = (
                fold(args[1])
                if len(args) > 1
                else next((fold(k.value) for k in node.keywords if k.arg == "mode"), "r")
            )
            kind = "write" if isinstance(mode, str) and any(c in mode for c in "wax+") else "read"
            self.f.files.append((kind, path, str(how)))
        elif name in (
            "os.listdir",
            "os.scandir",
            "os.walk",
            "glob.glob",
            "glob.iglob",
            "os.stat",
            "os.path.exists",
            "os.path.isfile",
            "shutil.copy",
            "shutil.copyfile",
            "shutil.copytree",
        ):
            self.f.files.append(("read" if name.startswith("shutil") else "list", path, str(how)))
        elif name in (
            "os.remove",
            "os.unlink",
            "os.rmdir",
            "shutil.rmtree",
            "shutil.move",
            "os.rename",
            "os.replace",
            "os.truncate",
            "os.chmod",
        ):
            self.f.files.append(("delete", path, str(how)))
        elif "." in name and (
            name.startswith(("pathlib.Path(", "Path(", "pathlib.PurePath("))
            or name.startswith("pathlib.Path().")
            or self._on_path_var(node.func)
        ):
            method = name.rsplit(".", 1)[-1]
            p = self.path_of(node.func.value) if isinstance(node.func, ast.Attribute) else None
            path_kind = (
                "read"
                if method in _OPEN_READ
                else "write"
                if method in _OPEN_WRITE
                else "delete"
                if method in _OPEN_DELETE
                else None
            )
            if path_kind is not None:
                self.f.files.append((path_kind, p, str(how)))
        if name in _NET_EXACT or (
            name.split(".", 1)[0] in _NET_ROOTS and name.rsplit(".", 1)[-1] in _NET_VERBS
        ):
            targets = [s for a in [*args, *(k.value for k in node.keywords)] for s in strings(a)]
            dynamic = not targets
            self.f.network.append((name, targets, dynamic, str(how)))
        shell = _SHELL.get(name)
        if shell is not None and args:
            self.command(name, node, shell, how)

    def command(self, name: str, node: ast.Call, shell: bool, how: object) -> None:
        """The command a process-starting call runs, as shell text: a string as the shell
        reads it, an argv (a list, a name bound to one, `os.exec*`'s arguments) word by
        word, with the words only known at run time as a shell variable. Static when its
        program is known: then it is screened as the command it is."""
        args = node.args
        use_shell = shell or any(k.arg == "shell" and fold(k.value) is True for k in node.keywords)
        words: list[str | None] | None
        if name.startswith(("os.execl", "os.spawnl")):
            words = self.words(args[2 if name.startswith("os.spawn") else 1 :])
            if name.endswith("e") and words:
                words = words[:-1]  # the environment
        elif name.startswith(("os.exec", "os.spawn", "os.posix_spawn")):
            at = 2 if name.startswith("os.spawn") else 1
            words = self.argv(args[at]) if len(args) > at else None
        elif name == "asyncio.create_subprocess_exec":
            words = self.words(args)
        else:
            text = self.shell_text(args[0]) if use_shell else None
            if text is not None:
                self.f.shell.append((text, True, str(how)))
                return
            words = self.argv(args[0])
            if words is None and not use_shell:
                value = self.text_of(args[0])
                words = [value] if isinstance(value, str) else None
        if words and isinstance(words[0], str):
            text = " ".join(_RUNTIME_WORD if w is None else shlex.quote(w) for w in words)
            self.f.shell.append((text, True, str(how)))
        else:
            self.f.shell.append((src(args[0]) if args else name, False, str(how)))

    def words(self, nodes: list[ast.expr]) -> list[str | None]:
        out: list[str | None] = []
        for e in nodes:
            if isinstance(e, ast.Starred):
                out += self.argv(e.value) or [None]
                continue
            v = self.text_of(e)
            out.append(v if isinstance(v, str) else None)
        return out

    def argv(self, node: ast.expr, _depth: int = 0) -> list[str | None] | None:
        """The words of an argv expression (None for each unknown one), or None when it is
        no list: `['git', 'show', sha]`, `GIT + ['log']`, `[*base, x]`, a name bound to one."""
        if _depth > 4:
            return None
        if isinstance(node, ast.Name) and node.id in self.seqs:
            node = self.seqs[node.id]
        if isinstance(node, (ast.List, ast.Tuple)):
            return self.words(node.elts)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left = self.argv(node.left, _depth + 1)
            if left is None:
                return None
            return left + (self.argv(node.right, _depth + 1) or [None])
        value = fold(node)
        if isinstance(value, tuple) and all(isinstance(v, str) for v in value):
            return list(value)
        return None

    def shell_text(self, node: ast.expr, _depth: int = 0) -> str | None:
        """A command string as the shell gets it, its parts only known at run time as a
        shell variable: `f"git show {sha}"` → `git show ${PYARG}`. None unless it starts
        with known text."""
        value = self.text_of(node)
        if isinstance(value, str):
            return value
        if _depth > 8:
            return None
        if isinstance(node, ast.JoinedStr):
            parts = [self.text_of(v) if isinstance(v, ast.Constant) else None for v in node.values]
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            parts = [
                self.shell_text(node.left, _depth + 1),
                self.shell_text(node.right, _depth + 1),
            ]
        else:
            return None
        if not isinstance(parts[0], str) or not parts[0].strip():
            return None
        return "".join(p if isinstance(p, str) else "${PYARG}" for p in parts)

    def allocation(self, name: str, node: ast.Call, how: object) -> None:
        if (
            name
            in (
                "bytearray",
                "bytes",
                "numpy.zeros",
                "numpy.ones",
                "numpy.empty",
                "numpy.full",
                "os.urandom",
                "list",
            )
            and node.args
        ):
            size = fold(node.args[0])
            if isinstance(size, tuple):
                size = _shape_size(size)
            if (
                name == "list"
                and isinstance(node.args[0], ast.Call)
                and self.resolve(node.args[0].func) == "range"
                and node.args[0].args
            ):
                size = fold(node.args[0].args[-1])
            if isinstance(size, (int, float)) and not isinstance(size, bool) and size >= HUGE:
                self.f.big_allocs.append(f"allocates {size:.3g} elements: {how}")

    def text_of(self, node: ast.expr) -> object:
        """A constant's value, or the string a name bound once holds (`p = 'x.py'`)."""
        if isinstance(node, ast.Name):
            return self.consts.get(node.id)
        return fold(node)

    def _on_path_var(self, func: ast.expr) -> bool:
        """`f.unlink()` where `f = root / 'test_x.py'` and `root = Path('tests')`."""
        return (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id in self.path_vars
            and self.path_of(func.value) is not None
        )

    def path_of(self, node: ast.expr, _d: int = 0) -> str | None:
        if _d > 8:
            return None
        if isinstance(node, ast.Name) and node.id in self.path_vars:
            return self.path_of(self.path_vars[node.id], _d + 1)  # `p = Path('x')`, `p.…`
        if isinstance(node, ast.Call) and node.args:
            v = self.text_of(node.args[0])
            return v if isinstance(v, str) else None
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            left, right = self.path_of(node.left, _d + 1), fold(node.right)
            return f"{left}/{right}" if left is not None and isinstance(right, str) else None
        return None

    def exits_summary(self, tree: ast.Module) -> None:
        """Exits inside functions count when the function runs at import or from a test."""
        main_reached = closure(
            self.calls_from,
            self.calls_from.get("<main>", set()) | (MAIN_NAMES & set(self.func_exits)),
        )
        import_reached = closure(self.calls_from, self.calls_from.get("<module>", set()))
        for fn, exits in self.func_exits.items():
            for name, ok, how in exits:
                if fn in import_reached and ok:
                    self.f.exits_at_import.append(f"`{how}` runs at import time via {fn}()")
                elif fn in main_reached or (fn in self.forking and "_exit" in name):
                    continue  # a CLI's main() or a forked child may exit as it likes
                elif ok:
                    self.f.exits_in_functions.append(f"`{how}` in {fn}() ends the test run")
        for node in tree.body:  # a module-level `pytest.skip(..., allow_module_level=True)`
            if (
                isinstance(node, ast.Expr)
                and isinstance(node.value, ast.Call)
                and self.resolve(node.value.func) == "pytest.skip"
            ):
                self.f.skips.append("the module skips itself at import")
            elif (
                isinstance(node, ast.Raise) and node.exc is not None and "SkipTest" in src(node.exc)
            ):
                self.f.skips.append("the module raises SkipTest at import")


def _shape_size(shape: tuple[object, ...]) -> float:
    """Elements of an array of this shape, stopping at HUGE (a product of big ints is slow)."""
    total: float = 1
    for s in shape:
        if isinstance(s, (int, float)) and not isinstance(s, bool):
            total *= s
            if abs(total) >= HUGE:
                return math.inf
    return total
