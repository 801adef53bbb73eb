"""The API's listeners: its port and, when `PROCTOR_SANDBOXFUSION_PORT` is set, a second one.

Some trainers' SandboxFusion clients build the URL themselves with SandboxFusion's port
(SkyRL's coder1 verifier posts to `http://{server}:8080/run_code`), so changing the host
in their config is not enough. The second port serves the same application on one more
socket of the same processes: the same routes, the same lifespan, nothing to keep in step.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import sys
from typing import Any

import uvicorn
from uvicorn.supervisors import Multiprocess

from core.config import Settings

logger = logging.getLogger(__name__)

APP = "service.main:create_app"
STARTUP_FAILURE = 3  # uvicorn's exit status when the server never started
# An idle keep-alive connection is closed after this long: longer than clients keep theirs
# (httpx 5 s, aiohttp 15 s), so a client never sends on one the server is closing at that
# moment — uvicorn's default, 5 s, equals httpx's and lost POSTs under load (ReadError)
KEEP_ALIVE_S = 75


@dataclasses.dataclass(frozen=True, kw_only=True)
class Listen:
    host: str
    port: int
    workers: int = 1
    graceful_shutdown_s: int = 3


def ports(settings: Settings, port: int) -> list[int]:
    """The ports to listen on: the API's, then SandboxFusion's if set and different."""
    extra = settings.sandboxfusion_port
    return [port] if extra is None or extra == port else [port, extra]


def serve(settings: Settings, listen: Listen) -> None:
    """Run uvicorn on every port of `ports` until it is stopped, as `uvicorn.run` does."""
    options: dict[str, Any] = {
        "factory": True,
        "host": listen.host,
        "workers": listen.workers,
        "log_level": "info",
        "timeout_graceful_shutdown": listen.graceful_shutdown_s,
        "timeout_keep_alive": KEEP_ALIVE_S,
    }
    wanted = ports(settings, listen.port)
    if len(wanted) == 1:
        uvicorn.run(APP, port=listen.port, **options)
        return
    configs = [uvicorn.Config(APP, port=port, **options) for port in wanted]
    logger.info("also serving on port %d, for SandboxFusion clients", wanted[1])
    # every port's socket is bound here, then served by the same processes
    sockets = [config.bind_socket() for config in configs]
    config = configs[0]
    if listen.workers > 1:
        Multiprocess(config, sockets=sockets).run()
        return
    config.load_app()
    server = uvicorn.Server(config)
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is how it is stopped
        server.run(sockets=sockets)
    if not server.started:
        sys.exit(STARTUP_FAILURE)
