"""SandboxFusion's `POST /run_code` as a benchmark target: the client every `/run_code` row
uses (SandboxFusion's and Proctor's alike), and a SandboxFusion server started from a
checkout for the length of a `with` block.

The checkout is set up beforehand (its locked requirements in a venv, by default at
`DIR/../venv`; `sudo` and cgroup-tools for `lite`; the `sandbox-runtime` environment its
Python runner activates, naming the interpreter programs run on); nothing of it is part of
this repository. Its server runs with its `sandbox/configs/local.yaml`, the
`isolation` key set to the mode measured (`none`: a subprocess of the server, as the user
who runs it; `lite`: namespaces, cgroups, an overlay root, run by root through sudo).
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import aiohttp
import httpx
from harness import RESULTS, free_port, summary

MODES = ("none", "lite")
START_S = 120.0  # its start-up imports its dataset registry: seconds on this machine
# the variables its start-up reads; the PATH is the system's, so its runner's interpreter
# is the one its `sandbox-runtime` environment names, not this bench's venv
ENVIRONMENT = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
}


def commit(checkout: Path) -> str:
    """The checkout's commit, as `git` names it (with `-dirty` when it has changes)."""
    return subprocess.run(
        ["git", "-C", str(checkout), "describe", "--always", "--dirty", "--abbrev=12"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def config(checkout: Path, mode: str) -> str:
    """The name of a config that is `local.yaml` with `isolation: <mode>` (written into the
    checkout's `sandbox/configs/` when it is not there yet): `SANDBOX_CONFIG` names it."""
    name = f"bench_{mode}"
    path = checkout / "sandbox" / "configs" / f"{name}.yaml"
    if not path.exists():
        local = (checkout / "sandbox" / "configs" / "local.yaml").read_text()
        changed, count = re.subn(r"(?m)^(\s+isolation:\s*)\S+", rf"\g<1>{mode}", local)
        if count != 1:
            raise RuntimeError(f"no single `isolation:` key in {path.parent / 'local.yaml'}")
        path.write_text(changed)
    return name


@contextmanager
def served(checkout: Path, mode: str, python: Path) -> Iterator[str]:
    """SandboxFusion's server (one uvicorn worker, as its image runs it) on a free port of
    127.0.0.1 in a session of its own, until the block ends; then stopped by its pid."""
    port = free_port()
    RESULTS.mkdir(parents=True, exist_ok=True)
    log = open(RESULTS / f"sandboxfusion-{mode}.log", "wb")  # noqa: SIM115 - closed below
    command = [str(python), "-m", "uvicorn", "sandbox.server.server:app", "--workers", "1"]
    process = subprocess.Popen(
        [*command, "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"],
        cwd=checkout,
        env={**os.environ, **ENVIRONMENT, "SANDBOX_CONFIG": config(checkout, mode)},
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_S
        while True:
            try:
                if httpx.get(f"{url}/v1/ping", timeout=2).json() == "pong":
                    break
            except (httpx.TransportError, ValueError):
                pass
            if process.poll() is not None:
                raise RuntimeError(f"SandboxFusion ({mode}) exited; see {log.name}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"SandboxFusion ({mode}) did not answer; see {log.name}")
            time.sleep(0.5)
        yield url
    finally:
        stop(process)
        log.close()


def stop(process: subprocess.Popen[bytes]) -> None:
    """Its session's process group (its pid: it leads the session it was started in)."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def passed(status: int, body: Any) -> bool:
    """SandboxFusion's own pass: the request ran and the program exited 0."""
    if status != 200 or not isinstance(body, dict):
        return False
    return (
        body.get("status") == "Success" and (body.get("run_result") or {}).get("return_code") == 0
    )


async def run_code(url: str, programs: list[str], concurrency: int, tag: str) -> dict[str, Any]:
    """Every program as `POST /run_code` {"code", "language": "python"}, at most `concurrency`
    at once, after one untimed warm-up request. `tag` goes into a comment at the end of each
    program, so a server that de-duplicates requests runs each round's programs anew. A
    request's clock starts once it has its slot (it is sent at once)."""
    latencies: list[float] = []
    ok = 0
    connector = aiohttp.TCPConnector(limit=concurrency)
    timeout = aiohttp.ClientTimeout(total=600)
    async with aiohttp.ClientSession(url, connector=connector, timeout=timeout) as session:

        async def post(code: str) -> bool:
            body = {"code": code, "language": "python"}
            async with session.post("/run_code", json=body) as answer:
                return passed(answer.status, await answer.json(content_type=None))

        await post(f"{programs[0]}\n# warm-up {tag}\n")
        slots = asyncio.Semaphore(concurrency)

        async def one(code: str) -> None:
            nonlocal ok
            async with slots:
                started = time.monotonic()
                good = await post(f"{code}\n# {tag}\n")
                latencies.append(time.monotonic() - started)
            ok += good

        started = time.monotonic()
        await asyncio.gather(*(one(p) for p in programs))
        elapsed = time.monotonic() - started
    return {
        "episodes": len(programs),
        "elapsed_s": round(elapsed, 2),
        "per_s": round(len(programs) / elapsed, 2),
        "ok": ok,
        **summary(latencies),
    }
