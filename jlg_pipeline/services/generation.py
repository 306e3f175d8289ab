"""``generate_for_session``: the single gate every trigger passes through (TRD dec-09).

turn ▶ claim ▶ bulkRegister ▶ mark. The turn is the online-session service's shared view
(``adapters/service_view.py``): the rate budget's slot, a pause, the breaker; a caller whose
turn is not now claims nothing and the session is tried again then. A lost claim returns
normally; a failed bulkRegister marks the session FAILED, keeps the error on the row and
raises a GenerationFailed that says whether the trigger should retry.

A bulkRegister result is never lost to a database fault: the completion write is retried,
the lease renewed meanwhile, for up to half the stale window; if it still has not landed, the
run fails retryably and its retry, while the claim is not yet stale, resumes it
(``ProgramSessionRepository.resume``) instead of skipping, and calls again with the cycle's
idempotency key, which the service answers with the same job.
"""

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import Any, Protocol

from jlg_pipeline.adapters.registrars import BulkRegistrar
from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.adapters.service_view import ServiceView
from jlg_pipeline.domain.backoff import backoff_s
from jlg_pipeline.domain.constants import TimingWindows
from jlg_pipeline.domain.errors import (
    DatabaseUnavailable,
    GenerationFailed,
    InvalidInput,
    NonRetryableGenerationFailed,
    RegistrarError,
    RegistrarUnavailable,
    RetryableGenerationFailed,
    is_retryable,
)
from jlg_pipeline.domain.messages import cycle_id
from jlg_pipeline.domain.models import (
    BulkRegisterRequest,
    BulkRegisterResult,
    Claim,
    GenerationOutcome,
    GenerationResult,
    LinkGenerationState,
    Trigger,
)
from jlg_pipeline.domain.retries import retry_wait_s
from jlg_pipeline.domain.service_view import (
    Health,
    Turn,
    ViewState,
    health_of,
    held_by_the_service,
)
from jlg_pipeline.domain.status import LinkGenerationStatus
from jlg_pipeline.log import describe, log_event
from jlg_pipeline.services.lease import lease
from jlg_pipeline.services.retrying import tries
from jlg_pipeline.services.set_aside import Path, set_aside

logger = logging.getLogger(__name__)
S = LinkGenerationStatus

SUPERSEDED_REASON = (
    "a newer attempt took the claim (stale reclaim, re-arm or clear); this mark was fenced out"
)


class SessionClaims(Protocol):
    """What the gate asks of the sessions' store (``adapters/repository.py`` in production, a
    recording fake in the unit tests): read a state, claim (the asked session, or the next
    that waits), resume a run's own claim, renew the lease, and the two fenced marks."""

    @property
    def windows(self) -> TimingWindows: ...
    def get_state(self, session_id: int) -> LinkGenerationState | None: ...
    def claim(self, session_id: int, trigger: Trigger, run_id: str | None) -> Claim | None: ...
    def claim_next(self, trigger: Trigger, run_id: str | None) -> Claim | None: ...
    def resume(self, session_id: int, run_id: str) -> Claim | None: ...
    def renew(self, claim: Claim) -> bool: ...
    def mark_completed(self, claim: Claim, job_id: str, total: int | None = None) -> bool: ...
    def mark_failed(self, claim: Claim, error: str, retry_in_s: float | None = None) -> bool: ...


class ServiceTurns(Protocol):
    """What the gate asks of the online-session service's shared view
    (``adapters/service_view.py``; a recording fake in the unit tests)."""

    def wait_for_turn(self) -> Turn: ...
    def not_used(self, turn: Turn) -> None: ...
    def give_back(self, turn: Turn) -> None: ...
    def pause_before_the_call(self) -> datetime | None: ...
    def report(self, health: Health, retry_after_s: float | None, turn: Turn) -> ViewState: ...


class Gate(Protocol):
    """``generate_for_session`` with its adapters, the caller's trigger and run bound."""

    def __call__(
        self, request: BulkRegisterRequest, *, resume: bool = True
    ) -> GenerationOutcome: ...


def bind_gate(
    repository: ProgramSessionRepository,
    registrar: BulkRegistrar,
    trigger: Trigger,
    run_id: str | None = None,
    view: ServiceView | None = None,
) -> Gate:
    """The one binding of the gate every run uses: each request through
    :func:`generate_for_session` with these adapters, this trigger and this run."""

    def generate(request: BulkRegisterRequest, *, resume: bool = True) -> GenerationOutcome:
        return generate_for_session(
            request.session_id,
            repository=repository,
            registrar=registrar,
            trigger=trigger,
            role=request.role,
            batch_size=request.batch_size,
            actor_user_id=request.actor_user_id,
            run_id=run_id,
            view=view,
            resume=resume,
        )

    return generate


