"""`walk` yields what `ast.walk` does, in its order, minus context and operator leaves."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from anticheat.analysis.python.walk import children, walk

_LEAVES = (ast.expr_context, ast.operator, ast.boolop, ast.unaryop, ast.cmpop)

# every construct of the grammar the analyses meet, and the standard library's own code
_SNIPPET = """
import os, sys as s
from a.b import c as d
@deco(1, k=2)
async def f(x, /, y=1, *a, z: int = 2, **k) -> None:
    global g
    async with open(x) as h, ctx():
        async for i in h:
            yield i
    await f(-x + y * z ** 2 // 3 % 4 @ m, not y and z or x)
class C(B, metaclass=M):
    __eq__ = lambda self, o: True
    def __ne__(self, o): return False
try:
    del a[1:2, ::3], b.c
except (E, F) as e:
    raise X from e
else:
    pass
finally:
    assert x < y <= z is not w in v, "m"
while True:
    x += 1; break
for (p, *q) in {k: v for k, v in z.items() if k}: continue
r = [i for i in range(3) if i > 0], {i for i in x}, (i for i in x), f"{x!r:>{w}}"
match r:
    case [1, *rest] | {"k": v, **kw} if v: pass
    case Point(x=0, y=_) as pt: pass
    case None: pass
t: list[int] = (yield_ := 3)
nonlocal_ = ...
"""


def _sources() -> list[str]:
    std = Path(ast.__file__).parent
    return [_SNIPPET] + [
        (std / name).read_text()
        for name in ("ast.py", "dataclasses.py", "typing.py", "re/_parser.py")
    ]


@pytest.mark.parametrize(
    "source", _sources(), ids=["grammar", "ast", "dataclasses", "typing", "re"]
)
def test_same_nodes_in_the_same_order(source: str) -> None:
    tree = ast.parse(source)
    for node in [tree, *ast.walk(tree)][:: max(1, len(source) // 20_000)]:
        if isinstance(node, _LEAVES):
            continue
        expected = [n for n in ast.walk(node) if not isinstance(n, _LEAVES)]
        got = walk(node)
        assert [id(n) for n in got] == [id(n) for n in expected], ast.dump(node)[:200]
        direct = [n for n in ast.iter_child_nodes(node) if not isinstance(n, _LEAVES)]
        assert children(node) == direct, ast.dump(node)[:200]


def test_nodes_built_by_hand() -> None:
    """Nodes made without every field (a substituted constant) walk like parsed ones."""
    node = ast.Call(ast.Name("f", ast.Load()), [ast.Constant(1)], [])
    assert walk(node) == [n for n in ast.walk(node) if not isinstance(n, _LEAVES)]
