"""generate_for_session: claim ▶ bulkRegister ▶ mark, with outcomes, errors and log lines."""

import logging
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from sqlalchemy import Engine

from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.domain.attempts import Trigger
from jlg_pipeline.domain.errors import (
    DatabaseUnavailable,
    GenerationFailed,
    NonRetryableGenerationFailed,
    RegistrarRejected,
    RegistrarUnavailable,
    RetryableGenerationFailed,
)
from jlg_pipeline.domain.generation import BulkRegisterRequest, GenerationResult
from jlg_pipeline.domain.status import LinkGenerationStatus
from jlg_pipeline.services.generation import generate_for_session
from testkit.factories import create_session, force_state, session_row
from tests.support.fakes import RecordingRegistrar
from tests.support.logs import events

S = LinkGenerationStatus


def test_completes_and_logs(
    engine: Engine, repository: ProgramSessionRepository, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    sid = create_session(engine)
    force_state(engine, sid, S.SCHEDULED)
    registrar = RecordingRegistrar(total=12)

    outcome = generate_for_session(
        BulkRegisterRequest.parse(sid, role="attendee", batch_size=100, actor_user_id=8),
        repository=repository,
        registrar=registrar,
        trigger=Trigger.EVENT,
    )

    assert outcome.result is GenerationResult.COMPLETED
    assert outcome.total == 12
    assert outcome.attempt == 1
    assert len(registrar.calls) == 1
    call = registrar.calls[0]
    assert (call.session_id, call.role, call.batch_size, call.actor_user_id) == (
        sid,
        "attendee",
        100,
        8,
    )
    row = session_row(engine, sid)
    assert row["link_generation_status"] == S.COMPLETED.value
    assert row["link_generation_job_id"] == outcome.job_id
    logged = events(caplog)
    assert [name for name, _ in logged] == ["generation.dispatched", "generation.completed"]
    for _, fields in logged:
        assert fields["session_id"] == sid
        assert fields["attempt"] == 1
        assert fields["trigger"] == "event"


def test_lost_claim_returns_a_skip_with_the_reason(
    engine: Engine, repository: ProgramSessionRepository, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    sid = create_session(engine)
    force_state(engine, sid, S.IN_PROGRESS, attempt=2)
    registrar = RecordingRegistrar()

    outcome = generate_for_session(
        BulkRegisterRequest.parse(sid),
        repository=repository,
        registrar=registrar,
        trigger=Trigger.CRON,
    )

    assert outcome.result is GenerationResult.SKIPPED
    assert outcome.reason == "another attempt (2) holds the claim"
    assert registrar.calls == []
    [(name, fields)] = events(caplog)
    assert name == "generation.claim_skipped"
    assert fields["session_id"] == sid


@pytest.mark.parametrize(
    ("status", "at", "deleted", "reason"),
    [
        (S.COMPLETED, timedelta(minutes=-1), False, "already COMPLETED this cycle"),
        (S.NOT_SCHEDULED, None, False, "link generation is not scheduled"),
        (S.SCHEDULED, timedelta(minutes=-1), True, "the program session is soft-deleted"),
    ],
)
def test_skip_reasons(
    engine: Engine,
    repository: ProgramSessionRepository,
    status: S,
    at: timedelta | None,
    deleted: bool,
    reason: str,
) -> None:
    sid = create_session(engine)
    force_state(engine, sid, status, at_offset=at, deleted=deleted)
    outcome = generate_for_session(
        BulkRegisterRequest.parse(sid),
        repository=repository,
        registrar=RecordingRegistrar(),
        trigger=Trigger.MANUAL,
    )
    assert (outcome.result, outcome.reason) == (GenerationResult.SKIPPED, reason)


def test_future_session_skip_says_when(
    engine: Engine, repository: ProgramSessionRepository
) -> None:
    sid = create_session(engine)
    force_state(engine, sid, S.SCHEDULED, at_offset=timedelta(hours=1))
    outcome = generate_for_session(
        BulkRegisterRequest.parse(sid),
        repository=repository,
        registrar=RecordingRegistrar(),
        trigger=Trigger.EVENT,
    )
    assert outcome.reason is not None
    assert outcome.reason.startswith("not due until ")
    missing = generate_for_session(
        BulkRegisterRequest.parse(sid + 100),
        repository=repository,
        registrar=RecordingRegistrar(),
        trigger=Trigger.EVENT,
    )
    assert missing.reason == "no such program session"


@pytest.mark.parametrize(
    ("error", "expected", "retryable"),
    [
        (RegistrarUnavailable("503 from upstream"), RetryableGenerationFailed, True),
        (RegistrarRejected("400 bad role"), NonRetryableGenerationFailed, False),
        (RuntimeError("surprise"), RetryableGenerationFailed, True),
    ],
)
def test_failure_marks_failed_keeps_the_error_and_classifies(
    engine: Engine,
    repository: ProgramSessionRepository,
    caplog: pytest.LogCaptureFixture,
    error: Exception,
    expected: type[GenerationFailed],
    retryable: bool,
) -> None:
    sid = create_session(engine)
    force_state(engine, sid, S.SCHEDULED)

    with pytest.raises(expected) as raised:
        generate_for_session(
            BulkRegisterRequest.parse(sid),
            repository=repository,
            registrar=RecordingRegistrar(error=error),
            trigger=Trigger.EVENT,
        )

    assert raised.value.retryable is retryable
    assert raised.value.__cause__ is error
    assert (raised.value.session_id, raised.value.attempt) == (sid, 1)
    row = session_row(engine, sid)
    assert row["link_generation_status"] == S.FAILED.value
    assert row["link_generation_last_error"] == f"{type(error).__name__}: {error}"
    failed = [f for name, f in events(caplog) if name == "generation.failed"]
    assert failed
    assert failed[0]["session_id"] == sid
    assert failed[0]["attempt"] == 1
    assert failed[0]["retryable"] is retryable


def test_failed_session_is_retried_with_a_new_attempt(
    engine: Engine, repository: ProgramSessionRepository
) -> None:
    sid = create_session(engine)
    force_state(engine, sid, S.SCHEDULED)
    with pytest.raises(GenerationFailed):
        generate_for_session(
            BulkRegisterRequest.parse(sid),
            repository=repository,
            registrar=RecordingRegistrar(error=RegistrarUnavailable("x")),
            trigger=Trigger.EVENT,
        )
    outcome = generate_for_session(
        BulkRegisterRequest.parse(sid),
        repository=repository,
        registrar=RecordingRegistrar(),
        trigger=Trigger.EVENT,
    )
    assert (outcome.result, outcome.attempt) == (GenerationResult.COMPLETED, 2)
    assert session_row(engine, sid)["link_generation_last_error"] is None


def test_superseded_when_reclaimed_during_bulk_register(
    engine: Engine, repository: ProgramSessionRepository
) -> None:
    sid = create_session(engine)
    force_state(engine, sid, S.SCHEDULED)
    slow = RecordingRegistrar(block=True)
    with ThreadPoolExecutor(1) as pool:
        zombie = pool.submit(
            generate_for_session,
            BulkRegisterRequest(sid),
            repository=repository,
            registrar=slow,
            trigger=Trigger.EVENT,
        )
        assert slow.entered.wait(10)
        force_state(engine, sid, S.IN_PROGRESS, updated_offset=timedelta(minutes=-31))
        successor = generate_for_session(
            BulkRegisterRequest.parse(sid),
            repository=repository,
            registrar=RecordingRegistrar(),
            trigger=Trigger.CRON,
        )
        slow.release.set()
        late = zombie.result(timeout=10)
    assert (successor.result, successor.attempt) == (GenerationResult.COMPLETED, 2)
    assert (late.result, late.attempt) == (GenerationResult.SUPERSEDED, 1)
    row = session_row(engine, sid)
    assert row["link_generation_status"] == S.COMPLETED.value
    assert row["link_generation_job_id"] == successor.job_id


def test_concurrent_triggers_generate_once(
    engine: Engine, repository: ProgramSessionRepository
) -> None:
    sid = create_session(engine)
    force_state(engine, sid, S.SCHEDULED)
    registrar = RecordingRegistrar()
    with ThreadPoolExecutor(12) as pool:
        outcomes = list(
            pool.map(
                lambda t: generate_for_session(
                    BulkRegisterRequest.parse(sid),
                    repository=repository,
                    registrar=registrar,
                    trigger=t,
                ),
                [Trigger.EVENT, Trigger.CRON, Trigger.BACKFILL] * 4,
            )
        )
    assert len(registrar.calls) == 1
    assert [o.result for o in outcomes].count(GenerationResult.COMPLETED) == 1


def test_database_lost_while_marking_failed_stays_retryable(
    engine: Engine, repository: ProgramSessionRepository, monkeypatch: pytest.MonkeyPatch
) -> None:
    sid = create_session(engine)
    force_state(engine, sid, S.SCHEDULED)

    def lost(*_: object) -> bool:
        raise DatabaseUnavailable("connection refused")

    monkeypatch.setattr(repository, "mark_failed", lost)
    with pytest.raises(RetryableGenerationFailed):
        generate_for_session(
            BulkRegisterRequest.parse(sid),
            repository=repository,
            registrar=RecordingRegistrar(error=RegistrarRejected("no")),
            trigger=Trigger.EVENT,
        )
    assert session_row(engine, sid)["link_generation_status"] == S.IN_PROGRESS.value