DRAIN_FOR_S = 30 * 60.0
"""How long after it began a run still takes from the queue (far inside a shared run's
three-hour bound: ``dagster/max_runtime`` never ends it mid-call)."""
HEARTBEAT_S = 5.0
"""How often a draining run says it is alive (``SessionQueue.beat``), at most."""


class Drain:
    """:func:`generate_next` bound as :func:`bind_gate` binds the gate, until ``until``
    (monotonic seconds), saying the run is alive through ``beat`` at most every HEARTBEAT_S;
    it keeps the request of each session it took, for the run's own retries
    (:meth:`request_for`)."""

    def __init__(
        self,
        repository: SessionClaims,
        registrar: BulkRegistrar,
        trigger: Trigger,
        run_id: str | None,
        view: ServiceTurns,
        beat: Callable[[], None] = lambda: None,
        count_set_aside: Callable[[], None] = lambda: None,
        until: float | None = None,
    ) -> None:
        self._bound = (repository, registrar, trigger, run_id, view)
        self._beat = beat
        self._count_set_aside = count_set_aside
        self._current = threading.local()
        self._until = time.monotonic() + DRAIN_FOR_S if until is None else until
        self._lock = threading.Lock()
        self._taken: dict[int, BulkRegisterRequest] = {}
        self._beat_at = -HEARTBEAT_S

    def __call__(self) -> GenerationOutcome | None:
        if time.monotonic() >= self._until:
            return None
        self._heartbeat()
        repository, registrar, trigger, run_id, view = self._bound
        self._current.session_id = None
        try:
            return generate_next(
                repository=repository,
                registrar=registrar,
                trigger=trigger,
                run_id=run_id,
                view=view,
                took=self._took,
            )
        except GenerationFailed:
            raise
        except Exception as exc:
            session_id = self._current.session_id
            if session_id is None:
                raise
            # One session the gate failed on unexpectedly after its claim: set aside (its
            # claim goes stale and it waits again), and the drain goes on with the rest.
            set_aside(Path.WORKER, session_id, exc, self._count_set_aside)
            raise RetryableGenerationFailed(
                f"session {session_id} set aside: {describe(exc)}",
                session_id=session_id,
                attempt=0,
                retryable=True,
                retry_in_s=repository.windows.stale_ms / 1000,
            ) from exc

    def _heartbeat(self) -> None:
        with self._lock:
            now = time.monotonic()
            if now - self._beat_at < HEARTBEAT_S:
                return
            self._beat_at = now
        try:
            self._beat()
        except Exception as exc:  # noqa: BLE001 - a missed beat costs the watchdog a launch
            log_event(logger, logging.WARNING, "generation.heartbeat_lost", error=describe(exc))

    def _took(self, request: BulkRegisterRequest) -> None:
        self._current.session_id = request.session_id
        with self._lock:
            self._taken[request.session_id] = request

    def request_for(self, session_id: int) -> BulkRegisterRequest | None:
        """The request of a session this drain took, if it took it."""
        with self._lock:
            return self._taken.get(session_id)


def generate_for_session(
    session_id: int,
    *,
    repository: SessionClaims,
    registrar: BulkRegistrar,
    trigger: Trigger,
    role: str | None = None,
    batch_size: int | None = None,
    actor_user_id: int | None = None,
    run_id: str | None = None,
    view: ServiceTurns | None = None,
    resume: bool = True,
) -> GenerationOutcome:
    """Generate join links for one session, at most once per cycle. ``resume``: a claim
    ``run_id`` already holds on the session is this caller's to resume (a retry of the run's
    step); not while the run's other callers may hold it right now (a run's first pass).

    Returns COMPLETED (with job id and total), SKIPPED (not the service's turn now, the
    claim was lost or the session is not claimable; ``reason`` says why) or SUPERSEDED
    (bulkRegister ran but a newer attempt took the claim meanwhile). Raises InvalidInput,
    before any write, for bad arguments, and GenerationFailed, after marking FAILED, when
    bulkRegister fails. ``view``: the online-session service's shared view (no rate budget
    when not given).
    """
    # Checked before any write, so bad input fails here and never half-way through.
    if not isinstance(trigger, Trigger):
        raise InvalidInput(f"trigger must be a Trigger, got {trigger!r}")
    request = BulkRegisterRequest(session_id, role, batch_size, actor_user_id)
    fields: dict[str, Any] = {"session_id": session_id, "trigger": trigger.value}
    view = view or _database_view(repository)
    turn = _turn(repository, view, session_id, fields)
    if isinstance(turn, GenerationOutcome):
        return turn
    claim = repository.claim(session_id, trigger, run_id)
    resumed = claim is None and run_id is not None and resume
    if resumed:
        claim = repository.resume(session_id, str(run_id))
    if claim is None:
        view.not_used(turn)
        return _skipped(session_id, skip_reason(repository.get_state(session_id)), fields)
    return _call(repository, registrar, view, turn, claim, request, trigger, fields, resumed)


