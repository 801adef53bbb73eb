"""docs/configuration.md against the code: every setting documented, every documented
default the real one, and every setting passed to the compose stack's containers."""

from __future__ import annotations

import re
import socket
from typing import Any

import pytest
import yaml

from core.config import Settings
from tests.conftest import REPO_ROOT

DOC = REPO_ROOT / "docs" / "configuration.md"
COMPOSE = REPO_ROOT / "docker-compose.yml"
UNSET = "(none)"
ROW = re.compile(r"^\|\s*`(PROCTOR_[A-Z0-9_]+)`\s*\|\s*([^|]+?)\s*\|")
# what the stack fixes for its containers instead of passing the caller's value through
# the API's listeners are the stack's: inside its container 8000, and 8080 for SandboxFusion
API_PORTS = {"PROCTOR_HOST", "PROCTOR_PORT", "PROCTOR_SANDBOXFUSION_PORT"}
FIXED_BY_COMPOSE = {"PROCTOR_REDIS_URL", "PROCTOR_HONEYPOT_NETWORK", *API_PORTS}
NOT_PASSED_BY_COMPOSE = {"PROCTOR_HOST_ID"}  # each worker container is a host of its own


def sections() -> dict[str, dict[str, str]]:
    """`## heading` → {variable: default cell} for the table rows under it."""
    found: dict[str, dict[str, str]] = {}
    heading = ""
    for line in DOC.read_text().splitlines():
        if line.startswith("## "):
            heading = line[3:].strip()
        elif match := ROW.match(line):
            found.setdefault(heading, {})[match.group(1)] = match.group(2)
    return found


def table(prefix: str) -> dict[str, str]:
    """The rows of the sections whose heading starts with `prefix` (one or several)."""
    found = [rows for heading, rows in sections().items() if heading.startswith(prefix)]
    assert found, f"no section starts with {prefix!r}"
    return {k: v for rows in found for k, v in rows.items()}


def literal(cell: str) -> str | None:
    """The value a default cell shows: `x` → x, (none) → None."""
    if cell == UNSET:
        return None
    match = re.fullmatch(r"`([^`]*)`", cell)
    assert match, f"a default is a `literal` or {UNSET}, not {cell!r}"
    return match.group(1)


# ------------------------------------------------------------------ service settings

JUDGE = "judge_"  # the judge's fields of Settings have a table of their own


def settings_variables() -> set[str]:
    return {
        f"PROCTOR_{name.upper()}" for name in Settings.model_fields if not name.startswith(JUDGE)
    }


def test_every_setting_is_documented_and_nothing_else() -> None:
    assert set(table("Service")) == settings_variables()


def default_is_documented(name: str, cell: str, monkeypatch: pytest.MonkeyPatch) -> None:
    variable = f"PROCTOR_{name.upper()}"
    default = getattr(Settings(), name)
    if name == "host_id":
        assert "hostname" in cell and default == socket.gethostname()
        return
    value = literal(cell)
    if value is None:
        assert not default, f"{variable} is documented as unset but defaults to {default!r}"
        return
    monkeypatch.setenv(variable, value)
    assert getattr(Settings(), name) == default, (
        f"{variable}: documented {value!r}, real {default!r}"
    )


def clear_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in settings_variables() | judge_variables():
        monkeypatch.delenv(variable, raising=False)


@pytest.mark.parametrize(
    "name", sorted(n for n in Settings.model_fields if not n.startswith(JUDGE))
)
def test_documented_setting_defaults_are_the_real_ones(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    clear_environment(monkeypatch)
    default_is_documented(name, table("Service")[f"PROCTOR_{name.upper()}"], monkeypatch)


# ------------------------------------------------------------------ judge settings


def judge_variables() -> set[str]:
    return {f"PROCTOR_{name.upper()}" for name in Settings.model_fields if name.startswith(JUDGE)}


def test_every_judge_variable_is_documented_and_nothing_else() -> None:
    assert set(table("LLM judge")) == judge_variables()


def test_documented_judge_defaults_are_the_real_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    clear_environment(monkeypatch)
    for variable, cell in table("LLM judge").items():
        with monkeypatch.context() as scoped:
            default_is_documented(variable.removeprefix("PROCTOR_").lower(), cell, scoped)


# ------------------------------------------------------------------ the compose stack


def compose_environment(service: str) -> dict[str, Any]:
    spec = yaml.safe_load(COMPOSE.read_text())
    environment: dict[str, Any] = spec["services"][service]["environment"]
    return environment


@pytest.mark.parametrize("service", ["api", "worker"])
def test_compose_passes_every_setting_through(service: str) -> None:
    environment = compose_environment(service)
    expected = (settings_variables() | judge_variables()) - NOT_PASSED_BY_COMPOSE
    if service == "worker":
        expected -= API_PORTS  # the API's, not the worker's
    assert set(environment) == expected
    passed = {k for k, v in environment.items() if v is None}
    assert passed == expected - FIXED_BY_COMPOSE


def test_compose_variables_are_documented() -> None:
    text = COMPOSE.read_text() + (REPO_ROOT / "scripts" / "compose.sh").read_text()
    used = set(re.findall(r"\$\{(PROCTOR_[A-Z0-9_]+)", text))
    documented = set(table("Compose"))
    assert used - settings_variables() - judge_variables() <= documented
    assert documented <= used
