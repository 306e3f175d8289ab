"""Why is it waiting? (docs/design.md "Why is it waiting"): for each hold, the answer is true.
Each case arranges the hold on real PostgreSQL, asks, checks the hold named and its time, then
lets the hold end with a worker draining the queue and checks the session is generated no
earlier than a moment before the time the answer named and no later than a few seconds after.

Before, nothing answered: no route, no command, and the session's GET left out its retry time."""

import json
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, text
from starlette.testclient import TestClient

from jlg_pipeline import bootstrap
from jlg_pipeline.adapters.queue import SessionQueue
from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.adapters.service_view import ServiceView
from jlg_pipeline.cli import main
from jlg_pipeline.config import Settings
from jlg_pipeline.domain.attempts import Trigger
from jlg_pipeline.domain.constants import next_fallback_sweep
from jlg_pipeline.domain.service_view import Budget
from jlg_pipeline.domain.status import LinkGenerationStatus
from jlg_pipeline.domain.validation import SessionId
from jlg_pipeline.services.generation import generate_next
from jlg_pipeline.services.why import HoldKind, Why
from testkit.factories import create_session, db_now, force_state, session_row
from tests.support.fakes import RecordingRegistrar
from tests.support.web import Aws, admin_headers, client_for, settings_for, token

S = LinkGenerationStatus
H = HoldKind
HOLD_S = 3.0
"""How far ahead each arranged hold ends."""
LATE_BY_S = 3.0
"""How long after the named time the worker may generate it: its loop's step, a claim."""
EARLY_BY_S = 0.5


def _settings(db_url: str, **overrides: Any) -> Settings:
    return settings_for(db_url, None, **overrides)


def _ask(db_url: str, engine: Engine, sid: int, **overrides: Any) -> Why:
    why = bootstrap.why_for(_settings(db_url, **overrides), engine)
    return why(SessionId(sid))


def _kinds(why: Why) -> list[HoldKind]:
    return [h.kind for h in why.holds]


def _alive(engine: Engine) -> None:
    """A worker beat just now: the answer names no missing worker."""
    SessionQueue(engine).beat("run-why")


def _generated_at(
    engine: Engine, sid: int, view: ServiceView, registrar: RecordingRegistrar, within_s: float
) -> datetime:
    """A worker drains the queue until ``sid`` is generated: the database clock then."""
    repository = ProgramSessionRepository(engine)
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        SessionQueue(engine).refresh()
        outcome = generate_next(
            repository=repository,
            registrar=registrar,
            trigger=Trigger.WATCHDOG,
            run_id="run-why",
            view=view,
        )
        if outcome is not None and outcome.session_id == sid:
            return db_now(engine)
        if outcome is None:
            time.sleep(0.1)
    raise AssertionError(f"session {sid} not generated within {within_s} s")


def _truthful(engine: Engine, sid: int, why: Why, view: ServiceView | None = None) -> None:
    assert why.next_at is not None
    at = _generated_at(engine, sid, view or ServiceView(engine), RecordingRegistrar(), 20)
    assert at >= why.next_at - timedelta(seconds=EARLY_BY_S), (at, why.next)
    assert at <= why.next_at + timedelta(seconds=LATE_BY_S), (at, why.next)


def _due(engine: Engine, program_id: int = 1) -> SessionId:
    sid = create_session(engine, program_id=program_id)
    force_state(engine, sid, S.SCHEDULED, at_offset=timedelta(seconds=-30))
    return sid


def _failed(
    engine: Engine, attempt: int, error: str | None, retry_in_s: float | None = None
) -> SessionId:
    """A session FAILED at ``attempt`` 5 minutes after its time, with ``error``; retried by
    the queue ``retry_in_s`` from now, or (None) failed for good."""
    sid = create_session(engine)
    force_state(engine, sid, S.FAILED, at_offset=timedelta(minutes=-5), attempt=attempt)
    with engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE hdb_program_session SET link_generation_last_error = :error,"
                " link_generation_retry_at = now() + make_interval(secs => :s) WHERE id = :id"
            ),
            {"error": error, "s": retry_in_s, "id": sid},
        )
    return sid


def test_not_due_names_its_time_and_is_generated_then(db_url: str, engine: Engine) -> None:
    sid = create_session(engine)
    force_state(engine, sid, S.SCHEDULED, at_offset=timedelta(seconds=HOLD_S))
    _alive(engine)

    why = _ask(db_url, engine, sid)

    assert not why.waits_now
    assert _kinds(why) == [H.NOT_DUE]
    assert why.next_at == why.claim_at == session_row(engine, sid)["link_generation_at"]
    assert why.next.startswith("the queue at ")
    _truthful(engine, sid, why)


