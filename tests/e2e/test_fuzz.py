"""API fuzz: schemathesis against the committed OpenAPI document and a running API.

What the document says must be what the API does: no server errors, every status it
answers documented, every body in the documented shape, headers and content type. (Schema-
valid requests may still be refused with a documented 422 where a rule is not in the
schema: path rules of file names, a deployment's maxima and images.) The API runs without workers (episodes only queue: this is
the HTTP surface, not the sandbox) and with every wait cut to a second, so a run of
bounded examples takes a minute or two.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.conftest import REPO_ROOT, claimed_database, running_api

pytestmark = pytest.mark.fuzz

MAX_EXAMPLES = 15  # per operation and phase: ~1-2 min for the whole document
schema = schemathesis.openapi.from_path(REPO_ROOT / "openapi" / "openapi.json")
CONFORMANCE = [
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
]


@pytest.fixture(scope="module")
def fuzz_api() -> Iterator[str]:
    """An API process with no workers, its own database, short waits and a small queue."""
    with (
        claimed_database() as redis_url,
        running_api(
            redis_url,
            PROCTOR_MAX_WAIT_S="1",
            PROCTOR_MAX_QUEUE_DEPTH="50",
            PROCTOR_DEDUP_TTL_S="0",
        ) as url,
    ):
        yield url


@schema.parametrize()
@settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
def test_the_api_does_what_its_document_says(case: schemathesis.Case, fuzz_api: str) -> None:
    checks = list(CONFORMANCE)
    if case.operation.path != "/readyz":  # with no worker, "not ready" is its documented 503
        checks.append(not_a_server_error)
    response = case.call(base_url=fuzz_api, timeout=30)
    case.validate_response(response, checks=checks)
