"""An exec into a sandbox that stopped is told apart from an engine failure: why it stopped
(its init OOM-killed, most often) is then read as evidence, not called our failure."""

from __future__ import annotations

import pytest
import requests
from docker.errors import APIError

from workers.sandbox.engine.errors import ContainerStopped, exec_failed

STOPPED = "container 0123456789ab is not running: Exited (137) Less than a second ago"


def api_error(status: int, explanation: str) -> APIError:
    response = requests.Response()
    response.status_code = status
    return APIError(f"{status} Server Error", response=response, explanation=explanation)


@pytest.mark.parametrize("status", [409, 500])  # 500: it stopped between create and start
def test_an_exec_into_a_stopped_sandbox_is_container_stopped(status: int) -> None:
    error = exec_failed(api_error(status, STOPPED), "0123456789abcdef")
    assert isinstance(error, ContainerStopped) and "Exited (137)" in str(error)


def test_another_engine_error_is_not() -> None:
    error = exec_failed(api_error(500, "no such exec"), "0123456789abcdef")
    assert not isinstance(error, ContainerStopped)
