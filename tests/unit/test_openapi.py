"""The committed OpenAPI document is what the app generates (run `make openapi`)."""

from __future__ import annotations

from pathlib import Path

from service.openapi_doc import render

COMMITTED = Path(__file__).resolve().parents[2] / "openapi" / "openapi.json"


def test_openapi_document_has_not_drifted() -> None:
    assert COMMITTED.exists(), "openapi/openapi.json is missing: run `make openapi`"
    assert COMMITTED.read_text() == render(), "the API changed: run `make openapi` and commit"
