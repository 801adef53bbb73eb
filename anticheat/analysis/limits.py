"""Every cap on the host work one screened action may cost, and the budget that spends them.

The code under test writes what the rule filter parses, folds and decodes, so each number
here bounds work it controls — in the worker on every action and one-shot file, and in the
API for POST /v1/screen. Past a cap the filter gives up on that part and says why
(`Budget.give_up`); the action is then reviewed (rule `evasion.screening-limit`), so bounded
work never becomes a silent allow. Per-operation caps stop one expression or command from
blowing up; the per-action totals stop many small ones from adding up.

    with limits.scope() as budget:   # one per screened action; nested calls share it
        ...
        budget.gave_up               # why parts of it were not screened
"""

from __future__ import annotations

from contextvars import ContextVar, Token
from dataclasses import dataclass, field

__all__ = [
    "FOLD_DEPTH",
    "HUGE",
    "MAX_FOLD_LEN",
    "MAX_FOLD_STEPS",
    "MAX_FOLD_TOTAL",
    "MAX_FOREIGN_SCAN",
    "MAX_INT_BITS",
    "MAX_OUTPUT",
    "MAX_OUTPUT_TOTAL",
    "MAX_PARSE_TOTAL",
    "MAX_PY_EXEC_SOURCE",
    "MAX_PY_NESTED",
    "MAX_PY_SOURCE",
    "MAX_PY_TOKENS",
    "MAX_PY_TOTAL",
    "MAX_SH_DEPTH",
    "MAX_SH_NESTING",
    "MAX_SH_NODES",
    "MAX_SH_SOURCE",
    "MAX_TR_SET",
    "MAX_UNPARSE",
    "MAX_UNPARSE_TOTAL",
    "MAX_WORD_SPLIT",
    "Budget",
    "current",
    "scope",
]

# ---------------------------------------------------------------- Python constant folding
# An allocation this big (elements or bytes) is an attack on the sandbox: it folds to
# `math.inf` without being built and the resource rules flag it.
HUGE = 2**31
# Characters, bytes or elements one folded value may have. Honest code folds far less
# (`'-' * 80`, a 1 MiB buffer `b'\0' * (1 << 20)`, a sieve `[True] * (10**6 + 1)`); the
# reported attack folded 400 MB per line. Past this, folding gives up on the expression.
MAX_FOLD_LEN = 1 << 20
# Total size of every value folded for one action (each node is folded once, memoised):
# eight lines of a value just under MAX_FOLD_LEN must not add up to gigabytes.
MAX_FOLD_TOTAL = 16 << 20
# Expression nodes evaluated by the folder per action (~1 µs each; memo hits are free).
# Each node is evaluated once unless it sits deeper than FOLD_DEPTH in a chain, which only
# machine-made code has; an honest module needs a few per line.
MAX_FOLD_STEPS = 100_000
# How deep one expression is folded (recursion of `fold`); deeper parts are unknown.
FOLD_DEPTH = 20
# Integers wider than this fold to `math.inf` ("astronomic") instead of being computed:
# a number hides no name, honest tests compute 2**1000, and multiplying megabit integers
# costs seconds. No review: nothing is left unseen.
MAX_INT_BITS = 4096
# Characters of source `ast.unparse` may render for evidence; bigger nodes are quoted by
# their head only (rendering is linear in the node and evidence is cut to 160 anyway).
MAX_UNPARSE = 4096
# Characters rendered for evidence per action; past it every node is quoted by its head.
# Nested calls re-render their arguments, so this keeps evidence linear in the source.
MAX_UNPARSE_TOTAL = 256 * 1024

