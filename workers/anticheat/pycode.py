"""Python source, analysed with `ast`: what a snippet or a written file would do when run.

One pass over the tree records behaviours, not strings: exits at import time, an
`__eq__` that is always true, pytest hooks that rewrite outcomes, monkeypatches of
unittest/pytest internals, frame and heap introspection, probes for the test harness,
files and network endpoints touched, and shell commands started through `subprocess`.
Names are resolved through imports and simple assignments (`import os as o`,
`s = socket.socket()`), and constant expressions are folded (`'gi' + 't'`,
`base64.b64decode('…')`), so the usual renamings do not hide a call.
"""

from __future__ import annotations

import ast
import base64
import binascii
import codecs
import math
import re
import shlex
from dataclasses import dataclass, field
from typing import Any

__all__ = ["PyFacts", "analyze_python"]

_IPV4 = re.compile(r"^\d{1,3}(\.\d{1,3}){3}$")

MAX_SOURCE = 512 * 1024  # bigger files are screened by their head only (and reviewed)
MAX_NESTED = 3  # exec(…) of a folded string is analysed this many levels deep
HUGE = 2**31  # elements or bytes: an allocation this big is an attack on the sandbox

_EXITS = {"sys.exit", "exit", "quit", "os._exit", "posix._exit", "builtins.exit", "os.abort"}
_MAIN_NAMES = frozenset({"main", "_main", "cli", "run", "entrypoint", "entry_point"})
_RUNNER_ROOTS = ("unittest", "_pytest", "pytest", "doctest", "pluggy", "nose")
_BUILTIN_TARGETS = frozenset({"__import__", "AssertionError", "BaseException", "Exception",
                              "SystemExit", "exit", "quit", "isinstance"})
_HARNESS_MODULES = frozenset({"pytest", "_pytest", "unittest", "doctest", "nose", "py.test",
                              "conftest", "pytest_timeout", "xdist"})
_HARNESS_ENV = ("PYTEST", "_PYTEST", "GRADER", "GRADING", "EVAL", "JUDGE", "PROCTOR", "HIDDEN",
                "REWARD", "VERIFIER", "SWE_", "SWEBENCH", "UNITTEST", "TESTING_HARNESS")
_HARNESS_ENV_EXACT = frozenset({"CI", "GITHUB_ACTIONS", "CONTINUOUS_INTEGRATION", "BUILD_ID"})
_NET_EXACT = frozenset({
    "urllib.request.urlopen", "urllib.request.urlretrieve", "urllib.urlopen", "urllib2.urlopen",
    "socket.create_connection", "socket.getaddrinfo", "socket.gethostbyname",
    "webbrowser.open", "xmlrpc.client.ServerProxy", "http.client.HTTPConnection",
    "http.client.HTTPSConnection", "ftplib.FTP", "ftplib.FTP_TLS", "smtplib.SMTP",
    "smtplib.SMTP_SSL", "telnetlib.Telnet", "websockets.connect", "websocket.create_connection",
    "asyncio.open_connection", "urllib.request.build_opener().open"})
_NET_ROOTS = frozenset({"requests", "httpx", "aiohttp", "urllib3", "http", "socket", "paramiko",
                        "pycurl", "websocket", "websockets", "urllib"})
_NET_VERBS = frozenset({"get", "post", "put", "patch", "delete", "head", "options", "request",
                        "urlopen", "connect", "connect_ex", "stream", "send", "fetch", "open"})
_SHELL = {"os.system": True, "os.popen": True, "subprocess.getoutput": True,
          "subprocess.getstatusoutput": True, "commands.getoutput": True,
          "asyncio.create_subprocess_shell": True, "subprocess.run": False,
          "subprocess.call": False, "subprocess.check_call": False,
          "subprocess.check_output": False, "subprocess.Popen": False, "pty.spawn": False,
          "asyncio.create_subprocess_exec": False, "os.execvp": False, "os.execv": False,
          "os.execlp": False, "os.spawnlp": False, "os.posix_spawn": False,
          "os.posix_spawnp": False}
_DECODERS = ("base64.", "binascii.", "codecs.decode", "zlib.decompress", "bytes.fromhex",
             "marshal.loads", "gzip.decompress", "lzma.decompress", "bz2.decompress")
_OPEN_READ = ("read_text", "read_bytes", "iterdir", "glob", "rglob", "open")
_OPEN_WRITE = ("write_text", "write_bytes", "touch", "mkdir", "symlink_to", "hardlink_to")
_OPEN_DELETE = ("unlink", "rmdir", "rename", "replace")


