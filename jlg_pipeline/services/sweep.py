"""The fallback sweep (TRD JoinLinkGenerationFallbackService) and the backfill: the sessions
each finds, through a run of several (``batch.py``), and how many were left past its bound."""

import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from functools import partial

from jlg_pipeline.adapters.candidates import Candidates
from jlg_pipeline.domain.constants import FALLBACK_BATCH_LIMIT
from jlg_pipeline.domain.errors import GenerationFailed, RetryableGenerationFailed
from jlg_pipeline.domain.generation import BulkRegisterRequest, GenerationOutcome, SweepReport
from jlg_pipeline.log import describe, log_event
from jlg_pipeline.services.batch import generate_each, log_finished
from jlg_pipeline.services.generation import Gate
from jlg_pipeline.services.set_aside import Path, set_aside

logger = logging.getLogger(__name__)

BACKFILL_LIMIT = 10_000


def sweep_overdue_sessions(
    candidates: Candidates,
    generate: Gate,
    limit: int = FALLBACK_BATCH_LIMIT,
    concurrency: int = 1,
) -> SweepReport:
    """Generate for up to ``limit`` overdue sessions, taken oldest first, up to
    ``concurrency`` at once.

    ``left_behind`` counts the due sessions beyond the limit, for the next sweep.
    """
    due_total = candidates.count_due_for_fallback_generation()
    found = candidates.find_due_for_fallback_generation(limit)
    return _generate_batch(
        "sweep",
        [BulkRegisterRequest(c.id) for c in found],
        due_total,
        _set_aside_on_error(generate, partial(candidates.count_set_aside, Path.SWEEP)),
        concurrency,
        limit=limit,
    )


def _set_aside_on_error(generate: Gate, count: Callable[[], None]) -> Gate:
    """``generate``, with a session it fails on unexpectedly (not a GenerationFailed, which the
    gate marked on the row) set aside: logged, counted, and reported failed, so the sweep goes
    on with the rest; the next sweep tries it again."""

    def guarded(request: BulkRegisterRequest, *, resume: bool = True) -> GenerationOutcome:
        try:
            return generate(request, resume=resume)
        except GenerationFailed:
            raise
        except Exception as exc:
            set_aside(Path.SWEEP, request.session_id, exc, count)
            raise RetryableGenerationFailed(
                f"session {request.session_id} set aside: {describe(exc)}",
                session_id=request.session_id,
                attempt=0,
                retryable=True,
            ) from exc

    return guarded


def backfill_window(
    candidates: Candidates,
    generate: Gate,
    start: datetime,
    end: datetime,
    limit: int = BACKFILL_LIMIT,
    concurrency: int = 1,
) -> SweepReport:
    """Generate for the due, not-COMPLETED sessions whose time falls in [start, end), at most
    ``limit``, up to ``concurrency`` at once; ``left_behind`` counts the rest (launch the
    partition again to take them)."""
    due_total = candidates.count_due_in_window(start, end)
    found = candidates.find_due_in_window(start, end, limit)
    return _generate_batch(
        "backfill",
        [BulkRegisterRequest(c.id) for c in found],
        due_total,
        generate,
        concurrency,
        limit=limit,
        start=start.isoformat(),
        end=end.isoformat(),
    )


def _generate_batch(
    kind: str,
    candidates: Sequence[BulkRegisterRequest],
    due_total: int,
    generate: Gate,
    concurrency: int,
    **context: str | int,
) -> SweepReport:
    """The sweep's and the backfill's one loop: log what was found, generate each candidate,
    count the due ones past the limit as left behind, log the counts."""
    log_event(
        logger,
        logging.INFO,
        f"{kind}.found",
        exc_info=None,
        found=len(candidates),
        due_total=due_total,
        **context,
    )
    report = generate_each(
        candidates,
        generate,
        left_behind=max(due_total - len(candidates), 0),
        concurrency=concurrency,
    )
    log_finished(f"{kind}.finished", report)
    return report
