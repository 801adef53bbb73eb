"""`res.*`: resource abuse (fork bombs, spawn loops, disk and memory fills, miners,
destruction, busy loops and long sleeps)."""

# ruff: noqa: SIM905 -- tables of names read best as one whitespace-separated string

from __future__ import annotations

import re

from anticheat.analysis.bash.syntax import Command
from anticheat.analysis.limits import MAX_FOREIGN_SCAN
from anticheat.context import Ctx
from anticheat.rules.rule import Answer, Category, Rule
from proctor.models import Decision

__all__ = [
    "RULES",
    "busy_loop",
    "cpu_burn",
    "destructive",
    "disk_fill",
    "fork_bomb",
    "long_sleep",
    "memory_bomb",
    "spawn_loop",
]

_GIB = 1 << 30


# `fork` and a loop keyword in one statement; the gap is bounded (an unbounded `[^;]*` is
# rescanned from every `fork`: 20,000 of them on one line took 12 s)
_FORK_LOOP = re.compile(
    r"\bfork\b[^;]{0,400}?\b(while|until|for)\b|\b(while|until|for)\b[^;]{0,400}?\bfork\b"
)


_SIZE = re.compile(r"^(\d+(?:\.\d+)?)([kKmMgGtTpP]?)(i?[bB])?$")


_MINERS = frozenset(
    (
        "xmrig minerd cpuminer ethminer t-rex nbminer cgminer bfgminer nanominer lolminer "
        "phoenixminer xmr-stak"
    ).split()
)


_STRESS = frozenset({"stress", "stress-ng", "stressapptest", "burnP6", "cpuburn"})
_HASHERS = frozenset({"md5sum", "sha256sum", "sha1sum", "gzip", "bzip2", "xz"})
_BURNERS = _MINERS | _STRESS | _HASHERS | {"yes", "cat"}
_SLEEPERS = frozenset({"sleep", "tail"})
_FILLERS = frozenset({"dd", "fallocate", "cat", "yes", "head", "pv"})
_DESTROYERS = frozenset(
    "rm mkfs mke2fs wipefs shutdown reboot halt poweroff init telinit kill killall pkill dd".split()
)


def _size(text: str) -> float | None:
    m = _SIZE.match(text)
    if not m:
        return None
    mult = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}
    return float(m.group(1)) * mult[m.group(2).lower()]


def fork_bomb(ctx: Ctx) -> str | None:
    script = ctx.facts.script
    if script is not None:
        for name, body in script.functions.items():
            calls = [c for c in body if c.name == name]
            if calls and (len(calls) >= 2 or any(c.background for c in calls)):
                return f"function `{name}` starts copies of itself: a fork bomb"
    for src in ctx.facts.python:
        if src.facts.fork_loops:
            return f"{src.origin}: {src.facts.fork_loops[0]}"
    if script is not None:
        for lang, code in script.foreign:
            if _FORK_LOOP.search(code[:MAX_FOREIGN_SCAN]):
                return f"`{lang}` forks in a loop"
    return None


def spawn_loop(ctx: Ctx) -> str | None:
    script = ctx.facts.script
    if script is None:
        return None
    for loop in script.loops:
        if loop.spawns and ((loop.infinite and not loop.exits) or (loop.iterations or 0) >= 500):
            return "a loop starts background jobs without bound"
    return None


def busy_loop(ctx: Ctx) -> str | None:
    script = ctx.facts.script
    if script is not None:
        for loop in script.loops:
            if loop.infinite and not loop.exits:
                return "an infinite shell loop with no way out"
    for src in ctx.facts.python:
        if src.executed and src.facts.busy_loops:
            return f"{src.origin}: {src.facts.busy_loops[0]}"
    return None


def disk_fill(ctx: Ctx) -> str | None:
    for c in ctx.facts.commands:
        if c.name not in _FILLERS:
            continue  # every case below is one of these commands
        texts = c.texts()
        if c.name == "dd":
            opts = dict(t.split("=", 1) for t in texts if "=" in t)
            if (
                opts.get("if", "").startswith(("/dev/zero", "/dev/urandom", "/dev/random"))
                and opts.get("of", "/dev/null") != "/dev/null"
            ):
                bs, count = _size(opts.get("bs", "512")), _size(opts.get("count", "inf"))
                if count is None or bs is None or bs * count >= _GIB:
                    return (
                        f"`dd` writes {opts.get('count', 'endless')} blocks of "
                        f"{opts.get('bs', '512')} to {opts.get('of')}"
                    )
        if c.name == "fallocate":
            for i, t in enumerate(texts):
                if t in ("-l", "--length") and i + 1 < len(texts):
                    size = _size(texts[i + 1])
                    if size is not None and size >= 4 * _GIB:
                        return f"`fallocate -l {texts[i + 1]}` fills the disk"
        into_file = any(
            r.op in (">", ">>", "&>") and r.target.text != "/dev/null" for r in c.redirects
        )
        endless = c.name == "yes" or (
            any(t in ("/dev/zero", "/dev/urandom") for t in texts) and not _bounded_head(c)
        )
        if c.name in ("cat", "yes", "head", "pv") and into_file and endless:
            return f"`{c.name}` writes without end into a file"
    return None


def _bounded_head(c: Command) -> bool:
    texts = c.texts()
    for i, t in enumerate(texts):
        if t in ("-c", "--bytes") and i + 1 < len(texts):
            size = _size(texts[i + 1])
            return size is not None and size < _GIB
        if t.startswith("-c") and len(t) > 2:
            size = _size(t[2:])
            return size is not None and size < _GIB
    return False