def test_backoff_names_its_retry_time_and_is_generated_then(db_url: str, engine: Engine) -> None:
    sid = _failed(engine, 2, "bulkRegister answered 503", retry_in_s=HOLD_S)
    _alive(engine)

    why = _ask(db_url, engine, sid)

    assert not why.waits_now
    assert _kinds(why) == [H.BACKOFF]
    retry_at = session_row(engine, sid)["link_generation_retry_at"]
    assert why.holds[0].until == why.next_at == retry_at
    assert "attempt 2" in why.holds[0].detail
    assert "503" in why.holds[0].detail
    assert "a worker takes it from the queue again" in why.holds[0].detail, "after_failure's rule"
    _truthful(engine, sid, why)


def test_claim_in_flight_names_when_it_goes_stale(db_url: str, engine: Engine) -> None:
    stale_s = Settings().windows.stale_ms / 1000
    sid = create_session(engine)
    force_state(
        engine,
        sid,
        S.IN_PROGRESS,
        at_offset=timedelta(minutes=-40),
        updated_offset=timedelta(seconds=HOLD_S - stale_s),
    )
    _alive(engine)

    why = _ask(db_url, engine, sid)

    assert not why.waits_now
    assert _kinds(why) == [H.CLAIM_IN_FLIGHT]
    row = session_row(engine, sid)
    assert why.next_at == row["updated_at"] + timedelta(seconds=stale_s)
    assert "goes stale" in why.holds[0].detail
    _truthful(engine, sid, why)


def _set_view(engine: Engine, **values: str) -> None:
    sets = ", ".join(f"{column} = {sql}" for column, sql in values.items())
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO jlg_service_view (name) VALUES ('online-session')"
                " ON CONFLICT DO NOTHING"
            )
        )
        conn.execute(text(f"UPDATE jlg_service_view SET {sets}"))


def test_a_pause_is_named_with_its_end_and_the_session_waits_for_it(
    db_url: str, engine: Engine
) -> None:
    sid = _due(engine)
    _set_view(engine, paused_until=f"now() + interval '{HOLD_S} seconds'")
    _alive(engine)

    why = _ask(db_url, engine, sid)

    assert why.waits_now, "the queue's predicate: the session waits, the service holds it"
    assert _kinds(why) == [H.SERVICE_PAUSE]
    paused_until = _view(engine)["paused_until"]
    assert why.holds[0].until == why.next_at == paused_until
    _truthful(engine, sid, why)


def test_the_breaker_names_when_it_opened_and_its_next_probe(db_url: str, engine: Engine) -> None:
    sid = _due(engine)
    _set_view(
        engine,
        down_since="now() - interval '1 minute'",
        failures="5",
        probe_until=f"now() + interval '{HOLD_S} seconds'",
    )
    _alive(engine)

    why = _ask(db_url, engine, sid)

    assert _kinds(why) == [H.SERVICE_DOWN]
    view = _view(engine)
    assert why.next_at == view["probe_until"]
    assert f"down since {view['down_since'].isoformat(timespec='seconds')}" in why.holds[0].detail
    _truthful(engine, sid, why)


def _view(engine: Engine) -> dict[str, Any]:
    with engine.connect() as conn:
        return dict(conn.execute(text("SELECT * FROM jlg_service_view")).one()._mapping)


def test_the_budget_names_its_next_slot(db_url: str, engine: Engine) -> None:
    sid = _due(engine)
    # One call a second: the slot after one taken at +HOLD_S lies HOLD_S ahead.
    _set_view(engine, next_slot_at=f"now() + interval '{HOLD_S} seconds'")
    _alive(engine)

    why = _ask(db_url, engine, sid, online_session_rate=1.0, online_session_burst=1.0)

    assert _kinds(why) == [H.SERVICE_BUDGET]
    assert why.next_at is not None
    assert abs((why.next_at - db_now(engine)).total_seconds() - HOLD_S) < 1
    _truthful(engine, sid, why, ServiceView(engine, Budget.of(1.0, 1.0)))


