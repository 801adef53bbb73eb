"""Calls one function of a solution for Proctor's generated tests (runs inside the sandbox).

    python3 proctor_call.py SOLUTION.py FUNCTION_NAME < arguments.json

Never imported by Proctor: `codetasks` copies it into the sandbox as `proctor_call.py`.
It runs the solution as a module (not as `__main__`, so a `main()` guard stays quiet) after
the imports verl's and PRIME's wrappers provide (LeetCode-style code uses `List` without
importing it), finds the function at top level or as a method of `Solution`, calls it with
the arguments and writes {"ok": true, "result": ...} or {"ok": false, "error": ...} as JSON
to its stdout. Whatever the solution prints goes to stderr instead, so it cannot garble the
answer. Standard library only.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from typing import Any

PRELUDE = """\
from string import *
from re import *
from datetime import *
from collections import *
from heapq import *
from bisect import *
from copy import *
from math import *
from random import *
from statistics import *
from itertools import *
from functools import *
from operator import *
from io import *
from sys import *
from json import *
from builtins import *
from typing import *
import string, re, datetime, collections, heapq, bisect, copy, math, random, statistics
import itertools, functools, operator, io, sys, json
"""
# recursive solutions are common in this data; Python's default of 1000 frames fails them
RECURSION_LIMIT = 100_000
ERROR_CHARS = 2000


def _plain(value: Any) -> Any:
    """The value as JSON would carry it (tuples → lists, sets → sorted lists)."""

    def default(thing: Any) -> Any:
        if isinstance(thing, set | frozenset):
            try:
                return sorted(thing)
            except TypeError:
                return list(thing)
        return repr(thing)

    return json.loads(json.dumps(value, default=default))


def call(path: str, name: str, args: list[Any]) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "solution", "__file__": path}
    try:
        exec(PRELUDE, namespace)
        with open(path, encoding="utf-8") as handle:
            source = handle.read()
        exec(compile(source, path, "exec"), namespace)
        target = namespace.get(name)
        if target is None and "Solution" in namespace:
            target = getattr(namespace["Solution"](), name)
        if target is None:
            raise NameError(f"no function or Solution method named {name!r}")
        return {"ok": True, "result": _plain(target(*args))}
    except BaseException:  # SystemExit too: the answer must still be written
        return {"ok": False, "error": traceback.format_exc()[-ERROR_CHARS:]}


def main() -> None:
    answer_fd = os.dup(1)
    os.dup2(2, 1)  # the solution's prints, even os.write(1, ...), land on stderr
    sys.stdout = sys.stderr
    args = json.loads(sys.stdin.read() or "[]")
    sys.setrecursionlimit(RECURSION_LIMIT)
    answer = call(sys.argv[1], sys.argv[2], args)
    with os.fdopen(answer_fd, "w", encoding="utf-8") as out:
        out.write(json.dumps(answer))


if __name__ == "__main__":
    main()
