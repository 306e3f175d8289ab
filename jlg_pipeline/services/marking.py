"""What a call's result leaves behind (``services/generation.py``'s last step): the fenced
mark on the row, told to the service's shared view, and the outcome or the GenerationFailed the
trigger sees.

A bulkRegister result is never lost to a database fault: the completion write is retried,
the lease renewed meanwhile, for up to half the stale window; if it still has not landed, the
run fails retryably and its retry, while the claim is not yet stale, resumes it
(``ProgramSessionRepository.resume``) instead of skipping, and calls again with the cycle's
idempotency key, which the service answers with the same job.
"""

import logging
from dataclasses import replace
from typing import Any

from jlg_pipeline.domain.attempts import Claim, Trigger
from jlg_pipeline.domain.backoff import backoff_s
from jlg_pipeline.domain.errors import (
    DatabaseUnavailable,
    GenerationFailed,
    NonRetryableGenerationFailed,
    RegistrarError,
    RegistrarUnavailable,
    RetryableGenerationFailed,
    is_retryable,
)
from jlg_pipeline.domain.generation import BulkRegisterResult, GenerationOutcome, GenerationResult
from jlg_pipeline.domain.retries import retry_wait_s
from jlg_pipeline.domain.service_view import Health, Turn, ViewState, health_of, held_by_the_service
from jlg_pipeline.log import describe, log_event
from jlg_pipeline.services.gate_ports import ServiceTurns, SessionClaims
from jlg_pipeline.services.retrying import tries

logger = logging.getLogger(__name__)

SUPERSEDED_REASON = (
    "a newer attempt took the claim (stale reclaim, re-arm or clear); this mark was fenced out"
)


def stop_if_paused_since(
    repository: SessionClaims,
    view: ServiceTurns,
    turn: Turn,
    claim: Claim,
    trigger: Trigger,
) -> None:
    """The service asked for a pause after this caller's turn, longer than a caller waits:
    the claim ends FAILED without a call, due again when the pause ends (held by the service,
    not by a backoff of its own)."""
    try:
        paused_until = view.pause_before_the_call()
    except Exception as exc:  # noqa: BLE001 - the turn was given: a look that fails calls anyway
        log_event(
            logger, logging.WARNING, "generation.pause_unread", exc_info=exc, error=describe(exc)
        )
        return
    if paused_until is None:
        return
    not_called = RegistrarUnavailable(
        "not called: the service asked for a pause until "
        f"{paused_until.isoformat()} after this call's turn",
        throttled=True,
    )
    view.give_back(turn)
    raise failure_marked(repository, claim, trigger, not_called)


def outcome_of(
    claim: Claim, result: BulkRegisterResult, landed: bool, fields: dict[str, Any]
) -> GenerationOutcome:
    """COMPLETED, or SUPERSEDED when a newer attempt fenced this one's mark out."""
    outcome = GenerationOutcome(
        claim.session_id,
        GenerationResult.COMPLETED,
        attempt=claim.attempt,
        job_id=result.job_id,
        total=result.total,
        cycle=claim.link_generation_at,
        lag_seconds=claim.lag_seconds,
        created=result.created,
    )
    job: dict[str, Any] = {"job_id": result.job_id, "total": result.total}
    if not landed:
        log_event(
            logger,
            logging.WARNING,
            "generation.superseded",
            **fields,
            **job,
            reason=SUPERSEDED_REASON,
        )
        return replace(outcome, result=GenerationResult.SUPERSEDED, reason=SUPERSEDED_REASON)
    log_event(
        logger,
        logging.INFO,
        "generation.completed",
        **fields,
        **job,
        created=result.created,
        lag_seconds=claim.lag_seconds,
    )
    return outcome


COMPLETION_RETRY_FIRST_S = 0.5
COMPLETION_RETRY_MAX_S = 10.0