def test_two_holds_each_named_and_the_later_one_ends_last(db_url: str, engine: Engine) -> None:
    sid = create_session(engine)
    force_state(engine, sid, S.SCHEDULED, at_offset=timedelta(seconds=1))
    _set_view(engine, paused_until=f"now() + interval '{HOLD_S} seconds'")
    _alive(engine)

    why = _ask(db_url, engine, sid)

    assert _kinds(why) == [H.NOT_DUE, H.SERVICE_PAUSE]
    assert why.ends_last is not None
    assert why.ends_last.kind is H.SERVICE_PAUSE
    assert why.next_at == why.ends_last.until
    _truthful(engine, sid, why)


def test_failed_for_good_names_the_sweep_or_a_person(db_url: str, engine: Engine) -> None:
    sid = _failed(engine, 1, "bulkRegister answered 422 MEETING_DELETED")
    _alive(engine)

    swept = _ask(db_url, engine, sid, fallback_cron_enabled=True)
    alone = _ask(db_url, engine, sid, fallback_cron_enabled=False)

    assert _kinds(swept) == [H.FAILED_FOR_GOOD]
    assert not swept.waits_now
    # The first sweep once the sweep's grace (30 minutes) after its time has passed.
    at = session_row(engine, sid)["link_generation_at"]
    grace = timedelta(milliseconds=Settings().windows.grace_ms)
    assert swept.next_at == next_fallback_sweep(max(swept.now, at + grace))
    assert swept.next.startswith("the sweep at ")
    assert "422" in swept.holds[0].detail
    assert _kinds(alone) == [H.FAILED_FOR_GOOD]
    assert alone.holds[0].by_person
    assert alone.next_at is None
    assert alone.next.startswith("nothing: ")
    assert "re-arm" in alone.next
    assert ProgramSessionRepository(engine).claim_next(Trigger.WATCHDOG, "run") is None


def test_a_row_out_of_range_is_set_aside_and_answers(db_url: str, engine: Engine) -> None:
    sid = create_session(engine)
    force_state(engine, sid, S.SCHEDULED)
    with engine.begin() as conn:
        conn.execute(
            text("UPDATE hdb_program_session SET link_generation_at = '-infinity' WHERE id = :i"),
            {"i": sid},
        )

    why = _ask(db_url, engine, sid)

    assert _kinds(why) == [H.SET_ASIDE]
    assert why.holds[0].by_person
    assert not why.waits_now
    assert why.claim_at is None
    assert why.next_at is None
    SessionQueue(engine).refresh()  # the queue sets it aside: FAILED, for a person
    assert _kinds(_ask(db_url, engine, sid)) == [H.SET_ASIDE]


def test_its_programme_waits_for_its_turn(db_url: str, engine: Engine) -> None:
    first = _due(engine, program_id=10)
    queue = SessionQueue(engine)
    queue.refresh()
    repository = ProgramSessionRepository(engine)
    claim = repository.claim_next(Trigger.WATCHDOG, "run-t")
    assert claim is not None
    assert claim.session_id == first
    others = [_due(engine, program_id=p) for p in (11, 12)]
    mine = _due(engine, program_id=10)
    queue.refresh()
    _alive(engine)

    why = _ask(db_url, engine, mine)

    assert why.waits_now
    assert _kinds(why) == [H.PROGRAMME_TURN]
    assert why.holds[0].detail.startswith("2 programme(s)")
    taken = [repository.claim_next(Trigger.WATCHDOG, "run-t") for _ in range(3)]
    assert [c.session_id for c in taken if c is not None] == [*others, mine]


def test_no_worker_names_the_watchdog_tick(db_url: str, engine: Engine) -> None:
    sid = create_session(engine)
    force_state(engine, sid, S.SCHEDULED, at_offset=timedelta(seconds=-10))

    why = _ask(db_url, engine, sid)

    assert why.waits_now
    assert _kinds(why) == [H.NO_WORKER]
    row = session_row(engine, sid)
    # Its event is on its way for the watchdog's grace (75 s), then the next tick (5 s).
    assert why.next_at == row["link_generation_at"] + timedelta(seconds=80)
    assert why.next.startswith("its event's run, or at the latest a worker the watchdog launches")


def test_the_scheduler_off_leaves_it_to_the_sweep_or_a_person(db_url: str, engine: Engine) -> None:
    sid = _due(engine)
    _alive(engine)

    swept = _ask(db_url, engine, sid, scheduler_enabled=False, fallback_cron_enabled=True)
    assert _kinds(swept) == [H.SCHEDULER_OFF]
    assert swept.next.startswith("the sweep at ")
    why = _ask(db_url, engine, sid, scheduler_enabled=False)

    assert _kinds(why) == [H.SCHEDULER_OFF]
    assert why.next_at is None
    assert "ENABLE_JOIN_LINK_SCHEDULER" in why.next


