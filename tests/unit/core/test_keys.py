"""The key schema against the store's docstring table, and the scripts against the statuses."""

from __future__ import annotations

import re

from core import keys, store
from core.store.admission import CREATE
from core.store.lifecycle import ADVANCE, FINISH
from core.store.scripts import LUA_STATUSES
from proctor.models import EpisodeStatus


def families() -> dict[str, str]:
    """Each key family of core/keys.py → the key it builds (functions with `{}` holes)."""
    built = {
        name: value
        for name, value in vars(keys).items()
        if name.isupper() and isinstance(value, str) and name != "PREFIX"
    }
    for name, value in vars(keys).items():
        if callable(value) and getattr(value, "__module__", None) == keys.__name__:
            built[f"{name}()"] = value("{}")
    return built


def test_every_key_family_is_in_the_store_table() -> None:
    table = store.__doc__ or ""
    for name, key in families().items():
        if name.endswith("_PREFIX"):  # the start of a family's keys, listed with its builder
            continue
        assert key.startswith(keys.PREFIX), name
        pattern = re.escape(key.removeprefix(keys.PREFIX)).replace(r"\{\}", r"\{[a-z0-9]+\}")
        row = re.search(rf"^\s+{pattern}\s.*\s{re.escape(name)}$", table, re.MULTILINE)
        assert row, f"{name} ({key}) is missing from core/store/__init__.py's key table"


def test_every_record_field_is_in_the_store_table() -> None:
    fields = (store.__doc__ or "").split("Fields of")[1]
    for field in store.RecordField:
        assert field.name == field.value  # the hash key is the member's value
        assert re.search(rf"\b{field.value}\b", fields), field


def test_the_scripts_name_no_status_and_cut_no_key() -> None:
    statuses = {s.value for s in EpisodeStatus}
    for script in (FINISH, ADVANCE, CREATE):
        body = script.body
        quoted = set(re.findall(r"'([a-z_]+)'", body))
        assert not quoted & statuses, quoted & statuses
        assert "string.sub" not in body


def test_the_generated_statuses_are_the_terminal_ones() -> None:
    terminal = {s.value for s in EpisodeStatus if s.terminal}
    line = LUA_STATUSES.splitlines()[0]
    assert set(re.findall(r'\["([a-z_]+)"\] = true', line)) == terminal
