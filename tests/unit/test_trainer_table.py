"""docs/trainers.md's compatibility table is the one tests/e2e/test_trainer_shapes.py runs."""

from __future__ import annotations

import importlib.util
from types import ModuleType

import pytest

from tests.conftest import REPO_ROOT
from tests.e2e import test_trainer_shapes as shapes


def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "trainer_table", REPO_ROOT / "scripts" / "trainer_table.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_doc_table_is_generated_from_the_shapes() -> None:
    table = script()
    text = table.DOC.read_text()
    assert table.rendered(text, shapes.table()) == text, "run scripts/trainer_table.py"


def test_every_shape_is_a_row() -> None:
    rows = [line for line in shapes.table().splitlines() if line.startswith("| ")][1:]
    assert len(rows) == len(shapes.SHAPES)
    assert len({s.id for s in shapes.SHAPES}) == len(shapes.SHAPES)


def test_a_document_without_the_markers_is_refused() -> None:
    with pytest.raises(ValueError, match="markers"):
        script().rendered("no table here\n", shapes.table())
