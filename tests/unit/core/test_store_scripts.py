"""Each store script's keys and arguments, pinned by name and position, and its body
reading exactly what it declares (core/store/scripts.py)."""

from __future__ import annotations

import re

import pytest

from core.store.admission import CREATE
from core.store.lifecycle import ADVANCE, FINISH
from core.store.scripts import LuaScript
from core.store.shares import RELEASE_OF, RESERVE

# KEYS and ARGV as Redis receives them, in order; a change here is a change of the
# script's calling convention, made on purpose
LAYOUTS: dict[str, tuple[LuaScript, tuple[str, ...], tuple[str, ...]]] = {
    "create": (
        CREATE,
        ("active", "queued", "pace", "workers"),
        ("max_queued", "max_wait_s", "dedup_ttl", "prefix", "live_since"),
    ),
    "advance": (ADVANCE, ("episode", "events", "queued", "pace"), ("id", "status")),
    "finish": (
        FINISH,
        (
            "episode",
            "active",
            "verdicts",
            "latency_total",
            "latency_queued",
            "latency_run",
            "latency_sandbox_start",
            "events",
            "queued",
            "pace",
            "minute",
            "rules",
            "categories",
        ),
        (
            "id",
            "status",
            "result",
            "verdict",
            "ttl",
            "total_s",
            "queued_s",
            "run_s",
            "sandbox_start_s",
            "finished",
            "buckets",
            "summary",
            "trim",
            "bucket",
            "rules",
            "categories",
        ),
    ),
    "reserve": (
        RESERVE,
        ("reservations", "line", "asked"),
        (
            "episode",
            "worker",
            "millicpus",
            "memory_mb",
            "budget_millicpus",
            "budget_memory_mb",
            "ttl",
            "left_s",
        ),
    ),
    "release_of": (RELEASE_OF, ("reservations",), ("worker",)),
}
RESTS = {
    "create": (None, "requests", ("id", "dedup", "created", "ttl", "request", "mode")),
    "advance": (None, "fields", ()),
    "finish": ("listed", None, ()),
    "reserve": (None, None, ()),
    "release_of": (None, "episodes", ()),
}


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_the_layout_is_pinned(name: str) -> None:
    script, script_keys, args = LAYOUTS[name]
    assert script.name == name
    assert (script.keys, script.args) == (script_keys, args)
    assert (script.rest_keys, script.rest_args, script.rest_fields) == RESTS[name]


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_the_body_reads_what_it_declares_and_no_position(name: str) -> None:
    script = LAYOUTS[name][0]
    assert not re.search(r"\b(KEYS|ARGV)\b", script.body + script.constants)
    read_keys = set(re.findall(r"\bKEY\.(\w+)", script.body))
    read_args = set(re.findall(r"\bARG\.(\w+)", script.body))
    assert read_keys == set(script.keys) | ({script.rest_keys} - {None})
    assert read_args == set(script.args) | ({script.rest_args} - {None})
    fields = set(re.findall(r"\br\.(\w+)", script.body))
    assert fields <= set(script.rest_fields)


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_the_builder_puts_each_name_at_its_place(name: str) -> None:
    script = LAYOUTS[name][0]
    keys = {k: f"key:{k}" for k in script.keys}
    args = {a: f"arg:{a}" for a in script.args}
    rest = [{f: f"{f}{i}" for f in script.rest_fields} for i in range(2)]
    rest_args = (rest if script.rest_fields else ["x", "y"]) if script.rest_args else []
    rest_keys = ["key:a", "key:b"] if script.rest_keys else []
    got_keys, got_args = script.layout(keys, args, rest_keys=rest_keys, rest_args=rest_args)
    assert got_keys[: len(script.keys)] == [f"key:{k}" for k in script.keys]
    assert got_keys[len(script.keys) :] == rest_keys
    assert got_args[: len(script.args)] == [f"arg:{a}" for a in script.args]
    flat = [r[f] for r in rest for f in script.rest_fields] if script.rest_fields else rest_args
    assert got_args[len(script.args) :] == flat
    # the prelude names the same places
    for i, k in enumerate(script.keys, 1):
        assert f"{k} = KEYS[{i}]" in script.prelude
    for i, a in enumerate(script.args, 1):
        assert f"{a} = ARGV[{i}]" in script.prelude


def test_a_missing_or_unknown_name_fails_before_redis() -> None:
    keys = {k: k for k in ADVANCE.keys}
    with pytest.raises(ValueError, match="missing \\['status'\\]"):
        ADVANCE.layout(keys, {"id": "ep"})
    with pytest.raises(ValueError, match="unknown \\['stauts'\\]"):
        ADVANCE.layout(keys, {"id": "ep", "status": "running", "stauts": "x"})
    with pytest.raises(ValueError, match="trailing"):
        RESERVE.layout(
            {k: k for k in RESERVE.keys}, dict.fromkeys(RESERVE.args, ""), rest_keys=["x"]
        )
    with pytest.raises(ValueError, match="requests"):
        CREATE.layout(
            {k: k for k in CREATE.keys}, dict.fromkeys(CREATE.args, ""), rest_args=[{"id": "x"}]
        )
