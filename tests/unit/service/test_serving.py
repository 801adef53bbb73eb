"""The API's listeners: its own port, and SandboxFusion's when one is set."""

from __future__ import annotations

import pytest

from core.config import Settings
from service.serving import ports


def test_one_port_unless_asked() -> None:
    assert ports(Settings(), 8000) == [8000]


def test_the_sandboxfusion_port_is_a_second_listener() -> None:
    assert ports(Settings(sandboxfusion_port=8080), 8000) == [8000, 8080]


def test_the_same_port_twice_is_one_listener() -> None:
    assert ports(Settings(sandboxfusion_port=8000), 8000) == [8000]


def test_the_setting_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROCTOR_SANDBOXFUSION_PORT", "8080")
    assert Settings().sandboxfusion_port == 8080
    monkeypatch.setenv("PROCTOR_SANDBOXFUSION_PORT", "70000")
    with pytest.raises(ValueError):
        Settings()
