"""``join_link_sqs_sensor``: the real-time path's consumer (TRD SqsPollerService + processor).

One tick drains bounded batches, turns each valid message into a RunRequest (run key from
the SQS message id, so a redelivered message never starts a second run) and removes every
message it handled; invalid ones are removed with a warning. SQS errors fail the tick.
"""

from dagster import (
    DefaultSensorStatus,
    RunRequest,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    sensor,
)

from jlg_pipeline.config import scheduler_enabled
from jlg_pipeline.domain.models import Trigger
from jlg_pipeline.orchestration.resources import SqsQueueResource
from jlg_pipeline.orchestration.tags import CORRELATION_TAG, SESSION_TAG, TRIGGER_TAG
from jlg_pipeline.services.event_intake import AcceptedEvent, drain

GENERATE_OP = "generate_join_links"


def run_request_for(event: AcceptedEvent) -> RunRequest:
    data = event.message.data
    config = {
        key: value
        for key, value in {
            "programSessionId": data.programSessionId,
            "role": data.role,
            "batchSize": data.batchSize,
            "actorUserId": data.actorUserId,
        }.items()
        if value is not None
    }
    tags = {SESSION_TAG: str(data.programSessionId), TRIGGER_TAG: Trigger.EVENT.value}
    if event.message.correlationId:
        tags[CORRELATION_TAG] = event.message.correlationId[:200]
    return RunRequest(
        run_key=f"sqs-{event.message_id}",
        run_config={"ops": {GENERATE_OP: {"config": config}}},
        tags=tags,
    )


def build_sqs_sensor(job_name: str, minimum_interval_seconds: int = 15):  # type: ignore[no-untyped-def]
    @sensor(
        name="join_link_sqs_sensor",
        job_name=job_name,
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=DefaultSensorStatus.RUNNING,
        description="Starts a join_link_generation_job run per JOIN_LINK_GENERATION message.",
    )
    def join_link_sqs_sensor(
        context: SensorEvaluationContext, sqs_queue: SqsQueueResource
    ) -> SensorResult | SkipReason:
        if not scheduler_enabled():
            return SkipReason("ENABLE_JOIN_LINK_SCHEDULER is off: the real-time path is disabled")
        intake = drain(sqs_queue.queue())
        for message_id, reason in intake.dropped:
            context.log.warning(f"dropped invalid message {message_id}: {reason}")
        if intake.undeleted:
            context.log.warning(f"SQS did not delete {intake.undeleted}; they will be seen again")
        if not intake.accepted:
            dropped = f" ({len(intake.dropped)} invalid dropped)" if intake.dropped else ""
            return SkipReason(f"no JOIN_LINK_GENERATION messages{dropped}")
        return SensorResult(run_requests=[run_request_for(e) for e in intake.accepted])

    return join_link_sqs_sensor
