"""EventBridge schedule sync in Dagster (the one-time EventBridge schedules, not Dagster's
cron schedules): ``join_link_schedule_sync_job`` applies the pending schedule changes, and
``join_link_schedule_sync_sensor`` launches it only while changes are due for a try, and
launches the direct generation runs of near times once they are due (docs/design.md "Schedule
sync"). The sensor's check is two probes of one small index; when nothing is due it asks
for nothing."""

from collections.abc import Sequence
from dataclasses import asdict
from functools import partial
from typing import Protocol

from dagster import (
    Config,
    DagsterInstance,
    DagsterRunStatus,
    DefaultSensorStatus,
    JobDefinition,
    Output,
    ResourceParam,
    RunRequest,
    RunsFilter,
    SensorDefinition,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    in_process_executor,
    job,
    op,
    sensor,
)

from jlg_pipeline.adapters.schedule_outbox import ScheduleOutbox
from jlg_pipeline.domain import validation
from jlg_pipeline.domain.attempts import Trigger
from jlg_pipeline.domain.generation import BulkRegisterRequest
from jlg_pipeline.domain.lanes import Lane
from jlg_pipeline.domain.messages import correlation_id
from jlg_pipeline.domain.run_sharing import DEFAULT_SHARING, RunSharing
from jlg_pipeline.domain.schedule_sync import SYNC_BATCH_LIMIT, SyncReport
from jlg_pipeline.log import describe
from jlg_pipeline.orchestration.generation_runs import Work, covering, requests_for
from jlg_pipeline.orchestration.resources import RunDatabase
from jlg_pipeline.orchestration.sensor_ticks import minimum_interval
from jlg_pipeline.orchestration.tags import (
    MAX_RUNTIME_TAG,
    SYNC_MAX_RUNTIME_S,
    TRIGGER_TAG,
    run_tags,
)
from jlg_pipeline.services.schedule_sync import direct_run_key, due_work
from jlg_pipeline.services.set_aside import Path, set_aside

SYNC_JOB = "join_link_schedule_sync_job"
SYNC_SENSOR_INTERVAL_S = 10
IN_FLIGHT = [
    DagsterRunStatus.QUEUED,
    DagsterRunStatus.NOT_STARTED,
    DagsterRunStatus.STARTING,
    DagsterRunStatus.STARTED,
]


class SyncConfig(Config):
    batchLimit: int = SYNC_BATCH_LIMIT


class SyncsSchedules(Protocol):
    """What the sync op needs: a ``ScheduleSync``, or the resource that assembles one."""

    def sync(self, limit: int) -> SyncReport: ...


@op(name="sync_schedules")
def sync_schedules(
    config: SyncConfig, schedule_sync: ResourceParam[SyncsSchedules]
) -> Output[None]:
    """Applies every pending change (the most overdue first, at most batchLimit). A change
    that fails again stays pending with its error and its next try; the run still succeeds."""
    # applied, failed, direct, left, dropped
    return Output(
        None,
        metadata=asdict(
            schedule_sync.sync(validation.positive_limit(config.batchLimit, "batchLimit"))
        ),
    )


@job(
    name=SYNC_JOB,
    executor_def=in_process_executor,
    description="Apply the pending EventBridge schedule changes (the outbox).",
    tags=run_tags(Lane.SYNC, SYNC_MAX_RUNTIME_S, **{TRIGGER_TAG: Trigger.MANUAL.value}),
)
def join_link_schedule_sync_job() -> None:
    sync_schedules()


def _sync_in_flight(instance: DagsterInstance) -> str | None:
    """What a new sync run would wait for: the one in flight, named, or None."""
    records = instance.get_run_records(
        filters=RunsFilter(job_name=SYNC_JOB, statuses=IN_FLIGHT), limit=1
    )
    if not records:
        return None
    run = records[0].dagster_run
    bound = run.tags.get(MAX_RUNTIME_TAG, "?")
    return (
        f"waiting for {SYNC_JOB} run {run.run_id} ({run.status.value}) to end; run monitoring "
        f"fails it once it has run {bound} s (dagster/max_runtime), so a dead one cannot hold "
        "schedule sync; near times go direct meanwhile"
    )


def _sync_request() -> RunRequest:
    return RunRequest(job_name=SYNC_JOB, tags={TRIGGER_TAG: Trigger.SENSOR.value})


def build_schedule_sync_sensor(
    generation_jobs: Sequence[JobDefinition], sharing: RunSharing = DEFAULT_SHARING
) -> SensorDefinition:
    """``generation_jobs`` run the direct launches: ``join_link_generation_job`` one session
    a run while few are due, ``join_link_shared_generation_job`` once more are."""

    @sensor(
        name="join_link_schedule_sync_sensor",
        jobs=[join_link_schedule_sync_job, *generation_jobs],
        minimum_interval_seconds=minimum_interval(SYNC_SENSOR_INTERVAL_S),
        default_status=DefaultSensorStatus.RUNNING,
        description="Launches join_link_schedule_sync_job while schedule changes are due for "
        "a try, and the generation run of a near time (trigger direct) once it is due.",
    )
    def join_link_schedule_sync_sensor(
        context: SensorEvaluationContext, database: ResourceParam[RunDatabase]
    ) -> SensorResult | SkipReason:
        return _tick(
            context.instance, ScheduleOutbox(database.engine), sharing, database.scheduler_enabled
        )

    return join_link_schedule_sync_sensor


def _tick(
    instance: DagsterInstance, outbox: ScheduleOutbox, sharing: RunSharing, enabled: bool
) -> SensorResult | SkipReason:
    if not enabled:
        if outbox.any_rows() and not _sync_in_flight(instance):
            return SensorResult(run_requests=[_sync_request()])
        return SkipReason("ENABLE_JOIN_LINK_SCHEDULER is off: nothing to sync")
    due = due_work(outbox, covering(instance))
    work = []
    for launch in due.launches:
        try:
            work.append(
                Work(
                    direct_run_key(launch),
                    BulkRegisterRequest.parse(
                        launch.session_id, actor_user_id=launch.actor_user_id
                    ),
                    correlation_id(launch.session_id),
                )
            )
        except Exception as exc:  # noqa: BLE001 - one row no run can be asked for stops no other
            set_aside(
                Path.SCHEDULE_SYNC,
                launch.session_id,
                exc,
                partial(outbox.set_aside, launch.session_id, describe(exc), Path.SCHEDULE_SYNC),
            )
    requests = requests_for(instance, work, Trigger.DIRECT, sharing)
    waiting = _sync_in_flight(instance) if due.sync_due else None
    if due.sync_due and waiting is None:
        requests.append(_sync_request())
    if not requests:
        done = f" ({due.done} direct launch(es) done)" if due.done else ""
        return SkipReason(waiting or f"no schedule change due{done}")
    return SensorResult(run_requests=requests)
