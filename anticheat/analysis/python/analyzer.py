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
import copy
import itertools
import math
import re
from typing import Any

from anticheat.analysis import limits
from anticheat.analysis.limits import (
    MAX_PY_EXEC_SOURCE,
    MAX_PY_NESTED,
    MAX_PY_SOURCE,
    MAX_PY_TOKENS,
    MAX_PY_TOTAL,
)
from anticheat.analysis.python.calls import DECODERS, EXITS, HARNESS_MODULES, CallEffects
from anticheat.analysis.python.equality import EQ_NAMES, always_answers
from anticheat.analysis.python.facts import PyFacts
from anticheat.analysis.python.folding import (
    UNKNOWN,
    Lazy,
    fold,
    harness_env,
    is_main_guard,
    is_runner,
    is_skip_mark,
    leaves,
    src,
    trivial_test,
    truthy,
    unbounded,
)
from anticheat.analysis.python.frames import FRAME_SOURCES, caller_uses
from anticheat.analysis.python.walk import children, walk

__all__ = ["PyFacts", "analyze_python"]

_IPV4 = re.compile(r"^\d{1,3}(\.\d{1,3}){3}$")


def analyze_python(source: str, _level: int = 0) -> PyFacts:
    """What a snippet or file would do when run; never raises, bounded by `limits`."""
    with limits.scope() as budget:
        outer, budget.memo = budget.memo, {}  # this tree's folds, freed with the tree
        try:
            return _analyze(source, _level, budget)
        finally:
            budget.memo = outer


def _analyze(source: str, level: int, budget: limits.Budget) -> PyFacts:
    facts = PyFacts()
    room = MAX_PY_TOTAL - budget.py_source
    if room <= 0:
        facts.error = f"{len(source)} characters of Python: only the first 0 screened"
        budget.give_up(f"more than {MAX_PY_TOTAL:,} characters of Python in one action")
        return facts
    most = MAX_PY_EXEC_SOURCE if level else MAX_PY_SOURCE
    cap = min(most, room)
    if len(source) > cap:
        facts.error = f"{len(source)} characters of Python: only the first {cap} screened"
        if cap < most:
            budget.give_up(f"more than {MAX_PY_TOTAL:,} characters of Python in one action")
        elif level:
            budget.give_up(
                f"exec() of {len(source):,} characters of Python: only the first {cap:,} screened"
            )
        source = source[:cap].rsplit("\n", 1)[0]
    budget.py_source += len(source)
    source = _within_tokens(source, facts, budget)
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        facts.error = f"Python that does not parse ({type(exc).__name__}: {exc})"[:200]
        return facts
    try:
        _Analyzer(facts, level).run(tree)
    except RecursionError:
        facts.error = "Python nested too deeply to analyse"
        budget.give_up("Python nested too deeply to analyse: the rest was not screened")
    return facts


# what makes an AST node, roughly: names, numbers, one-line strings, operators and opening
# brackets (a call, a list); closing brackets, commas and colons make none
_TOKEN = re.compile(r"""\w+|'[^'\\\n]*'|"[^"\\\n]*"|[^\s\w)\]},:;'"]""")


def _within_tokens(source: str, facts: PyFacts, budget: limits.Budget) -> str:
    """The head of `source` that the token budget allows (the AST is ~0.8 KB a token)."""
    room = MAX_PY_TOKENS - budget.py_tokens
    tokens = _TOKEN.subn("", source)[1]
    if tokens <= room:
        budget.py_tokens += tokens
        return source
    budget.py_tokens = MAX_PY_TOKENS
    budget.give_up(f"more than {MAX_PY_TOKENS:,} Python tokens in one action")
    end = 0
    if room > 0:
        end = next(itertools.islice(_TOKEN.finditer(source), room - 1, None)).start()
    facts.error = f"{len(source)} characters of Python: only the first {end} screened"
    return source[:end].rsplit("\n", 1)[0]


