"""docs/configuration.md against the code: every setting documented, every documented
default the real one, and every setting passed to the compose stack's containers."""

from __future__ import annotations

import dataclasses
import re
import socket
from enum import Enum
from typing import Any

import pytest
import yaml

from core.config import Settings
from tests.conftest import REPO_ROOT
from workers.anticheat.judge import JudgeSettings

DOC = REPO_ROOT / "docs" / "configuration.md"
COMPOSE = REPO_ROOT / "docker-compose.yml"
UNSET = "(none)"
ROW = re.compile(r"^\|\s*`(PROCTOR_[A-Z0-9_]+)`\s*\|\s*([^|]+?)\s*\|")
# what the stack fixes for its containers instead of passing the caller's value through
FIXED_BY_COMPOSE = {"PROCTOR_REDIS_URL", "PROCTOR_HONEYPOT_NETWORK", "PROCTOR_HOST",
                    "PROCTOR_PORT"}
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
    (rows,) = [rows for heading, rows in sections().items() if heading.startswith(prefix)]
    return rows


def literal(cell: str) -> str | None:
    """The value a default cell shows: `x` → x, (none) → None."""
    if cell == UNSET:
        return None
    match = re.fullmatch(r"`([^`]*)`", cell)
    assert match, f"a default is a `literal` or {UNSET}, not {cell!r}"
    return match.group(1)


# ------------------------------------------------------------------ service settings


def settings_variables() -> set[str]:
    return {f"PROCTOR_{name.upper()}" for name in Settings.model_fields}


def test_every_setting_is_documented_and_nothing_else() -> None:
    assert set(table("Service")) == settings_variables()


@pytest.mark.parametrize("name", sorted(Settings.model_fields))
def test_documented_setting_defaults_are_the_real_ones(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for variable in settings_variables():
        monkeypatch.delenv(variable, raising=False)
    variable = f"PROCTOR_{name.upper()}"
    cell = table("Service")[variable]
    default = getattr(Settings(), name)
    if name == "host_id":
        assert "hostname" in cell and default == socket.gethostname()
        return
    value = literal(cell)
    if value is None:
        assert not default, f"{variable} is documented as unset but defaults to {default!r}"
        return
    monkeypatch.setenv(variable, value)
    assert getattr(Settings(), name) == default, f"{variable}: documented {value!r}, real {default!r}"


# ------------------------------------------------------------------ judge settings


def probe_value(default: Any) -> str:
    """A valid value other than the default, to see whether from_env reads a variable."""
    if isinstance(default, Enum):
        return str(next(m.value for m in type(default) if m is not default))
    if isinstance(default, bool):
        return str(not default)
    if isinstance(default, int):
        return str(default + 1)
    if isinstance(default, float):
        return str(default / 2)
    return "probe"


def judge_variables() -> set[str]:
    """The PROCTOR_JUDGE_* variables from_env actually reads (found by trying each field)."""
    defaults = JudgeSettings.from_env({})
    read = set()
    for field in dataclasses.fields(JudgeSettings):
        variable = f"PROCTOR_JUDGE_{field.name.upper()}"
        default = getattr(defaults, field.name)
        changed = JudgeSettings.from_env({variable: probe_value(default)})
        if getattr(changed, field.name) != default:
            read.add(variable)
    return read


def test_every_judge_variable_is_documented_and_nothing_else() -> None:
    assert set(table("LLM judge")) == judge_variables()


def test_documented_judge_defaults_are_the_real_ones() -> None:
    defaults = JudgeSettings.from_env({})
    for variable, cell in table("LLM judge").items():
        name = variable.removeprefix("PROCTOR_JUDGE_").lower()
        value = literal(cell)
        if value is None:
            assert not getattr(defaults, name), variable
            continue
        documented = JudgeSettings.from_env({variable: value})
        assert getattr(documented, name) == getattr(defaults, name), variable


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
        expected -= {"PROCTOR_HOST", "PROCTOR_PORT"}  # the API's, not the worker's
    assert set(environment) == expected
    passed = {k for k, v in environment.items() if v is None}
    assert passed == expected - FIXED_BY_COMPOSE


def test_compose_variables_are_documented() -> None:
    text = COMPOSE.read_text() + (REPO_ROOT / "scripts" / "compose.sh").read_text()
    used = set(re.findall(r"\$\{(PROCTOR_[A-Z0-9_]+)", text))
    documented = set(table("Compose"))
    assert used - settings_variables() - judge_variables() <= documented
    assert documented <= used
