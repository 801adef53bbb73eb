"""Every default of `Settings` is the named constant of core/defaults.py."""

from __future__ import annotations

import pytest

from core import defaults
from core.config import Settings

# no constant: unset by default, or the machine's own (the hostname)
UNSET = {
    name
    for name, field in Settings.model_fields.items()
    if field.default is None or field.default_factory in (list, dict)
}
DERIVED = {"host_id"}


@pytest.mark.parametrize("name", sorted(set(Settings.model_fields) - UNSET - DERIVED))
def test_the_default_is_the_named_constant(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(f"PROCTOR_{name.upper()}", raising=False)
    constant = getattr(defaults, name.upper())
    real = getattr(Settings(), name)
    assert real == (dict(constant) if name == "images" else constant)


def test_the_judges_defaults_are_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """`JudgeSettings`' own defaults (tests and tools make one directly) are the named
    constants, as the `Settings` it is read from in a worker."""
    from anticheat.judge.settings import JudgeSettings

    for name in Settings.model_fields:
        monkeypatch.delenv(f"PROCTOR_{name.upper()}", raising=False)
    assert JudgeSettings() == JudgeSettings.from_settings(Settings())
