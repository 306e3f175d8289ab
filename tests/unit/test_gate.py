"""Every branch of the gate (``services/generation.generate_for_session``) without
PostgreSQL: its store and its view of the service are recording fakes on the gate's own
protocols (``SessionClaims``, ``ServiceTurns``); the real ones are proven in
tests/integration/test_generation.py and test_service_view.py."""

from datetime import UTC, datetime

import pytest

from jlg_pipeline.domain.attempts import Trigger
from jlg_pipeline.domain.errors import (
    NonRetryableGenerationFailed,
    RegistrarRejected,
    RegistrarUnavailable,
    RetryableGenerationFailed,
)
from jlg_pipeline.domain.generation import BulkRegisterRequest, GenerationOutcome, GenerationResult
from jlg_pipeline.domain.service_view import Health, Hold, Turn, Verdict
from jlg_pipeline.domain.status import LinkGenerationStatus as S
from jlg_pipeline.services.generation import generate_for_session
from tests.support.fakes import FakeSessions, FakeTurns, RecordingRegistrar

LATER = datetime(2026, 12, 5, 9, 0, 30, tzinfo=UTC)


def _gate(
    sessions: FakeSessions,
    turns: FakeTurns,
    registrar: RecordingRegistrar | None = None,
    run_id: str | None = None,
) -> GenerationOutcome:
    return generate_for_session(
        BulkRegisterRequest.parse(7),
        repository=sessions,
        registrar=registrar or RecordingRegistrar(),
        trigger=Trigger.EVENT,
        run_id=run_id,
        view=turns,
    )


def test_a_session_nobody_can_claim_takes_no_turn() -> None:
    sessions, turns = FakeSessions(), FakeTurns()
    sessions.arm(7, S.COMPLETED)
    outcome = _gate(sessions, turns)
    assert (outcome.result, outcome.reason) == (
        GenerationResult.SKIPPED,
        "already COMPLETED this cycle",
    )
    assert turns.taken == []
    assert sessions.asked == ["get_state 7"]


def test_a_turn_that_says_wait_leaves_the_session_waiting_without_a_claim() -> None:
    wait = Turn(Verdict.WAIT, LATER, Hold.BUDGET, 30.0)
    sessions, turns = FakeSessions(), FakeTurns(turns=[wait])
    sessions.arm(7, S.SCHEDULED)
    outcome = _gate(sessions, turns)
    assert outcome.result is GenerationResult.SKIPPED
    assert outcome.reason == f"the rate budget's next free slot; not before {LATER.isoformat()}"
    assert sessions.states[7].status is S.SCHEDULED, "it waits in the queue"
    assert not any(a.startswith("claim") for a in sessions.asked)


def test_a_claim_lost_after_the_turn_leaves_the_turn_to_the_next_session() -> None:
    sessions, turns = FakeSessions(lose_claim=True), FakeTurns()
    sessions.arm(7, S.SCHEDULED)
    outcome = _gate(sessions, turns)
    assert (outcome.result, outcome.reason) == (
        GenerationResult.SKIPPED,
        "another attempt (1) holds the claim",
    )
    assert turns.unused == turns.taken


def test_a_run_resumes_its_own_claim_and_calls_again() -> None:
    sessions, turns, registrar = FakeSessions(), FakeTurns(), RecordingRegistrar()
    sessions.arm(7, S.SCHEDULED)
    first = sessions.claim(7, Trigger.EVENT, "run-1")
    assert first is not None
    outcome = _gate(sessions, turns, registrar, run_id="run-1")
    assert (outcome.result, outcome.attempt) == (GenerationResult.COMPLETED, first.attempt)
    assert "resume 7" in sessions.asked
    assert [r.idempotency_key for r in registrar.calls] == ["join-link-7@2026-12-05T09:00:00Z"]


def test_a_pause_found_after_the_turn_fails_the_claim_without_a_call() -> None:
    sessions, turns, registrar = FakeSessions(), FakeTurns(paused_until=LATER), RecordingRegistrar()
    sessions.arm(7, S.SCHEDULED)
    with pytest.raises(RetryableGenerationFailed) as failed:
        _gate(sessions, turns, registrar)
    assert failed.value.retry_in_s == 0.0, "due again when the pause ends, not on a backoff"
    assert registrar.calls == []
    assert turns.given_back == turns.taken
    assert sessions.states[7].status is S.FAILED


def test_a_retryable_failure_is_reported_to_the_view_and_marked_with_its_wait() -> None:
    sessions, turns = FakeSessions(), FakeTurns()
    registrar = RecordingRegistrar(error=RegistrarUnavailable("bulkRegister answered 503"))
    sessions.arm(7, S.SCHEDULED)
    with pytest.raises(RetryableGenerationFailed) as failed:
        _gate(sessions, turns, registrar)
    assert turns.reports == [(Health.UNWELL, None)]
    assert failed.value.retry_in_s == 10.0, "its own backoff: the service was not down"
    assert "mark_failed 7 retry_in_s=10.0" in sessions.asked


def test_a_refusal_is_not_retried() -> None:
    sessions, turns = FakeSessions(), FakeTurns()
    registrar = RecordingRegistrar(error=RegistrarRejected("bulkRegister answered 422"))
    sessions.arm(7, S.SCHEDULED)
    with pytest.raises(NonRetryableGenerationFailed):
        _gate(sessions, turns, registrar)
    assert turns.reports == [(Health.ANSWERED, None)], "it answered: the service is well"
    assert "mark_failed 7 retry_in_s=None" in sessions.asked


def test_a_call_that_succeeds_is_marked_completed_and_told_to_the_view() -> None:
    sessions, turns = FakeSessions(), FakeTurns()
    sessions.arm(7, S.SCHEDULED)
    outcome = _gate(sessions, turns)
    assert (outcome.result, outcome.attempt, outcome.total) == (GenerationResult.COMPLETED, 1, 3)
    assert turns.reports == [(Health.ANSWERED, None)]
    assert sessions.states[7].status is S.COMPLETED


def test_a_mark_a_newer_attempt_fenced_out_is_superseded() -> None:
    sessions, turns = FakeSessions(fence_marks=True), FakeTurns()
    sessions.arm(7, S.SCHEDULED)
    outcome = _gate(sessions, turns)
    assert outcome.result is GenerationResult.SUPERSEDED
    assert (outcome.reason or "").startswith("a newer attempt")


@pytest.mark.parametrize(
    "fault",
    [OverflowError("date value out of range"), ValueError("int too large"), RuntimeError("bug")],
)
def test_a_view_that_fails_to_take_a_failure_still_leaves_it_failed_with_its_retry_due(
    fault: Exception,
) -> None:
    """The audit's 13-digit Retry-After raised inside the view: the session stayed IN_PROGRESS
    until the stale window, and no pause was recorded."""
    sessions, turns = FakeSessions(), FakeTurns(report_error=fault)
    registrar = RecordingRegistrar(
        error=RegistrarUnavailable("bulkRegister answered 503", retry_after_s=1e15)
    )
    sessions.arm(7, S.SCHEDULED)
    with pytest.raises(RetryableGenerationFailed) as failed:
        _gate(sessions, turns, registrar)
    assert failed.value.retry_in_s is not None
    assert sessions.states[7].status is S.FAILED


def test_a_view_that_fails_to_take_a_success_still_leaves_it_completed() -> None:
    sessions, turns = FakeSessions(), FakeTurns(report_error=OverflowError("out of range"))
    sessions.arm(7, S.SCHEDULED)
    assert _gate(sessions, turns).result is GenerationResult.COMPLETED
    assert sessions.states[7].status is S.COMPLETED
