"""The fallback: ``join_link_fallback_sweep_job`` (every overdue, not-COMPLETED session; the
4-hourly ``join_link_fallback_schedule`` launches it) and ``join_link_backfill_job`` (by day of
``link_generation_at``, over partitions operators launch). Both go through the gate,
``JLG_GENERATION_CONCURRENCY`` at once, and go on past a failing session."""

from datetime import UTC, date, datetime, timedelta

from dagster import (
    Config,
    DailyPartitionsDefinition,
    DefaultScheduleStatus,
    OpExecutionContext,
    Output,
    ResourceParam,
    RunRequest,
    ScheduleEvaluationContext,
    SkipReason,
    in_process_executor,
    job,
    op,
    schedule,
)

from jlg_pipeline.adapters.registrars import BulkRegistrar
from jlg_pipeline.domain import validation
from jlg_pipeline.domain.attempts import Trigger
from jlg_pipeline.domain.constants import (
    FALLBACK_BATCH_LIMIT,
    FALLBACK_CRON,
    FALLBACK_CRON_TIMEZONE,
)
from jlg_pipeline.domain.lanes import Lane
from jlg_pipeline.orchestration.resources import RunDatabase
from jlg_pipeline.orchestration.run_outcome import finish, tag_start
from jlg_pipeline.orchestration.tags import LONG_MAX_RUNTIME_S, TRIGGER_TAG, run_tags
from jlg_pipeline.services.generation import bind_gate
from jlg_pipeline.services.sweep import BACKFILL_LIMIT, backfill_window, sweep_overdue_sessions

BACKFILL_DAYS = 30


def backfill_partitions_from(today: date) -> DailyPartitionsDefinition:
    """The last BACKFILL_DAYS days through today (UTC): end_offset=1 makes today's partition
    exist, so a session due this morning can be backfilled. The window starts when the code
    location loads, as Dagster's run retention does (JLG_DAGSTER_RETENTION_DAYS, 30): the
    partitions page shows days that can still have work, not every day since the project
    began as "missing"."""
    start = today - timedelta(days=BACKFILL_DAYS)
    return DailyPartitionsDefinition(start_date=start.isoformat(), timezone="UTC", end_offset=1)


backfill_partitions = backfill_partitions_from(datetime.now(UTC).date())


class SweepConfig(Config):
    batchLimit: int = FALLBACK_BATCH_LIMIT


class BackfillConfig(Config):
    limit: int = BACKFILL_LIMIT
    """Sessions one partition's run takes at most; its metadata's left_behind counts the rest."""


@op(name="sweep_overdue_sessions")
def sweep_overdue_sessions_op(
    context: OpExecutionContext,
    config: SweepConfig,
    database: ResourceParam[RunDatabase],
    registrar: ResourceParam[BulkRegistrar],
) -> Output[None]:
    """Regenerates overdue, not-COMPLETED sessions; fails the run if any session failed."""
    repository = database.repository()
    report = sweep_overdue_sessions(
        database.candidates(),
        bind_gate(repository, registrar, tag_start(context, None), context.run_id, database.view()),
        validation.positive_limit(config.batchLimit, "batchLimit"),
        concurrency=database.concurrency,
    )
    return finish(context, report, database.sweep_enabled)


@job(
    name="join_link_fallback_sweep_job",
    executor_def=in_process_executor,
    description="The fallback sweep: every overdue, not-COMPLETED session through the gate.",
    # A launch from the UI or CLI says so; the schedule's runs carry trigger=cron instead.
    tags=run_tags(Lane.SWEEP, LONG_MAX_RUNTIME_S, **{TRIGGER_TAG: Trigger.MANUAL.value}),
)
def join_link_fallback_sweep_job() -> None:
    sweep_overdue_sessions_op()


@op(name="backfill_partition_sessions")
def backfill_partition_sessions(
    context: OpExecutionContext,
    config: BackfillConfig,
    database: ResourceParam[RunDatabase],
    registrar: ResourceParam[BulkRegistrar],
) -> Output[None]:
    """Regenerates every due, not-COMPLETED session whose time falls in the partition's day."""
    window = context.partition_time_window
    repository = database.repository()
    report = backfill_window(
        database.candidates(),
        bind_gate(repository, registrar, tag_start(context, None), context.run_id, database.view()),
        window.start,
        window.end,
        validation.positive_limit(config.limit, "limit"),
        concurrency=database.concurrency,
    )
    return finish(context, report, database.sweep_enabled)


@job(
    name="join_link_backfill_job",
    executor_def=in_process_executor,
    partitions_def=backfill_partitions,
    description=(
        "Backfill: regenerate due, not-COMPLETED sessions by day (UTC) of link_generation_at. "
        "A 'missing' partition is a day no backfill ran for, not work waiting: the real-time "
        "path and the sweep generate sessions without materializing partitions."
    ),
    tags=run_tags(Lane.SWEEP, LONG_MAX_RUNTIME_S, **{TRIGGER_TAG: Trigger.BACKFILL.value}),
)
def join_link_backfill_job() -> None:
    backfill_partition_sessions()


@schedule(
    name="join_link_fallback_schedule",
    cron_schedule=FALLBACK_CRON,
    execution_timezone=FALLBACK_CRON_TIMEZONE,
    job=join_link_fallback_sweep_job,
    default_status=DefaultScheduleStatus.RUNNING,
    description="Every 4 hours: re-attempt overdue sessions the real-time path missed.",
)
def join_link_fallback_schedule(
    context: ScheduleEvaluationContext, database: ResourceParam[RunDatabase]
) -> RunRequest | SkipReason:
    if not database.sweep_enabled:
        return SkipReason("ENABLE_JOIN_LINK_FALLBACK_CRON is off: the fallback sweep is disabled")
    return RunRequest(tags={TRIGGER_TAG: Trigger.CRON.value})
