"""PATCH/GET link-generation over HTTP: validation, 404/409, re-arm, AWS schedule (moto),
best-effort on AWS failures, the flag, and the envelope everywhere."""

import json
import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.stub import Stubber
from sqlalchemy import Engine, func, select
from starlette.testclient import TestClient

from devstack.ports import free_port
from jlg_pipeline.adapters.aws_scheduler import scheduler_client
from jlg_pipeline.adapters.tables import schedule_outbox
from jlg_pipeline.domain.status import LinkGenerationStatus
from testkit.factories import create_session, force_state, online_snapshot, session_row
from tests.support.logs import fields_of
from tests.support.web import (
    ROLE_ARN,
    Aws,
    RecordingClient,
    admin_headers,
    client_for,
    settings_for,
)

S = LinkGenerationStatus
HEADERS = admin_headers()


def _path(sid: int | str) -> str:
    return f"/program-session/{sid}/link-generation"


def _later(**delta: float) -> datetime:
    return datetime.now(UTC).replace(microsecond=0) + timedelta(**(delta or {"days": 1}))


@pytest.fixture
def http(db_url: str, aws: Aws) -> Iterator[TestClient]:
    with client_for(settings_for(db_url, aws.queue_arn), aws.scheduler) as client:
        yield client


def _schedule(aws: Aws, sid: int) -> dict[str, Any]:
    found: dict[str, Any] = aws.scheduler.get_schedule(Name=f"join-link-{sid}", GroupName="default")
    return found


def test_patch_schedules_and_answers_the_pinned_body(
    engine: Engine, http: TestClient, aws: Aws
) -> None:
    sid = create_session(engine)
    online = online_snapshot(engine, sid)
    at = _later(days=1)
    local = at.astimezone().isoformat()

    response = http.patch(_path(sid), headers=HEADERS, json={"linkGenerationAt": local})

    assert response.status_code == 200, response.text
    assert response.json() == {
        "success": True,
        "data": {
            "id": sid,
            "linkGenerationAt": at.strftime("%Y-%m-%dT%H:%M:%S.000Z"),
            "linkGenerationStatus": "SCHEDULED",
        },
        "error": None,
    }
    row = session_row(engine, sid)
    assert row["link_generation_at"] == at
    assert row["updated_by"] == 7
    assert online_snapshot(engine, sid) == online

    schedule = _schedule(aws, sid)
    assert schedule["ScheduleExpression"] == f"at({at:%Y-%m-%dT%H:%M:%S})"
    assert schedule["ScheduleExpressionTimezone"] == "UTC"
    assert schedule["FlexibleTimeWindow"] == {"Mode": "OFF"}
    assert schedule["ActionAfterCompletion"] == "DELETE"
    assert schedule["State"] == "ENABLED"
    target = schedule["Target"]
    assert (target["Arn"], target["RoleArn"]) == (aws.queue_arn, ROLE_ARN)
    assert target["RetryPolicy"] == {"MaximumRetryAttempts": 5, "MaximumEventAgeInSeconds": 86400}
    message = json.loads(target["Input"])
    assert message["queueType"] == "EVENT"
    assert message["subType"] == "JOIN_LINK_GENERATION"
    assert message["correlationId"] == f"join-link-{sid}"
    assert message["data"] == {"programSessionId": sid, "actorUserId": 7}
    assert message["timestamp"].endswith("Z")

    got = http.get(_path(sid), headers=HEADERS)
    assert got.status_code == 200
    # The GET's answer is the PATCH's and when the queue retries it (a SCHEDULED one: none).
    assert got.json() == {**response.json(), "data": {**response.json()["data"], "retryAt": None}}


