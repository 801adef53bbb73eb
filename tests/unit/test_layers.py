"""Imports run one way: proctor ← core ← anticheat ← service | workers.

Read from the source (ast), so a violation fails here before it is a deployment problem
(tree-sitter or Docker in the API process, FastAPI in a worker). Imports inside functions
count too, except the CLI's: `proctor` is the client package, and its server commands
start the service or a worker on demand.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# each package, and the packages of ours it may import
ALLOWED = {
    "proctor": {"proctor"},
    "core": {"proctor", "core"},
    "anticheat": {"proctor", "core", "anticheat"},
    "service": {"proctor", "core", "anticheat", "service"},
    "workers": {"proctor", "core", "anticheat", "workers"},
}
OURS = set(ALLOWED)
# third-party packages a layer must not pull in
FORBIDDEN = {
    "core": {"fastapi", "docker"},
    "anticheat": {"fastapi", "docker"},
    "workers": {"fastapi"},
    "service": {"docker"},
}
LAZY_OK = {Path("proctor/cli.py")}  # server commands import the server on demand


def modules(package: str) -> list[Path]:
    return sorted(p for p in (ROOT / package).rglob("*.py") if "assets" not in p.parts)


def imported(path: Path) -> list[tuple[int, str, bool]]:
    """(line, top-level name, at module level) of every import of an absolute module."""
    tree = ast.parse(path.read_text(), filename=str(path))
    top = {id(node) for node in tree.body}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found += [(node.lineno, name.split(".")[0], id(node) in top) for name in names]
    return found


def violations(package: str) -> list[str]:
    bad = []
    for path in modules(package):
        relative = path.relative_to(ROOT)
        for line, name, module_level in imported(path):
            if not module_level and relative in LAZY_OK:
                continue
            if name in OURS and name not in ALLOWED[package]:
                bad.append(f"{relative}:{line} imports {name}")
            if name in FORBIDDEN.get(package, set()):
                bad.append(f"{relative}:{line} imports {name}")
    return bad


@pytest.mark.parametrize("package", sorted(p for p in ALLOWED if (ROOT / p).is_dir()))
def test_imports_run_one_way(package: str) -> None:
    assert violations(package) == []


def test_routes_do_not_import_routes() -> None:
    routes = ROOT / "service" / "routes"
    bad = [
        f"{p.relative_to(ROOT)}:{line}"
        for p in sorted(routes.glob("*.py"))
        for line, name, _ in imported(p)
        if name == "service"
        and any(
            f"service.routes.{q.stem}" in p.read_text().splitlines()[line - 1]
            for q in routes.glob("*.py")
        )
    ]
    assert bad == []


def test_no_import_cycles_inside_a_package() -> None:
    graph: dict[str, set[str]] = {}
    for package in ALLOWED:
        for path in modules(package):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            # every import counts, those under TYPE_CHECKING and inside functions too: a
            # cycle hidden behind a lazy import is still two modules that need each other
            tree = ast.parse(path.read_text())
            nodes = list(ast.walk(tree))
            deps = {
                n.module
                for n in nodes
                if isinstance(n, ast.ImportFrom) and n.level == 0 and n.module
            }
            # `from package import module` names a module too
            deps |= {
                f"{n.module}.{a.name}"
                for n in nodes
                if isinstance(n, ast.ImportFrom) and n.level == 0 and n.module
                for a in n.names
            }
            deps |= {a.name for n in nodes if isinstance(n, ast.Import) for a in n.names}
            graph[name] = {d for d in deps if d.split(".")[0] in OURS and d != name}
    cycles: list[str] = []
    done: set[str] = set()

    def visit(node: str, trail: list[str]) -> None:  # depth first; each node finished once
        if node in trail:
            cycles.append(" → ".join([*trail[trail.index(node) :], node]))
            return
        if node in done:
            return
        for dep in sorted(graph.get(node, ())):
            if dep in graph:
                visit(dep, [*trail, node])
        done.add(node)

    for start in sorted(graph):
        visit(start, [])
    assert cycles == []


def test_container_assets_are_never_imported_by_the_host() -> None:
    """Files under assets/ are copied into containers (as text), never imported here."""
    assets = {
        ".".join(p.relative_to(ROOT).with_suffix("").parts)
        for package in ALLOWED
        for p in (ROOT / package).rglob("assets/*.py")
    }
    bad = []
    for package in ALLOWED:
        for path in modules(package):
            for node in ast.walk(ast.parse(path.read_text())):
                names = (
                    [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
                    if isinstance(node, ast.ImportFrom) and node.module
                    else []
                )
                bad += [
                    f"{path.relative_to(ROOT)}:{node.lineno} imports {n}"
                    for n in names
                    if n in assets or (n and ".assets" in n)
                ]
    assert assets and bad == []


ENGINE = Path("workers/sandbox/engine")


def test_only_the_engine_imports_docker() -> None:
    """The Docker SDK is untyped: one package wraps it, and nothing else of ours sees it."""
    bad = [
        f"{path.relative_to(ROOT)}:{line}"
        for package in ALLOWED
        for path in modules(package)
        for line, name, _ in imported(path)
        if name == "docker" and ENGINE not in path.relative_to(ROOT).parents
    ]
    assert bad == []
    assert any(name == "docker" for p in (ROOT / ENGINE).glob("*.py") for _, name, _ in imported(p))
