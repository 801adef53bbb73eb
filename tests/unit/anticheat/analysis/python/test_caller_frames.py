"""A caller's frame, however it is reached, used to read the caller's source or patch
what it holds; and the ordinary frame uses of library code, which are not."""

from __future__ import annotations

import pytest

from anticheat.analysis.python.analyzer import analyze_python

READS_SOURCE = {
    "getsource of _getframe(1)": (
        "import sys, inspect\ndef f():\n    fr = sys._getframe(1)\n"
        "    return inspect.getsource(fr.f_code)\n"
    ),
    "linecache of f_back": (
        "import inspect, linecache\ndef f():\n    fr = inspect.currentframe().f_back\n"
        "    return ''.join(linecache.getlines(fr.f_code.co_filename))\n"
    ),
    "getattr with a folded name": (
        "import sys as _s\ngrab = getattr(_s, '_get' + 'frame')\ndef f():\n"
        "    with open(grab(1).f_code.co_filename) as h:\n        return h.read()\n"
    ),
    "import alias": (
        "from sys import _getframe as gf\nimport io\ndef f():\n"
        "    return io.open(gf(2).f_code.co_filename).read()\n"
    ),
    "inspect.stack FrameInfo": (
        "import inspect\ndef f():\n    caller = inspect.stack()[1]\n"
        "    return open(caller.filename).read()\n"
    ),
    "getouterframes loop": (
        "import inspect, tokenize\ndef f():\n"
        "    for info in inspect.getouterframes(inspect.currentframe()):\n"
        "        tokenize.open(info.filename).read()\n"
    ),
    "extract_stack": (
        "import traceback, linecache\ndef f():\n    s = traceback.extract_stack()[-2]\n"
        "    return linecache.getline(s.filename, s.lineno)\n"
    ),
    "walk_stack": (
        "import traceback, inspect\ndef f():\n"
        "    for fr, _ in traceback.walk_stack(None):\n        inspect.getsourcelines(fr)\n"
    ),
    "tb_frame.f_back": (
        "import sys, inspect\ndef f():\n    try:\n        raise ValueError\n"
        "    except ValueError:\n        tb = sys.exc_info()[2]\n"
        "        return inspect.findsource(tb.tb_frame.f_back)\n"
    ),
    "pathlib read_text": (
        "import sys\nfrom pathlib import Path\ndef f():\n"
        "    return Path(sys._getframe(1).f_code.co_filename).read_text()\n"
    ),
    "nested helper": (
        "import inspect\ndef wrap(fn):\n    def inner(*a):\n"
        "        frame = inspect.currentframe().f_back\n"
        "        path = frame.f_code.co_filename\n        text = open(path).read()\n"
        "        return fn(*a)\n    return inner\n"
    ),
}

PATCHES = {
    "assert method of self": (
        "import inspect\ndef f():\n    fr = inspect.currentframe().f_back\n"
        "    case = fr.f_locals.get('self')\n    case.assertEqual = lambda *a, **k: None\n"
    ),
    "setattr on a subscript": (
        "import sys\ndef f():\n    setattr(sys._getframe(1).f_locals['self'], 'fail', print)\n"
    ),
    "every value of every frame": (
        "import inspect\ndef f():\n    for info in inspect.stack():\n"
        "        for k, v in info.frame.f_locals.items():\n            v.expected = 0\n"
    ),
}

HONEST = {
    "module name of the caller": (
        "import sys\ndef make(name):\n"
        "    mod = sys._getframe(1).f_globals.get('__name__', '__main__')\n    return mod\n"
    ),
    "caller namespace for annotations": (
        "import sys\ndef ns(depth=2):\n    frame = sys._getframe(depth)\n"
        "    return dict(frame.f_locals), frame.f_globals\n"
    ),
    "location for a log line": (
        "import inspect\ndef where():\n    fr = inspect.currentframe().f_back\n"
        "    return f'{fr.f_code.co_filename}:{fr.f_lineno}'\n"
    ),
    "own source": "import inspect\ndef f():\n    return inspect.getsource(f)\n",
    "own file": "def f():\n    return open(__file__).read()\n",
    "own frame": (
        "import sys, linecache\ndef f():\n    fr = sys._getframe(0)\n"
        "    return linecache.getline(fr.f_code.co_filename, 1)\n"
    ),
    "tracer": "import sys\ndef t(fn):\n    sys._getframe(1).f_trace = fn\n",
    "module of a value": (
        "import sys\ndef named(o):\n    o.__module__ = sys._getframe(1).f_globals['__name__']\n"
    ),
}


@pytest.mark.parametrize("code", READS_SOURCE.values(), ids=list(READS_SOURCE))
def test_caller_source_reads(code: str) -> None:
    facts = analyze_python(code)
    assert facts.caller_source, facts


@pytest.mark.parametrize("code", PATCHES.values(), ids=list(PATCHES))
def test_caller_patches(code: str) -> None:
    facts = analyze_python(code)
    assert facts.caller_patches, facts


@pytest.mark.parametrize("code", HONEST.values(), ids=list(HONEST))
def test_ordinary_frame_uses(code: str) -> None:
    facts = analyze_python(code)
    assert not facts.caller_source and not facts.caller_patches, facts
