"""The defences travel with their bytecode: an interpreter of the worker's version loads it
without compiling the source (it never reads the source at all)."""

from __future__ import annotations

import sys
from importlib import util
from pathlib import Path

from workers.evaluation.report_seal import DEFENCES_NAME, defences_bytecode, defences_source


def test_the_pyc_beside_the_defences_is_what_their_import_loads(tmp_path: Path) -> None:
    source = tmp_path / DEFENCES_NAME
    source.write_text("raise SystemExit('the source was compiled')\n")  # never read
    for name, data in defences_bytecode().items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(data)
    spec = util.spec_from_file_location("_defences_under_test", source)
    assert spec is not None and spec.loader is not None
    module = util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert callable(module.arm) and module.__file__ == str(source)
    assert "def arm(" in defences_source()


def test_it_is_named_for_this_interpreter_only() -> None:
    (name,) = defences_bytecode()
    assert name == f"__pycache__/defences.{sys.implementation.cache_tag}.pyc"
