"""``join_link_sqs_sensor``: the real-time path's consumer (TRD SqsPollerService + processor).

Each tick acknowledges (deletes) the messages whose runs now exist, then drains the queue
until it is empty or the tick's budget is spent, and asks for runs for the new valid
messages: a ``join_link_generation_job`` run each (run key from the SQS message id) while few
wait, ``join_link_shared_generation_job`` runs of up to ``JLG_MAX_SESSIONS_PER_RUN`` once
more do (``domain/run_sharing.py``); every run is tagged with the messages it covers. The
messages a tick asked runs for stay on the queue, invisible, and are listed in the sensor's
cursor; Dagster stores that cursor together with the run requests, so the next tick finds
their runs in the instance and deletes them. A tick that fails or is lost deletes nothing
valid (docs/design.md "Delivery guarantees"). SQS errors fail the tick.
"""

import json
from collections.abc import Sequence

from dagster import (
    DagsterInstance,
    DefaultSensorStatus,
    JobDefinition,
    ResourceParam,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    sensor,
)

from jlg_pipeline.adapters.sqs_queue import QueueMessage
from jlg_pipeline.domain.attempts import Trigger
from jlg_pipeline.domain.run_sharing import DEFAULT_SHARING, RunSharing
from jlg_pipeline.orchestration.generation import build_generation_job, build_shared_generation_job
from jlg_pipeline.orchestration.generation_runs import Work, covering, requests_for
from jlg_pipeline.orchestration.resources import QueueIntake, RunDatabase
from jlg_pipeline.orchestration.sensor_ticks import minimum_interval
from jlg_pipeline.services.event_intake import (
    AcceptedEvent,
    RunsExist,
    acknowledge,
    drain,
    record_options,
)


def run_key_for(message_id: str) -> str:
    return f"sqs-{message_id}"


def work_for(accepted: AcceptedEvent) -> Work:
    return Work(
        run_key_for(accepted.message_id),
        accepted.request,
        accepted.event.correlationId,
    )


def runs_exist_in(instance: DagsterInstance) -> RunsExist:
    """Looks messages' runs up, a batch at a time, whatever run covers each."""
    covered = covering(instance)

    def exist(message_ids: Sequence[str]) -> set[str]:
        keys = {run_key_for(m): m for m in message_ids}
        return {keys[key] for key in covered(list(keys))}

    return exist


def encode_pending(accepted: list[AcceptedEvent]) -> str:
    return json.dumps([[a.message_id, a.message.receipt_handle] for a in accepted])


def decode_pending(cursor: str | None) -> list[QueueMessage]:
    """The messages the previous tick asked runs for; [] for a cursor of another shape (they
    then come back after their visibility timeout, so nothing is lost)."""
    try:
        entries = json.loads(cursor or "[]")
    except ValueError:
        return []
    if not isinstance(entries, list):
        return []
    return [
        QueueMessage(message_id=entry[0], receipt_handle=entry[1], body="", receive_count=0)
        for entry in entries
        if isinstance(entry, list)
        and len(entry) == 2
        and all(isinstance(part, str) for part in entry)
    ]


def build_sqs_sensor(  # type: ignore[no-untyped-def]
    every_s: int,
    sharing: RunSharing = DEFAULT_SHARING,
    jobs: Sequence[JobDefinition] | None = None,
):
    """A sensor ticking every ``every_s`` seconds (JLG_SQS_SENSOR_INTERVAL_S); ``jobs``: the
    two generation jobs the code location holds (built afresh if not given)."""
    if sharing.max_sessions_per_run == 1:
        described = "Starts a join_link_generation_job run per JOIN_LINK_GENERATION message"
    else:
        described = (
            "Starts a join_link_generation_job run per JOIN_LINK_GENERATION message while at "
            f"most {sharing.share_above} wait, join_link_shared_generation_job runs of up to "
            f"{sharing.max_sessions_per_run} once more do"
        )

    @sensor(
        name="join_link_sqs_sensor",
        jobs=list(jobs or (build_generation_job(), build_shared_generation_job())),
        minimum_interval_seconds=minimum_interval(every_s),
        default_status=DefaultSensorStatus.RUNNING,
        description=f"{described}; a message is deleted once its run exists.",
    )
    def join_link_sqs_sensor(
        context: SensorEvaluationContext,
        sqs_queue: ResourceParam[QueueIntake],
        database: ResourceParam[RunDatabase],
    ) -> SensorResult | SkipReason:
        if not database.scheduler_enabled:
            return SkipReason("ENABLE_JOIN_LINK_SCHEDULER is off: the real-time path is disabled")
        queue = sqs_queue.queue()
        runs_exist = runs_exist_in(context.instance)
        acknowledged = acknowledge(queue, decode_pending(context.cursor), runs_exist)
        intake = drain(queue, runs_exist, wait_seconds=sqs_queue.wait_seconds)
        for message_id, reason in intake.dropped:
            context.log.warning(f"dropped invalid message {message_id}: {reason}")
        undeleted = acknowledged.undeleted + intake.undeleted
        if undeleted:
            context.log.warning(f"SQS did not delete {undeleted}; they will be seen again")
        cursor = encode_pending(intake.accepted)
        if not intake.accepted:
            done = len(acknowledged.acknowledged) + len(intake.acknowledged)
            notes = [f"{done} acknowledged"] if done else []
            notes += [f"{len(intake.dropped)} invalid dropped"] if intake.dropped else []
            notes += [f"{len(undeleted)} not deleted by SQS"] if undeleted else []
            suffix = f" ({', '.join(notes)})" if notes else ""
            return SensorResult(
                skip_reason=f"no new JOIN_LINK_GENERATION messages{suffix}", cursor=cursor
            )
        record_options(intake.accepted, database.queue().record)
        work = [work_for(a) for a in intake.accepted]
        return SensorResult(
            run_requests=requests_for(context.instance, work, Trigger.EVENT, sharing),
            cursor=cursor,
        )

    return join_link_sqs_sensor
