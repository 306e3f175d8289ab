"""Nothing stops the queue (docs/design.md "One queue"): a programme with nothing to claim
never holds a place in the pick, and no row anyone can write stops a claim.

Before, 80 programmes each holding one session failed for good (or in its backoff) filled the
pick's look, and a late session of another programme waited for the 4-hourly sweep; a host
row at ``-infinity`` was called, then failed every claim of the next once its claim went
stale; a heartbeat at ``infinity`` (the host's ``updated_at``, a worker's row) never aged; and
a view row at ``infinity`` failed every gate call and the operator's own commands."""

import logging
import time
from datetime import timedelta

import pytest
from sqlalchemy import Engine, text

from jlg_pipeline.adapters.intent_writes import IntentWrites
from jlg_pipeline.adapters.metrics_snapshot import read_metrics_snapshot
from jlg_pipeline.adapters.programme_operations import ProgrammeOperations
from jlg_pipeline.adapters.queue import SessionQueue
from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.adapters.service_view import ServiceView
from jlg_pipeline.cli import main
from jlg_pipeline.domain.attempts import Trigger
from jlg_pipeline.domain.constants import TimingWindows
from jlg_pipeline.domain.programme_actions import ProgrammeAction, ProgrammeRequest, SessionFilter
from jlg_pipeline.domain.service_view import Budget
from jlg_pipeline.domain.session_state import SetOutcome
from jlg_pipeline.domain.status import LinkGenerationStatus
from jlg_pipeline.domain.validation import SessionId
from jlg_pipeline.services.generation import generate_next
from jlg_pipeline.services.programme_actions import ProgrammeActions
from testkit.factories import create_session, create_sessions, db_now, force_state, session_row
from tests.support.fakes import RecordingRegistrar
from tests.support.logs import fields_of

S = LinkGenerationStatus
W = Trigger.WATCHDOG
CROWD = 80
"""More programmes than the pick looks at in one claim (``PROGRAMMES_LOOKED_AT``)."""


def _late(engine: Engine, program_id: int, seconds: int = 90) -> SessionId:
    sid = create_session(engine, program_id=program_id)
    force_state(engine, sid, S.SCHEDULED, at_offset=timedelta(seconds=-seconds))
    return sid


def _crowd(engine: Engine, status: S, retry: str | None) -> None:
    """``CROWD`` programmes (ids 1..80), each holding one session due 10 minutes ago in
    ``status``, its retry time ``retry`` (SQL, or NULL)."""
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO hdb_program_session (program_id, link_generation_at,"
                " link_generation_status, link_generation_attempt, link_generation_retry_at)"
                f" SELECT p, now() - interval '10 minutes', :status, 1, {retry or 'NULL'}"
                " FROM generate_series(1, :n) AS p"
            ),
            {"status": status.value, "n": CROWD},
        )


def _drain(repository: ProgramSessionRepository) -> list[int]:
    taken: list[int] = []
    while (claim := repository.claim_next(W, "run-l")) is not None:
        taken.append(claim.session_id)
    return taken


@pytest.mark.parametrize(
    ("status", "retry"),
    [
        (S.FAILED, None),  # failed for good: the service refused it, or its budget ran out
        (S.FAILED, "now() + interval '10 minutes'"),  # in its backoff
        (S.IN_PROGRESS, None),  # a live claim holds it (updated_at is now)
    ],
    ids=["failed-for-good", "in-backoff", "in-flight"],
)
def test_programmes_with_nothing_to_claim_never_keep_a_waiting_one_from_the_pick(
    engine: Engine, repository: ProgramSessionRepository, status: S, retry: str | None
) -> None:
    _crowd(engine, status, retry)
    queue = SessionQueue(engine)
    queue.refresh()
    late = _late(engine, program_id=1000)
    queue.refresh()

    assert _drain(repository) == [late]