@dataclass(slots=True)
class PyFacts:
    error: str | None = None
    imports: set[str] = field(default_factory=set)
    exits_at_import: list[str] = field(default_factory=list)
    exits_in_functions: list[str] = field(default_factory=list)
    exit_hooks: list[str] = field(default_factory=list)
    always_equal: list[str] = field(default_factory=list)
    outcome_hooks: list[str] = field(default_factory=list)
    collection_changes: list[str] = field(default_factory=list)
    runner_patches: list[str] = field(default_factory=list)
    frame_reads: list[str] = field(default_factory=list)
    heap_scans: list[str] = field(default_factory=list)
    harness_probes: list[str] = field(default_factory=list)
    files: list[tuple[str, str | None, str]] = field(default_factory=list)  # kind, path, how
    network: list[tuple[str, list[str], bool, str]] = field(default_factory=list)
    shell: list[tuple[str, bool, str]] = field(default_factory=list)  # text, static, how
    decoded_exec: list[str] = field(default_factory=list)
    big_allocs: list[str] = field(default_factory=list)
    fork_loops: list[str] = field(default_factory=list)
    busy_loops: list[str] = field(default_factory=list)
    trivial_tests: list[str] = field(default_factory=list)
    skips: list[str] = field(default_factory=list)
    urls: list[str] = field(default_factory=list)  # address-like string constants
    reads_stdin: bool = False
    tests_defined: int = 0


def analyze_python(source: str, _level: int = 0) -> PyFacts:
    facts = PyFacts()
    if len(source) > MAX_SOURCE:
        facts.error = f"{len(source)} characters of Python: only the first {MAX_SOURCE} screened"
        source = source[:MAX_SOURCE].rsplit("\n", 1)[0]
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        facts.error = f"Python that does not parse ({type(exc).__name__}: {exc})"[:200]
        return facts
    try:
        _Analyzer(facts, _level).run(tree)
    except RecursionError:
        facts.error = "Python nested too deeply to analyse"
    return facts


def _src(node: ast.AST) -> str:
    try:
        return ast.unparse(node)[:160]
    except (ValueError, RecursionError, AttributeError):
        return type(node).__name__


