"""The attempt history and the session listing over HTTP (docs/design.md "Attempt history"): the
pinned shapes, paging by id with and without a status filter, 400 for anything else, and the
same auth and 404s as the other route."""

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import Engine
from starlette.testclient import TestClient

from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.domain.attempts import Trigger
from jlg_pipeline.domain.errors import RegistrarRejected
from jlg_pipeline.domain.generation import BulkRegisterRequest
from jlg_pipeline.domain.status import LinkGenerationStatus
from jlg_pipeline.services.generation import generate_for_session
from testkit.factories import create_session, force_state, session_row
from tests.support.fakes import RecordingRegistrar
from tests.support.web import Aws, admin_headers, client_for, settings_for, token

S = LinkGenerationStatus
HEADERS = admin_headers()
MENTOR = {
    "Authorization": f"Bearer {token(3, ('mentor',))}",
    "X-Active-Role": "mentor",
}


@pytest.fixture
def http(db_url: str, aws: Aws) -> Iterator[TestClient]:
    with client_for(settings_for(db_url, aws.queue_arn), aws.scheduler) as client:
        yield client


def _attempts(sid: int) -> str:
    return f"/program-session/{sid}/link-generation/attempts"


def test_attempts_newest_first_in_the_pinned_shape(engine: Engine, http: TestClient) -> None:
    sid = create_session(engine)
    force_state(engine, sid, S.SCHEDULED, at_offset=timedelta(minutes=-2))
    repository = ProgramSessionRepository(engine)
    with pytest.raises(Exception, match="422"):
        generate_for_session(
            BulkRegisterRequest.parse(sid),
            repository=repository,
            registrar=RecordingRegistrar(error=RegistrarRejected("bulkRegister answered 422")),
            trigger=Trigger.EVENT,
            run_id="run-a",
        )
    done = generate_for_session(
        BulkRegisterRequest.parse(sid),
        repository=repository,
        registrar=RecordingRegistrar(total=25),
        trigger=Trigger.CRON,
    )
    response = http.get(_attempts(sid), headers=HEADERS)
    assert response.status_code == 200
    body = response.json()
    assert (body["success"], body["error"]) == (True, None)
    newest, first = body["data"]
    assert set(newest) == {
        "attempt",
        "trigger",
        "runId",
        "claimedAt",
        "finishedAt",
        "outcome",
        "jobId",
        "total",
        "error",
        "lagMs",
    }
    assert (newest["attempt"], newest["trigger"], newest["runId"], newest["outcome"]) == (
        2,
        "cron",
        None,
        "COMPLETED",
    )
    assert (newest["jobId"], newest["total"], newest["error"]) == (done.job_id, 25, None)
    assert newest["claimedAt"].endswith("Z")
    assert newest["finishedAt"].endswith("Z")
    assert 120_000 <= newest["lagMs"] < 180_000
    assert (first["attempt"], first["runId"], first["outcome"]) == (1, "run-a", "FAILED")
    assert "422" in first["error"]


def test_attempts_of_a_session_never_attempted_are_empty(engine: Engine, http: TestClient) -> None:
    response = http.get(_attempts(create_session(engine)), headers=HEADERS)
    assert (response.status_code, response.json()["data"]) == (200, [])


def test_attempts_answer_like_the_other_route(engine: Engine, http: TestClient) -> None:
    sid = create_session(engine)
    deleted = create_session(engine)
    force_state(engine, deleted, S.SCHEDULED, deleted=True)
    assert http.get(_attempts(999_999), headers=HEADERS).status_code == 404
    assert http.get(_attempts(deleted), headers=HEADERS).status_code == 404
    assert http.get(_attempts(sid)).status_code == 401
    assert http.get(_attempts(sid), headers=MENTOR).status_code == 403
    assert (
        http.get("/program-session/abc/link-generation/attempts", headers=HEADERS).status_code
        == 400
    )


def _page(http: TestClient, **query: Any) -> Any:
    response = http.get("/program-session/link-generation", headers=HEADERS, params=query)
    assert response.status_code == 200, response.text
    return response.json()["data"]