def record_completion(
    repository: SessionClaims,
    claim: Claim,
    trigger: Trigger,
    result: BulkRegisterResult,
) -> bool:
    """``mark_completed``, retried while the database is unavailable, for up to half the
    stale window. Raises RetryableGenerationFailed when it never landed: the row still says
    IN_PROGRESS under this attempt, and a retry of the same run soon after resumes it before
    it goes stale (after that, a new attempt takes it over and the cycle's idempotency key
    keeps the service to one job)."""
    fields: dict[str, Any] = {
        "session_id": claim.session_id,
        "attempt": claim.attempt,
        "job_id": result.job_id,
    }
    within_s = repository.windows.stale_ms / 2000
    for number in tries(COMPLETION_RETRY_FIRST_S, COMPLETION_RETRY_MAX_S, within_s=within_s):
        try:
            return repository.mark_completed(claim, result.job_id, result.total)
        except DatabaseUnavailable as exc:
            log_event(
                logger,
                logging.WARNING,
                "generation.completion_retry",
                **fields,
                trigger=trigger.value,
                retry_in_s=backoff_s(COMPLETION_RETRY_FIRST_S, number, COMPLETION_RETRY_MAX_S),
                error=str(exc),
            )
    log_event(logger, logging.ERROR, "generation.completion_unrecorded", **fields)
    raise RetryableGenerationFailed(
        f"bulkRegister job {result.job_id} for session {claim.session_id} "
        f"(attempt {claim.attempt}) could not be recorded: the database stayed "
        "unavailable; a retry of this run resumes the claim and the service "
        "answers the same job for the cycle's idempotency key",
        session_id=claim.session_id,
        attempt=claim.attempt,
        retryable=True,
        cycle=claim.link_generation_at,
    )


def tell_the_view(view: ServiceTurns, turn: Turn, exc: Exception | None) -> ViewState | None:
    """What the call's result says about the service, told to every caller (None: it says
    nothing about the service, or it could not be told). Whatever goes wrong telling it, the
    call's own result still reaches the row: COMPLETED, or FAILED with its retry due."""
    health = health_of(exc)
    retry_after_s = exc.retry_after_s if isinstance(exc, RegistrarUnavailable) else None
    try:
        if health is None:
            view.give_back(turn)
            return None
        return view.report(health, retry_after_s, turn)
    except DatabaseUnavailable as db_exc:
        log_event(logger, logging.WARNING, "generation.view_unreported", error=str(db_exc))
    except Exception as bug:  # noqa: BLE001 - a fault of ours must not keep the mark from the row
        log_event(
            logger,
            logging.ERROR,
            "generation.view_unreported",
            exc_info=bug,
            health=health,
            error=describe(bug),
        )
    return None


def failure_marked(
    repository: SessionClaims,
    claim: Claim,
    trigger: Trigger,
    exc: Exception,
    view: ViewState | None = None,
) -> GenerationFailed:
    """Mark the claim FAILED (fenced), log, and build the error the trigger sees. A
    retryable failure is left for the watchdog to try again after its wait: no run waits.
    The wait is the session's own backoff, unless the service as a whole held it (paused, or
    unwell for everyone: ``view``, the shared view after this failure), when it is due again
    the moment the service is."""
    retryable = is_retryable(exc)
    message = describe(exc)
    retry_in_s = _retry_in_s(exc, claim.attempt, view) if retryable else None
    try:
        marked = repository.mark_failed(claim, message, retry_in_s)
    except DatabaseUnavailable as db_exc:
        # The row stays IN_PROGRESS; once stale, the sweep (or a retry) reclaims it.
        log_event(
            logger,
            logging.ERROR,
            "generation.mark_failed_lost",
            session_id=claim.session_id,
            attempt=claim.attempt,
            error=str(db_exc),
        )
        marked, retryable, retry_in_s = False, True, None
    log_event(
        logger,
        logging.ERROR,
        "generation.failed",
        # A registrar error is expected and self-explanatory; anything else gets a traceback.
        exc_info=None if isinstance(exc, RegistrarError) else exc,
        session_id=claim.session_id,
        attempt=claim.attempt,
        trigger=trigger.value,
        retryable=retryable,
        retry_in_s=retry_in_s,
        fenced_out=not marked,
        error=message,
    )
    error_type = RetryableGenerationFailed if retryable else NonRetryableGenerationFailed
    return error_type(
        f"generation failed for session {claim.session_id} (attempt {claim.attempt}): {message}",
        session_id=claim.session_id,
        attempt=claim.attempt,
        retryable=retryable,
        cycle=claim.link_generation_at,
        retry_in_s=retry_in_s,
    )


def _retry_in_s(exc: Exception, attempt: int, view: ViewState | None) -> float:
    health = health_of(exc)
    if health is Health.THROTTLED or (
        health is Health.UNWELL and view is not None and held_by_the_service(view)
    ):
        return 0.0
    return retry_wait_s(attempt)
