"""Screening any input is bounded: each cap of `limits` stops an input that used to blow up.

Every attack here once cost the worker hundreds of MiB or seconds of CPU (or never ended);
now it is screened within generous bounds (the precise figures are in
bench/screen_adversarial.py) and, where part of it was not screened, reviewed with
evidence that says so. Honest look-alikes of the same shapes stay `allow`.
"""

from __future__ import annotations

import base64
import time
import tracemalloc

import pytest

from anticheat.analysis import limits
from anticheat.screen import screen
from proctor.models import BashAction, Decision, ScreenVerdict, WriteFileAction

Action = BashAction | WriteFileAction

# A blow-up detector, not a speed target (bench/screen_adversarial.py has the figures): the
# costliest bounded shape takes ~0.75 s on a quiet machine, an unbounded one tens of seconds
# or forever; the margin is for a loaded CI machine, where CPU time inflates too.
MAX_S = 5.0
MAX_MIB = 50


def py(content: str) -> WriteFileAction:
    return WriteFileAction(path="solution.py", content=content)


def sh(command: str) -> BashAction:
    return BashAction(command=command)


def bounded(action: Action) -> ScreenVerdict:
    """Screen it timed, then under tracemalloc (which slows it); check both."""
    t0 = time.process_time()
    verdict = screen(action)
    cpu = time.process_time() - t0
    tracemalloc.start()
    try:
        screen(action)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert cpu < MAX_S, f"{cpu:.2f} s of CPU"
    assert peak < MAX_MIB << 20, f"{peak / 2**20:.0f} MiB at peak"
    return verdict


def _nested_b64(levels: int) -> str:
    cmd = "git log --all"
    for _ in range(levels):
        cmd = f'bash -c "$(echo {base64.b64encode(cmd.encode()).decode()} | base64 -d)"'
    return cmd


# (case id, action, words the give-up evidence must contain)
GIVE_UPS: list[tuple[str, Action, str]] = [
    ("repeat-str", py("_unused = 0 and 'x' * 400000000\n" * 8), "folding gave up"),
    ("repeat-bytes", py("_ = 0 and b'x' * 2_000_000_000\n"), "folding gave up"),
    ("repeat-tuple", py("_ = 0 and (0,) * 200_000_000\n"), "folding gave up"),
    ("join", py("_ = 0 and open(''.join(('x' * 1000,) * 1_000_000))\n"), "folding gave up"),
    ("percent-width", py("_ = 0 and open('%0400000000d' % 0)\n"), "folding gave up"),
    ("percent-star", py("_ = 0 and open('%*d' % (400000000, 1))\n"), "folding gave up"),
    (
        "percent-args",
        py("_ = 0 and open('%s' * 100000 % (('x' * 10000,) * 100000))\n"),
        "folding gave up",
    ),
    ("concat", py("_ = 0 and open(('x' * 1000000) + ('y' * 1000000))\n"), "folding gave up"),
    ("fstring", py("_ = 0 and open(f\"{'x' * 900000}{'y' * 900000}\")\n"), "folding gave up"),
    ("fold-total", py("_ = 0 and 'x' * 1000000\n" * 20), "values folded for this action"),
    ("fold-steps", py(("x = " + " * ".join(["1"] * 900) + "\n") * 25), "expression nodes"),
    ("exec-fanout", py("exec('a=1\\n' * 60000)\n" * 1000), "exec() of 240,000 characters"),
    ("deep-attribute", py("open(" + "a." * 990 + "join(x))\n"), "nested too deeply"),
    ("py-tokens", py("a=1\n" * 60_000), "Python tokens"),
    (
        "py-total",
        sh(("printf '#" + "a" * 998 + "\\n%s' " + "x " * 250 + "| python3 -; ") * 3),
        "characters of Python in one action",
    ),
    (
        "printf",
        sh("printf '" + "A" * 100_000 + "%s' " + "a " * 10_000 + "> out.txt"),
        "would print more than",
    ),
    ("rev-chain", sh("echo " + "A" * 100_000 + " | rev" * 3_000), "static output in one action"),
    ("tr-set", sh("echo a | tr '" + "\u0100-\u10ff" * 15_000 + "' x"), "`tr` set"),
    (
        "xargs-split",
        sh("printf '" + "ab " * 170 + "%s ' " + "x " * 2_000 + "| xargs echo"),
        "split into words",
    ),
    (
        "parse-total",
        sh(("bash -c \"$(printf 'echo " + "A" * 1000 + "%s' " + "x " * 100 + ')"; ') * 12),
        "bytes of shell to parse in one action",
    ),
    ("sh-depth", sh(_nested_b64(12)), "nesting deeper than"),
    ("sh-nesting", sh("echo " + "$(echo " * 10_000 + "x" + ")" * 10_000), "nested deeper"),
    ("sh-nodes", sh("true; " * 20_000), "node budget"),
    ("sh-size", sh("echo hi; " * 110_000), "only the first"),
]


