"""Static evaluation of the few shell commands whose output is fixed by their input.

`echo`, `printf`, `cat <<EOF`, `base64 -d`, `xxd -r -p`, `rev` and `tr` are how a payload
is hidden (`bash -c "$(echo Y3VybC… | base64 -d)"`); computing their output without
running anything lets the rule filter screen the payload itself.
"""

from __future__ import annotations

import base64
import binascii
import re

from anticheat.analysis import limits
from anticheat.analysis.bash.syntax import Command
from anticheat.analysis.limits import MAX_OUTPUT, MAX_OUTPUT_TOTAL, MAX_TR_SET

__all__ = ["DECODERS", "ansi_c", "range_size", "static_output"]

DECODERS = frozenset({"base64", "base32", "basenc", "xxd", "rev", "tr", "openssl"})

_ESCAPES = {
    "n": "\n",
    "t": "\t",
    "r": "\r",
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "v": "\v",
    "e": "\x1b",
    "E": "\x1b",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "?": "?",
}
_ESC_RE = re.compile(
    r"\\(x[0-9a-fA-F]{1,2}|u[0-9a-fA-F]{1,4}|U[0-9a-fA-F]{1,8}|0?[0-7]{1,3}|.)", re.DOTALL
)


def ansi_c(body: str) -> str:
    """The value of a `$'…'` string (or `echo -e` / printf text)."""

    def sub(m: re.Match[str]) -> str:
        e = m.group(1)
        if e[0] in "xuU":
            return chr(int(e[1:], 16))
        if e[0] in "01234567":
            return chr(int(e, 8) & 0xFF)
        return _ESCAPES.get(e, "\\" + e)

    return _ESC_RE.sub(sub, body) if "\\" in body else body


class _TooBig(Exception):
    """Raised while an output is built, as soon as it exceeds MAX_OUTPUT."""


def static_output(cmd: Command) -> str | None:
    """What `cmd` prints, when that follows from its words and stdin alone.

    Bounded per command (MAX_OUTPUT) and per action (MAX_OUTPUT_TOTAL); computed once per
    command, as pipes, redirects and substitutions all ask for it."""
    b = limits.current()
    key = ("static_output", id(cmd))
    hit = b.memo.get(key)
    if isinstance(hit, tuple) and hit[0] is cmd:
        return hit[1]  # type: ignore[no-any-return]
    try:
        out = _static_output(cmd)
        too_big = out is not None and len(out) > MAX_OUTPUT
    except _TooBig:
        out, too_big = None, True
    if too_big:
        b.give_up(
            f"`{cmd.name}` would print more than {MAX_OUTPUT:,} characters: "
            "its output was not decoded"
        )
        out = None
    elif out is not None and b.output_bytes + len(out) > MAX_OUTPUT_TOTAL:
        b.give_up(
            f"more than {MAX_OUTPUT_TOTAL:,} characters of static output in one action: "
            f"`{cmd.name}`'s was not decoded"
        )
        out = None
    elif out is not None:
        b.output_bytes += len(out)
    b.memo[key] = (cmd, out)  # the command is kept alive with it, so its id stays its own
    return out


def _static_output(cmd: Command) -> str | None:
    name = cmd.name
    words = cmd.argv[1:]
    if not all(w.static for w in words):
        return None
    args = [w.text for w in words]
    try:
        if name == "echo":
            return _echo(args)
        if name == "printf":
            return _printf(args)
        stdin = cmd.stdin
        if name == "cat" and stdin is not None and all(a == "-" for a in args):
            return stdin
        if stdin is None:
            return None
        if name in ("base64", "basenc") and any(
            a in ("-d", "--decode", "-D", "--base64") for a in args
        ):
            return base64.b64decode("".join(stdin.split()) + "==", validate=False).decode(
                "utf-8", "replace"
            )
        if name == "base32" and any(a in ("-d", "--decode") for a in args):
            s = "".join(stdin.split())
            return base64.b32decode(s + "=" * (-len(s) % 8)).decode("utf-8", "replace")
        if name == "xxd" and "-r" in args:
            return binascii.unhexlify("".join(stdin.split())).decode("utf-8", "replace")
        if name == "openssl" and "base64" in args and "-d" in args:
            return base64.b64decode("".join(stdin.split()) + "==").decode("utf-8", "replace")
        if name == "rev":
            return "\n".join(line[::-1] for line in stdin.split("\n"))
        if name == "tr" and len(args) == 2:
            src, dst = _tr_set(args[0]), _tr_set(args[1])
            if src and dst:
                dst = dst + dst[-1] * max(0, len(src) - len(dst))
                return stdin.translate(str.maketrans(src, dst[: len(src)]))
    except (ValueError, binascii.Error, UnicodeDecodeError, OverflowError):
        return None
    return None


def range_size(text: str) -> int | None:
    """Iterations of `{1..N}` or `$(seq …)` in a for loop, when static."""
    m = re.fullmatch(r"\{(-?\d+)\.\.(-?\d+)(?:\.\.\d+)?\}", text)
    if m:
        return abs(int(m.group(2)) - int(m.group(1))) + 1
    m = re.fullmatch(r"\$\(\s*seq\s+(?:(-?\d+)\s+)?(?:(-?\d+)\s+)?(-?\d+)\s*\)", text)
    if m:
        first = int(m.group(1)) if m.group(1) else 1
        return max(0, int(m.group(3)) - first + 1)
    return None


def _echo(args: list[str]) -> str:
    newline, escapes = True, False
    while args and re.fullmatch(r"-[neE]+", args[0]):
        newline &= "n" not in args[0]
        escapes = "e" in args[0] or (escapes and "E" not in args[0])
        args = args[1:]
    text = " ".join(args)
    text = ansi_c(text) if escapes else text
    return text + ("\n" if newline else "")


def _printf(args: list[str]) -> str | None:
    if not args:
        return None
    fmt, rest = args[0], args[1:]
    if fmt == "--" and rest:
        fmt, rest = rest[0], rest[1:]
    out, size = [], 0
    while True:  # printf reuses the format until its arguments run out
        piece, used = _printf_once(fmt, rest)
        out.append(piece)
        size += len(piece)
        if size > MAX_OUTPUT:  # stop building it: 100 KB of format, 10k arguments was 1 GB
            raise _TooBig
        rest = rest[used:]
        if not rest or used == 0:
            break
    return "".join(out)


def _printf_once(fmt: str, args: list[str]) -> tuple[str, int]:
    used = 0

    def sub(m: re.Match[str]) -> str:
        nonlocal used
        spec = m.group(0)
        if spec == "%%":
            return "%"
        value = args[used] if used < len(args) else ""
        used += 1
        return ansi_c(value) if spec.endswith("b") else value

    text = re.sub(r"%%|%[-+ #0]*\d*(?:\.\d+)?[sdbiuxXoc]", sub, fmt)
    return ansi_c(text), used


def _tr_set(spec: str) -> str:
    spec = ansi_c(spec)
    out: list[str] = []
    i = 0
    while i < len(spec):
        if len(out) > MAX_TR_SET:  # each range expands one character at a time
            limits.current().give_up(f"a `tr` set of more than {MAX_TR_SET:,} characters")
            return ""
        if i + 2 < len(spec) and spec[i + 1] == "-":
            a, b = ord(spec[i]), ord(spec[i + 2])
            if b - a > 4096:
                return ""
            out.extend(chr(c) for c in range(a, b + 1))
            i += 3
        else:
            out.append(spec[i])
            i += 1
    return "".join(out)
