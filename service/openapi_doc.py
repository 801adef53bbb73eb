"""The OpenAPI document as committed in openapi/openapi.json (stable, sorted output)."""

from __future__ import annotations

import json

from core.config import Settings


def render() -> str:
    from service.main import create_app

    document = create_app(Settings()).openapi()
    return json.dumps(document, indent=2, sort_keys=True) + "\n"