class _Analyzer:
    def __init__(self, facts: PyFacts, level: int) -> None:
        self.f = facts
        self.level = level
        self.alias: dict[str, str] = {}
        self.func_exits: dict[str, list[tuple[str, bool, object]]] = {}  # fn -> (name, ok, how)
        self.calls_from: dict[str, set[str]] = {}  # fn -> local functions it calls
        self.forking: set[str] = set()

    # ------------------------------------------------------------------ driver

    def run(self, tree: ast.Module) -> None:
        for node in ast.walk(tree):  # names first: flow-insensitive is enough here
            if isinstance(node, ast.Import):
                for a in node.names:
                    self.f.imports.add(a.name)
                    if a.name == "__main__":
                        self.f.heap_scans.append("imports the running test script's `__main__`")
                    self.alias[a.asname or a.name.split(".")[0]] = a.name if a.asname else \
                        a.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                self.f.imports.add(node.module)
                for a in node.names:
                    self.alias[a.asname or a.name] = f"{node.module}.{a.name}"
            elif isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                    isinstance(node.targets[0], ast.Name):
                r = self.resolve(node.value)
                if r is not None and r != node.targets[0].id:
                    self.alias.setdefault(node.targets[0].id, r)
            elif isinstance(node, ast.withitem) and isinstance(node.optional_vars, ast.Name):
                r = self.resolve(node.context_expr)
                if r is not None:
                    self.alias.setdefault(node.optional_vars.id, r)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                    len(self.f.urls) < 32 and ("://" in node.value or _IPV4.match(node.value)):
                self.f.urls.append(node.value[:300])
        self.body(tree.body, fn=None, guarded=False, loop=None)
        self.exits_summary(tree)

    def body(self, stmts: list[ast.stmt], fn: str | None, guarded: bool,
             loop: ast.AST | None) -> None:
        for st in stmts:
            self.stmt(st, fn, guarded, loop)

    def stmt(self, st: ast.stmt, fn: str | None, guarded: bool, loop: ast.AST | None) -> None:
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for d in st.decorator_list:
                self.expr(d, fn, guarded, loop)
            self.function(st, fn)
            return
        if isinstance(st, ast.ClassDef):
            self.klass(st, fn, guarded)
            return
        if isinstance(st, ast.If) and fn is None and _is_main_guard(st.test):
            self.body(st.body, fn, True, loop)
            self.body(st.orelse, fn, guarded, loop)
            return
        if isinstance(st, (ast.While, ast.For, ast.AsyncFor)):
            if isinstance(st, ast.While):
                self.expr(st.test, fn, guarded, loop)
                if fn is None and _truthy(st.test) and not _leaves(st.body):
                    self.f.busy_loops.append(f"`while {_src(st.test)}:` never exits")
            else:
                self.expr(st.iter, fn, guarded, loop)
            self.body(st.body, fn, guarded, st)
            self.body(st.orelse, fn, guarded, loop)
            return
        if isinstance(st, ast.Raise) and st.exc is not None:
            name = self.resolve(st.exc.func if isinstance(st.exc, ast.Call) else st.exc)
            if name == "SystemExit":
                args = st.exc.args if isinstance(st.exc, ast.Call) else []
                self.exit_call("SystemExit", args, fn, guarded, _src(st))
        if isinstance(st, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            self.assignment(st, fn)
        for child in ast.iter_child_nodes(st):
            if isinstance(child, ast.stmt):
                self.stmt(child, fn, guarded, loop)
            elif isinstance(child, ast.expr):
                self.expr(child, fn, guarded, loop)
            elif isinstance(child, (ast.excepthandler, ast.withitem, ast.match_case)):
                for sub in ast.iter_child_nodes(child):
                    if isinstance(sub, ast.stmt):
                        self.stmt(sub, fn, guarded, loop)
                    elif isinstance(sub, ast.expr):
                        self.expr(sub, fn, guarded, loop)

    def function(self, st: ast.FunctionDef | ast.AsyncFunctionDef, outer: str | None) -> None:
        name = st.name
        self.func_exits.setdefault(name, [])
        self.calls_from.setdefault(name, set())
        if name.startswith("test") and outer is None or (outer or "").startswith("Test"):
            if name.startswith("test"):
                self.f.tests_defined += 1
                if _trivial_test(st):
                    self.f.trivial_tests.append(f"test `{name}` cannot fail")
                if any(_is_skip_mark(self.resolve_deco(d)) for d in st.decorator_list):
                    self.f.skips.append(f"test `{name}` is unconditionally skipped")
        if name.startswith("pytest_"):
            self.pytest_hook(st)
        self.body(st.body, name, False, None)

    def klass(self, st: ast.ClassDef, fn: str | None, guarded: bool) -> None:
        if any(_is_skip_mark(self.resolve_deco(d)) for d in st.decorator_list):
            self.f.skips.append(f"class `{st.name}` is unconditionally skipped")
        for item in st.body:
            target_name, value = None, None
            if isinstance(item, ast.FunctionDef) and item.name in ("__eq__", "__ne__"):
                target_name, value = item.name, item
            elif isinstance(item, ast.Assign) and len(item.targets) == 1 and \
                    isinstance(item.targets[0], ast.Name) and \
                    item.targets[0].id in ("__eq__", "__ne__"):
                target_name, value = item.targets[0].id, item.value
            if target_name is not None and value is not None:
                want = target_name == "__eq__"
                if _constant_returns(value) == want:
                    self.f.always_equal.append(
                        f"class `{st.name}` defines `{target_name}` that always returns {want}")
        self.body(st.body, f"{st.name}" if fn is None else fn, guarded, None)

    # ------------------------------------------------------------------ expressions

    def expr(self, node: ast.expr, fn: str | None, guarded: bool, loop: ast.AST | None) -> None:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call):
                self.call(sub, fn, guarded, loop)
            elif isinstance(sub, ast.Attribute):
                if sub.attr in ("f_locals", "f_globals"):
                    self.f.frame_reads.append(f"reads a frame's `{sub.attr}`: {_src(sub)}")
                elif sub.attr in ("stdin",) and self.resolve(sub.value) == "sys":
                    self.f.reads_stdin = True
                if self.resolve(sub) in ("unittest.mock.ANY", "mock.ANY"):
                    self.f.always_equal.append("uses `mock.ANY`, an object equal to everything")
            elif isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load) and \
                    sub.id in self.alias and self.alias[sub.id] in ("unittest.mock.ANY",
                                                                     "mock.ANY"):
                self.f.always_equal.append("uses `mock.ANY`, an object equal to everything")
            elif isinstance(sub, ast.BinOp) and isinstance(sub.op, (ast.Mult, ast.Pow)) and \
                    _fold(sub) == math.inf and any(
                        isinstance(x, (ast.Constant, ast.List, ast.Tuple)) and not
                        isinstance(_fold(x), (int, float)) for x in (sub.left, sub.right)):
                self.f.big_allocs.append(f"allocates a sequence of astronomic size: {_src(sub)}")
            elif isinstance(sub, ast.Compare):
                self.compare(sub)
            elif isinstance(sub, ast.Subscript):
                base = self.resolve(sub.value)
                key = _fold(sub.slice)
                if base == "sys.modules" and isinstance(key, str):
                    if key in _HARNESS_MODULES:
                        self.f.harness_probes.append(f"looks up sys.modules[{key!r}]")
                    elif key == "__main__":
                        self.f.heap_scans.append("reads the running test script's `__main__`")
                elif base in ("os.environ", "os.environb") and _harness_env(key):
                    self.f.harness_probes.append(f"reads the harness variable {key!r}")

    def call(self, node: ast.Call, fn: str | None, guarded: bool, loop: ast.AST | None) -> None:
        name = self.resolve(node.func)
        if name is None:
            return
        how = _Lazy(node)
        if fn is not None and name in self.func_exits:
            self.calls_from.setdefault(fn, set()).add(name)
        elif fn is None and name in self.func_exits:
            self.calls_from.setdefault("<module>" if not guarded else "<main>", set()).add(name)
        if name in _EXITS:
            self.exit_call(name, node.args, fn, guarded, how)
        elif name == "os.fork" or name.endswith(("Process().start", "Popen")) and loop:
            if fn is not None:
                self.forking.add(fn)
            if loop is not None and _unbounded(loop):
                self.f.fork_loops.append(f"`{how}` inside an unbounded loop")
        elif name == "atexit.register" and node.args:
            target = self.resolve(node.args[0])
            if target in _EXITS or (isinstance(node.args[0], ast.Lambda) and any(
                    isinstance(s, ast.Call) and self.resolve(s.func) in _EXITS
                    for s in ast.walk(node.args[0]))) or target in self.func_exits and \
                    self.func_exits.get(target or ""):
                self.f.exit_hooks.append(f"`{how}` forces the exit status at shutdown")
        elif name in ("gc.get_objects", "gc.get_referrers", "gc.get_referents"):
            self.f.heap_scans.append(f"scans the heap with `{name}`")
        elif name in ("__import__", "importlib.import_module") and node.args:
            mod = _fold(node.args[0])
            if isinstance(mod, str):
                self.f.imports.add(mod)
                if mod == "__main__":
                    self.f.heap_scans.append("imports the running test script's `__main__`")
        elif name in ("setattr", "unittest.mock.patch.object", "mock.patch.object") and node.args:
            target = self.resolve(node.args[0])
            if target and _is_runner(target, _fold(node.args[1]) if len(node.args) > 1 else None):
                self.f.runner_patches.append(f"patches {target}: {how}")
        elif name in ("unittest.mock.patch", "mock.patch") and node.args:
            target = _fold(node.args[0])
            if isinstance(target, str) and _is_runner(*target.rsplit(".", 1)):
                self.f.runner_patches.append(f"patches {target}")
        elif name in ("exec", "eval", "compile", "builtins.exec") and node.args:
            self.exec_call(node.args[0], how)
        elif name in ("os.getenv", "os.environ.get", "os.environ.__contains__") and node.args:
            if _harness_env(_fold(node.args[0])):
                self.f.harness_probes.append(f"reads the harness variable: {how}")
        elif name == "sys.modules.get" and node.args:
            key = _fold(node.args[0])
            if key in _HARNESS_MODULES:
                self.f.harness_probes.append(f"looks up {key!r} in sys.modules")
        elif name in ("input", "sys.stdin.read", "sys.stdin.readline", "fileinput.input") or \
                name == "open" and node.args and _fold(node.args[0]) == 0:
            self.f.reads_stdin = True
        self.files_and_net(name, node, how, fn)
        self.allocation(name, node, how)

    def exit_call(self, name: str, args: list[ast.expr], fn: str | None, guarded: bool,
                  how: object) -> None:
        code = _fold(args[0]) if args else 0
        ok = code in (0, None, False) and not isinstance(code, _Unknown)
        if name == "os.abort":
            return
        if fn is None:
            if not guarded and ok:
                self.f.exits_at_import.append(f"`{how}` runs at import time")
        else:
            self.func_exits.setdefault(fn, []).append((name, ok, how))

    def exec_call(self, arg: ast.expr, how: object) -> None:
        decoded = any(isinstance(s, ast.Call) and (self.resolve(s.func) or "").startswith(_DECODERS)
                      or isinstance(s, ast.Attribute) and s.attr == "decode"
                      for s in ast.walk(arg))
        text = _fold(arg)
        if isinstance(text, bytes):
            text = text.decode("utf-8", "replace")
        if decoded:
            self.f.decoded_exec.append(f"executes decoded code: {how}")
        if isinstance(text, str) and self.level < MAX_NESTED:
            inner = analyze_python(text, self.level + 1)
            _merge(self.f, inner)

    def assignment(self, st: ast.Assign | ast.AugAssign | ast.AnnAssign, fn: str | None) -> None:
        targets = st.targets if isinstance(st, ast.Assign) else [st.target]
        for t in targets:
            if isinstance(t, ast.Attribute):
                base = self.resolve(t.value)
                if base and _is_runner(base, t.attr):
                    self.f.runner_patches.append(f"overrides {base}.{t.attr}")
                elif base in ("sys", "threading") and t.attr == "excepthook":
                    self.f.runner_patches.append(f"replaces {base}.excepthook")
            elif isinstance(t, ast.Subscript) and self.resolve(t.value) == "sys.modules":
                key = _fold(t.slice)
                if isinstance(key, str) and key.split(".")[0] in _HARNESS_MODULES:
                    self.f.runner_patches.append(f"replaces sys.modules[{key!r}]")
            elif isinstance(t, ast.Name) and fn is None and st.value is not None:
                if t.id in ("collect_ignore", "collect_ignore_glob"):
                    entries = _fold(st.value)
                    if not isinstance(entries, (list, tuple)) or any(
                            "test" in str(e) for e in entries):
                        self.f.collection_changes.append(f"`{t.id}` hides test files")
                elif t.id == "pytestmark" and _is_skip_mark(self.resolve_deco(st.value)):
                    self.f.skips.append("`pytestmark` skips the whole module")

    def compare(self, node: ast.Compare) -> None:
        parts = [node.left, *node.comparators]
        consts = [_fold(p) for p in parts]
        strs = [c for c in consts if isinstance(c, str)]
        if not strs:
            return
        others = " ".join(_src(p) for p, c in zip(parts, consts, strict=True)
                          if not isinstance(c, str))
        names = {self.resolve(p) for p in parts}
        if names & {"sys.modules", "os.environ"} and any(
                s in _HARNESS_MODULES or _harness_env(s) for s in strs):
            self.f.harness_probes.append(f"checks for the test harness: {_src(node)}")
        elif any(s.lower() in ("pytest", "py.test", "_pytest", "unittest", "conftest")
                 for s in strs) or any("test" in s.lower() for s in strs) and any(
                k in others for k in ("argv", "filename", "co_filename", "stack", "f_code",
                                      "getppid", "cmdline", "__file__", "f_back")):
            self.f.harness_probes.append(f"checks how it is being run: {_src(node)}")

    def pytest_hook(self, st: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        name = st.name
        nodes = list(ast.walk(st))
        assigned = {t.attr for n in nodes if isinstance(n, (ast.Assign, ast.AugAssign))
                    for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
                    if isinstance(t, ast.Attribute)}
        called = {self.resolve(n.func) or "" for n in nodes if isinstance(n, ast.Call)}
        attrs_called = {n.func.attr for n in nodes if isinstance(n, ast.Call)
                        and isinstance(n.func, ast.Attribute)}
        returns_true = _constant_returns(st) is True or any(
            isinstance(n, ast.Return) and n.value is not None and _fold(n.value) is True
            for n in nodes)
        skips = any(c in ("pytest.skip", "pytest.xfail", "pytest.skip.Exception") for c in called)
        if name in ("pytest_runtest_makereport", "pytest_report_teststatus",
                    "pytest_runtest_logreport", "pytest_runtest_logfinish"):
            if assigned & {"outcome", "longrepr", "wasxfail", "passed", "failed"} or \
                    attrs_called & {"force_result", "force_exception"} or \
                    any(isinstance(n, ast.Return) and n.value is not None and
                        "passed" in str(_fold(n.value)) for n in nodes):
                self.f.outcome_hooks.append(f"`{name}` rewrites test outcomes")
        elif name in ("pytest_pyfunc_call", "pytest_runtest_call", "pytest_runtest_protocol",
                      "pytest_runtest_setup", "pytest_runtestloop"):
            if returns_true or skips or attrs_called & {"force_result"}:
                self.f.outcome_hooks.append(f"`{name}` stops tests from running")
        elif name in ("pytest_collection_modifyitems", "pytest_deselected",
                      "pytest_collection_finish", "pytest_collection"):
            destructive = any(isinstance(n, ast.Subscript) and isinstance(n.ctx, (ast.Store,
                              ast.Del)) for n in nodes) or attrs_called & {
                "clear", "remove", "pop", "pytest_deselected"} or skips or any(
                isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and
                n.func.attr == "add_marker" and any(_is_skip_mark(self.resolve_deco(a))
                                                    for a in n.args) for n in nodes)
            if destructive or returns_true:
                self.f.collection_changes.append(f"`{name}` removes or skips collected tests")
        elif name in ("pytest_ignore_collect", "pytest_collect_file", "pytest_pycollect_makeitem"):
            if returns_true or name == "pytest_ignore_collect":
                self.f.collection_changes.append(f"`{name}` hides test files from collection")
        elif name in ("pytest_sessionfinish", "pytest_unconfigure", "pytest_terminal_summary"):
            if "exitstatus" in assigned or "testsfailed" in assigned:
                self.f.outcome_hooks.append(f"`{name}` overwrites the session's exit status")
        elif name in ("pytest_configure", "pytest_cmdline_main", "pytest_load_initial_conftests",
                      "pytest_cmdline_preparse"):
            if assigned & {"keyword", "deselect", "ignore", "ignore_glob", "markexpr", "args"} \
                    or any("--deselect" in str(_fold(n)) or "-k" == _fold(n)
                           for n in nodes if isinstance(n, ast.Constant)):
                self.f.collection_changes.append(f"`{name}` changes which tests run")

    # ------------------------------------------------------------------ effects

    def files_and_net(self, name: str, node: ast.Call, how: object, fn: str | None) -> None:
        args = node.args
        first = _fold(args[0]) if args else None
        path = first if isinstance(first, str) else None
        if name in ("open", "io.open", "codecs.open", "os.open"):
            mode = _fold(args[1]) if len(args) > 1 else next(
                (_fold(k.value) for k in node.keywords if k.arg == "mode"), "r")
            kind = "write" if isinstance(mode, str) and any(c in mode for c in "wax+") else "read"
            self.f.files.append((kind, path, str(how)))
        elif name in ("os.listdir", "os.scandir", "os.walk", "glob.glob", "glob.iglob",
                      "os.stat", "os.path.exists", "os.path.isfile", "shutil.copy",
                      "shutil.copyfile", "shutil.copytree"):
            self.f.files.append(("read" if name.startswith("shutil") else "list", path, str(how)))
        elif name in ("os.remove", "os.unlink", "os.rmdir", "shutil.rmtree", "shutil.move",
                      "os.rename", "os.replace", "os.truncate", "os.chmod"):
            self.f.files.append(("delete", path, str(how)))
        elif "." in name and (name.startswith(("pathlib.Path(", "Path(", "pathlib.PurePath("))
                              or name.startswith("pathlib.Path().")):
            method = name.rsplit(".", 1)[-1]
            p = self.path_of(node.func.value) if isinstance(node.func, ast.Attribute) else None
            kind = "read" if method in _OPEN_READ else "write" if method in _OPEN_WRITE else \
                "delete" if method in _OPEN_DELETE else None
            if kind is not None:
                self.f.files.append((kind, p, str(how)))
        if name in _NET_EXACT or name.split(".", 1)[0] in _NET_ROOTS and \
                name.rsplit(".", 1)[-1] in _NET_VERBS:
            targets = [s for a in [*args, *(k.value for k in node.keywords)]
                       for s in _strings(a)]
            dynamic = not targets
            self.f.network.append((name, targets, dynamic, str(how)))
        shell = _SHELL.get(name)
        if shell is not None and args:
            value = _fold(args[0])
            use_shell = shell or any(k.arg == "shell" and _fold(k.value) is True
                                     for k in node.keywords)
            if isinstance(value, str):
                self.f.shell.append((value if use_shell else shlex.quote(value), True, str(how)))
            elif isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
                self.f.shell.append((shlex.join(value), True, str(how)))
            elif name.startswith(("os.exec", "os.spawn")) and all(
                    isinstance(_fold(a), str) for a in args[1:]):
                self.f.shell.append((shlex.join([str(_fold(a)) for a in args[1:]]), True,
                                     str(how)))
            else:
                self.f.shell.append((_src(args[0]), False, str(how)))

    def allocation(self, name: str, node: ast.Call, how: object) -> None:
        if name in ("bytearray", "bytes", "numpy.zeros", "numpy.ones", "numpy.empty",
                    "numpy.full", "os.urandom", "list") and node.args:
            size = _fold(node.args[0])
            if isinstance(size, tuple):
                size = math.prod(s for s in size if isinstance(s, (int, float)))
            if name == "list" and isinstance(node.args[0], ast.Call) and \
                    self.resolve(node.args[0].func) == "range" and node.args[0].args:
                size = _fold(node.args[0].args[-1])
            if isinstance(size, (int, float)) and not isinstance(size, bool) and size >= HUGE:
                self.f.big_allocs.append(f"allocates {size:.3g} elements: {how}")

    def path_of(self, node: ast.expr) -> str | None:
        if isinstance(node, ast.Call) and node.args:
            v = _fold(node.args[0])
            return v if isinstance(v, str) else None
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            left, right = self.path_of(node.left), _fold(node.right)
            return f"{left}/{right}" if left is not None and isinstance(right, str) else None
        return None

    def exits_summary(self, tree: ast.Module) -> None:
        """Exits inside functions count when the function runs at import or from a test."""
        main_reached = _closure(self.calls_from, self.calls_from.get("<main>", set()) |
                                (_MAIN_NAMES & set(self.func_exits)))
        import_reached = _closure(self.calls_from, self.calls_from.get("<module>", set()))
        for fn, exits in self.func_exits.items():
            for name, ok, how in exits:
                if fn in import_reached and ok:
                    self.f.exits_at_import.append(f"`{how}` runs at import time via {fn}()")
                elif fn in main_reached or fn in self.forking and "_exit" in name:
                    continue
                elif ok or "_exit" in name:
                    self.f.exits_in_functions.append(f"`{how}` in {fn}() ends the test run")
        for node in tree.body:  # a module-level `pytest.skip(..., allow_module_level=True)`
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and \
                    self.resolve(node.value.func) == "pytest.skip":
                self.f.skips.append("the module skips itself at import")
            elif isinstance(node, ast.Raise) and node.exc is not None and "SkipTest" in _src(
                    node.exc):
                self.f.skips.append("the module raises SkipTest at import")

    # ------------------------------------------------------------------ names

    def resolve(self, node: ast.AST | None, _d: int = 0) -> str | None:
        if node is None or _d > 12:
            return None
        if isinstance(node, ast.Name):
            seen = node.id
            for _ in range(4):  # follow alias chains, not cycles
                nxt = self.alias.get(seen.split(".")[0])
                if nxt is None or nxt == seen.split(".")[0]:
                    break
                seen = nxt + seen[len(seen.split(".")[0]):]
            return seen
        if isinstance(node, ast.Attribute):
            base = self.resolve(node.value, _d + 1)
            return f"{base}.{node.attr}" if base else None
        if isinstance(node, ast.Call):
            func = self.resolve(node.func, _d + 1)
            if func in ("__import__", "importlib.import_module") and node.args:
                mod = _fold(node.args[0])
                return mod if isinstance(mod, str) else None
            if func == "getattr" and len(node.args) >= 2:
                base, attr = self.resolve(node.args[0], _d + 1), _fold(node.args[1])
                return f"{base}.{attr}" if base and isinstance(attr, str) else None
            return f"{func}()" if func else None
        if isinstance(node, ast.Subscript):
            base = self.resolve(node.value, _d + 1)
            key = _fold(node.slice)
            if base == "sys.modules" and isinstance(key, str):
                return key
            if base in ("vars()", "globals()", "__builtins__") and isinstance(key, str):
                return key
        return None

    def resolve_deco(self, node: ast.AST) -> str:
        target = node.func if isinstance(node, ast.Call) else node
        name = self.resolve(target) or ""
        if isinstance(node, ast.Call) and name.endswith(("skipif", "skipIf", "skipUnless")):
            cond = _fold(node.args[0]) if node.args else None
            return name if cond is True else ""
        return name


# ---------------------------------------------------------------------- helpers


class _Unknown:
    pass


class _Lazy:
    """The source of a node, rendered only if it ends up in evidence (unparse is slow)."""

    __slots__ = ("node",)

    def __init__(self, node: ast.AST) -> None:
        self.node = node

    def __str__(self) -> str:
        return _src(self.node)

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)


