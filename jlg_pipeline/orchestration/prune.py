"""``join_link_dagster_prune_job``: keeps Dagster's own storage small. One run per message
means run and event-log rows grow without bound, and dagster-postgres keeps them forever.
The attempt history (our own table) is the record of what happened, so old runs carry
nothing we need: every day, runs that finished more than ``olderThanDays`` ago are deleted
with their event logs, through the instance API, in bounded batches. Queued and in-progress
runs are never touched. Deleting is safe: duplicates are stopped by the claim, not by run
keys, so a message redelivered after its run is gone generates nothing twice."""

from datetime import UTC, datetime, timedelta

from dagster import (
    Config,
    DagsterRunStatus,
    DefaultScheduleStatus,
    OpExecutionContext,
    Output,
    RunRequest,
    RunsFilter,
    ScheduleDefinition,
    ScheduleEvaluationContext,
    in_process_executor,
    job,
    op,
    schedule,
)

from jlg_pipeline.config import DEFAULT_RETENTION_DAYS
from jlg_pipeline.domain.attempts import Trigger
from jlg_pipeline.domain.errors import ConfigError
from jlg_pipeline.domain.lanes import Lane
from jlg_pipeline.orchestration.tags import LONG_MAX_RUNTIME_S, TRIGGER_TAG, run_tags

PRUNE_JOB = "join_link_dagster_prune_job"
FINISHED = [DagsterRunStatus.SUCCESS, DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED]


class PruneConfig(Config):
    olderThanDays: float = DEFAULT_RETENTION_DAYS
    batchSize: int = 200
    """Runs looked up and deleted per batch."""
    maxRuns: int = 20_000
    """At most this many per run; the next day's run takes the rest."""


@op(name="prune_dagster_runs")
def prune_dagster_runs(context: OpExecutionContext, config: PruneConfig) -> Output[None]:
    """Deletes finished runs last updated before the cutoff, oldest first."""
    if config.olderThanDays < 0 or config.batchSize < 1 or config.maxRuns < 1:
        raise ConfigError("olderThanDays must be ≥ 0, batchSize and maxRuns ≥ 1")
    cutoff = datetime.now(UTC) - timedelta(days=config.olderThanDays)
    instance = context.instance
    deleted = 0
    while deleted < config.maxRuns:
        records = instance.get_run_records(
            filters=RunsFilter(statuses=FINISHED, updated_before=cutoff),
            limit=min(config.batchSize, config.maxRuns - deleted),
            order_by="update_timestamp",
            ascending=True,
        )
        if not records:
            break
        for record in records:
            instance.delete_run(record.dagster_run.run_id)
        deleted += len(records)
        context.log.info(f"deleted {deleted} run(s) so far")
    left = len(
        instance.get_run_ids(filters=RunsFilter(statuses=FINISHED, updated_before=cutoff), limit=1)
    )
    return Output(
        None,
        metadata={"deleted": deleted, "cutoff": cutoff.isoformat(), "more_left": bool(left)},
    )


@job(
    name=PRUNE_JOB,
    executor_def=in_process_executor,
    description="Delete finished Dagster runs (and their event logs) older than the retention.",
    tags=run_tags(Lane.MAINTENANCE, LONG_MAX_RUNTIME_S, **{TRIGGER_TAG: Trigger.MANUAL.value}),
)
def join_link_dagster_prune_job() -> None:
    prune_dagster_runs()


def build_prune_schedule(retention_days: float) -> ScheduleDefinition:
    """The daily prune of runs older than ``retention_days`` (JLG_DAGSTER_RETENTION_DAYS, read
    with the code location's settings)."""

    @schedule(
        name="join_link_dagster_prune_schedule",
        job=join_link_dagster_prune_job,
        cron_schedule="30 3 * * *",
        execution_timezone="UTC",
        default_status=DefaultScheduleStatus.RUNNING,
        description=f"Daily: delete finished runs older than {retention_days:g} days "
        "(JLG_DAGSTER_RETENTION_DAYS).",
    )
    def join_link_dagster_prune_schedule(context: ScheduleEvaluationContext) -> RunRequest:
        return RunRequest(
            run_config={
                "ops": {"prune_dagster_runs": {"config": {"olderThanDays": retention_days}}}
            },
            tags={TRIGGER_TAG: Trigger.CRON.value},
        )

    return join_link_dagster_prune_schedule