@pytest.mark.parametrize(
    ("status", "deleted", "kind"),
    [
        (S.COMPLETED, False, H.COMPLETED),
        (S.NOT_SCHEDULED, False, H.NOT_SCHEDULED),
        (S.SCHEDULED, True, H.DELETED),
    ],
)
def test_settled_sessions_say_so(
    db_url: str, engine: Engine, status: S, deleted: bool, kind: HoldKind
) -> None:
    sid = create_session(engine)
    at = None if status is S.NOT_SCHEDULED else timedelta(minutes=-1)
    force_state(engine, sid, status, at_offset=at, deleted=deleted)

    why = _ask(db_url, engine, sid)

    assert _kinds(why) == [kind]
    assert why.next_at is None
    assert not why.waits_now
    assert why.next.startswith("nothing: ")


def test_a_waiting_session_with_nothing_holding_it_is_taken_now(
    db_url: str, engine: Engine
) -> None:
    sid = _due(engine)
    _alive(engine)

    why = _ask(db_url, engine, sid)

    assert why.waits_now
    assert why.holds == ()
    assert why.next == "the queue now"
    _truthful(engine, sid, why)


@pytest.fixture
def http(db_url: str, aws: Aws) -> Iterator[TestClient]:
    with client_for(settings_for(db_url, aws.queue_arn), aws.scheduler) as client:
        yield client


def test_the_api_answers_in_the_envelope_and_get_shows_the_retry_time(
    engine: Engine, http: TestClient
) -> None:
    sid = _failed(engine, 1, None, retry_in_s=60)
    _alive(engine)

    response = http.get(f"/program-session/{sid}/link-generation/why", headers=admin_headers())
    state = http.get(f"/program-session/{sid}/link-generation", headers=admin_headers())

    assert response.status_code == 200, response.text
    data = response.json()["data"]
    assert data["holds"][0]["hold"] == "backoff"
    assert data["nextAt"] == data["holds"][0]["until"] == data["claimableAt"]
    assert data["nextAt"].endswith("Z")
    assert data["waitsNow"] is False
    assert state.json()["data"]["retryAt"] == data["nextAt"]
    assert (
        http.get("/program-session/999999/link-generation/why", headers=admin_headers()).status_code
        == 404
    )
    assert http.get(f"/program-session/{sid}/link-generation/why").status_code == 401
    mentor = {"Authorization": f"Bearer {token(3, ('mentor',))}", "X-Active-Role": "mentor"}
    assert (
        http.get(f"/program-session/{sid}/link-generation/why", headers=mentor).status_code == 403
    )
    bad = http.get("/program-session/1%0a2/link-generation/why", headers=admin_headers())
    assert bad.status_code == 400
    assert bad.json()["error"]["code"] == "BAD_REQUEST"


def test_the_api_answers_a_row_out_of_range(engine: Engine, http: TestClient) -> None:
    sid = create_session(engine)
    force_state(engine, sid, S.SCHEDULED)
    with engine.begin() as conn:
        conn.execute(
            text("UPDATE hdb_program_session SET link_generation_at = 'infinity' WHERE id = :i"),
            {"i": sid},
        )

    response = http.get(f"/program-session/{sid}/link-generation/why", headers=admin_headers())

    assert response.status_code == 200, response.text
    data = response.json()["data"]
    assert data["linkGenerationAt"] is None
    assert data["holds"][0]["hold"] == "set aside"


def test_jlg_why_prints_the_answer_and_its_json(
    db_url: str, engine: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    sid = _due(engine)
    _set_view(engine, paused_until="now() + interval '1 minute'")

    assert main(["--database-url", db_url, "why", str(sid)]) == 0
    shown = capsys.readouterr().out
    assert main(["--database-url", db_url, "why", str(sid), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)

    assert "held by          service pause: the service asked for a pause" in shown
    assert "service pause" in [h["hold"] for h in data["holds"]]
    assert main(["--database-url", db_url, "why", "x" * 500]) == 2
    assert "SESSION_ID must be" in capsys.readouterr().err
    assert main(["--database-url", db_url, "why", "999999"]) == 2