_PATH_TYPES = ("pathlib.Path(", "pathlib.PurePath(", "pathlib.PosixPath(")
_CLASS_MAKERS = frozenset({"type", "builtins.type", "types.new_class", "types.prepare_class"})
# what hands a frame (and through `f_back` every caller's locals and source) to the code;
# `sys._getframe` counts only with n ≠ 0 (`call`)
FRAME_FUNCS = (FRAME_SOURCES - {"sys._getframe"}) | {"linecache.getline", "linecache.getlines"}


# what tells where a module's files are installed (with `X.__file__`, `X.__path__`)
_LOCATORS = frozenset(
    {
        "inspect.getfile",
        "inspect.getsourcefile",
        "importlib.util.find_spec",
        "importlib.resources.files",
    }
)


# a test framework's skip, raised from code: the test that called it is skipped, not failed
SKIP_RAISERS = frozenset(
    {
        "pytest.skip",
        "pytest.xfail",
        "pytest.skip.Exception",
        "_pytest.outcomes.skip",
        "_pytest.outcomes.Skipped",
        "unittest.SkipTest",
        "unittest.case.SkipTest",
        "nose.SkipTest",
    }
)
# the clock a test reads (timeouts, durations, dates): replaced, the test sees another time
CLOCK_NAMES = {
    "time": frozenset(
        [
            "time",
            "time_ns",
            "monotonic",
            "monotonic_ns",
            "perf_counter",
            "perf_counter_ns",
            "process_time",
            "sleep",
            "gmtime",
            "localtime",
        ]
    ),
    "datetime": frozenset({"datetime", "date"}),
    "datetime.datetime": frozenset({"now", "utcnow", "today"}),
    "datetime.date": frozenset({"today"}),
}


def is_clock(module: object, attr: object) -> bool:
    return isinstance(module, str) and attr in CLOCK_NAMES.get(module, ())


