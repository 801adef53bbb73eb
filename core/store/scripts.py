"""Lua scripts that take their keys and arguments by name.

Redis hands a script two positional lists, KEYS and ARGV. A `LuaScript` declares the
names once, in the order the lists hold them; a generated prelude puts them in two tables,
so a body reads `KEY.episode` and `ARG.ttl`, never `KEYS[9]` or `ARGV[14]`, and the
Python side passes mappings (`BoundScript.__call__`) that are laid out by the same
declaration and checked against it: adding an argument moves no other, and a name left
out or misspelt fails before Redis is asked. What does not fit a fixed list comes last:
`rest_keys` names the trailing keys (a list), `rest_args` the trailing arguments, a flat
list or, with `rest_fields`, a list of records of those fields. The values stay the
strings Redis would have received positionally (no JSON to decode in Redis's one thread,
no float cut to 14 digits by Lua). tests/unit/core/test_store_scripts.py pins each
script's layout.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import redis
from redis.commands.core import Script

from proctor.models import EpisodeMode, EpisodeStatus

TERMINAL = tuple(s.value for s in EpisodeStatus if s.terminal)
# an identical request does not share an episode that ended like this: it runs again
UNSHAREABLE = (EpisodeStatus.failed.value, EpisodeStatus.cancelled.value)


def _lua_set(name: str, values: Iterable[str]) -> str:
    items = ", ".join(f"[{json.dumps(v)}] = true" for v in values)
    return f"local {name} = {{{items}}}\n"


# The statuses the scripts need, generated from `EpisodeStatus` and put in front of those
# that compare statuses (`LuaScript.statuses`).
LUA_STATUSES = (
    _lua_set("TERMINAL", TERMINAL)
    + _lua_set("UNSHAREABLE", UNSHAREABLE)
    + f"local QUEUED = {json.dumps(EpisodeStatus.queued.value)}\n"
    + f"local RUNNING = {json.dumps(EpisodeStatus.running.value)}\n"
    + f"local INTERACTIVE = {json.dumps(EpisodeMode.interactive.value)}\n"
)


@dataclass(frozen=True, slots=True)
class LuaScript:
    """A script's body and the names of what it takes (see the module docstring)."""

    name: str
    keys: tuple[str, ...]
    args: tuple[str, ...]
    body: str
    rest_keys: str | None = None  # KEY[rest_keys]: the keys after the named ones
    rest_args: str | None = None  # ARG[rest_args]: the arguments after the named ones
    rest_fields: tuple[str, ...] = ()  # … grouped into records of these fields
    statuses: bool = False  # the body compares statuses: LUA_STATUSES goes in front
    constants: str = ""  # more Lua put in front of the body (tuning constants)

    @property
    def prelude(self) -> str:
        named_keys = ", ".join(f"{k} = KEYS[{i}]" for i, k in enumerate(self.keys, 1))
        named_args = ", ".join(f"{a} = ARGV[{i}]" for i, a in enumerate(self.args, 1))
        lua = f"local KEY = {{{named_keys}}}\nlocal ARG = {{{named_args}}}\n"
        if self.rest_keys:
            lua += _rest("KEY", "KEYS", self.rest_keys, len(self.keys), ())
        if self.rest_args:
            lua += _rest("ARG", "ARGV", self.rest_args, len(self.args), self.rest_fields)
        return lua

    @property
    def source(self) -> str:
        statuses = LUA_STATUSES if self.statuses else ""
        return statuses + self.constants + self.prelude + self.body

    def layout(
        self,
        keys: Mapping[str, str],
        args: Mapping[str, Any],
        *,
        rest_keys: Sequence[str] = (),
        rest_args: Sequence[Any] = (),
    ) -> tuple[list[str], list[Any]]:
        """KEYS and ARGV as Redis takes them; ValueError when a name is missing or unknown."""
        _same(self.name, "keys", keys, self.keys)
        _same(self.name, "arguments", args, self.args)
        if (rest_keys and not self.rest_keys) or (rest_args and not self.rest_args):
            raise ValueError(f"{self.name} takes no trailing keys or arguments")
        argv = [args[a] for a in self.args]
        for item in rest_args:
            if self.rest_fields:
                _same(self.name, self.rest_args or "", item, self.rest_fields)
                argv += [item[f] for f in self.rest_fields]
            else:
                argv.append(item)
        return [keys[k] for k in self.keys] + list(rest_keys), argv

    def bind(self, client: redis.Redis) -> BoundScript:
        return BoundScript(self, client.register_script(self.source))


@dataclass(frozen=True, slots=True)
class BoundScript:
    """A script registered on one client, called with named keys and arguments."""

    script: LuaScript
    registered: Script

    def __call__(
        self,
        keys: Mapping[str, str],
        args: Mapping[str, Any],
        *,
        rest_keys: Sequence[str] = (),
        rest_args: Sequence[Any] = (),
    ) -> Any:
        script_keys, argv = self.script.layout(keys, args, rest_keys=rest_keys, rest_args=rest_args)
        return self.registered(keys=script_keys, args=argv)


def _rest(table: str, source: str, name: str, after: int, fields: tuple[str, ...]) -> str:
    if not fields:
        item, step = f"{source}[i]", 1
    else:
        named = ", ".join(f"{f} = {source}[i + {j}]" for j, f in enumerate(fields))
        item, step = f"{{{named}}}", len(fields)
    return (
        f"{table}.{name} = {{}}\n"
        f"for i = {after + 1}, #{source}, {step} do "
        f"{table}.{name}[#{table}.{name} + 1] = {item} end\n"
    )


def _same(script: str, what: str, given: Mapping[str, Any], declared: tuple[str, ...]) -> None:
    if set(given) != set(declared):
        missing = sorted(set(declared) - set(given))
        unknown = sorted(set(given) - set(declared))
        raise ValueError(f"{script}: {what} missing {missing}, unknown {unknown}")
