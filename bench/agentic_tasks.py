"""The task images of bench/agentic.py: small git repositories, each with a bug at its base
commit, the fix in a later commit (which the image must not carry) and a hidden test, built
by `proctor images build-task` (the user's path, offline) and pushed to a registry.

Each repository is a one-module library (`lib.py`) with a README and a visible test; the
variants differ in the function that is wrong, so every image is its own (own digest, own
layers above the shared base) as a dataset's per-instance images are.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import REPO_ROOT

GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@example.invalid",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@example.invalid",
    "PATH": "/usr/bin:/bin",
}
MODULE = "lib.py"
HIDDEN_TEST = "test_hidden.py"


@dataclass(frozen=True)
class Variant:
    name: str
    params: str
    buggy: str  # the returned expression at the base commit
    fixed: str  # ... after the (later, upstream) fix
    check: str  # the hidden test's assertion

    def module(self, *, fixed: bool) -> str:
        body = self.fixed if fixed else self.buggy
        return (
            '"""A small library."""\n\n\n'
            "def identity(x):\n    return x\n\n\n"
            f"def {self.name}({self.params}):\n    return {body}\n"
        )

    def hidden_test(self) -> str:
        return (
            f"from lib import {self.name}\n\n\ndef test_{self.name}():\n    assert {self.check}\n"
        )


VARIANTS = (
    Variant("add", "a, b", "a - b", "a + b", "add(2, 3) == 5"),
    Variant("mul", "a, b", "a + b", "a * b", "mul(3, 4) == 12"),
    Variant("maximum", "a, b", "min(a, b)", "max(a, b)", "maximum(2, 7) == 7"),
    Variant("square", "x", "x * 2", "x * x", "square(5) == 25"),
    Variant("negate", "x", "x", "-x", "negate(4) == -4"),
    Variant("half", "x", "x // 3", "x / 2", "half(5) == 2.5"),
    Variant("last", "xs", "xs[0]", "xs[-1]", "last([1, 2, 3]) == 3"),
    Variant("is_even", "x", "x % 2 == 1", "x % 2 == 0", "is_even(4) is True"),
)


@dataclass(frozen=True)
class TaskImage:
    ref: str
    base_commit: str
    variant: Variant
    build_s: float

    def episode(self) -> dict[str, Any]:
        """An interactive episode's request on this task, as a trainer sends each sample."""
        return {
            "mode": "interactive",
            "task": {
                "image": self.ref,
                "repo": {"path": "/testbed", "base_commit": self.base_commit},
                "tests": {"files": {HIDDEN_TEST: self.variant.hidden_test()}},
                "limits": {"timeout_s": 60},
            },
        }

    def fix(self) -> dict[str, Any]:
        return {"type": "write_file", "path": MODULE, "content": self.variant.module(fixed=True)}


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=repo, env=GIT_ENV, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def repository(root: Path, variant: Variant) -> tuple[Path, str]:
    """A bundle of a repository whose base commit has the bug and a later one the fix:
    (bundle, base commit)."""
    repo = root / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "README.md").write_text(f"# lib\n\n`{variant.name}` is wrong; fix it.\n")
    (repo / MODULE).write_text(variant.module(fixed=False))
    (repo / "tests" / "test_visible.py").write_text(
        "from lib import identity\n\n\ndef test_identity():\n    assert identity(3) == 3\n"
    )
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "initial")
    base = _git(repo, "rev-parse", "HEAD")
    (repo / MODULE).write_text(variant.module(fixed=True))
    _git(repo, "commit", "-q", "-am", f"fix {variant.name}")  # the future, not in the image
    bundle = root / "repo.bundle"
    _git(repo, "bundle", "create", "-q", str(bundle), "--all")
    return bundle, base


def build(registry_host: str, index: int, tag: str, scratch: Path) -> TaskImage:
    """Build and push one task image with `proctor images build-task`; the local copy is
    removed, so the workers pull it as they would a dataset's."""
    variant = VARIANTS[index % len(VARIANTS)]
    root = scratch / f"task-{index}"
    root.mkdir(parents=True)
    bundle, base = repository(root, variant)
    ref = f"{registry_host}/agentic/{variant.name}-{index}:{tag}"
    spec = {
        "image": ref,
        "repo": {"bundle": bundle.name, "base_commit": base, "path": "/testbed"},
        "test_command": f"python3 -m pytest -q {HIDDEN_TEST}",
    }
    (root / "spec.json").write_text(json.dumps(spec))
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "proctor.cli", "images", "build-task", "spec.json"],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"build-task {ref} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    build_s = time.monotonic() - started
    subprocess.run(["docker", "rmi", "-f", ref], capture_output=True, check=False)
    return TaskImage(ref=ref, base_commit=base, variant=variant, build_s=build_s)
