"""A real local judge for tests: llama.cpp's server with SmolLM2-135M (`scripts/judge.sh`)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from tests.conftest import REPO_ROOT, free_port

SCRIPT = REPO_ROOT / "scripts" / "judge.sh"


@dataclass
class LocalJudge:
    url: str
    port: int | None = None  # set when this session started the server and must stop it
    env: dict[str, str] = field(default_factory=dict)

    def stop(self) -> None:
        if self.port is not None:
            subprocess.run(["bash", str(SCRIPT), "stop"], env=self.env, check=True, timeout=60)


def _answers(url: str) -> bool:
    try:
        return httpx.get(f"{url}/models", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


def _start_local_judge(state_dir: Path) -> LocalJudge:
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip(
            "llama-cpp-python[server] is not installed in .venv: run `scripts/judge.sh install` "
            "(compiles llama.cpp once) or set PROCTOR_JUDGE_URL to a running judge"
        )
    port = free_port()
    env = {**os.environ, "PROCTOR_JUDGE_PORT": str(port), "PROCTOR_JUDGE_STATE_DIR": str(state_dir)}
    started = subprocess.run(
        ["bash", str(SCRIPT), "start"], env=env, capture_output=True, text=True, timeout=600
    )
    if started.returncode != 0:
        pytest.fail(f"scripts/judge.sh start failed:\n{started.stdout}\n{started.stderr}")
    return LocalJudge(url=f"http://127.0.0.1:{port}/v1", port=port, env=env)


@pytest.fixture(scope="session")
def judge_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A judge already running at PROCTOR_JUDGE_URL, else a private one on a free port."""
    configured = os.environ.get("PROCTOR_JUDGE_URL", "").rstrip("/")
    if configured:
        if not _answers(configured):
            pytest.fail(f"PROCTOR_JUDGE_URL={configured} does not answer GET /models")
        yield configured
        return
    local = _start_local_judge(tmp_path_factory.mktemp("judge"))
    try:
        yield local.url
    finally:
        local.stop()
