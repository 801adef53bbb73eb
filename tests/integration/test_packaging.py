"""What a trainer's `pip install proctor` brings: the client alone. The client wheel, built
from a copy of the checkout, installed into a fresh venv of the system's Python: `proctor`
imports, its CLI runs, and no server package (core, anticheat, service, workers) lands in
that environment under its generic name. The server's packages are a wheel of their own,
built for the service image only (images/service/server-pyproject.toml).

Dependencies come from the service image's wheelhouse (`make setup` builds it), else from
the package index; build isolation fetches setuptools as `pip wheel` always does."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from proctor.imagebuild import recipes
from tests.conftest import REPO_ROOT

SERVER = ("anticheat", "core", "service", "workers")
SYSTEM_PYTHON = Path("/usr/bin/python3")
WHEELHOUSE = REPO_ROOT / "images" / ".wheels" / "service"


def run(*command: str | Path, cwd: Path | None = None) -> str:
    done = subprocess.run(
        [str(c) for c in command], capture_output=True, text=True, cwd=cwd, timeout=540
    )
    assert done.returncode == 0, f"{command}: {done.stdout[-2000:]}{done.stderr[-3000:]}"
    return done.stdout


def wheel(tmp: Path, *, server: bool) -> Path:
    """The client's wheel (or the server's) built from a copy of the checkout's source."""
    src, out = tmp / ("server-src" if server else "client-src"), tmp / "dist"
    for name in recipes.source_files(REPO_ROOT):
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO_ROOT / name, src / name)
    if server:
        shutil.copy2(REPO_ROOT / recipes.SERVER_PYPROJECT, src / "pyproject.toml")
    run(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", out, src)
    name = "proctor_server" if server else "proctor"
    (built,) = out.glob(f"{name}-*.whl")
    return built


def top_level(wheel_file: Path) -> set[str]:
    with zipfile.ZipFile(wheel_file) as archive:
        return {
            n.split("/")[0] for n in archive.namelist() if not n.split("/")[0].endswith("-info")
        }


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("wheels")
    return wheel(tmp, server=False), wheel(tmp, server=True)


def test_the_client_wheel_holds_proctor_alone(built: tuple[Path, Path]) -> None:
    client, _ = built
    assert top_level(client) == {"proctor"}


def test_the_server_wheel_holds_the_server_and_its_assets(built: tuple[Path, Path]) -> None:
    _, server = built
    assert top_level(server) == set(SERVER)
    with zipfile.ZipFile(server) as archive:
        names = set(archive.namelist())
    for asset in (
        "service/ui/templates/overview.html",
        "workers/honeypot/assets/honeypot_server.py",
        "workers/sandbox/assets/pool_server.py",
        "workers/evaluation/assets/split_grader.py",
    ):
        assert asset in names


@pytest.mark.skipif(not SYSTEM_PYTHON.exists(), reason="no system Python at /usr/bin/python3")
def test_a_trainer_installs_the_client_alone(built: tuple[Path, Path], tmp_path: Path) -> None:
    client, _ = built
    venv = tmp_path / "venv"
    run(SYSTEM_PYTHON, "-m", "venv", venv)
    index = ["--no-index", "--find-links", WHEELHOUSE] if WHEELHOUSE.is_dir() else []
    run(venv / "bin" / "python", "-m", "pip", "install", "--quiet", *index, client)
    assert "Proctor" in run(venv / "bin" / "proctor", "--help", cwd=tmp_path)
    probe = (
        "import importlib.util, proctor; from proctor import Client, Env; "
        f"print(sorted(n for n in {SERVER!r} if importlib.util.find_spec(n)))"
    )
    assert run(venv / "bin" / "python", "-I", "-c", probe, cwd=tmp_path).strip() == "[]"
