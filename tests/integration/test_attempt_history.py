"""Attempt history (docs/design.md "Attempt history") on real PostgreSQL: every claim opens a
record and every mark closes it in the same transaction as the state change, so the record
and the row never disagree."""

from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from sqlalchemy import Engine, func, select

from jlg_pipeline.adapters.intent_writes import IntentWrites
from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.adapters.tables import generation_attempt
from jlg_pipeline.domain.attempts import AttemptOutcome, Claim, Trigger
from jlg_pipeline.domain.constants import TimingWindows
from jlg_pipeline.domain.errors import GenerationFailed, RegistrarRejected
from jlg_pipeline.domain.generation import BulkRegisterRequest
from jlg_pipeline.domain.status import LinkGenerationStatus
from jlg_pipeline.domain.validation import SessionId
from jlg_pipeline.services.generation import generate_for_session
from testkit.factories import create_session, force_state, session_row
from tests.support.fakes import RecordingRegistrar

S = LinkGenerationStatus


def _open(engine: Engine, sid: int) -> int:
    with engine.connect() as conn:
        return int(
            conn.execute(
                select(func.count()).where(
                    generation_attempt.c.program_session_id == sid,
                    generation_attempt.c.outcome == "IN_PROGRESS",
                )
            ).scalar_one()
        )


def test_a_failure_then_a_success_leave_two_records_newest_first(
    engine: Engine, repository: ProgramSessionRepository
) -> None:
    sid = create_session(engine)
    force_state(engine, sid, S.SCHEDULED, at_offset=timedelta(minutes=-3))
    failing = RecordingRegistrar(error=RegistrarRejected("bulkRegister answered 422 (GONE)"))
    with pytest.raises(GenerationFailed):
        generate_for_session(
            BulkRegisterRequest.parse(sid),
            repository=repository,
            registrar=failing,
            trigger=Trigger.EVENT,
            run_id="run-1",
        )
    done = generate_for_session(
        BulkRegisterRequest.parse(sid),
        repository=repository,
        registrar=RecordingRegistrar(total=25),
        trigger=Trigger.CRON,
        run_id="run-2",
    )
    second, first = repository.attempts(sid)
    assert (second.attempt, second.trigger, second.run_id) == (2, "cron", "run-2")
    assert second.outcome is AttemptOutcome.COMPLETED
    assert (second.job_id, second.total, second.error) == (done.job_id, 25, None)
    assert second.finished_at is not None
    assert (first.attempt, first.trigger, first.run_id) == (1, "event", "run-1")
    assert first.outcome is AttemptOutcome.FAILED
    assert first.error is not None
    assert "422 (GONE)" in first.error
    row = session_row(engine, sid)
    for record in (first, second):
        assert record.link_generation_at == row["link_generation_at"]
        expected = record.claimed_at - row["link_generation_at"]
        assert abs(record.lag - expected) < timedelta(seconds=1)
        assert timedelta(minutes=3) <= record.lag < timedelta(minutes=4)
    assert _open(engine, sid) == 0


def _reclaimed(engine: Engine) -> tuple[ProgramSessionRepository, int, Claim, Claim]:
    """A session whose first attempt went stale and was reclaimed by a second."""
    repository = ProgramSessionRepository(engine, TimingWindows(stale_ms=1000))
    sid = create_session(engine)
    force_state(engine, sid, S.SCHEDULED)
    first = repository.claim(sid, Trigger.EVENT, "run-first")
    assert first is not None
    force_state(engine, sid, S.IN_PROGRESS, updated_offset=timedelta(seconds=-5), attempt=1)
    successor = repository.claim(sid, Trigger.CRON, "run-sweep")
    assert successor is not None
    return repository, sid, first, successor


def test_a_stale_reclaim_closes_the_abandoned_attempt(engine: Engine) -> None:
    repository, sid, _, _ = _reclaimed(engine)
    newest, abandoned = repository.attempts(SessionId(sid))
    assert (abandoned.attempt, abandoned.outcome) == (1, AttemptOutcome.RECLAIMED)
    assert abandoned.finished_at is not None
    assert (newest.attempt, newest.outcome) == (2, AttemptOutcome.IN_PROGRESS)
    assert _open(engine, sid) == 1


def test_a_zombies_late_result_is_kept_on_its_own_record_whose_outcome_stays(
    engine: Engine,
) -> None:
    repository, sid, zombie, successor = _reclaimed(engine)
    assert repository.mark_completed(successor, "job-new", 10)
    before = session_row(engine, sid)
    assert not repository.mark_completed(zombie, "job-old", 9)
    assert session_row(engine, sid) == before
    newest, old = repository.attempts(SessionId(sid))
    assert (newest.outcome, newest.job_id, newest.total) == (
        AttemptOutcome.COMPLETED,
        "job-new",
        10,
    )
    # Closed RECLAIMED when it was taken over: that stays; its bulkRegister job is kept on it.
    assert (old.outcome, old.job_id, old.total) == (AttemptOutcome.RECLAIMED, "job-old", 9)


def test_the_claim_race_has_one_winner_and_one_open_record(engine: Engine) -> None:
    repository = ProgramSessionRepository(engine)
    for _ in range(10):
        sid = create_session(engine)
        force_state(engine, sid, S.SCHEDULED)
        with ThreadPoolExecutor(8) as pool:
            claims = list(pool.map(repository.claim, [sid] * 8, [Trigger.EVENT] * 8))
        assert sum(c is not None for c in claims) == 1
        assert _open(engine, sid) == 1
        assert len(repository.attempts(sid)) == 1


def test_rearming_over_a_stale_attempt_closes_it(engine: Engine) -> None:
    repository = ProgramSessionRepository(engine, TimingWindows(stale_ms=1000))
    sid = create_session(engine)
    force_state(engine, sid, S.SCHEDULED)
    assert repository.claim(sid, Trigger.EVENT) is not None
    force_state(engine, sid, S.IN_PROGRESS, updated_offset=timedelta(seconds=-5), attempt=1)
    assert (
        IntentWrites(engine, repository.windows).set_link_generation(sid, None, 7).state is not None
    )
    [record] = repository.attempts(sid)
    assert record.outcome is AttemptOutcome.RECLAIMED
    assert _open(engine, sid) == 0


def test_a_session_never_attempted_has_no_records(
    engine: Engine, repository: ProgramSessionRepository
) -> None:
    assert repository.attempts(create_session(engine)) == []