# ---------------------------------------------------------------- Python analysis
# One file or snippet: bigger ones are screened by their head (and reviewed). Parsing
# costs ~1.3 µs per character; with MAX_PY_TOKENS it keeps the largest file near 0.3 s.
# Honest written files are far smaller; a bigger one goes to the judge.
MAX_PY_SOURCE = 256 * 1024
# All Python parsed for one action: written files, `python -c`, heredocs, and strings
# handed to exec() (which fold from a few characters into a whole new module each).
MAX_PY_TOTAL = 512 * 1024
# Python tokens parsed per action, counted before parsing by a regex (C speed; names,
# numbers, strings, operators, opening brackets): the AST costs up to ~0.9 KB of memory and
# its analysis ~5 µs per token, so this keeps one action under ~45 MiB and ~0.4 s. Ordinary
# code has a token per ~3 characters: honest files up to ~150 KB are screened whole.
MAX_PY_TOKENS = 50_000
# exec(…) of a folded string is analysed this many levels deep, and this much of it
# (honest exec'd strings are a line or two; `exec('a=1\n' * 60000)` is a module).
MAX_PY_NESTED = 3
MAX_PY_EXEC_SOURCE = 64 * 1024

# ---------------------------------------------------------------- bash
# One parse: beyond, the head is screened and the rest reported.
MAX_SH_SOURCE = 128 * 1024
# Bytes given to tree-sitter per action, over every nested `sh -c`, eval, decoded
# payload, written script and subprocess string: each of those can be a fresh 128 KB.
MAX_PARSE_TOTAL = 1 << 20
# Syntax nodes walked per action, across every nesting level and every parse.
MAX_SH_NODES = 20_000
# Syntactic nesting ($( $( … )), subshells) walked before giving up on the rest.
MAX_SH_NESTING = 150
# Nested `sh -c` / eval / decoded payload levels.
MAX_SH_DEPTH = 8
# Static output of one command (echo, printf, base64 -d, rev …), checked while it is
# built: printf reuses its format per argument, so 100 KB times 10k arguments was 1 GB.
MAX_OUTPUT = 1 << 20
# Static output of every command of an action: a pipeline of 3,000 `rev`s copies its
# input 3,000 times.
MAX_OUTPUT_TOTAL = 8 << 20
# Characters a `tr` set may expand to (ranges are expanded one character at a time).
MAX_TR_SET = 1 << 16
# Characters split into words (`… | xargs cmd`, `env -S`): shlex is ~1 µs per character.
MAX_WORD_SPLIT = 64 * 1024
# Characters of perl/ruby/node code scanned for shell strings (the scan is a regex).
MAX_FOREIGN_SCAN = 64 * 1024

_MAX_NOTES = 8  # give-up notes kept per action: the first says why, the rest are context


@dataclass(slots=True)
class Budget:
    """What one screened action has spent, and where the filter gave up."""

    fold_steps: int = 0
    fold_bytes: int = 0
    py_source: int = 0
    py_tokens: int = 0
    parse_bytes: int = 0
    nodes: int = 0
    output_bytes: int = 0
    unparsed: int = 0  # characters of source rendered for evidence
    cuts: int = 0  # folds cut at FOLD_DEPTH (their partial results are not memoised)
    gave_up: list[str] = field(default_factory=list)
    memo: dict[object, object] = field(default_factory=dict)  # folded node -> value

    def give_up(self, note: str) -> None:
        """Record that part of the action was not screened (deduplicated, first ones kept)."""
        if note not in self.gave_up and len(self.gave_up) < _MAX_NOTES:
            self.gave_up.append(note)


_ACTIVE: ContextVar[Budget | None] = ContextVar("anticheat_budget", default=None)


class _Scope:
    """`with scope() as budget`: a class, not a generator, as every parse enters one."""

    __slots__ = ("_budget", "_token")

    def __init__(self) -> None:
        self._token: Token[Budget | None] | None = None
        self._budget: Budget | None = None

    def __enter__(self) -> Budget:
        active = _ACTIVE.get()
        if active is not None:
            return active
        self._budget = Budget()
        self._token = _ACTIVE.set(self._budget)
        return self._budget

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            _ACTIVE.reset(self._token)
            self._token = None
            assert self._budget is not None
            self._budget.memo.clear()


def scope() -> _Scope:
    """The budget of the action being screened; a new one when none is (each entry point)."""
    return _Scope()


def current() -> Budget:
    """The active budget, or a throw-away one (a helper called outside any screening)."""
    active = _ACTIVE.get()
    return active if active is not None else Budget()
