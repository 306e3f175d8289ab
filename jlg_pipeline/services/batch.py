"""A run of several sessions: each through the one gate, a bounded few at once (the TRD bounds
bulk-job fan-out), after the run's callers have taken what the queue gives; a result the run
could not record tried again in the run; one failing session never stops or delays the rest.
The sweep, a backfill and a shared run (a burst, the watchdog's worker) each use it."""

import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from jlg_pipeline.domain.errors import GenerationFailed
from jlg_pipeline.domain.generation import (
    BulkRegisterRequest,
    GenerationOutcome,
    GenerationResult,
    SessionResult,
    SweepReport,
)
from jlg_pipeline.domain.validation import SessionId
from jlg_pipeline.log import describe, log_event
from jlg_pipeline.services.after_failure import By, who_tries_again
from jlg_pipeline.services.drain import Drain
from jlg_pipeline.services.generation import Gate
from jlg_pipeline.services.retrying import tries

logger = logging.getLogger(__name__)


def generate_each(
    requests: Sequence[BulkRegisterRequest],
    generate: Gate,
    *,
    left_behind: int,
    concurrency: int = 1,
    resume: bool = True,
    then: Drain | None = None,
) -> SweepReport:
    """With ``then``, first as many callers as ``concurrency`` taking what the queue gives
    until it gives nothing (docs/design.md "One queue": the run's own sessions wait there with
    the rest); then each of ``requests`` through ``generate`` (``resume`` passed on), up to
    ``concurrency`` at once, except those the drain acted on: those the queue did not give
    anyone (the service said wait) are claimed or held now, and those done are skipped. The
    report lists each session once, with what happened to it (a failure says whether it is
    retryable)."""
    workers = concurrency if then is not None else max(min(concurrency, len(requests)), 1)
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="generate") as pool:
        each: list[SessionResult] = []
        if then is not None:
            each += [
                r for rs in pool.map(lambda _: _generate_next(then), range(workers)) for r in rs
            ]
        acted_on = {r.session_id for r in each}
        own = [r for r in requests if r.session_id not in acted_on]
        each += pool.map(lambda r: _generate_one(r, generate, resume), own)
    best: dict[int, SessionResult] = {}
    for result in each:
        seen = best.setdefault(result.session_id, result)
        if _RANK[result.outcome] > _RANK[seen.outcome]:
            best[result.session_id] = result
    return summarize(list(best.values()), left_behind=left_behind)


_RANK = {
    GenerationResult.SKIPPED: 0,
    GenerationResult.FAILED: 1,
    GenerationResult.SUPERSEDED: 2,
    GenerationResult.COMPLETED: 2,
}
"""Which of a session's results in one pass tells what happened to it: one that called the
service over a skip (the queue gave it to this run before its own pass found it done), and the
success over the failure before it (a pass never calls a session again once it succeeded)."""


def generate_retrying_unrecorded(
    requests: Sequence[BulkRegisterRequest],
    generate: Gate,
    *,
    concurrency: int,
    retries: int,
    first_delay_s: float,
    sleep: Callable[[float], None] = time.sleep,
    then: Drain | None = None,
) -> SweepReport:
    """Each session through ``generate`` (a run of several), then up to ``retries`` more
    rounds, ``first_delay_s`` doubling between them, for the sessions whose result this run
    could not record (retryable, with no wait for the watchdog): only their own run can
    resume their claim. A session the watchdog comes back for never holds the run. ``then``:
    the queue the first round drains before its own sessions (``generate_each``), which also
    knows the request of each session it took."""
    by_session = {r.session_id: r for r in requests}
    results: dict[int, SessionResult] = {}
    pending = list(requests)
    for number in tries(first_delay_s, at_most=retries + 1, sleep=sleep):
        if number:
            log_event(logger, logging.INFO, "generation.retrying_in_run", sessions=len(pending))
        # The first round's own pass may find a claim the drain of the same run holds right
        # now; only a later round resumes this run's claims.
        done = generate_each(
            pending,
            generate,
            left_behind=0,
            concurrency=concurrency,
            resume=number > 0,
            then=None if number else then,
        )
        results.update({s.session_id: s for s in done.sessions})
        pending = [
            request
            for s in done.sessions
            if s.outcome == GenerationResult.FAILED
            and who_tries_again(bool(s.retryable), s.retry_in_s, sweep_on=True) is By.THIS_RUN
            and (
                request := by_session.get(s.session_id)
                or (then.request_for(s.session_id) if then is not None else None)
            )
            is not None
        ]
        if not pending:
            break
    return summarize(list(results.values()), left_behind=0)


def summarize(sessions: Sequence[SessionResult], *, left_behind: int) -> SweepReport:
    """The counts of a run's sessions (a superseded one ran bulkRegister: completed)."""
    failed = tuple(s.session_id for s in sessions if s.outcome == GenerationResult.FAILED)
    return SweepReport(
        found=len(sessions),
        completed=sum(
            s.outcome in (GenerationResult.COMPLETED, GenerationResult.SUPERSEDED) for s in sessions
        ),
        skipped=sum(s.outcome == GenerationResult.SKIPPED for s in sessions),
        failed=len(failed),
        left_behind=left_behind,
        failed_session_ids=failed,
        sessions=tuple(sessions),
    )


def _generate_one(request: BulkRegisterRequest, generate: Gate, resume: bool) -> SessionResult:
    result = _result_of(lambda: generate(request, resume=resume), request.session_id)
    assert result is not None, "the gate always answers for a session it was given"
    return result


def _generate_next(then: Drain) -> list[SessionResult]:
    """What ``then`` generates, one session after another, until it has none."""
    results = []
    while (result := _result_of(then, None)) is not None:
        results.append(result)
    return results


def _result_of(
    attempt: Callable[[], GenerationOutcome | None], session_id: SessionId | None
) -> SessionResult | None:
    """One pass through the gate as a session's result (for the session it acted on), or None
    when it acted on none (an unexpected error with no session named: logged)."""
    try:
        outcome = attempt()
    except GenerationFailed as exc:
        # generate_for_session logged it with context; it names the session it was for.
        return SessionResult(
            exc.session_id,
            GenerationResult.FAILED,
            retryable=exc.retryable,
            retry_in_s=exc.retry_in_s,
        )
    except Exception as exc:  # noqa: BLE001 - one broken session must not stop the rest
        log_event(
            logger,
            logging.ERROR,
            "sweep.session_error",
            exc_info=exc,
            session_id=session_id,
            error=describe(exc),
        )
        return (
            None
            if session_id is None
            else SessionResult(session_id, GenerationResult.FAILED, retryable=True)
        )
    return (
        None
        if outcome is None
        else SessionResult(outcome.session_id, outcome.result, outcome.lag_seconds)
    )


def log_finished(event: str, report: SweepReport) -> None:
    log_event(
        logger,
        logging.WARNING if report.failed or report.left_behind else logging.INFO,
        event,
        found=report.found,
        completed=report.completed,
        skipped=report.skipped,
        failed=report.failed,
        left_behind=report.left_behind,
        failed_session_ids=",".join(map(str, report.failed_session_ids)) or None,
    )
