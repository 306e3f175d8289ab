"""The fallback sweep (TRD JoinLinkGenerationFallbackService) and the backfill: the nets
under lost events, crashed runs and outages. Every candidate goes through the one gate,
sequentially, and one failing session never stops the rest."""

import logging
from collections.abc import Callable, Sequence
from datetime import datetime

from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.domain import validation
from jlg_pipeline.domain.constants import FALLBACK_BATCH_LIMIT
from jlg_pipeline.domain.errors import GenerationFailed
from jlg_pipeline.domain.models import (
    DueSession,
    GenerationOutcome,
    GenerationResult,
    SessionResult,
    SweepReport,
)
from jlg_pipeline.log import log_event

logger = logging.getLogger(__name__)

Generate = Callable[[int], GenerationOutcome]
"""Runs one session through ``generate_for_session`` with the caller's trigger bound."""

BACKFILL_LIMIT = 10_000
FAILED = "failed"


def sweep_overdue_sessions(
    repository: ProgramSessionRepository,
    generate: Generate,
    limit: int = FALLBACK_BATCH_LIMIT,
) -> SweepReport:
    """Generate for up to ``limit`` overdue sessions, oldest first.

    ``left_behind`` counts the due sessions beyond the limit, for the next sweep.
    """
    limit = validation.positive_limit(limit, "batchLimit")
    due_total = repository.count_due_for_fallback_generation()
    candidates = repository.find_due_for_fallback_generation(limit)
    log_event(
        logger, logging.INFO, "sweep.found", found=len(candidates), due_total=due_total, limit=limit
    )
    report = generate_each(candidates, generate, left_behind=max(due_total - len(candidates), 0))
    _log_finished("sweep.finished", report)
    return report


def backfill_window(
    repository: ProgramSessionRepository,
    generate: Generate,
    start: datetime,
    end: datetime,
    limit: int = BACKFILL_LIMIT,
) -> SweepReport:
    """Generate for every due, not-COMPLETED session whose time falls in [start, end)."""
    candidates = repository.find_due_in_window(start, end, limit)
    log_event(
        logger,
        logging.INFO,
        "backfill.found",
        found=len(candidates),
        start=start.isoformat(),
        end=end.isoformat(),
    )
    report = generate_each(candidates, generate, left_behind=0)
    _log_finished("backfill.finished", report)
    return report


def generate_each(
    candidates: Sequence[DueSession], generate: Generate, *, left_behind: int
) -> SweepReport:
    completed = skipped = 0
    failed: list[int] = []
    sessions: list[SessionResult] = []
    for candidate in candidates:
        try:
            outcome = generate(candidate.id)
        except GenerationFailed:
            failed.append(candidate.id)  # generate_for_session logged it with context
            sessions.append(SessionResult(candidate.id, FAILED))
            continue
        except Exception as exc:  # noqa: BLE001 - one broken session must not stop the rest
            log_event(
                logger,
                logging.ERROR,
                "sweep.session_error",
                exc_info=exc,
                session_id=candidate.id,
                error=f"{type(exc).__name__}: {exc}",
            )
            failed.append(candidate.id)
            sessions.append(SessionResult(candidate.id, FAILED))
            continue
        sessions.append(SessionResult(candidate.id, outcome.result.value, outcome.lag_seconds))
        if outcome.result is GenerationResult.SKIPPED:
            skipped += 1
        else:
            completed += 1
    return SweepReport(
        found=len(candidates),
        completed=completed,
        skipped=skipped,
        failed=len(failed),
        left_behind=left_behind,
        failed_session_ids=tuple(failed),
        sessions=tuple(sessions),
    )


def _log_finished(event: str, report: SweepReport) -> None:
    log_event(
        logger,
        logging.WARNING if report.failed else logging.INFO,
        event,
        found=report.found,
        completed=report.completed,
        skipped=report.skipped,
        failed=report.failed,
        left_behind=report.left_behind,
        failed_session_ids=",".join(map(str, report.failed_session_ids)) or None,
    )