UNKNOWN = _Unknown()


def _fold(node: ast.AST | None, depth: int = 0) -> Any:
    """The value of a constant expression, or UNKNOWN."""
    if node is None or depth > 20:
        return UNKNOWN
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        vals = [_fold(e, depth + 1) for e in node.elts]
        return UNKNOWN if any(v is UNKNOWN for v in vals) else tuple(vals)
    if isinstance(node, ast.JoinedStr):
        parts = [_fold(v.value if isinstance(v, ast.FormattedValue) else v, depth + 1)
                 for v in node.values]
        return "".join(str(p) for p in parts) if all(p is not UNKNOWN for p in parts) else UNKNOWN
    if isinstance(node, ast.UnaryOp):
        v = _fold(node.operand, depth + 1)
        if v is UNKNOWN:
            return UNKNOWN
        try:
            return {ast.Not: lambda: not v, ast.USub: lambda: -v, ast.UAdd: lambda: +v,
                    ast.Invert: lambda: ~v}[type(node.op)]()
        except (TypeError, KeyError):
            return UNKNOWN
    if isinstance(node, ast.BinOp):
        a, b = _fold(node.left, depth + 1), _fold(node.right, depth + 1)
        if a is UNKNOWN or b is UNKNOWN:
            return UNKNOWN
        return _binop(node.op, a, b)
    if isinstance(node, ast.Subscript):
        v, s = _fold(node.value, depth + 1), node.slice
        if isinstance(v, (str, bytes, tuple)) and isinstance(s, ast.Slice) and s.lower is None \
                and s.upper is None and _fold(s.step) == -1:
            return v[::-1]
        return UNKNOWN
    if isinstance(node, ast.Call):
        return _fold_call(node, depth)
    return UNKNOWN


