"""False positives of the Python rules on real library code: every module of installed
packages screened as if the agent wrote it into a repository task of that package.

    cd bench && ../.venv/bin/python screen_library.py [--packages pytest,rich] [--rules …]

Library code is the honest look-alike of solution code: it takes frames (pydantic,
pytest), defines `__eq__` in every way there is (attrs, dataclasses, enum), starts git
through subprocess (setuptools-scm, versioneer). Each row: a rule, how many modules it
flags and which. Goal: none, or each explained and at most 1 % of the modules.
"""

# ruff: noqa: SIM905 -- tables of names read best as one whitespace-separated string

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

from harness import table

from anticheat.screen import screen_detailed
from proctor.models import TaskContext, WriteFileAction

PACKAGES = (
    "pytest _pytest pluggy pydantic rich httpx httpcore typer click redis rq docker fastapi "
    "starlette jinja2 anyio hypothesis packaging setuptools requests werkzeug urllib3 uvicorn"
).split()
# the rules whose matchers read the Python analysis this corpus exercises
WATCHED = (
    "eval.caller-source grader.caller-patch tests.always-equal eval.frame-or-heap "
    "eval.solution-reads-tests grader.runner-patch tests.early-exit"
).split()


def site_packages() -> Path:
    for entry in sys.path:
        if entry.endswith("site-packages") and Path(entry).is_dir():
            return Path(entry)
    raise SystemExit("no site-packages on sys.path")


def modules(root: Path, packages: list[str]) -> list[tuple[str, Path]]:
    out = []
    for pkg in packages:
        base = root / pkg
        files = sorted(base.rglob("*.py")) if base.is_dir() else []
        out += [(pkg, f) for f in files if "__pycache__" not in f.parts]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--packages", default=",".join(PACKAGES))
    parser.add_argument("--rules", default="", help="comma-separated rule ids (all that fire)")
    args = parser.parse_args()
    root = site_packages()
    chosen = modules(root, [p for p in args.packages.split(",") if p])
    watched = [r for r in args.rules.split(",") if r] or WATCHED
    flagged: dict[str, list[str]] = defaultdict(list)
    per_pkg: dict[str, int] = defaultdict(int)
    started = time.process_time()
    for pkg, path in chosen:
        per_pkg[pkg] += 1
        rel = path.relative_to(root).as_posix()
        content = path.read_text(encoding="utf-8", errors="replace")
        task = TaskContext(kind="repo", target_package=pkg.strip("_"), protected_paths=["tests/"])
        hits = screen_detailed(WriteFileAction(path=rel, content=content), task).hits
        for rule in {h.rule.id for h in hits}:
            flagged[rule].append(rel)
    cpu = time.process_time() - started
    total = len(chosen)
    rows = []
    for rule in sorted(set(watched) | set(flagged)):
        found = flagged.get(rule, [])
        rows.append(
            {
                "rule": rule,
                "modules": total,
                "flagged": len(found),
                "rate": f"{len(found) / total:.2%}" if total else "-",
                "examples": ", ".join(found[:3]) + (" …" if len(found) > 3 else ""),
            }
        )
    print(
        f"{total} modules of {len(per_pkg)} packages ({cpu:.0f} s CPU): "
        + ", ".join(f"{p} {n}" for p, n in per_pkg.items())
    )
    print(table(rows, ["rule", "modules", "flagged", "rate", "examples"]))
    for rule in watched:
        for rel in flagged.get(rule, []):
            print(f"  {rule}: {rel}")


if __name__ == "__main__":
    main()