def test_a_programme_in_backoff_takes_its_turn_again_when_its_retry_falls_due(
    engine: Engine, repository: ProgramSessionRepository
) -> None:
    """The failure's own mark brings the programme's turn forward to its retry: no refresh
    (the host's writes' net) is needed for the queue to find it again."""
    sessions = [_late(engine, program_id=p) for p in range(1, 11)]
    SessionQueue(engine).refresh()
    for claim in [repository.claim_next(W, "run-l") for _ in sessions]:
        assert claim is not None
        assert repository.mark_failed(claim, "503", retry_in_s=1.0)

    assert _drain(repository) == [], "all in their backoff"
    time.sleep(1.2)
    assert sorted(_drain(repository)) == sessions


def _host_writes(engine: Engine, sid: int, column: str, value: str) -> None:
    """The host's own UPDATE of ``column`` to ``value`` (SQL)."""
    with engine.begin() as conn:
        conn.execute(
            text(f"UPDATE hdb_program_session SET {column} = {value} WHERE id = :id"), {"id": sid}
        )


@pytest.mark.parametrize(
    "value", ["'-infinity'", "'4713-01-01 00:00:00+00 BC'", "'0001-01-01 00:00+00'"]
)
def test_a_host_row_at_an_unreadable_time_is_set_aside_before_any_call(
    engine: Engine,
    repository: ProgramSessionRepository,
    value: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    absurd = create_session(engine, program_id=1)
    force_state(engine, absurd, S.SCHEDULED)
    _host_writes(engine, absurd, "link_generation_at", value)
    late = [_late(engine, program_id=p) for p in range(2, 7)]
    registrar = RecordingRegistrar()
    view = ServiceView(engine)

    with caplog.at_level(logging.ERROR):
        SessionQueue(engine).refresh()
        generated = []
        while (
            outcome := generate_next(
                repository=repository, registrar=registrar, trigger=W, run_id="run-l", view=view
            )
        ) is not None:
            generated.append(outcome.session_id)

    assert sorted(generated) == late
    assert absurd not in [r.session_id for r in registrar.calls], "never called"
    row = session_row(engine, absurd)
    assert row["link_generation_status"] == S.FAILED.value, "never claimed, never IN_PROGRESS"
    assert row["link_generation_retry_at"] is None, "a person's, not the queue's"
    assert "set aside" in row["link_generation_last_error"]
    assert row["link_generation_attempt"] == 0
    assert read_metrics_snapshot(engine).set_aside == {"queue": 1}
    assert [f["row_id"] for f in fields_of(caplog, "queue.row_set_aside")] == [absurd]
    SessionQueue(engine).refresh()
    assert read_metrics_snapshot(engine).set_aside == {"queue": 1}, "counted once"
    assert repository.claim(absurd, Trigger.CRON) is None, "the sweep's claim refuses it too"


def test_a_stale_claim_on_a_row_the_host_made_unreadable_stops_no_claim(
    engine: Engine, repository: ProgramSessionRepository
) -> None:
    """The host rewrote a claimed row's time; its run died. Before, every claim of the next
    that took it over raised (DatetimeFieldOverflow), and the others waited for a person."""
    held = create_session(engine, program_id=1)
    force_state(engine, held, S.SCHEDULED)
    claim = repository.claim(held, W, "run-dead")
    assert claim is not None
    _host_writes(engine, held, "link_generation_at", "'-infinity'")
    _host_writes(engine, held, "updated_at", "now() - interval '31 minutes'")
    late = [_late(engine, program_id=p) for p in range(2, 7)]
    SessionQueue(engine).refresh()

    assert sorted(_drain(repository)) == late
    assert session_row(engine, held)["link_generation_status"] != S.IN_PROGRESS.value


def test_a_host_heartbeat_in_the_future_counts_as_now_and_then_goes_stale(
    engine: Engine,
) -> None:
    """The host's ``updated_at`` is the claim's lease; one at ``infinity`` was never stale:
    the PATCH answered 409 for ever and neither the queue nor the sweep saw the session."""
    windows = TimingWindows(stale_ms=1000)
    repository = ProgramSessionRepository(engine, windows)
    sid = create_session(engine, program_id=1)
    force_state(engine, sid, S.SCHEDULED)
    assert repository.claim(sid, W, "run-dead") is not None
    _host_writes(engine, sid, "updated_at", "'infinity'")
    queue = SessionQueue(engine, windows)

    queue.refresh()
    time.sleep(1.2)

    assert repository.claim_next(W, "run-next") is not None, "stale a window after it was seen"
    writes = IntentWrites(engine, windows)
    _host_writes(engine, sid, "updated_at", "'infinity'")
    queue.refresh()
    time.sleep(1.2)
    set_at = session_row(engine, sid)["link_generation_at"] + timedelta(days=1)
    assert writes.set_link_generation(SessionId(sid), set_at, 7).outcome is SetOutcome.UPDATED


def test_a_worker_heartbeat_in_the_future_counts_as_now(engine: Engine) -> None:
    """Before, a worker row at ``infinity`` counted as a live worker for ever, and the
    watchdog launched nothing."""
    queue = SessionQueue(engine)
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO jlg_worker (run_id, beat_at) VALUES ('w', 'infinity')"))

    assert queue.attendance(live_within_s=1.0).live_workers == 1, "alive now"
    time.sleep(1.2)
    assert queue.attendance(live_within_s=1.0).live_workers == 0, "and aging from then"


@pytest.mark.parametrize("column", ["paused_until", "probe_until", "next_slot_at"])
def test_a_view_row_at_infinity_stops_neither_the_gate_nor_the_operator(
    engine: Engine,
    db_url: str,
    column: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("JLG_ENVIRONMENT", "local")
    with engine.begin() as conn:
        conn.execute(
            text(
                f"INSERT INTO jlg_service_view (name, {column}) VALUES ('online-session',"
                " 'infinity') ON CONFLICT (name) DO UPDATE SET"
                f" {column} = excluded.{column}"
            )
        )
    view = ServiceView(engine, Budget(rate=10.0, max_pause_s=1.0))
    view.take_turn()
    assert main(["--database-url", db_url, "service", "show"]) == 0
    assert "9999" not in capsys.readouterr().out, "shown at its bound"
    time.sleep(1.5)
    assert view.wait_for_turn().calls, "the bound is a time that passes"
    assert main(["--database-url", db_url, "service", "resume", "--by", "ops"]) == 0


def test_an_unreadable_time_in_the_queues_own_rows_stops_no_claim(
    engine: Engine, repository: ProgramSessionRepository
) -> None:
    late = _late(engine, program_id=5)
    create_sessions(engine, 1, program_id=6)
    SessionQueue(engine).refresh()
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO jlg_programme_turn (program_id, served, next_due_at) VALUES"
                " (7, NULL, '-infinity'), (8, -9223372036854775808, 'infinity')"
            )
        )
        conn.execute(
            text(
                "INSERT INTO jlg_session_queue (program_session_id, cycle_at) VALUES"
                " (:id, '-infinity')"
            ),
            {"id": late},
        )
    assert _drain(repository) == [late]


