"""The rest of the surface: envelope on unknown routes, wrong methods and crashes; health,
readiness, metrics and the OpenAPI document; a configuration that cannot work fails at start."""

import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine
from starlette.testclient import TestClient

from jlg_pipeline.domain.errors import ConfigError
from jlg_pipeline.domain.status import LinkGenerationStatus
from testkit.factories import create_session, force_state
from tests.support.web import Aws, admin_headers, client_for, settings_for
from web.app import create_app

HEADERS = admin_headers()


@pytest.fixture
def http(db_url: str, aws: Aws) -> Iterator[TestClient]:
    with client_for(settings_for(db_url, aws.queue_arn), aws.scheduler) as client:
        yield client


def _is_error_envelope(response_json: object, code: str) -> bool:
    assert isinstance(response_json, dict)
    return (
        response_json.get("success") is False
        and response_json.get("data") is None
        and response_json["error"]["code"] == code
        and isinstance(response_json["error"]["message"], str)
    )


def test_unknown_route_and_wrong_method(http: TestClient) -> None:
    missing = http.get("/nope", headers=HEADERS)
    assert missing.status_code == 404
    assert _is_error_envelope(missing.json(), "NOT_FOUND")
    wrong = http.delete("/program-session/1/link-generation", headers=HEADERS)
    assert wrong.status_code == 405
    assert _is_error_envelope(wrong.json(), "METHOD_NOT_ALLOWED")
    assert set(wrong.headers["allow"].replace(" ", "").split(",")) == {"GET", "HEAD", "PATCH"}
    post = http.post("/healthz")
    assert post.status_code == 405


def test_unexpected_error_is_logged_and_never_shown(
    engine: Engine,
    http: TestClient,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    sid = create_session(engine)

    def explode(*_: object) -> None:
        raise RuntimeError("secret internal detail")

    monkeypatch.setattr(http.app.state.sessions, "get_link_generation", explode)  # type: ignore[attr-defined]
    response = http.get(f"/program-session/{sid}/link-generation", headers=HEADERS)
    assert response.status_code == 500
    assert _is_error_envelope(response.json(), "INTERNAL_ERROR")
    assert "secret" not in response.text
    assert "Traceback" not in response.text
    [record] = [
        r for r in caplog.records if getattr(r, "jlg_event", None) == "http.unexpected_error"
    ]
    assert record.levelno == logging.ERROR
    assert record.exc_info is not None
    assert record.jlg_fields["path"] == f"/program-session/{sid}/link-generation"  # type: ignore[attr-defined]


def test_health_and_readiness(http: TestClient) -> None:
    assert http.get("/healthz").json() == {"success": True, "data": {"status": "ok"}, "error": None}
    ready = http.get("/readyz")
    assert ready.status_code == 200
    assert ready.json()["data"]["database"] == "ok"


def test_readiness_fails_cleanly_without_the_database(aws: Aws) -> None:
    settings = settings_for("postgresql://postgres@127.0.0.1:1/none", aws.queue_arn)
    with client_for(settings, aws.scheduler) as http:
        assert http.get("/healthz").status_code == 200
        ready = http.get("/readyz")
        assert ready.status_code == 503
        assert _is_error_envelope(ready.json(), "SERVICE_UNAVAILABLE")
        assert "Traceback" not in ready.text
        patched = http.patch(
            "/program-session/1/link-generation", headers=HEADERS, json={"linkGenerationAt": None}
        )
        assert patched.status_code == 503


def test_metrics_count_requests_and_sessions_by_status(engine: Engine, http: TestClient) -> None:
    for status in (
        LinkGenerationStatus.FAILED,
        LinkGenerationStatus.FAILED,
        LinkGenerationStatus.COMPLETED,
    ):
        force_state(engine, create_session(engine), status)
    sid = create_session(engine)
    http.patch(
        f"/program-session/{sid}/link-generation",
        headers=HEADERS,
        json={"linkGenerationAt": (datetime.now(UTC) + timedelta(days=1)).isoformat()},
    )
    http.get("/program-session/1/link-generation")
    http.app.state.figures.refresh()  # type: ignore[attr-defined]
    text = http.get("/metrics").text
    assert 'jlg_program_sessions{status="FAILED"} 2.0' in text
    assert 'jlg_program_sessions{status="SCHEDULED"} 1.0' in text
    assert 'jlg_program_sessions{status="IN_PROGRESS"} 0.0' in text
    route = 'route="/program-session/{id}/link-generation"'
    assert f'jlg_http_requests_total{{method="PATCH",{route},status="200"}} 1.0' in text
    assert f'{route},status="401"' in text
    assert "jlg_http_request_duration_seconds_bucket" in text


def test_openapi_document_describes_both_operations(http: TestClient) -> None:
    document = http.get("/openapi.json").json()
    operations = document["paths"]["/program-session/{id}/link-generation"]
    assert set(operations) >= {"get", "patch"}
    assert set(operations["patch"]["responses"]) == {
        "200",
        "400",
        "401",
        "403",
        "404",
        "409",
        "413",
        "500",
        "503",
    }
    dto = document["components"]["schemas"]["SetLinkGenerationDto"]
    assert dto["required"] == ["linkGenerationAt"]
    assert dto["additionalProperties"] is False


TIME_FIELDS = {
    "linkGenerationAt",
    "retryAt",
    "claimedAt",
    "finishedAt",
    "changedAt",
    "previousLinkGenerationAt",
    "updatedAt",
    "createdAt",
    "now",
    "claimableAt",
    "nextAt",
    "until",
}


def test_every_time_in_a_response_is_declared_a_date_time(http: TestClient) -> None:
    """A client generated from the spec parses each time into its datetime type (before,
    every one was a plain string: no ``format: date-time``)."""
    schemas = http.get("/openapi.json").json()["components"]["schemas"]
    undeclared = []
    for name, schema in schemas.items():
        for field, spec in schema.get("properties", {}).items():
            if field not in TIME_FIELDS:
                continue
            options = spec.get("anyOf", [spec])
            if not any(o.get("format") == "date-time" for o in options):
                undeclared.append(f"{name}.{field}")
    assert undeclared == []


def test_every_route_served_is_documented_or_internal_and_every_documented_one_served(
    http: TestClient,
) -> None:
    """The document and the routes come from one table: each served path and method is in
    the document (or is /metrics or /openapi.json), and each documented one is served."""
    document = http.get("/openapi.json").json()
    documented = {
        (path, method.upper())
        for path, item in document["paths"].items()
        for method in item
        if method != "parameters"
    }
    served = {
        (route.path, method)
        for route in http.app.routes  # type: ignore[attr-defined]
        for method in route.methods - {"HEAD"}
    }
    assert served - documented == {("/metrics", "GET"), ("/openapi.json", "GET")}
    assert documented <= served


@pytest.mark.parametrize(
    ("overrides", "message"),
    [({"jwt_secret": None}, "JLG_JWT_SECRET"), ({"jwt_secret": "short"}, "at least 32 bytes")],
)
def test_unusable_auth_configuration_fails_at_start(
    db_url: str, overrides: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        create_app(settings_for(db_url, None, **overrides))
