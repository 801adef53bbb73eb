"""`proctor images build-task SPEC.json`: a task image built offline from a repository bundle
with a later commit in it, a requirement and an editable install, pushed to a real registry;
then run as a sandbox, by reference, like any task image."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path

import docker
import httpx
import pytest

from tests.conftest import REPO_ROOT
from tests.e2e.helpers import GIT_ENV
from tests.registry import BASE, Registry, running_registry
from workers.sandbox.docker import DEPLOYMENT_LABEL, Engine, SandboxSpec
from workers.sandbox.protocol import Run, RunResult
from workers.sandbox.sandbox import Sandbox

pytestmark = pytest.mark.usefixtures("docker_ready")

PYPROJECT = """\
[build-system]
requires = ["setuptools"]
build-backend = "setuptools.build_meta"

[project]
name = "calc"
version = "0.1"
"""
BUGGY = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
TEST = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=repo, env=GIT_ENV, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def repository(root: Path) -> tuple[Path, str, str]:
    """A bundle with a base commit and a later fix: (bundle, base, fix)."""
    repo = root / "calc"
    (repo / "calc").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "pyproject.toml").write_text(PYPROJECT)
    (repo / "calc" / "__init__.py").write_text(BUGGY)
    (repo / "tests" / "test_calc.py").write_text(TEST)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    base = git(repo, "rev-parse", "HEAD")
    (repo / "calc" / "__init__.py").write_text(FIXED)
    git(repo, "commit", "-q", "-am", "the fix (later than the task's base)")
    fix = git(repo, "rev-parse", "HEAD")
    git(repo, "tag", "v0.2")
    bundle = root / "calc.bundle"
    git(repo, "bundle", "create", "-q", str(bundle), "--all")
    return bundle, base, fix


@pytest.fixture
def registry() -> Iterator[Registry]:
    with tempfile.TemporaryDirectory() as tmp, running_registry(Path(tmp)) as running:
        yield running


def test_a_task_image_is_built_offline_pushed_and_runs_at_its_base(
    registry: Registry, tmp_path: Path
) -> None:
    bundle, base, fix = repository(tmp_path)
    image = registry.ref("swe/calc", uuid.uuid4().hex[:8])
    spec = {
        "image": image,
        "repo": {"bundle": bundle.name, "base_commit": base, "path": "/testbed"},
        "python": "3.11",
        "requirements": ["six==1.16.0"],
        "install": ["python3 -m pip install -e ."],
        "test_command": "python3 -m pytest -q tests",
    }
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    client = docker.from_env()
    deployment = f"test-{uuid.uuid4().hex[:8]}"
    engine = Engine(worker="build-task-test", host="test", deployment=deployment, holder_image=BASE)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "proctor.cli", "images", "build-task", "spec.json"],
            cwd=tmp_path,
            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO_ROOT), "HOME": str(tmp_path)},
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        name, _, tag = image.partition("/")[2].rpartition(":")
        tags = httpx.get(f"http://{registry.host}/v2/{name}/tags/list").json()
        assert tag in tags["tags"]  # pushed
        labels = client.images.get(image).labels
        assert labels["org.proctor.task.base_commit"] == base
        assert labels["org.proctor.task.test_command"] == "python3 -m pytest -q tests"

        client.images.remove(image)  # from the registry, as a worker gets it
        engine.pull(image, timeout_s=300)
        container = engine.create(SandboxSpec(image=image), name=f"built-{uuid.uuid4().hex[:10]}")
        try:
            sandbox = Sandbox(engine, container, episode_id=uuid.uuid4().hex)

            def run(command: str) -> RunResult:
                op = Run(command=command, timeout_s=120, output_bytes=1 << 16)
                result = sandbox.program([op], timeout_s=130).result(op)
                assert isinstance(result, RunResult)
                return result

            head = run("git -C /testbed rev-parse HEAD")
            assert head.stdout.strip() == base
            later = run(f"git -C /testbed cat-file -e {fix}")
            assert later.exit_code != 0  # the later commit is not in the image
            refs = run("git -C /testbed for-each-ref; git -C /testbed log --all --format=%H")
            assert refs.stdout.split() == [base]
            imported = run("cd / && python3 -c 'import six, calc; print(calc.__file__)'")
            assert imported.exit_code == 0, imported.stderr
            assert imported.stdout.strip() == "/testbed/calc/__init__.py"
            tests = run("cd /testbed && python3 -m pytest -q -p no:cacheprovider tests")
            assert tests.exit_code == 1 and "1 failed" in tests.stdout  # the base's bug
        finally:
            engine.remove(container.id)
    finally:
        engine.release_networks()
        for c in client.containers.list(
            all=True, filters={"label": f"{DEPLOYMENT_LABEL}={deployment}"}
        ):
            c.remove(force=True)
        with suppress(docker.errors.ImageNotFound):
            client.images.remove(image, force=True)
        client.close()
