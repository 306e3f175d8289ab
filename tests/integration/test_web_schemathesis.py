"""Property-based run over the served OpenAPI document (schemathesis): whatever it sends,
no 5xx, no stack trace, and every answer matches the documented envelope and status codes."""

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)
from sqlalchemy import Engine

from testkit.factories import create_session
from tests.support.web import Aws, admin_headers, client_for, settings_for

CHECKS = (
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
)


@pytest.fixture
def api_schema(engine: Engine, db_url: str, aws: Aws) -> Iterator[Any]:
    for _ in range(5):
        create_session(engine)
    with client_for(settings_for(db_url, aws.queue_arn), aws.scheduler) as http:
        yield schemathesis.openapi.from_asgi("/openapi.json", http.app)


# Derandomized: the same cases every run, so what the run asserts it saw it always sees.
FUZZ = settings(
    max_examples=120, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck)
)


def _assert_safe(response: Any) -> None:
    assert response.status_code < 500, response.text
    assert "Traceback" not in response.text
    content_type = " ".join(response.headers.get("content-type", []))
    if content_type.startswith("application/json"):
        assert set(response.json()) == {"success", "data", "error"}


def _fuzz(api_schema: Any, extra_headers: dict[str, str]) -> list[int]:
    """Runs every documented operation; returns the status of every answer."""
    statuses: list[int] = []
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) == 10
    for operation in operations:

        @given(case=operation.as_strategy())
        @FUZZ
        def run(case: Any) -> None:
            case.headers = {**(case.headers or {}), **extra_headers}
            response = case.call()
            case.validate_response(response, checks=CHECKS)
            _assert_safe(response)
            statuses.append(response.status_code)

        run()
    return statuses


def test_as_admin(api_schema: Any) -> None:
    """Valid credentials, so the fuzzing reaches path and body validation."""
    statuses = _fuzz(api_schema, admin_headers())
    assert len(statuses) > 200
    assert {200, 400} <= set(statuses), sorted(set(statuses))


def test_with_generated_credentials(api_schema: Any) -> None:
    """Whatever headers are generated (no token, junk tokens): never a 5xx."""
    statuses = _fuzz(api_schema, {})
    assert len(statuses) > 200
    assert {401} <= set(statuses)
