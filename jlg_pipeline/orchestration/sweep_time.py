"""When the 4-hourly sweep runs next, for the messages that tell a person what happens to a
session nobody else will retry: the schedule's own cadence (domain/constants.py), while its
flag is on."""

from datetime import datetime

from jlg_pipeline.domain.constants import next_fallback_sweep


def sweep_runs_at(now: datetime, sweep_enabled: bool) -> datetime | None:
    """The sweep's next start (UTC) after ``now``; None while ENABLE_JOIN_LINK_FALLBACK_CRON
    is off (``sweep_enabled``, as the code location read it)."""
    if not sweep_enabled:
        return None
    return next_fallback_sweep(now)
