"""``join_link_sqs_sensor``: the real-time path's consumer (TRD SqsPollerService + processor).

Each tick acknowledges (deletes) the messages whose runs now exist, then drains bounded
batches and asks for one run per new valid message, run key from the SQS message id. The
messages a tick asked runs for stay on the queue, invisible, and are listed in the sensor's
cursor; Dagster stores that cursor together with the run requests, so the next tick finds
their runs in the instance and deletes them. A tick that fails or is lost deletes nothing
valid (docs/design.md "Delivery guarantees"). SQS errors fail the tick.

With ``JLG_MAX_SESSIONS_PER_RUN`` above 1 a tick's valid messages share
``join_link_shared_generation_job`` runs of up to that many sessions, each run tagged with
the messages it covers (``run_requests``), and a tick drains enough batches to fill one.
"""

import json
import math

from dagster import (
    DagsterInstance,
    DefaultSensorStatus,
    ResourceParam,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    sensor,
)

from jlg_pipeline.adapters.sqs_queue import QueueMessage
from jlg_pipeline.config import Flags
from jlg_pipeline.domain.models import Trigger
from jlg_pipeline.orchestration.resources import QueueIntake
from jlg_pipeline.orchestration.run_requests import (
    GENERATION_JOB,
    SHARED_GENERATION_JOB,
    Work,
    covered_in,
    run_requests_for,
)
from jlg_pipeline.services.event_intake import (
    DEFAULT_MAX_BATCHES,
    AcceptedEvent,
    RunExists,
    acknowledge,
    drain,
)

MAX_BATCHES_PER_TICK = 50
"""500 messages: well inside a tick's 60 s (each costs one run-tag lookup)."""


def run_key_for(message_id: str) -> str:
    return f"sqs-{message_id}"


def work_for(accepted: AcceptedEvent) -> Work:
    return Work(
        run_key_for(accepted.message_id),
        accepted.request,
        accepted.event.correlationId,
    )


def run_exists_in(instance: DagsterInstance, *, shared: bool = False) -> RunExists:
    """Looks a message's run up: by its run key, or by the tag of the shared run covering it."""
    exists = covered_in(instance, shared=shared)
    return lambda message_id: exists(run_key_for(message_id))


def batches_per_tick(max_sessions_per_run: int) -> int:
    """Receive batches (of 10) a tick takes: enough to fill one shared run."""
    return min(max(DEFAULT_MAX_BATCHES, math.ceil(max_sessions_per_run / 10)), MAX_BATCHES_PER_TICK)


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
    minimum_interval_seconds: int, max_sessions_per_run: int = 1
):
    shared = max_sessions_per_run > 1
    described = (
        f"Starts join_link_shared_generation_job runs of up to {max_sessions_per_run} "
        "sessions for each tick's JOIN_LINK_GENERATION messages"
        if shared
        else "Starts a join_link_generation_job run per JOIN_LINK_GENERATION message"
    )

    @sensor(
        name="join_link_sqs_sensor",
        job_name=SHARED_GENERATION_JOB if shared else GENERATION_JOB,
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=DefaultSensorStatus.RUNNING,
        description=f"{described}; a message is deleted once its run exists.",
    )
    def join_link_sqs_sensor(
        context: SensorEvaluationContext, sqs_queue: ResourceParam[QueueIntake]
    ) -> SensorResult | SkipReason:
        if not Flags.read().scheduler_enabled:
            return SkipReason("ENABLE_JOIN_LINK_SCHEDULER is off: the real-time path is disabled")
        queue = sqs_queue.queue()
        run_exists = run_exists_in(context.instance, shared=shared)
        acknowledged = acknowledge(queue, decode_pending(context.cursor), run_exists)
        intake = drain(
            queue,
            run_exists,
            max_batches=batches_per_tick(max_sessions_per_run),
            wait_seconds=sqs_queue.wait_seconds,
        )
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
        return SensorResult(
            run_requests=run_requests_for(
                [work_for(a) for a in intake.accepted], Trigger.EVENT, max_sessions_per_run
            ),
            cursor=cursor,
        )

    return join_link_sqs_sensor
