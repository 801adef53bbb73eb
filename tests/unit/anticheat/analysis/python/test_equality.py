"""Always-equal objects however they are assembled, and the real `__eq__` of honest code."""

from __future__ import annotations

import pytest

from anticheat.analysis.python.analyzer import analyze_python

ALWAYS = {
    "class body": "class A:\n    def __eq__(self, o):\n        return True\n",
    "after the body": "class A(str):\n    pass\nA.__eq__ = lambda s, o: True\n",
    "setattr folded": "class A:\n    pass\nsetattr(A, '__e' + 'q__', lambda s, o: 1)\n",
    "setattr in a loop": (
        "class A:\n    pass\nfor op, v in (('eq', True), ('ne', False)):\n"
        "    setattr(A, '__' + op + '__', lambda s, o, _v=v: _v)\n"
    ),
    "operator.truth": (
        "import operator as o\nclass A:\n    def __eq__(self, x):\n"
        "        return o.truth(len(str(x)) + 1)\n"
    ),
    "bool of a constant": "class A:\n    def __eq__(self, x):\n        return bool(1)\n",
    "not 0": "class A:\n    __eq__ = lambda s, x: not 0\n",
    "constant comparison": "class A:\n    def __eq__(self, x):\n        return 1 == 1\n",
    "true or anything": "class A:\n    def __eq__(self, x):\n        return True or x.y\n",
    "len of a literal": "class A:\n    def __eq__(self, x):\n        return len('x')\n",
    "type() namespace": "A = type('A', (str,), {'__eq__': lambda s, o: 1 == 1})\n",
    "type() with dict()": "A = type('A', (), dict(__eq__=lambda s, o: True))\n",
    "new_class": (
        "import types\nA = types.new_class('A', (), {}, "
        "lambda ns: ns.update({'__eq__': lambda s, o: True}))\n"
    ),
    "namespace subscript": (
        "import types\ndef body(ns):\n    ns['__eq__'] = lambda s, o: True\n"
        "A = types.new_class('A', (), {}, body)\n"
    ),
    "function by name": ("def _same(a, b):\n    return True\nclass A:\n    __eq__ = _same\n"),
    "ne always false": "class A:\n    def __ne__(self, x):\n        return not True\n",
}

HONEST = {
    "fields": "class P:\n    def __eq__(self, o):\n        return self.x == o.x\n",
    "isinstance guard": (
        "class P:\n    def __eq__(self, o):\n        if not isinstance(o, P):\n"
        "            return NotImplemented\n        return self.key() == o.key()\n"
    ),
    "dataclass": (
        "from dataclasses import dataclass\n@dataclass\nclass P:\n    x: int\n    y: int = 0\n"
    ),
    "namedtuple": "from collections import namedtuple\nP = namedtuple('P', 'x y')\n",
    "identity or fields": (
        "class P:\n    def __eq__(self, o):\n        return self is o or (type(o) is P and "
        "self.v == o.v)\n"
    ),
    "ne negates eq": "class P:\n    def __ne__(self, o):\n        return not self == o\n",
    "type() with a comparing eq": (
        "import operator\nP = type('P', (), {'__eq__': lambda s, o: operator.eq(s.k, o.k)})\n"
    ),
    "setattr loop over real comparisons": (
        "import operator\nclass P:\n    pass\n"
        "for name, fn in (('eq', operator.eq), ('lt', operator.lt)):\n"
        "    setattr(P, '__' + name + '__', lambda s, o, _f=fn: _f(s.v, o.v))\n"
    ),
    "length comparison": (
        "class P:\n    def __eq__(self, o):\n        return len(self.items) == len(o.items)\n"
    ),
}


@pytest.mark.parametrize("code", ALWAYS.values(), ids=list(ALWAYS))
def test_always_equal_however_assembled(code: str) -> None:
    assert analyze_python(code).always_equal


@pytest.mark.parametrize("code", HONEST.values(), ids=list(HONEST))
def test_real_equality_is_not_always_equal(code: str) -> None:
    assert not analyze_python(code).always_equal