def generate_next(
    *,
    repository: SessionClaims,
    registrar: BulkRegistrar,
    trigger: Trigger,
    run_id: str | None = None,
    view: ServiceTurns,
    took: Callable[[BulkRegisterRequest], None] = lambda _: None,
) -> GenerationOutcome | None:
    """The gate for the session the queue gives next (``claim_next``: docs/design.md "One
    queue"), generated as :func:`generate_for_session` would with the options recorded for its
    cycle (``took`` is told them); None when none waits or the service says wait."""
    turn = view.wait_for_turn()
    if not turn.calls:
        return None
    claim = repository.claim_next(trigger, run_id)
    if claim is None:
        view.not_used(turn)
        return None
    request = claim.request or BulkRegisterRequest(claim.session_id)
    took(request)
    fields: dict[str, Any] = {"session_id": claim.session_id, "trigger": trigger.value}
    return _call(repository, registrar, view, turn, claim, request, trigger, fields, False)


def _database_view(repository: SessionClaims) -> ServiceView:
    if not isinstance(repository, ProgramSessionRepository):
        raise InvalidInput("a store other than the database brings its own service view")
    return ServiceView(repository.engine)


def _call(
    repository: SessionClaims,
    registrar: BulkRegistrar,
    view: ServiceTurns,
    turn: Turn,
    claim: Claim,
    request: BulkRegisterRequest,
    trigger: Trigger,
    fields: dict[str, Any],
    resumed: bool,
) -> GenerationOutcome:
    """bulkRegister for a claimed session under the cycle's idempotency key, and the mark."""
    fields["attempt"] = claim.attempt
    request = replace(request, idempotency_key=cycle_id(claim.session_id, claim.link_generation_at))
    event = "generation.resumed" if resumed else "generation.dispatched"
    log_event(logger, logging.INFO, event, **fields, **_described(request))
    _stop_if_paused_since(repository, view, turn, claim, trigger)
    with lease(repository, claim):
        try:
            result = registrar.bulk_register(request)
        except Exception as exc:  # every failure must leave the row FAILED, whatever it is
            after = _tell_the_view(view, turn, exc)
            raise _failed(repository, claim, trigger, exc, after) from exc
        _tell_the_view(view, turn, None)
        landed = _record_completion(repository, claim, trigger, result)
    return _generated(claim, result, landed, fields)


def _turn(
    repository: SessionClaims,
    view: ServiceTurns,
    session_id: int,
    fields: dict[str, Any],
) -> Turn | GenerationOutcome:
    """The service's turn to call now, or why not (SKIPPED, holding nothing): the session
    cannot be claimed by anyone (no slot of the budget is spent on it), or the view says wait
    (the session waits in the queue; the watchdog launches a worker once the view lets one
    call)."""
    settled = _settled(repository.get_state(session_id))
    if settled is not None:
        return _skipped(session_id, settled, fields)
    turn = view.wait_for_turn()
    if turn.calls:
        return turn
    reason = f"{turn.reason}; not before {turn.at.isoformat()}"
    log_event(logger, logging.INFO, "generation.held", **fields, reason=reason)
    return GenerationOutcome(session_id, GenerationResult.SKIPPED, reason=reason)


def _skipped(session_id: int, reason: str, fields: dict[str, Any]) -> GenerationOutcome:
    log_event(logger, logging.INFO, "generation.claim_skipped", **fields, reason=reason)
    return GenerationOutcome(session_id, GenerationResult.SKIPPED, reason=reason)


def _described(request: BulkRegisterRequest) -> dict[str, Any]:
    return {
        "role": request.role,
        "batch_size": request.batch_size,
        "idempotency_key": request.idempotency_key,
    }


def _stop_if_paused_since(
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
    raise _failed(repository, claim, trigger, not_called)


def _generated(
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


def _record_completion(
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


def _tell_the_view(view: ServiceTurns, turn: Turn, exc: Exception | None) -> ViewState | None:
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


def _failed(
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
    return retry_wait_s(None, attempt)


def _settled(state: LinkGenerationState | None) -> str | None:
    if state is None:
        return "no such program session"
    return state.settled()


def skip_reason(state: LinkGenerationState | None) -> str:
    """Why a claim on this session is not won, in words an operator can act on."""
    settled = _settled(state)
    if settled is not None:
        return settled
    assert state is not None
    if state.status is S.IN_PROGRESS and not state.stale:
        return f"another attempt ({state.attempt}) holds the claim"
    return "the claim was lost to a concurrent caller"
