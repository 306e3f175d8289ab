"""When the 4-hourly sweep runs next, for the messages that tell a person what happens to a
session nobody else will retry. Dagster's own cron iterator reads FALLBACK_CRON, so the
answer follows the schedule whatever its cron says."""

from datetime import datetime

from dagster._utils.schedules import cron_string_iterator

from jlg_pipeline.config import Flags
from jlg_pipeline.domain.constants import FALLBACK_CRON


def next_sweep_at(now: datetime) -> datetime | None:
    """The sweep's next start (UTC) after ``now``; None while ENABLE_JOIN_LINK_FALLBACK_CRON
    is off (read now, as the schedule reads it on each tick)."""
    if not Flags.read().fallback_cron_enabled:
        return None
    return next(cron_string_iterator(now.timestamp(), FALLBACK_CRON, "UTC"))
