"""``generate_for_session``: the single gate every trigger passes through (TRD dec-09).

turn ▶ claim ▶ bulkRegister ▶ mark. The turn is the online-session service's shared view
(``adapters/service_view.py``): the rate budget's slot, a pause, the breaker; a caller whose
turn is not now claims nothing and the session is tried again then. A lost claim returns
normally; a failed bulkRegister marks the session FAILED, keeps the error on the row and
raises a GenerationFailed that says whether the trigger should retry.

What a call's result leaves behind is ``services/marking.py``'s; a run's callers draining
the one queue, ``services/drain.py``'s; what the gate asks of its stores, ``gate_ports.py``.
"""

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Protocol

from jlg_pipeline.adapters.registrars import BulkRegistrar
from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.adapters.service_view import ServiceView
from jlg_pipeline.domain.attempts import Claim, Trigger
from jlg_pipeline.domain.errors import InvalidInput
from jlg_pipeline.domain.generation import BulkRegisterRequest, GenerationOutcome, GenerationResult
from jlg_pipeline.domain.messages import cycle_id
from jlg_pipeline.domain.service_view import Turn
from jlg_pipeline.domain.session_state import LinkGenerationState
from jlg_pipeline.domain.status import LinkGenerationStatus
from jlg_pipeline.domain.validation import SessionId
from jlg_pipeline.log import log_event
from jlg_pipeline.services.gate_ports import ServiceTurns, SessionClaims
from jlg_pipeline.services.lease import lease
from jlg_pipeline.services.marking import (
    failure_marked,
    outcome_of,
    record_completion,
    stop_if_paused_since,
    tell_the_view,
)

logger = logging.getLogger(__name__)
S = LinkGenerationStatus


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
            request,
            repository=repository,
            registrar=registrar,
            trigger=trigger,
            run_id=run_id,
            view=view,
            resume=resume,
        )

    return generate


def generate_for_session(
    request: BulkRegisterRequest,
    *,
    repository: SessionClaims,
    registrar: BulkRegistrar,
    trigger: Trigger,
    run_id: str | None = None,
    view: ServiceTurns | None = None,
    resume: bool = True,
) -> GenerationOutcome:
    """Generate join links for the session ``request`` names (never another), at most once
    per cycle. ``resume``: a claim ``run_id`` already holds on it is this caller's to resume (a
    retry of the run's step), not while the run's other callers may hold it (a run's first
    pass).

    Returns COMPLETED (with job id and total), SKIPPED (not the service's turn, the claim lost
    or the session not claimable; ``reason`` says why) or SUPERSEDED (a newer attempt took
    the claim during bulkRegister). Raises GenerationFailed, after marking FAILED, when
    bulkRegister fails. ``view``: the service's shared view (no rate budget when not given).
    The request was parsed where it entered (``BulkRegisterRequest.parse``)."""
    session_id = request.session_id
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
        # Nothing waits: the slot passes (kept, a later call would spend it after its time).
        view.give_back(turn)
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
    stop_if_paused_since(repository, view, turn, claim, trigger)
    with lease(repository, claim):
        try:
            result = registrar.bulk_register(request)
        except Exception as exc:  # every failure must leave the row FAILED, whatever it is
            after = tell_the_view(view, turn, exc)
            raise failure_marked(repository, claim, trigger, exc, after) from exc
        tell_the_view(view, turn, None)
        landed = record_completion(repository, claim, trigger, result)
    return outcome_of(claim, result, landed, fields)


def _turn(
    repository: SessionClaims,
    view: ServiceTurns,
    session_id: SessionId,
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


def _skipped(session_id: SessionId, reason: str, fields: dict[str, Any]) -> GenerationOutcome:
    log_event(logger, logging.INFO, "generation.claim_skipped", **fields, reason=reason)
    return GenerationOutcome(session_id, GenerationResult.SKIPPED, reason=reason)


def _described(request: BulkRegisterRequest) -> dict[str, Any]:
    return {
        "role": request.role,
        "batch_size": request.batch_size,
        "idempotency_key": request.idempotency_key,
    }


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