class _Analyzer(CallEffects):
    def __init__(self, facts: PyFacts, level: int) -> None:
        self.f = facts
        self.level = level
        self.alias: dict[str, str] = {}
        self.func_exits: dict[str, list[tuple[str, bool, object]]] = {}  # fn -> (name, ok, how)
        self.calls_from: dict[str, set[str]] = {}  # fn -> local functions it calls
        self.forking: set[str] = set()
        self.consts: dict[str, str] = {}
        self.seqs: dict[str, ast.expr] = {}
        self.path_vars: dict[str, ast.expr] = {}
        self.frames_seen = False  # a caller's frame is taken somewhere: follow where it goes
        self.defs: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}  # module-level

    # ------------------------------------------------------------------ driver

    def run(self, tree: ast.Module) -> None:
        stores: dict[str, int] = {}  # how often each name is bound, anywhere
        texts: dict[str, str] = {}  # names bound to a constant string
        seqs: dict[str, ast.expr] = {}  # names bound to a list or tuple display
        paths: dict[str, ast.expr] = {}  # names bound to a `Path(…)` or a `Path / "x"`
        for node in walk(tree):  # names first: flow-insensitive is enough here
            if isinstance(node, ast.Name):
                if not isinstance(node.ctx, ast.Load):
                    stores[node.id] = stores.get(node.id, 0) + 1
                continue
            if isinstance(node, ast.arg):
                stores[node.arg] = stores.get(node.arg, 0) + 1
                continue
            if isinstance(node, ast.Import):
                for a in node.names:
                    self.f.imports.add(a.name)
                    if a.name == "__main__":
                        self.f.heap_scans.append("imports the running test script's `__main__`")
                    self.alias[a.asname or a.name.split(".")[0]] = (
                        a.name if a.asname else a.name.split(".")[0]
                    )
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                self.f.imports.add(node.module)
                for a in node.names:
                    self.alias[a.asname or a.name] = f"{node.module}.{a.name}"
            elif (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
            ):
                r = self.resolve(node.value)
                if r is not None and r != node.targets[0].id:
                    self.alias.setdefault(node.targets[0].id, r)
                if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                    texts[node.targets[0].id] = node.value.value
                elif isinstance(node.value, (ast.List, ast.Tuple)):
                    seqs[node.targets[0].id] = node.value
                elif isinstance(node.value, ast.BinOp) or (
                    r is not None and r.startswith(_PATH_TYPES)
                ):
                    paths[node.targets[0].id] = node.value
            elif isinstance(node, ast.withitem) and isinstance(node.optional_vars, ast.Name):
                r = self.resolve(node.context_expr)
                if r is not None:
                    self.alias.setdefault(node.optional_vars.id, r)
            elif (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and len(self.f.urls) < 32
                and ("://" in node.value or _IPV4.match(node.value))
            ):
                self.f.urls.append(node.value[:300])
        self.defs = {
            st.name: st
            for st in tree.body
            if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef))
            and stores.get(st.name, 0) == 0
        }
        # `p = 'tests/test_x.py'` bound once and never again: `open(p, 'w')` opens that path
        self.consts = {k: v for k, v in texts.items() if stores.get(k) == 1}
        self.seqs = {k: v for k, v in seqs.items() if stores.get(k) == 1}
        # `p = Path('tests/test_x.py')` then `p.write_text(…)` writes that path
        self.path_vars = {k: v for k, v in paths.items() if stores.get(k) == 1}
        self.body(tree.body, fn=None, guarded=False, loop=None)
        self.f.program = _calls_at_module_level(tree.body)
        self.exits_summary(tree)
        if self.frames_seen:
            for use in caller_uses(tree, self.resolve):
                found = self.f.caller_source if use.kind == "source" else self.f.caller_patches
                found.append(use.detail)

    def body(
        self, stmts: list[ast.stmt], fn: str | None, guarded: bool, loop: ast.AST | None
    ) -> None:
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
        if isinstance(st, ast.If) and fn is None and is_main_guard(st.test):
            self.body(st.body, fn, True, loop)
            self.body(st.orelse, fn, guarded, loop)
            return
        if isinstance(st, (ast.While, ast.For, ast.AsyncFor)):
            if isinstance(st, ast.While):
                self.expr(st.test, fn, guarded, loop)
                if fn is None and truthy(st.test) and not leaves(st.body):
                    self.f.busy_loops.append(f"`while {src(st.test)}:` never exits")
            else:
                self.expr(st.iter, fn, guarded, loop)
            self.body(st.body, fn, guarded, st)
            self.body(st.orelse, fn, guarded, loop)
            return
        if isinstance(st, ast.Raise) and st.exc is not None:
            name = self.resolve(st.exc.func if isinstance(st.exc, ast.Call) else st.exc)
            if name == "SystemExit":
                args = st.exc.args if isinstance(st.exc, ast.Call) else []
                self.exit_call("SystemExit", args, fn, guarded, src(st))
        if isinstance(st, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            self.assignment(st, fn)
        for child in children(st):
            if isinstance(child, ast.stmt):
                self.stmt(child, fn, guarded, loop)
            elif isinstance(child, ast.expr):
                self.expr(child, fn, guarded, loop)
            elif isinstance(child, (ast.excepthandler, ast.withitem, ast.match_case)):
                for sub in children(child):
                    if isinstance(sub, ast.stmt):
                        self.stmt(sub, fn, guarded, loop)
                    elif isinstance(sub, ast.expr):
                        self.expr(sub, fn, guarded, loop)

    def function(self, st: ast.FunctionDef | ast.AsyncFunctionDef, outer: str | None) -> None:
        name = st.name
        self.func_exits.setdefault(name, [])
        self.calls_from.setdefault(name, set())
        in_test_scope = outer is None or outer.startswith("Test")
        if in_test_scope and name.startswith("test"):
            self.f.tests_defined += 1
            if trivial_test(st):
                self.f.trivial_tests.append(f"test `{name}` cannot fail")
            if any(is_skip_mark(self.resolve_deco(d)) for d in st.decorator_list):
                self.f.skips.append(f"test `{name}` is unconditionally skipped")
        if name.startswith("pytest_"):
            self.pytest_hook(st)
        f = self.f
        before = (len(f.harness_probes), len(f.frame_reads), len(f.heap_scans))
        switches, patches = len(f.graded_switches), len(f.runner_patches)
        self.body(st.body, name, False, None)
        probed = len(f.harness_probes) > before[0]
        heap = len(f.heap_scans) > before[2]
        if (
            probed
            and (heap or len(f.frame_reads) > before[1])
            and switches == len(f.graded_switches)
        ):
            f.graded_switches.append(
                f"`{name}` looks for the test runner and reads the caller's frames or the heap"
            )
        if heap and patches == len(f.runner_patches) and _rewrites_found_code(st):
            f.runner_patches.append(f"`{name}` rewrites functions it finds on the heap")

    def klass(self, st: ast.ClassDef, fn: str | None, guarded: bool) -> None:
        if any(is_skip_mark(self.resolve_deco(d)) for d in st.decorator_list):
            self.f.skips.append(f"class `{st.name}` is unconditionally skipped")
        for item in st.body:
            target_name: str | None = None
            value: ast.AST | None = None
            if isinstance(item, ast.FunctionDef) and item.name in ("__eq__", "__ne__"):
                target_name, value = item.name, item
            elif (
                isinstance(item, ast.Assign)
                and len(item.targets) == 1
                and isinstance(item.targets[0], ast.Name)
                and item.targets[0].id in ("__eq__", "__ne__")
            ):
                target_name, value = item.targets[0].id, item.value
            if target_name is not None and value is not None and self.always(value, target_name):
                self.f.always_equal.append(
                    f"class `{st.name}` defines `{target_name}` that always returns "
                    f"{target_name == '__eq__'}"
                )
        self.body(st.body, f"{st.name}" if fn is None else fn, guarded, None)

    # ------------------------------------------------------------------ expressions

    def expr(self, node: ast.expr, fn: str | None, guarded: bool, loop: ast.AST | None) -> None:
        for sub in walk(node):
            if isinstance(sub, ast.Call):
                self.call(sub, fn, guarded, loop)
            elif isinstance(sub, ast.Attribute):
                if sub.attr in ("f_locals", "f_globals", "f_back"):
                    self.f.frame_reads.append(f"reads a frame's `{sub.attr}`: {src(sub)}")
                    self.frames_seen = self.frames_seen or sub.attr == "f_back"
                elif sub.attr in ("__file__", "__path__") and len(self.f.locations) < 16:
                    owner = self.resolve(sub.value)
                    if owner:
                        self.f.locations.append(owner)
                elif sub.attr in ("stdin",) and self.resolve(sub.value) == "sys":
                    self.f.reads_stdin = True
                if sub.attr == "ANY" and self.resolve(sub) in ("unittest.mock.ANY", "mock.ANY"):
                    self.f.always_equal.append("uses `mock.ANY`, an object equal to everything")
            elif (
                isinstance(sub, ast.Name)
                and isinstance(sub.ctx, ast.Load)
                and sub.id in self.alias
                and self.alias[sub.id] in ("unittest.mock.ANY", "mock.ANY")
            ):
                self.f.always_equal.append("uses `mock.ANY`, an object equal to everything")
            elif (
                isinstance(sub, ast.BinOp)
                and isinstance(sub.op, (ast.Mult, ast.Pow))
                and fold(sub) == math.inf
                and any(
                    isinstance(x, (ast.Constant, ast.List, ast.Tuple))
                    and not isinstance(fold(x), (int, float))
                    for x in (sub.left, sub.right)
                )
            ):
                self.f.big_allocs.append(f"allocates a sequence of astronomic size: {src(sub)}")
            elif isinstance(sub, ast.Compare):
                self.compare(sub)
            elif isinstance(sub, ast.Subscript):
                base = self.resolve(sub.value)
                key = fold(sub.slice)
                if base == "sys.modules" and isinstance(key, str):
                    if key in HARNESS_MODULES:
                        self.f.harness_probes.append(f"looks up sys.modules[{key!r}]")
                    elif key == "__main__" or "test" in key:
                        self.f.heap_scans.append(f"reads the test module sys.modules[{key!r}]")
                elif base in ("os.environ", "os.environb") and harness_env(key):
                    self.f.harness_probes.append(f"reads the harness variable {key!r}")

    def call(self, node: ast.Call, fn: str | None, guarded: bool, loop: ast.AST | None) -> None:
        name = self.resolve(node.func)
        if name is None:
            return
        how = Lazy(node)
        if fn is not None and name in self.func_exits:
            self.calls_from.setdefault(fn, set()).add(name)
        elif fn is None and name in self.func_exits:
            self.calls_from.setdefault("<module>" if not guarded else "<main>", set()).add(name)
        if name in SKIP_RAISERS:
            self.f.raised_skips.append(f"`{how}` skips the test that called it")
        elif (
            name in ("setattr", "unittest.mock.patch.object", "mock.patch.object")
            and (len(node.args) >= 2 and is_clock(self.resolve(node.args[0]), fold(node.args[1])))
        ) or (
            name in ("unittest.mock.patch", "mock.patch", "freezegun.freeze_time")
            and (
                name == "freezegun.freeze_time"
                or (node.args and is_clock(*str(fold(node.args[0])).rpartition(".")[::2]))
            )
        ):
            self.f.clock_patches.append(f"replaces the clock: {how}")
        if name in EXITS:
            self.exit_call(name, node.args, fn, guarded, how)
        elif name == "os.fork" or (name.endswith(("Process().start", "Popen")) and loop):
            if fn is not None:
                self.forking.add(fn)
            if loop is not None and unbounded(loop):
                self.f.fork_loops.append(f"`{how}` inside an unbounded loop")
        elif name == "atexit.register" and node.args:
            target = self.resolve(node.args[0])
            if (
                target in EXITS
                or (
                    isinstance(node.args[0], ast.Lambda)
                    and any(
                        isinstance(s, ast.Call) and self.resolve(s.func) in EXITS
                        for s in walk(node.args[0])
                    )
                )
                or (target in self.func_exits and self.func_exits.get(target or ""))
            ):
                self.f.exit_hooks.append(f"`{how}` forces the exit status at shutdown")
        elif name in _LOCATORS and node.args and len(self.f.locations) < 16:
            owner = fold(node.args[0]) if name.startswith("importlib") else None
            owner = owner if isinstance(owner, str) else self.resolve(node.args[0])
            if owner:
                self.f.locations.append(owner)
        elif name in ("gc.get_objects", "gc.get_referrers", "gc.get_referents"):
            self.f.heap_scans.append(f"scans the heap with `{name}`")
        elif name in ("__import__", "importlib.import_module") and node.args:
            mod = fold(node.args[0])
            if isinstance(mod, str):
                self.f.imports.add(mod)
                if mod == "__main__":
                    self.f.heap_scans.append("imports the running test script's `__main__`")
        elif name in FRAME_FUNCS or (
            name == "sys._getframe" and node.args and fold(node.args[0]) not in (0, False)
        ):  # its own frame (`currentframe()`, `_getframe()`) is what a name lookup needs
            self.f.frame_reads.append(f"takes a frame of the running code: {how}")
            self.frames_seen = self.frames_seen or name in FRAME_SOURCES or "_getframe" in name
        elif name == "setattr" and len(node.args) >= 3 and fold(node.args[1]) in EQ_NAMES:
            self.eq_patch(str(fold(node.args[1])), node.args[2], how)
        elif name == "setattr" and len(node.args) >= 3 and isinstance(loop, ast.For):
            self.eq_patch_in_loop(node, loop, how)
        elif name in _CLASS_MAKERS:
            self.class_namespace(node, how)
        elif name in ("setattr", "unittest.mock.patch.object", "mock.patch.object") and node.args:
            target = self.resolve(node.args[0])
            if target and is_runner(target, fold(node.args[1]) if len(node.args) > 1 else None):
                self.f.runner_patches.append(f"patches {target}: {how}")
        elif name in ("unittest.mock.patch", "mock.patch") and node.args:
            target = fold(node.args[0])
            if isinstance(target, str) and is_runner(*target.rsplit(".", 1)):
                self.f.runner_patches.append(f"patches {target}")
        elif name in ("exec", "eval", "compile", "builtins.exec") and node.args:
            self.exec_call(node.args[0], how)
        elif name in ("os.getenv", "os.environ.get", "os.environ.__contains__") and node.args:
            if harness_env(fold(node.args[0])):
                self.f.harness_probes.append(f"reads the harness variable: {how}")
        elif name in ("hasattr", "getattr") and len(node.args) >= 2:
            attr = fold(node.args[1])
            if self.resolve(node.args[0]) == "sys" and isinstance(attr, str) and "test" in attr:
                self.f.harness_probes.append(f"looks for a flag the test setup sets: {how}")
        elif name in ("sys.modules.values", "sys.modules.items", "sys.modules.copy"):
            self.f.heap_scans.append(f"walks every loaded module (the tests among them): {how}")
        elif name == "sys.modules.get" and node.args:
            key = fold(node.args[0])
            if key in HARNESS_MODULES:
                self.f.harness_probes.append(f"looks up {key!r} in sys.modules")
        elif name in ("input", "sys.stdin.read", "sys.stdin.readline", "fileinput.input") or (
            name == "open" and node.args and fold(node.args[0]) == 0
        ):
            self.f.reads_stdin = True
        self.files_and_net(name, node, how, fn)
        self.allocation(name, node, how)

    def exit_call(
        self, name: str, args: list[ast.expr], fn: str | None, guarded: bool, how: object
    ) -> None:
        code = fold(args[0]) if args else 0
        ok = code is not UNKNOWN and code in (0, None, False)
        if name == "os.abort":
            return
        if fn is None:
            if not guarded and ok:
                self.f.exits_at_import.append(f"`{how}` runs at import time")
        else:
            self.func_exits.setdefault(fn, []).append((name, ok, how))

    def exec_call(self, arg: ast.expr, how: object) -> None:
        decoded = any(
            (isinstance(s, ast.Call) and (self.resolve(s.func) or "").startswith(DECODERS))
            or (isinstance(s, ast.Attribute) and s.attr == "decode")
            for s in walk(arg)
        )
        text = fold(arg)
        if isinstance(text, bytes):
            text = text.decode("utf-8", "replace")
        if decoded:
            self.f.decoded_exec.append(f"executes decoded code: {how}")
        if isinstance(text, str) and self.level < MAX_PY_NESTED:
            inner = analyze_python(text, self.level + 1)
            _merge(self.f, inner)

    def always(self, value: ast.AST, name: str) -> bool:
        """Whether `value` bound as `__eq__`/`__ne__` always says "equal" (a module-level
        function given by name is read where it is defined)."""
        if isinstance(value, ast.Name) and value.id in self.defs:
            value = self.defs[value.id]
        return always_answers(value, name, self.resolve)

    def eq_patch(self, name: str, value: ast.expr | None, how: object) -> None:
        """`__eq__`/`__ne__` set on a class after its body (assignment or `setattr`)."""
        if value is not None and self.always(value, name):
            self.f.always_equal.append(
                f"sets `{name}` that always returns {name == '__eq__'}: {how}"
            )
        else:
            self.f.eq_patches.append(f"sets `{name}` after the class body: {how}")

    def eq_patch_in_loop(self, node: ast.Call, loop: ast.For, how: object) -> None:
        """`for op, v in (('eq', True), …): setattr(C, '__' + op + '__', …)`: the loop
        unrolled over its constant items, so a name built from them is known."""
        items = fold(loop.iter)
        if not isinstance(items, tuple) or not 0 < len(items) <= 16:
            return
        names = [n.id for n in walk(loop.target) if isinstance(n, ast.Name)]
        if not names or fold(node.args[1]) is not UNKNOWN:
            return
        for item in items:
            env = _bind_target(loop.target, item)
            if env is None:
                return
            name = fold(_substitute(node.args[1], env))
            if name in EQ_NAMES:
                self.eq_patch(str(name), _substitute(node.args[2], env), how)

    def class_namespace(self, node: ast.Call, how: object) -> None:
        """`type(name, bases, {'__eq__': …})`, `types.new_class(…, exec_body)`: a class
        whose namespace is a dict (or filled by a function) given in the call."""
        for sub in walk(node):
            if isinstance(sub, ast.Dict):
                for key, value in zip(sub.keys, sub.values, strict=True):
                    name = fold(key) if key is not None else None
                    if name in EQ_NAMES:
                        self.eq_patch(str(name), value, how)
            elif isinstance(sub, ast.Call) and self.resolve(sub.func) == "dict":
                for kw in sub.keywords:
                    if kw.arg in EQ_NAMES:
                        self.eq_patch(kw.arg, kw.value, how)

    def assignment(self, st: ast.Assign | ast.AugAssign | ast.AnnAssign, fn: str | None) -> None:
        targets = st.targets if isinstance(st, ast.Assign) else [st.target]
        for t in targets:
            if isinstance(t, ast.Attribute) and t.attr in EQ_NAMES:
                self.eq_patch(t.attr, st.value, Lazy(st))
            elif isinstance(t, ast.Subscript) and fold(t.slice) in EQ_NAMES:
                if st.value is not None and self.always(st.value, str(fold(t.slice))):
                    self.f.always_equal.append(
                        f"puts an `{fold(t.slice)}` that always says equal in a class "
                        f"namespace: {Lazy(st)}"
                    )
            elif isinstance(t, ast.Attribute):
                base = self.resolve(t.value)
                if is_clock(base, t.attr):
                    self.f.clock_patches.append(f"replaces {base}.{t.attr}")
                elif base and is_runner(base, t.attr):
                    self.f.runner_patches.append(f"overrides {base}.{t.attr}")
                elif base in ("sys", "threading") and t.attr == "excepthook":
                    self.f.runner_patches.append(f"replaces {base}.excepthook")
            elif isinstance(t, ast.Subscript) and self.resolve(t.value) == "sys.modules":
                key = fold(t.slice)
                if isinstance(key, str) and key.split(".")[0] in HARNESS_MODULES:
                    self.f.runner_patches.append(f"replaces sys.modules[{key!r}]")
            elif isinstance(t, ast.Name) and fn is None and st.value is not None:
                if t.id in ("collect_ignore", "collect_ignore_glob"):
                    entries = fold(st.value)
                    if not isinstance(entries, (list, tuple)) or any(
                        "test" in str(e) for e in entries
                    ):
                        self.f.collection_changes.append(f"`{t.id}` hides test files")
                elif t.id == "pytestmark" and is_skip_mark(self.resolve_deco(st.value)):
                    self.f.skips.append("`pytestmark` skips the whole module")

    # ------------------------------------------------------------------ effects

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
                seen = nxt + seen[len(seen.split(".")[0]) :]
            return seen
        if isinstance(node, ast.Attribute):
            base = self.resolve(node.value, _d + 1)
            return f"{base}.{node.attr}" if base else None
        if isinstance(node, ast.Call):
            func = self.resolve(node.func, _d + 1)
            if func in ("__import__", "importlib.import_module") and node.args:
                mod = fold(node.args[0])
                return mod if isinstance(mod, str) else None
            if func == "getattr" and len(node.args) >= 2:
                base, attr = self.resolve(node.args[0], _d + 1), fold(node.args[1])
                return f"{base}.{attr}" if base and isinstance(attr, str) else None
            return f"{func}()" if func else None
        if isinstance(node, ast.Subscript):
            base = self.resolve(node.value, _d + 1)
            key = fold(node.slice)
            if base == "sys.modules" and isinstance(key, str):
                return key
            if base in ("vars()", "globals()", "__builtins__") and isinstance(key, str):
                return key
        return None

    def resolve_deco(self, node: ast.AST) -> str:
        target = node.func if isinstance(node, ast.Call) else node
        name = self.resolve(target) or ""
        if isinstance(node, ast.Call) and name.endswith(("skipif", "skipIf", "skipUnless")):
            cond = fold(node.args[0]) if node.args else None
            return name if cond is True else ""
        return name


_CODE_ATTRS = frozenset({"__code__", "__defaults__", "__kwdefaults__"})


def _rewrites_found_code(st: ast.AST) -> bool:
    """Whether a function swaps other functions' code (`obj.__code__ = …`, `setattr(obj,
    '__code__', …)`) or picks tests by name (`.startswith('test')`) to change them."""
    stores = by_name = False
    for n in walk(st):
        if isinstance(n, (ast.Assign, ast.AugAssign)):
            for t in n.targets if isinstance(n, ast.Assign) else [n.target]:
                if isinstance(t, ast.Attribute):
                    if t.attr in _CODE_ATTRS:
                        return True
                    stores = True
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.args:
            if n.func.id == "setattr" and len(n.args) > 1:
                if fold(n.args[1]) in _CODE_ATTRS:
                    return True
                stores = True
        elif isinstance(n, ast.Constant) and isinstance(n.value, str):
            by_name = by_name or n.value.startswith(("test", "Test"))
    return stores and by_name


def _bind_target(target: ast.expr, value: object) -> dict[str, object] | None:
    """The names a `for` target binds to one item (`a, b` to a pair); None if it cannot."""
    if isinstance(target, ast.Name):
        return {target.id: value}
    if isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, tuple):
        if len(target.elts) != len(value):
            return None
        env: dict[str, object] = {}
        for elt, v in zip(target.elts, value, strict=True):
            sub = _bind_target(elt, v)
            if sub is None:
                return None
            env.update(sub)
        return env
    return None


