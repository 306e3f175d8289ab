"""``join_link_fallback_schedule``: the 4-hourly sweep (TRD @Cron), UTC."""

from dagster import (
    DefaultScheduleStatus,
    RunRequest,
    ScheduleEvaluationContext,
    SkipReason,
    schedule,
)

from jlg_pipeline.config import fallback_cron_enabled
from jlg_pipeline.domain.constants import FALLBACK_CRON, FALLBACK_CRON_TIMEZONE
from jlg_pipeline.domain.models import Trigger
from jlg_pipeline.orchestration.tags import TRIGGER_TAG


@schedule(
    name="join_link_fallback_schedule",
    cron_schedule=FALLBACK_CRON,
    execution_timezone=FALLBACK_CRON_TIMEZONE,
    job_name="join_link_fallback_sweep_job",
    default_status=DefaultScheduleStatus.RUNNING,
    description="Every 4 hours: re-attempt overdue sessions the real-time path missed.",
)
def join_link_fallback_schedule(context: ScheduleEvaluationContext) -> RunRequest | SkipReason:
    if not fallback_cron_enabled():
        return SkipReason("ENABLE_JOIN_LINK_FALLBACK_CRON is off: the fallback sweep is disabled")
    return RunRequest(tags={TRIGGER_TAG: Trigger.CRON.value})