def test_reschedule_moves_clear_deletes_and_repeats_are_idempotent(
    engine: Engine, http: TestClient, aws: Aws
) -> None:
    sid = create_session(engine)
    first, second = _later(days=1), _later(days=2)
    for _ in range(2):
        assert (
            http.patch(
                _path(sid), headers=HEADERS, json={"linkGenerationAt": first.isoformat()}
            ).status_code
            == 200
        )
    assert _schedule(aws, sid)["ScheduleExpression"] == f"at({first:%Y-%m-%dT%H:%M:%S})"
    http.patch(_path(sid), headers=HEADERS, json={"linkGenerationAt": second.isoformat()})
    assert _schedule(aws, sid)["ScheduleExpression"] == f"at({second:%Y-%m-%dT%H:%M:%S})"
    names = [s["Name"] for s in aws.scheduler.list_schedules()["Schedules"]]
    assert names == [f"join-link-{sid}"]

    for _ in range(2):
        cleared = http.patch(_path(sid), headers=HEADERS, json={"linkGenerationAt": None})
        assert cleared.status_code == 200
        assert cleared.json()["data"] == {
            "id": sid,
            "linkGenerationAt": None,
            "linkGenerationStatus": "NOT_SCHEDULED",
        }
    assert aws.scheduler.list_schedules()["Schedules"] == []


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"not json", "not valid JSON"),
        (b"", "not valid JSON"),
        (b"[]", "JSON object"),
        (b'"2030-01-01T00:00:00Z"', "JSON object"),
        (b"{}", "linkGenerationAt is required"),
        (b'{"linkGenerationAt": null, "role": "x"}', "unknown field role"),
        (b'{"linkGenerationAt": 1893456000}', "string date-time"),
        (b'{"linkGenerationAt": true}', "string date-time"),
        (b'{"linkGenerationAt": "tomorrow"}', "RFC 3339"),
        (b'{"linkGenerationAt": "2030-01-01T00:00:00"}', "with an offset"),
        (b'{"linkGenerationAt": "2030-01-01"}', "with an offset"),
        (b'{"linkGenerationAt": "2020-01-01T00:00:00Z"}', "in the future"),
        (b'{"linkGenerationAt": "9999-12-31T23:59:59-23:59"}', "not a valid date-time in range"),
        (b'{"linkGenerationAt": "\\u0000"}', "RFC 3339"),
    ],
)
def test_bad_bodies_are_400_and_change_nothing(
    engine: Engine, http: TestClient, aws: Aws, body: bytes, message: str
) -> None:
    sid = create_session(engine)
    force_state(engine, sid, S.COMPLETED)
    before = session_row(engine, sid)
    response = http.patch(
        _path(sid), headers={**HEADERS, "Content-Type": "application/json"}, content=body
    )
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "BAD_REQUEST"
    assert message in response.json()["error"]["message"]
    assert session_row(engine, sid) == before
    assert aws.scheduler.list_schedules()["Schedules"] == []


def test_oversized_body_is_refused(engine: Engine, http: TestClient) -> None:
    sid = create_session(engine)
    response = http.patch(
        _path(sid), headers=HEADERS, content=b'{"linkGenerationAt": "' + b"9" * 5000 + b'"}'
    )
    assert response.status_code == 413
    assert "larger than" in response.json()["error"]["message"]


@pytest.mark.parametrize("raw_id", ["abc", "0", "-1", "99999999999999999999", "1.5"])
def test_bad_ids_are_400(http: TestClient, raw_id: str) -> None:
    for method in ("GET", "PATCH"):
        response = http.request(
            method, _path(raw_id), headers=HEADERS, json={"linkGenerationAt": None}
        )
        assert response.status_code == 400, (method, response.text)
        assert "program session id" in response.json()["error"]["message"]


def test_missing_and_soft_deleted_sessions_are_404(engine: Engine, http: TestClient) -> None:
    sid = create_session(engine)
    force_state(engine, sid, S.SCHEDULED, deleted=True)
    for target in (sid, sid + 1000):
        for method in ("GET", "PATCH"):
            response = http.request(
                method, _path(target), headers=HEADERS, json={"linkGenerationAt": None}
            )
            assert response.status_code == 404
            assert response.json()["error"]["code"] == "NOT_FOUND"


def test_running_generation_is_409_until_stale(engine: Engine, http: TestClient, aws: Aws) -> None:
    sid = create_session(engine)
    force_state(engine, sid, S.IN_PROGRESS)
    before = session_row(engine, sid)
    response = http.patch(
        _path(sid), headers=HEADERS, json={"linkGenerationAt": _later().isoformat()}
    )
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "CONFLICT"
    assert session_row(engine, sid) == before
    assert aws.scheduler.list_schedules()["Schedules"] == []

    force_state(engine, sid, S.IN_PROGRESS, updated_offset=timedelta(minutes=-31))
    assert (
        http.patch(_path(sid), headers=HEADERS, json={"linkGenerationAt": None}).status_code == 200
    )