def memory_bomb(ctx: Ctx) -> str | None:
    for src in ctx.facts.python:
        if src.facts.big_allocs:
            return f"{src.origin}: {src.facts.big_allocs[0]}"
    return None


def cpu_burn(ctx: Ctx) -> str | None:
    for c in ctx.facts.commands:
        if c.name not in _BURNERS:
            continue  # every case below is one of these commands
        if c.name in _MINERS or c.name in _STRESS:
            return f"`{c.name}` burns the sandbox's CPU"
        texts = c.texts()
        if c.name == "yes" and (
            c.background or any(r.target.text == "/dev/null" for r in c.redirects)
        ):
            return "`yes` spins on the CPU"
        if c.name in _HASHERS and any(t in ("/dev/zero", "/dev/urandom") for t in texts):
            return f"`{c.name}` over an endless device spins on the CPU"
        if (
            c.name == "cat"
            and any(t in ("/dev/zero", "/dev/urandom") for t in texts)
            and any(r.target.text == "/dev/null" for r in c.redirects)
        ):
            return "`cat` of an endless device spins on the CPU"
    return None


def long_sleep(ctx: Ctx) -> str | None:
    for c in ctx.facts.commands:
        if c.name not in _SLEEPERS:
            continue  # every case below is one of these commands
        texts = c.texts()
        if c.name == "sleep" and texts:
            total = 0.0
            for t in texts:
                if t in ("inf", "infinity"):
                    return "`sleep infinity` holds the sandbox"
                m = re.fullmatch(r"(\d+(?:\.\d+)?)([smhd]?)", t)
                if m:
                    total += (
                        float(m.group(1))
                        * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]
                    )
            if total >= 3600:
                return f"`sleep {' '.join(texts)}` holds the sandbox for an hour or more"
        if c.name == "tail" and "-f" in texts and "/dev/null" in texts:
            return "`tail -f /dev/null` holds the sandbox forever"
    return None


def destructive(ctx: Ctx) -> str | None:
    for c in ctx.facts.commands:
        if c.name not in _DESTROYERS and not c.name.startswith("mkfs."):
            continue  # every case below is one of these commands
        texts = c.texts()
        if c.name == "rm" and any("r" in t.lstrip("-") for t in texts if t.startswith("-")):
            targets = [t for t in texts if not t.startswith("-")]
            if (
                any(
                    t.rstrip("/*")
                    in ("", "~", "/home", "/usr", "/etc", "/bin", "/lib", "/var", "/root")
                    and t.startswith(("/", "~"))
                    for t in targets
                )
                or "--no-preserve-root" in texts
            ):
                return f"`rm {' '.join(texts)}` destroys the system"
        if c.name in ("mkfs", "mke2fs", "wipefs") or c.name.startswith("mkfs."):
            return f"`{c.name}` formats a device"
        if c.name in ("shutdown", "reboot", "halt", "poweroff") or (
            c.name in ("init", "telinit") and texts[:1] in (["0"], ["6"])
        ):
            return f"`{c.name}` stops the machine"
        if (
            c.name == "kill"
            and any(t in ("-1", "1") for t in texts if t != "-9")
            and ("-1" in texts[-1:] or "1" in texts[-1:])
        ):
            return f"`kill {' '.join(texts)}` kills every process (or init)"
        if c.name in ("killall", "pkill") and any(
            re.search(r"proctor|grader|judge|^init$|dockerd|containerd|sshd", t)
            for t in texts
            if not t.startswith("-")
        ):
            return f"`{c.name}` kills processes it did not start"
        if c.name == "dd" and any(
            t.startswith("of=/dev/") and t not in ("of=/dev/null",) for t in texts
        ):
            return "`dd` overwrites a device"
    return None


RULES: tuple[Rule, ...] = (
    # -- resource abuse
    Rule(
        "res.fork-bomb",
        Category.resource_abuse,
        "processes that replicate themselves",
        Decision.intercept,
        fork_bomb,
        needs=("script.functions", "python", "script.foreign"),
        answer=Answer.limits,
    ),
    Rule(
        "res.spawn-loop",
        Category.resource_abuse,
        "a loop starting background jobs without bound",
        Decision.intercept,
        spawn_loop,
        needs=("script.loops",),
        answer=Answer.limits,
    ),
    Rule(
        "res.disk-fill",
        Category.resource_abuse,
        "filling the disk from an endless device",
        Decision.intercept,
        disk_fill,
        names=_FILLERS,
        answer=Answer.limits,
    ),
    Rule(
        "res.memory-bomb",
        Category.resource_abuse,
        "allocating gigabytes at once",
        Decision.intercept,
        memory_bomb,
        needs=("python",),
        answer=Answer.limits,
    ),
    Rule(
        "res.cpu-burn",
        Category.resource_abuse,
        "miners, stress tools and endless hashing",
        Decision.intercept,
        cpu_burn,
        names=_BURNERS,
        answer=Answer.limits,
    ),
    Rule(
        "res.destructive",
        Category.resource_abuse,
        "destroying the system or killing processes it did not start",
        Decision.intercept,
        destructive,
        needs=("commands",),
        answer=Answer.limits,
    ),
    Rule(
        "res.busy-loop",
        Category.resource_abuse,
        "an infinite loop with no exit",
        Decision.review,
        busy_loop,
        needs=("script.loops", "python"),
        answer=Answer.limits,
    ),
    Rule(
        "res.long-sleep",
        Category.resource_abuse,
        "holding the sandbox idle for an hour or more",
        Decision.review,
        long_sleep,
        names=_SLEEPERS,
        answer=Answer.limits,
    ),
)