def _binop(op: ast.operator, a: Any, b: Any) -> Any:
    try:
        if isinstance(op, ast.Pow) and isinstance(a, int) and isinstance(b, int):
            if b > 0 and abs(a) > 1 and b * math.log2(abs(a)) > 256:
                return math.inf
            return a**b
        if isinstance(op, ast.LShift) and isinstance(b, int) and b > 256:
            return math.inf
        if isinstance(op, ast.Mult) and isinstance(a, (str, bytes, tuple)) and \
                isinstance(b, (int, float)) or isinstance(op, ast.Mult) and \
                isinstance(b, (str, bytes, tuple)) and isinstance(a, (int, float)):
            seq, n = (a, b) if isinstance(a, (str, bytes, tuple)) else (b, a)
            if n * max(len(seq), 1) >= HUGE or isinstance(n, float):
                return math.inf if n * max(len(seq), 1) >= HUGE else UNKNOWN
            return seq * n
        if isinstance(op, (ast.Add, ast.Sub, ast.Mult, ast.Mod, ast.FloorDiv, ast.LShift,
                           ast.BitOr, ast.BitAnd, ast.BitXor, ast.Div)):
            fns = {ast.Add: lambda: a + b, ast.Sub: lambda: a - b, ast.Mult: lambda: a * b,
                   ast.Mod: lambda: a % b, ast.FloorDiv: lambda: a // b,
                   ast.LShift: lambda: a << b, ast.BitOr: lambda: a | b,
                   ast.BitAnd: lambda: a & b, ast.BitXor: lambda: a ^ b, ast.Div: lambda: a / b}
            return fns[type(op)]()
    except (TypeError, ValueError, ZeroDivisionError, OverflowError, MemoryError):
        return UNKNOWN
    return UNKNOWN


