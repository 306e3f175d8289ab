"""A status outside the enum (issue 68, item 3): the host's table is not ours, and if its owner
drops the CHECK constraint one row may hold any text. Before, one such row made GET, both
listings (the unfiltered one too), ``/attempts``, the programme dry run and ``jlg why`` answer
500. Now it reads as UNKNOWN, no claim takes it, a listing can find it, a PATCH repairs it, and
every other row reads as before."""

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine, text
from starlette.testclient import TestClient

from jlg_pipeline.adapters.queue import SessionQueue
from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.domain.attempts import Trigger
from jlg_pipeline.domain.status import LinkGenerationStatus
from jlg_pipeline.domain.validation import SessionId
from testkit.factories import create_session, force_state
from tests.support.web import Aws, admin_headers, client_for, settings_for

S = LinkGenerationStatus
HEADERS = admin_headers()
CHECK = "ck_psession_link_gen_status"


@pytest.fixture
def bogus(engine: Engine) -> Iterator[int]:
    """A due session of programme 9 whose status is ``BOGUS``, the CHECK dropped meanwhile."""
    sid = create_session(engine, program_id=9)
    force_state(engine, sid, S.SCHEDULED, at_offset=timedelta(minutes=-5))
    with engine.begin() as conn:
        definition = conn.execute(
            text("SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conname = :n"),
            {"n": CHECK},
        ).scalar_one()
        conn.execute(text(f"ALTER TABLE hdb_program_session DROP CONSTRAINT {CHECK}"))
        conn.execute(
            text("UPDATE hdb_program_session SET link_generation_status = 'BOGUS' WHERE id = :i"),
            {"i": sid},
        )
    yield sid
    with engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE hdb_program_session SET link_generation_status = 'NOT_SCHEDULED'"
                " WHERE link_generation_status = 'BOGUS'"
            )
        )
        conn.execute(text(f"ALTER TABLE hdb_program_session ADD CONSTRAINT {CHECK} {definition}"))


@pytest.fixture
def http(db_url: str, aws: Aws) -> Iterator[TestClient]:
    with client_for(settings_for(db_url, aws.queue_arn), aws.scheduler) as client:
        yield client


def test_a_status_outside_the_five_reads_as_unknown_and_stops_nothing(
    engine: Engine, http: TestClient, bogus: int
) -> None:
    other = create_session(engine, program_id=9)
    force_state(engine, other, S.SCHEDULED, at_offset=timedelta(minutes=-4))
    path = f"/program-session/{bogus}/link-generation"

    got = http.get(path, headers=HEADERS)
    listed = http.get("/program-session/link-generation?programId=9", headers=HEADERS)
    found = http.get("/program-session/link-generation?status=UNKNOWN", headers=HEADERS)
    attempts = http.get(f"{path}/attempts", headers=HEADERS)
    why = http.get(f"{path}/why", headers=HEADERS)
    dry = http.patch(
        "/program/9/link-generation",
        headers=HEADERS,
        json={"shiftBy": 60, "dryRun": True},
    )

    assert got.status_code == 200, got.text
    assert got.json()["data"]["linkGenerationStatus"] == "UNKNOWN"
    assert listed.status_code == 200, listed.text
    assert [(i["id"], i["linkGenerationStatus"]) for i in listed.json()["data"]["items"]] == [
        (bogus, "UNKNOWN"),
        (other, "SCHEDULED"),
    ]
    assert [i["id"] for i in found.json()["data"]["items"]] == [bogus]
    assert attempts.status_code == 200, attempts.text
    assert why.status_code == 200, why.text
    assert why.json()["data"]["holds"][0]["hold"] == "set aside"
    assert dry.status_code == 200, dry.text

    SessionQueue(engine).refresh()
    repository = ProgramSessionRepository(engine)
    claim = repository.claim_next(Trigger.WATCHDOG, "run-u")
    assert claim is not None
    assert claim.session_id == other, "the other session is claimed, never the unknown one"
    assert repository.claim_next(Trigger.WATCHDOG, "run-u") is None
    assert repository.claim(SessionId(bogus), Trigger.EVENT, "run-u") is None

    later = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    repaired = http.patch(path, headers=HEADERS, json={"linkGenerationAt": later})
    assert repaired.status_code == 200, repaired.text
    assert repaired.json()["data"]["linkGenerationStatus"] == "SCHEDULED"
