"""Stale reclaim, fencing and the due guard, on the database clock."""

import time
from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine

from jlg_pipeline.adapters.intent_writes import IntentWrites
from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.domain.constants import STALE_MS, TimingWindows
from jlg_pipeline.domain.status import LinkGenerationStatus
from jlg_pipeline.domain.validation import SessionId
from testkit.factories import create_session, force_state, session_row

S = LinkGenerationStatus


def test_production_stale_window_is_thirty_minutes(
    engine: Engine, repository: ProgramSessionRepository
) -> None:
    assert STALE_MS == 30 * 60 * 1000
    sid = create_session(engine)
    force_state(engine, sid, S.IN_PROGRESS, updated_offset=timedelta(minutes=-29), attempt=1)
    assert repository.claim(sid) is None
    force_state(
        engine, sid, S.IN_PROGRESS, updated_offset=timedelta(minutes=-30, seconds=-1), attempt=1
    )
    claim = repository.claim(sid)
    assert claim is not None
    assert claim.attempt == 2


def test_reclaim_after_the_window_passes_in_real_time(engine: Engine) -> None:
    repo = ProgramSessionRepository(engine, TimingWindows(stale_ms=1500))
    sid = create_session(engine)
    force_state(engine, sid, S.SCHEDULED)
    first = repo.claim(sid)
    assert first is not None
    assert repo.claim(sid) is None, "a fresh IN_PROGRESS is not reclaimed"
    time.sleep(1.7)
    second = repo.claim(sid)
    assert second is not None
    assert second.attempt == first.attempt + 1


def test_zombie_marks_are_fenced_out(engine: Engine, repository: ProgramSessionRepository) -> None:
    sid = create_session(engine)
    force_state(engine, sid, S.SCHEDULED)
    zombie = repository.claim(sid)
    assert zombie is not None
    force_state(engine, sid, S.IN_PROGRESS, updated_offset=timedelta(minutes=-31))
    successor = repository.claim(sid)
    assert successor is not None

    assert not repository.mark_completed(zombie, "zombie-job")
    assert not repository.mark_failed(zombie, "zombie error")
    row = session_row(engine, sid)
    assert row["link_generation_status"] == S.IN_PROGRESS.value
    assert row["link_generation_attempt"] == successor.attempt
    assert row["link_generation_job_id"] is None

    assert repository.mark_completed(successor, "real-job")
    assert not repository.mark_failed(zombie, "late zombie error")
    row = session_row(engine, sid)
    assert row["link_generation_status"] == S.COMPLETED.value
    assert row["link_generation_job_id"] == "real-job"
    assert row["link_generation_last_error"] is None


def test_rearm_fences_out_the_crashed_run(
    engine: Engine, repository: ProgramSessionRepository
) -> None:
    sid = create_session(engine)
    force_state(engine, sid, S.SCHEDULED)
    crashed = repository.claim(sid)
    assert crashed is not None
    force_state(engine, sid, S.IN_PROGRESS, updated_offset=timedelta(minutes=-31))
    rearm = IntentWrites(engine).set_link_generation(sid, datetime.now(UTC) + timedelta(days=1), 3)
    assert rearm.state is not None
    assert rearm.state.status is S.SCHEDULED
    assert not repository.mark_completed(crashed, "late")
    assert session_row(engine, sid)["link_generation_status"] == S.SCHEDULED.value


def test_future_session_is_not_claimed(
    engine: Engine, repository: ProgramSessionRepository
) -> None:
    sid = create_session(engine)
    force_state(engine, sid, S.SCHEDULED, at_offset=timedelta(minutes=5))
    assert repository.claim(sid) is None
    force_state(engine, sid, S.FAILED, at_offset=timedelta(minutes=5))
    assert repository.claim(sid) is None
    assert session_row(engine, sid)["link_generation_status"] == S.FAILED.value


def test_due_tolerance_admits_a_slightly_early_event(
    engine: Engine, repository: ProgramSessionRepository
) -> None:
    sid = create_session(engine)
    force_state(engine, sid, S.SCHEDULED, at_offset=timedelta(seconds=30))
    assert repository.claim(sid) is not None


def test_scheduled_without_a_time_is_not_claimed(
    engine: Engine, repository: ProgramSessionRepository
) -> None:
    sid = create_session(engine)
    force_state(engine, sid, S.SCHEDULED, at_offset=None)
    assert repository.claim(sid) is None


def test_get_state_reports_staleness_and_due(
    engine: Engine, repository: ProgramSessionRepository
) -> None:
    sid = create_session(engine)
    force_state(engine, sid, S.IN_PROGRESS, updated_offset=timedelta(minutes=-31), attempt=4)
    state = repository.get_state(sid)
    assert state is not None
    assert (state.status, state.stale, state.due, state.attempt, state.deleted) == (
        S.IN_PROGRESS,
        True,
        True,
        4,
        False,
    )
    assert repository.get_state(SessionId(sid + 999)) is None