def _fold_call(node: ast.Call, depth: int) -> Any:
    func = node.func
    args = [_fold(a, depth + 1) for a in node.args]
    if any(a is UNKNOWN for a in args) or node.keywords:
        return UNKNOWN
    try:
        if isinstance(func, ast.Name):
            if func.id == "chr" and len(args) == 1:
                return chr(args[0])
            if func.id in ("str", "bytes", "int", "tuple", "list") and len(args) == 1:
                v = args[0]
                return tuple(v) if func.id in ("tuple", "list") else {
                    "str": str, "bytes": bytes, "int": int}[func.id](v) if not (
                    func.id == "bytes" and isinstance(v, int)) else UNKNOWN
            if func.id == "Path" and len(args) == 1:
                return args[0]
        if isinstance(func, ast.Attribute):
            owner = func.value
            dotted = _dotted(owner)
            if func.attr == "join" and len(args) == 1 and isinstance(owner, ast.Constant):
                return owner.value.join(args[0])
            if func.attr == "join" and dotted in ("os.path", "posixpath"):
                return "/".join(str(a) for a in args)
            if func.attr in ("b64decode", "standard_b64decode", "urlsafe_b64decode",
                             "decodebytes") and dotted == "base64":
                data = args[0]
                return base64.b64decode(data + ("==" if isinstance(data, str) else b"=="))
            if func.attr in ("unhexlify", "a2b_hex") or func.attr == "fromhex":
                return binascii.unhexlify(args[0])
            if func.attr == "decode" and len(args) <= 2:
                v = _fold(owner, depth + 1)
                if isinstance(v, bytes):
                    return v.decode(*[a for a in args if isinstance(a, str)][:1] or ["utf-8"])
                if dotted == "codecs" and len(args) == 2 and isinstance(args[0], str):
                    return codecs.decode(args[0], args[1])
            if func.attr == "encode" and len(args) <= 1:
                v = _fold(owner, depth + 1)
                return v.encode() if isinstance(v, str) else UNKNOWN
    except (ValueError, TypeError, binascii.Error, LookupError, UnicodeError, OverflowError):
        return UNKNOWN
    return UNKNOWN


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def _strings(node: ast.AST) -> list[str]:
    v = _fold(node)
    if isinstance(v, str):
        return [v]
    if isinstance(v, tuple):
        return [x for x in v if isinstance(x, str)]
    return [s.value for s in ast.walk(node) if isinstance(s, ast.Constant)
            and isinstance(s.value, str)]