@pytest.mark.parametrize("status", [S.COMPLETED, S.FAILED])
def test_completed_and_failed_sessions_can_be_rearmed(
    engine: Engine, http: TestClient, status: S
) -> None:
    sid = create_session(engine)
    force_state(engine, sid, status)
    response = http.patch(
        _path(sid), headers=HEADERS, json={"linkGenerationAt": _later().isoformat()}
    )
    assert response.status_code == 200
    assert response.json()["data"]["linkGenerationStatus"] == "SCHEDULED"


def test_unreachable_aws_still_answers_200(
    engine: Engine, db_url: str, aws: Aws, caplog: pytest.LogCaptureFixture
) -> None:
    sid = create_session(engine)
    dead = scheduler_client(region_name="us-east-1", endpoint_url=f"http://127.0.0.1:{free_port()}")
    with client_for(settings_for(db_url, aws.queue_arn), dead) as http:
        response = http.patch(
            _path(sid), headers=HEADERS, json={"linkGenerationAt": _later().isoformat()}
        )
        cleared = http.patch(_path(sid), headers=HEADERS, json={"linkGenerationAt": None})
    assert response.status_code == 200
    assert response.json()["data"]["linkGenerationStatus"] == "SCHEDULED"
    assert cleared.status_code == 200
    failures = fields_of(caplog, "schedule_sync.failed")
    assert [f["operation"] for f in failures] == ["upsert", "delete"]
    assert all(f["error"] == "EndpointConnectionError" for f in failures)


def test_aws_errors_are_swallowed(
    engine: Engine, db_url: str, aws: Aws, caplog: pytest.LogCaptureFixture
) -> None:
    sid = create_session(engine)
    client = scheduler_client(region_name="us-east-1")
    stubber = Stubber(client)
    stubber.add_client_error("update_schedule", "AccessDeniedException", http_status_code=403)
    stubber.add_client_error("delete_schedule", "ThrottlingException", http_status_code=429)
    with stubber, client_for(settings_for(db_url, aws.queue_arn), client) as http:
        armed = http.patch(
            _path(sid), headers=HEADERS, json={"linkGenerationAt": _later().isoformat()}
        )
        assert armed.status_code == 200
        assert session_row(engine, sid)["link_generation_status"] == "SCHEDULED"
        assert (
            http.patch(_path(sid), headers=HEADERS, json={"linkGenerationAt": None}).status_code
            == 200
        )
        stubber.assert_no_pending_responses()
    errors = [f["error"] for f in fields_of(caplog, "schedule_sync.failed")]
    assert errors == [
        "UpdateSchedule: AccessDeniedException (HTTP 403)",
        "DeleteSchedule: ThrottlingException (HTTP 429)",
    ]


@pytest.mark.parametrize("overrides", [{"scheduler_enabled": False}, {"scheduler_target": None}])
def test_flag_off_or_unconfigured_makes_no_aws_call(
    engine: Engine,
    db_url: str,
    aws: Aws,
    caplog: pytest.LogCaptureFixture,
    overrides: dict[str, Any],
) -> None:
    caplog.set_level(logging.INFO)
    sid = create_session(engine)
    recording = RecordingClient(aws.scheduler)
    with client_for(settings_for(db_url, aws.queue_arn, **overrides), recording) as http:
        assert (
            http.patch(
                _path(sid), headers=HEADERS, json={"linkGenerationAt": _later().isoformat()}
            ).status_code
            == 200
        )
        assert (
            http.patch(_path(sid), headers=HEADERS, json={"linkGenerationAt": None}).status_code
            == 200
        )
    assert recording.calls == []
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(schedule_outbox)).scalar_one() == 0


def test_only_the_three_write_operations_are_called(engine: Engine, db_url: str, aws: Aws) -> None:
    sid = create_session(engine)
    recording = RecordingClient(aws.scheduler)
    with client_for(settings_for(db_url, aws.queue_arn), recording) as http:
        http.patch(_path(sid), headers=HEADERS, json={"linkGenerationAt": _later().isoformat()})
        http.patch(
            _path(sid), headers=HEADERS, json={"linkGenerationAt": _later(days=3).isoformat()}
        )
        http.patch(_path(sid), headers=HEADERS, json={"linkGenerationAt": None})
        http.patch(_path(sid), headers=HEADERS, json={"linkGenerationAt": None})
    assert set(recording.calls) <= {"create_schedule", "update_schedule", "delete_schedule"}
    assert recording.calls == [
        "update_schedule",
        "create_schedule",
        "update_schedule",
        "delete_schedule",
        "delete_schedule",
    ]