def test_the_listing_pages_through_by_id(engine: Engine, http: TestClient) -> None:
    ids = [create_session(engine) for _ in range(5)]
    for sid in ids[::2]:
        force_state(engine, sid, S.FAILED)
    deleted = create_session(engine)
    force_state(engine, deleted, S.FAILED, deleted=True)

    first = _page(http, limit=2)
    assert [i["id"] for i in first["items"]] == ids[:2]
    assert first["nextAfterId"] == ids[1]
    second = _page(http, limit=2, afterId=ids[1])
    assert [i["id"] for i in second["items"]] == ids[2:4]
    last = _page(http, limit=2, afterId=ids[3])
    assert [i["id"] for i in last["items"]] == [ids[4]]
    assert last["nextAfterId"] is None

    failed = _page(http, status="FAILED", limit=2)
    assert [i["id"] for i in failed["items"]] == [ids[0], ids[2]]
    rest = _page(http, status="FAILED", limit=2, afterId=failed["nextAfterId"])
    assert [i["id"] for i in rest["items"]] == [ids[4]]
    assert rest["nextAfterId"] is None

    # As a generated client sends a list (the parameter repeated), and as the spec writes it.
    for both in ({"status": ["FAILED", "NOT_SCHEDULED"]}, {"status": "FAILED,NOT_SCHEDULED"}):
        assert [i["id"] for i in _page(http, **both)["items"]] == ids

    [item] = _page(http, afterId=ids[3], limit=1)["items"]
    row = session_row(engine, ids[4])
    assert set(item) == {
        "id",
        "linkGenerationAt",
        "linkGenerationStatus",
        "attempt",
        "lastError",
        "updatedAt",
    }
    assert (item["linkGenerationStatus"], item["attempt"], item["lastError"]) == (
        "FAILED",
        row["link_generation_attempt"],
        None,
    )
    assert item["linkGenerationAt"].endswith("Z")
    assert item["updatedAt"].endswith("Z")


@pytest.mark.parametrize(
    "query",
    [
        {"limit": "0"},
        {"limit": "501"},
        {"limit": "ten"},
        {"limit": "1.5"},
        {"afterId": "-1"},
        {"afterId": "x"},
        {"status": "DONE"},
        {"status": "failed"},
        {"sort": "id"},
        {"limit": ["5", "6"]},
    ],
)
def test_bad_listing_parameters_are_400(http: TestClient, query: dict[str, Any]) -> None:
    response = http.get("/program-session/link-generation", headers=HEADERS, params=query)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "BAD_REQUEST"


def test_the_listing_needs_an_admin(http: TestClient) -> None:
    assert http.get("/program-session/link-generation").status_code == 401
    assert http.get("/program-session/link-generation", headers=MENTOR).status_code == 403


def test_both_routes_are_in_the_openapi_document(http: TestClient) -> None:
    paths = http.get("/openapi.json").json()["paths"]
    assert "get" in paths["/program-session/{id}/link-generation/attempts"]
    listing = paths["/program-session/link-generation"]["get"]
    assert {p["name"] for p in listing["parameters"]} >= {"status", "limit", "afterId"}


def _scrape(http: TestClient) -> dict[str, float]:
    http.app.state.figures.refresh()  # type: ignore[attr-defined]
    values = {}
    for line in http.get("/metrics").text.splitlines():
        if line.startswith("jlg_") and " " in line:
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    return values


def test_metrics_count_attempts_lateness_and_overdue_sessions(
    engine: Engine, http: TestClient
) -> None:
    repository = ProgramSessionRepository(engine)
    late = create_session(engine)
    force_state(engine, late, S.SCHEDULED, at_offset=timedelta(minutes=-10))
    generate_for_session(
        BulkRegisterRequest.parse(late),
        repository=repository,
        registrar=RecordingRegistrar(),
        trigger=Trigger.CRON,
    )
    overdue = create_session(engine)
    force_state(engine, overdue, S.SCHEDULED, at_offset=timedelta(minutes=-6))
    recent = create_session(engine)
    force_state(engine, recent, S.FAILED, at_offset=timedelta(minutes=-1))
    future = create_session(engine)
    force_state(engine, future, S.SCHEDULED, at_offset=timedelta(hours=1))

    values = _scrape(http)

    assert values["jlg_overdue_sessions"] == 1.0
    assert values['jlg_generation_attempts_total{outcome="COMPLETED",trigger="cron"}'] == 1.0
    assert values["jlg_generation_lag_seconds_count"] == 1.0
    assert 600 <= values["jlg_generation_lag_seconds_sum"] < 660
    assert values['jlg_generation_lag_seconds_bucket{le="300.0"}'] == 0.0
    assert values['jlg_generation_lag_seconds_bucket{le="1800.0"}'] == 1.0
    # Sessions that hold a time are counted; a COMPLETED one holds none (docs/design.md "Scale").
    assert values['jlg_program_sessions{status="SCHEDULED"}'] == 2.0
    assert values['jlg_program_sessions{status="FAILED"}'] == 1.0
    assert 'jlg_program_sessions{status="COMPLETED"}' not in values


def test_a_scrape_serves_the_last_reading_without_querying(
    engine: Engine, http: TestClient
) -> None:
    before = _scrape(http)
    force_state(engine, create_session(engine), S.SCHEDULED, at_offset=timedelta(hours=-1))
    assert http.get("/metrics").text.count("jlg_overdue_sessions 0.0") == 1
    assert before["jlg_overdue_sessions"] == 0.0
    assert _scrape(http)["jlg_overdue_sessions"] == 1.0
