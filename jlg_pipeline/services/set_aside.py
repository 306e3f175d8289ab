"""One bad row never stops a path (docs/design.md "Trust boundaries", "No single answer"): each
periodic path (the schedule-sync sensor, the outbox applier, a worker draining the queue, the
sweep) acts on
its rows one at a time, and a row it cannot act on is set aside: logged with its id, counted on
``/metrics`` (``jlg_rows_set_aside_total{path}``) and tried again on the path's own backoff,
while the rest go on."""

import logging
from collections.abc import Callable
from enum import StrEnum

from jlg_pipeline.domain.errors import DatabaseUnavailable
from jlg_pipeline.log import describe, log_event

logger = logging.getLogger(__name__)


class Path(StrEnum):
    SCHEDULE_SYNC = "schedule_sync"
    """The sync sensor's direct launches."""
    OUTBOX = "outbox"
    """The sync job applying pending schedule changes."""
    WORKER = "worker"
    """A run draining the one queue (docs/design.md "One queue")."""
    SWEEP = "sweep"


def set_aside(
    path: Path, row_id: int | None, exc: BaseException, record: Callable[[], None]
) -> None:
    """Log the row (``row_id``) ``path`` could not act on, with what went wrong, and
    ``record`` it (counted, and deferred on the path's own backoff where the path keeps one).
    Never raises: a database that fails meanwhile only loses the record (the row is then
    tried again at its next turn)."""
    log_event(
        logger,
        logging.ERROR,
        f"{path.value}.row_set_aside",
        exc_info=exc,
        row_id=row_id,
        error=describe(exc),
    )
    try:
        record()
    except DatabaseUnavailable as lost:
        log_event(logger, logging.WARNING, f"{path.value}.set_aside_unrecorded", error=str(lost))