def _is_main_guard(test: ast.expr) -> bool:
    return isinstance(test, ast.Compare) and "__name__" in _src(test) and "__main__" in _src(test)


def _truthy(test: ast.expr) -> bool:
    v = _fold(test)
    return v is not UNKNOWN and bool(v)


def _unbounded(loop: ast.AST) -> bool:
    if isinstance(loop, ast.While):
        return _truthy(loop.test) and not any(isinstance(n, ast.Break) for n in ast.walk(loop))
    if isinstance(loop, (ast.For, ast.AsyncFor)) and isinstance(loop.iter, ast.Call) and \
            _dotted(loop.iter.func) == "range" and loop.iter.args:
        n = _fold(loop.iter.args[-1])
        return isinstance(n, (int, float)) and n >= 1000
    return False


def _leaves(body: list[ast.stmt]) -> bool:
    for st in body:
        for n in ast.walk(st):
            if isinstance(n, (ast.Break, ast.Return, ast.Raise)):
                return True
            if isinstance(n, ast.Call) and _dotted(n.func) in ("sys.exit", "exit", "quit",
                                                                "os._exit"):
                return True
    return False


def _constant_returns(node: ast.AST) -> bool | None:
    """True/False when every return of a function (or a lambda) is that constant."""
    if isinstance(node, ast.Lambda):
        v = _fold(node.body)
        return bool(v) if v is not UNKNOWN and not isinstance(v, _Unknown) else None
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    values = set()
    stack: list[ast.AST] = list(node.body)
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(n, ast.Return):
            v = _fold(n.value) if n.value is not None else None
            if v is UNKNOWN or v is NotImplemented:
                return None
            values.add(bool(v))
        stack.extend(ast.iter_child_nodes(n))
    return values.pop() if len(values) == 1 else None


