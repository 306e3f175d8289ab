"""The fallback sweep (TRD JoinLinkGenerationFallbackService): the net under lost events,
crashed runs and outages. Every candidate goes through the one gate, sequentially."""

import logging
from collections.abc import Callable

from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.domain import validation
from jlg_pipeline.domain.constants import FALLBACK_BATCH_LIMIT
from jlg_pipeline.domain.errors import GenerationFailed
from jlg_pipeline.domain.models import GenerationOutcome, GenerationResult, SweepReport
from jlg_pipeline.log import log_event

logger = logging.getLogger(__name__)

Generate = Callable[[int], GenerationOutcome]
"""Runs one session through ``generate_for_session`` with the sweep's trigger bound."""


def sweep_overdue_sessions(
    repository: ProgramSessionRepository,
    generate: Generate,
    limit: int = FALLBACK_BATCH_LIMIT,
) -> SweepReport:
    """Generate for up to ``limit`` overdue sessions, oldest first, going on past failures.

    ``left_behind`` counts the due sessions beyond the limit, for the next sweep; a
    session that fails is counted and named in ``failed_session_ids``, never raised.
    """
    limit = validation.positive_limit(limit, "batchLimit")
    due_total = repository.count_due_for_fallback_generation()
    candidates = repository.find_due_for_fallback_generation(limit)
    log_event(
        logger,
        logging.INFO,
        "sweep.found",
        found=len(candidates),
        due_total=due_total,
        limit=limit,
    )
    completed = skipped = 0
    failed: list[int] = []
    for candidate in candidates:
        try:
            outcome = generate(candidate.id)
        except GenerationFailed:
            failed.append(candidate.id)  # generate_for_session logged it with context
            continue
        except Exception as exc:  # noqa: BLE001 - one broken session must not stop the sweep
            log_event(
                logger,
                logging.ERROR,
                "sweep.session_error",
                exc_info=exc,
                session_id=candidate.id,
                error=f"{type(exc).__name__}: {exc}",
            )
            failed.append(candidate.id)
            continue
        if outcome.result is GenerationResult.SKIPPED:
            skipped += 1
        else:
            completed += 1
    report = SweepReport(
        found=len(candidates),
        completed=completed,
        skipped=skipped,
        failed=len(failed),
        left_behind=max(due_total - len(candidates), 0),
        failed_session_ids=tuple(failed),
    )
    log_event(
        logger,
        logging.WARNING if failed else logging.INFO,
        "sweep.finished",
        found=report.found,
        completed=report.completed,
        skipped=report.skipped,
        failed=report.failed,
        left_behind=report.left_behind,
        failed_session_ids=",".join(map(str, failed)) or None,
    )
    return report