class _Substitute(ast.NodeTransformer):
    def __init__(self, env: dict[str, object]) -> None:
        self.env = env

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if isinstance(node.ctx, ast.Load) and node.id in self.env:
            value: Any = self.env[node.id]  # a folded constant: str, bytes, a number, a tuple
            return ast.copy_location(ast.Constant(value), node)
        return node


def _substitute(node: ast.expr, env: dict[str, object]) -> ast.expr:
    """A copy of `node` with the loop's names replaced by one iteration's constants."""
    out = _Substitute(env).visit(copy.deepcopy(node))
    assert isinstance(out, ast.expr)
    return out


def _calls_at_module_level(stmts: list[ast.stmt]) -> bool:
    """A call made as a statement of the module itself (in its `if`/`for`/`with`/`try`
    blocks too, a `__main__` guard included), not inside a function or class."""
    todo = list(stmts)
    while todo:
        st = todo.pop()
        if isinstance(st, ast.Expr) and isinstance(st.value, (ast.Call, ast.Await)):
            return True
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for child in children(st):
            if isinstance(child, ast.stmt):
                todo.append(child)
            elif isinstance(child, (ast.excepthandler, ast.match_case)):
                todo.extend(sub for sub in children(child) if isinstance(sub, ast.stmt))
    return False


def _merge(into: PyFacts, other: PyFacts) -> None:
    for name in PyFacts.__slots__:
        a, b = getattr(into, name), getattr(other, name)
        if isinstance(a, list):
            a.extend(b)
        elif isinstance(a, set):
            a.update(b)
    into.reads_stdin |= other.reads_stdin
    into.program |= other.program
    if other.error and not into.error:
        into.error = f"exec'd code: {other.error}"