def _trivial_test(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    for st in fn.body:
        if isinstance(st, ast.Pass) or isinstance(st, ast.Expr) and isinstance(
                st.value, ast.Constant):
            continue
        if isinstance(st, ast.Assert) and _truthy(st.test):
            continue
        if isinstance(st, ast.Return) and (st.value is None or _fold(st.value) is not UNKNOWN):
            continue
        return False
    return True


def _is_skip_mark(name: str) -> bool:
    return name.endswith((".mark.skip", ".mark.xfail", "unittest.skip", ".skipif", ".skipIf",
                          ".skipUnless", "unittest.expectedFailure"))


def _is_runner(base: str, attr: object) -> bool:
    root = base.split(".")[0].removesuffix("()")
    if root in ("builtins", "__builtins__"):
        return attr in _BUILTIN_TARGETS
    return root in _RUNNER_ROOTS or base.endswith(("TestCase", "TestResult", "TextTestRunner"))


def _harness_env(key: object) -> bool:
    if not isinstance(key, str):
        return False
    k = key.upper()
    return k in _HARNESS_ENV_EXACT or k.startswith(_HARNESS_ENV)


def _closure(graph: dict[str, set[str]], start: set[str]) -> set[str]:
    seen, todo = set(), list(start)
    while todo:
        n = todo.pop()
        if n not in seen:
            seen.add(n)
            todo.extend(graph.get(n, ()))
    return seen


def _merge(into: PyFacts, other: PyFacts) -> None:
    for name in PyFacts.__slots__:  # type: ignore[attr-defined]
        a, b = getattr(into, name), getattr(other, name)
        if isinstance(a, list):
            a.extend(b)
        elif isinstance(a, set):
            a.update(b)
    into.reads_stdin |= other.reads_stdin
    if other.error and not into.error:
        into.error = f"exec'd code: {other.error}"