@pytest.mark.parametrize(
    ("action", "words"), [c[1:] for c in GIVE_UPS], ids=[c[0] for c in GIVE_UPS]
)
def test_a_cap_gives_up_and_says_so(action: Action, words: str) -> None:
    verdict = bounded(action)
    assert verdict.decision is not Decision.allow
    assert verdict.rule == "evasion.screening-limit" or verdict.decision is Decision.intercept
    if verdict.rule == "evasion.screening-limit":
        assert "screening gave up" in verdict.reason and words in verdict.reason, verdict.reason


BOUNDED: list[tuple[str, Action]] = [
    ("int-product-tree", py("_ = 0 and " + "(" * 12 + "(2**255)" + "*(2**255))" * 12 + "\n")),
    ("fork-in-big-loop", py("import os\nwhile True:\n" + "    os.fork()\n" * 20_000)),
    (
        "nested-while",
        py("".join(" " * i + "while True:\n" for i in range(90)) + (" " * 90 + "x = 1\n") * 2_000),
    ),
    ("nested-calls", py(("x = " + "open(" * 150 + "'f'" + ")" * 150 + "\n") * 400)),
    ("perl-fork-words", sh("perl -e '" + "fork " * 20_000 + "'")),
    ("deep-subshell", sh("(" * 60_000 + "true" + ")" * 60_000)),
    ("heredoc", sh("cat > x.py <<'EOF'\n" + "print(1)\n" * 100_000 + "EOF\npython x.py")),
]


@pytest.mark.parametrize("action", [c[1] for c in BOUNDED], ids=[c[0] for c in BOUNDED])
def test_costly_shapes_are_screened_within_bounds(action: Action) -> None:
    bounded(action)


HONEST: list[tuple[str, Action]] = [
    (
        "sieve",
        py("def f():\n    s = [True] * (10**6 + 1)\n    b = b'\\0' * (1 << 20)\n    return s, b\n"),
    ),
    (
        "bignum",
        py("BIG = 2**1000\nG = 10**100\nLINE = '-' * 80\nprint(LINE, BIG % 7, '%5d' % 3)\n"),
    ),
    ("fstrings", py("name = 'x'\nprint(f'{name:>10}' + ', '.join(['a', 'b']) * 3)\n")),
    ("printf", sh("printf '%s\\n' one two three | xargs -n1 echo")),
    ("pipeline", sh(" && ".join(f"python -m pytest tests/test_{i}.py -q" for i in range(100)))),
    ("multiline-python", sh('python3 -c "import sys\nprint(sys.version)\n"')),
]


@pytest.mark.parametrize("action", [c[1] for c in HONEST], ids=[c[0] for c in HONEST])
def test_honest_lookalikes_stay_allowed(action: Action) -> None:
    assert bounded(action).decision is Decision.allow


def test_multiline_python_c_is_screened_line_by_line() -> None:
    # the newlines of a double-quoted word used to vanish: the code did not parse, unseen
    verdict = screen(sh("python3 -c \"import os\nos.system('git log --all')\n\""))
    assert verdict.decision is Decision.intercept and verdict.rule == "vcs.all-refs"


def test_caps_are_named_in_one_place() -> None:
    names = [n for n in limits.__all__ if n.isupper()]
    assert len(names) >= 15 and all(isinstance(getattr(limits, n), int) for n in names)


def test_a_budget_is_per_action() -> None:
    # one action's spending does not leave the next one with less
    heavy = py("_ = 0 and 'x' * 1000000\n" * 15)
    assert screen(heavy).decision is Decision.allow
    assert screen(heavy).decision is Decision.allow