def test_each_write_of_ours_brings_its_programmes_turn_forward_without_a_refresh(
    engine: Engine,
) -> None:
    """The refresh is the net for the host's writes only: an arm ahead, a programme action
    ahead, and a claim whose run died each bring the programme's turn to the session's next
    claim time in their own statement, so the pick finds it then."""
    windows = TimingWindows(stale_ms=1000)
    repository = ProgramSessionRepository(engine, windows)
    writes = IntentWrites(engine, windows)
    armed, moved, died = (create_session(engine, program_id=p) for p in (31, 32, 33))
    force_state(engine, died, S.SCHEDULED)
    assert repository.claim(died, Trigger.CRON, "run-dead") is not None
    ahead = db_now(engine) + timedelta(seconds=1)
    assert writes.set_link_generation(armed, ahead, 7).outcome is SetOutcome.UPDATED
    where = SessionFilter(program_id=32)
    actions = ProgrammeActions(writes, ProgrammeOperations(engine), record_schedule_changes=False)
    request = ProgrammeRequest(where, ProgrammeAction.setting(ahead), 1, False)
    assert actions.act(request, 7, "key-1").changed == 1

    assert _drain(repository) == [], "none is due yet"
    time.sleep(1.2)
    assert sorted(_drain(repository)) == sorted([armed, moved, died])
