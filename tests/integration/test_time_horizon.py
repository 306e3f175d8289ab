"""Times stay readable (docs/design.md "Trust boundaries", "No single answer"): no stored time
lies past the horizon (LINK_GENERATION_HORIZON ahead), the PATCH and programme actions refuse
it with the reason, and a row holding a time no Python read can load (the host wrote it, or
an older release shifted it past year 9999) is reported as such, never a 500.

The audit's probe, as sent: a session PATCHed to 9999-06-01, then a programme ``shiftBy:
316224000`` (within the allowed bound) stored ``10009-06-08``; that session's GET, ``/changes``
and the PATCH that would repair it answered 500, as did the programme's listing and every dry
run."""

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, text
from starlette.testclient import TestClient

from jlg_pipeline.domain.constants import LINK_GENERATION_HORIZON
from jlg_pipeline.domain.status import LinkGenerationStatus
from testkit.factories import create_sessions, force_state, session_row
from tests.support.web import Aws, admin_headers, client_for, settings_for

S = LinkGenerationStatus
HEADERS = admin_headers()
AUDIT_SHIFT_S = 316_224_000


@pytest.fixture
def http(db_url: str, aws: Aws) -> Iterator[TestClient]:
    with client_for(settings_for(db_url, aws.queue_arn), aws.scheduler) as client:
        yield client


def _iso(when: datetime) -> str:
    return when.isoformat().replace("+00:00", "Z")


def _session(sid: int) -> str:
    return f"/program-session/{sid}/link-generation"


def _error(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["error"]
    return error


def test_a_patch_past_the_horizon_is_refused_with_the_reason(
    engine: Engine, http: TestClient
) -> None:
    (sid,) = create_sessions(engine, 1, program_id=41)
    before = session_row(engine, sid)["link_generation_at"]
    beyond = datetime.now(UTC) + LINK_GENERATION_HORIZON + timedelta(days=1)
    error = _error(
        http.patch(_session(sid), headers=HEADERS, json={"linkGenerationAt": _iso(beyond)}), 400
    )
    assert "horizon" in error["message"]
    assert session_row(engine, sid)["link_generation_at"] == before
    within = datetime.now(UTC) + LINK_GENERATION_HORIZON - timedelta(days=1)
    ok = http.patch(_session(sid), headers=HEADERS, json={"linkGenerationAt": _iso(within)})
    assert ok.status_code == 200, ok.text


def test_a_programme_action_refuses_a_time_past_the_horizon_and_skips_a_shift_past_it(
    engine: Engine, http: TestClient
) -> None:
    near, far = create_sessions(engine, 2, program_id=42)
    force_state(engine, near, S.SCHEDULED, at_offset=timedelta(days=10))
    force_state(engine, far, S.SCHEDULED, at_offset=LINK_GENERATION_HORIZON - timedelta(days=1))
    beyond = datetime.now(UTC) + LINK_GENERATION_HORIZON + timedelta(days=1)
    body = {"linkGenerationAt": _iso(beyond), "expectedCount": 2}
    error = _error(
        http.patch(
            "/program/42/link-generation", headers={**HEADERS, "Idempotency-Key": "h1"}, json=body
        ),
        400,
    )
    assert "horizon" in error["message"]

    shift = {"shiftBy": 3 * 86_400, "expectedCount": 2}
    answer = http.patch(
        "/program/42/link-generation", headers={**HEADERS, "Idempotency-Key": "h2"}, json=shift
    )
    assert answer.status_code == 200, answer.text
    data = answer.json()["data"]
    assert data["changed"] == 1
    assert data["skipped"] == [{"id": far, "reason": "out of range"}]


def test_the_audits_shift_past_year_9999_is_skipped(engine: Engine, http: TestClient) -> None:
    (sid,) = create_sessions(engine, 1, program_id=43)
    with engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE hdb_program_session SET link_generation_at = '9999-06-01T00:00:00Z',"
                " link_generation_status = 'SCHEDULED' WHERE id = :id"
            ),
            {"id": sid},
        )
    body = {"shiftBy": AUDIT_SHIFT_S, "expectedCount": 1}
    answer = http.patch(
        "/program/43/link-generation", headers={**HEADERS, "Idempotency-Key": "a1"}, json=body
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["data"]["skipped"] == [{"id": sid, "reason": "out of range"}]
    assert session_row(engine, sid)["link_generation_at"].year == 9999


def test_a_row_holding_an_unreadable_time_is_reported_as_such_and_can_be_repaired(
    engine: Engine, http: TestClient
) -> None:
    """What an older release's shift (or the host itself) may have stored."""
    sid, other = create_sessions(engine, 2, program_id=44)
    force_state(engine, other, S.SCHEDULED, at_offset=timedelta(days=3))
    with engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE hdb_program_session SET link_generation_at = '10009-06-08T00:00:00Z',"
                " link_generation_status = 'SCHEDULED' WHERE id = :id"
            ),
            {"id": sid},
        )
    shown = http.get(_session(sid), headers=HEADERS)
    assert shown.status_code == 200, shown.text
    data = shown.json()["data"]
    assert data["linkGenerationAt"] is None
    assert data["outOfRange"] == ["linkGenerationAt"]
    assert http.get(f"{_session(sid)}/changes", headers=HEADERS).status_code == 200
    listing = http.get("/program-session/link-generation?programId=44", headers=HEADERS)
    assert listing.status_code == 200, listing.text
    items = {item["id"]: item for item in listing.json()["data"]["items"]}
    assert items[sid]["outOfRange"] == ["linkGenerationAt"]
    assert "outOfRange" not in items[other]
    dry = http.patch(
        "/program/44/link-generation", headers=HEADERS, json={"shiftBy": 60, "dryRun": True}
    )
    assert dry.status_code == 200, dry.text
    assert {"id": sid, "reason": "out of range"} in dry.json()["data"]["skipped"]

    repaired = http.patch(_session(sid), headers=HEADERS, json={"linkGenerationAt": None})
    assert repaired.status_code == 200, repaired.text
    assert repaired.json()["data"]["linkGenerationStatus"] == "NOT_SCHEDULED"
    changes = http.get(f"{_session(sid)}/changes", headers=HEADERS).json()["data"]
    assert changes[0]["linkGenerationAt"] is None


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("updated_at", "infinity"),
        ("link_generation_retry_at", "-infinity"),
        ("starts_at", "infinity"),
    ],
)
def test_any_time_the_host_stores_leaves_every_read_standing(
    engine: Engine, http: TestClient, column: str, value: str
) -> None:
    """The host owns its rows and may write any time PostgreSQL takes."""
    (sid,) = create_sessions(engine, 1, program_id=45)
    with engine.begin() as conn:
        conn.execute(
            text(f"UPDATE hdb_program_session SET {column} = :v WHERE id = :id"),
            {"v": value, "id": sid},
        )
    assert http.get(_session(sid), headers=HEADERS).status_code == 200
    listing = http.get("/program-session/link-generation?programId=45", headers=HEADERS)
    assert listing.status_code == 200, listing.text
