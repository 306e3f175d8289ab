"""join_link_sqs_sensor with build_sensor_context against moto SQS (no mocks of Dagster)."""

import json
from typing import Any

import pytest
from botocore.exceptions import ClientError
from dagster import DagsterInstance, OpDefinition, SensorResult, SkipReason, build_sensor_context
from sqlalchemy import Engine

from jlg_pipeline.definitions import defs
from jlg_pipeline.domain.status import LinkGenerationStatus
from jlg_pipeline.orchestration.jobs import build_generation_job
from jlg_pipeline.orchestration.resources import DatabaseResource, SqsQueueResource
from jlg_pipeline.orchestration.sensors import build_sqs_sensor
from tests.support.dagster import fake_registrar
from tests.support.factories import create_session, force_state, session_row
from tests.support.fakes import RecordingRegistrar
from tests.support.web import Aws

S = LinkGenerationStatus
SENSOR = build_sqs_sensor("join_link_generation_job")


def _message(data: Any, **overrides: Any) -> str:
    body = {
        "queueType": "EVENT",
        "subType": "JOIN_LINK_GENERATION",
        "timestamp": "2026-12-02T10:00:00.000Z",
        "correlationId": "join-link-1",
        "data": data,
        **overrides,
    }
    return json.dumps(body)


def _tick(aws: Aws) -> SensorResult | SkipReason:
    context = build_sensor_context(
        instance=DagsterInstance.ephemeral(),
        resources={"sqs_queue": SqsQueueResource(queue_url=aws.queue_url)},
    )
    result = SENSOR(context)
    assert isinstance(result, SensorResult | SkipReason)
    return result


def _left(aws: Aws) -> int:
    attributes = aws.sqs.get_queue_attributes(
        QueueUrl=aws.queue_url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]) + int(
        attributes["ApproximateNumberOfMessagesNotVisible"]
    )


@pytest.fixture(autouse=True)
def scheduler_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENABLE_JOIN_LINK_SCHEDULER", "true")


def test_valid_messages_become_run_requests(aws: Aws) -> None:
    aws.sqs.send_message(QueueUrl=aws.queue_url, MessageBody=_message({"programSessionId": 7}))
    aws.sqs.send_message(
        QueueUrl=aws.queue_url,
        MessageBody=_message(
            {"programSessionId": 8, "role": "mentor", "batchSize": 25, "actorUserId": 3},
            correlationId="join-link-8",
        ),
    )

    result = _tick(aws)

    assert isinstance(result, SensorResult)
    requests = sorted(result.run_requests or [], key=lambda r: r.tags["jlg/session"])
    assert [r.tags["jlg/session"] for r in requests] == ["7", "8"]
    assert requests[0].run_config == {
        "ops": {"generate_join_links": {"config": {"programSessionId": 7}}}
    }
    assert requests[1].run_config["ops"]["generate_join_links"]["config"] == {
        "programSessionId": 8,
        "role": "mentor",
        "batchSize": 25,
        "actorUserId": 3,
    }
    assert requests[1].tags["jlg/trigger"] == "event"
    assert requests[1].tags["jlg/correlation_id"] == "join-link-8"
    assert all(r.run_key and r.run_key.startswith("sqs-") for r in requests)
    assert _left(aws) == 0


def test_more_than_one_batch_in_a_tick(aws: Aws) -> None:
    for sid in range(1, 26):
        aws.sqs.send_message(
            QueueUrl=aws.queue_url, MessageBody=_message({"programSessionId": sid})
        )
    result = _tick(aws)
    assert isinstance(result, SensorResult)
    assert len(result.run_requests or []) == 25
    assert _left(aws) == 0


@pytest.mark.parametrize(
    "body",
    [
        "not json",
        "",
        "[]",
        _message({"programSessionId": 1}, queueType="COMMAND"),
        _message({"programSessionId": 1}, subType="OTHER"),
        _message({}),
        _message(None),
        _message({"programSessionId": "7"}),
        _message({"programSessionId": True}),
        _message({"programSessionId": -3}),
        _message({"programSessionId": 0}),
        _message({"programSessionId": 7.5}),
        _message({"programSessionId": 7.0}),
        _message({"programSessionId": 2**63}),
        _message({"programSessionId": 7, "batchSize": "big"}),
        json.dumps({"queueType": "EVENT", "subType": "JOIN_LINK_GENERATION"}),
    ],
)
def test_malformed_messages_start_nothing_and_are_removed(aws: Aws, body: str) -> None:
    aws.sqs.send_message(QueueUrl=aws.queue_url, MessageBody=body or " ")
    result = _tick(aws)
    assert isinstance(result, SkipReason)
    assert "1 invalid dropped" in (result.skip_message or "")
    assert _left(aws) == 0


def test_a_poison_message_does_not_block_the_good_ones(aws: Aws) -> None:
    aws.sqs.send_message(QueueUrl=aws.queue_url, MessageBody="{{{")
    aws.sqs.send_message(QueueUrl=aws.queue_url, MessageBody=_message({"programSessionId": 5}))
    result = _tick(aws)
    assert isinstance(result, SensorResult)
    assert [r.tags["jlg/session"] for r in result.run_requests or []] == ["5"]
    assert _left(aws) == 0


def test_flag_off_skips_without_touching_the_queue(
    aws: Aws, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENABLE_JOIN_LINK_SCHEDULER", "false")
    aws.sqs.send_message(QueueUrl=aws.queue_url, MessageBody=_message({"programSessionId": 5}))
    result = _tick(aws)
    assert isinstance(result, SkipReason)
    assert "ENABLE_JOIN_LINK_SCHEDULER" in (result.skip_message or "")
    assert _left(aws) == 1


def test_sqs_errors_fail_the_tick(aws: Aws) -> None:
    context = build_sensor_context(
        instance=DagsterInstance.ephemeral(),
        resources={"sqs_queue": SqsQueueResource(queue_url=aws.queue_url + "-missing")},
    )
    with pytest.raises(ClientError, match=r"NonExistentQueue|does not exist"):
        SENSOR(context)


def test_duplicates_get_distinct_run_keys_and_generate_once(
    engine: Engine, db_url: str, aws: Aws
) -> None:
    sid = create_session(engine)
    force_state(engine, sid, S.SCHEDULED)
    for _ in range(3):
        aws.sqs.send_message(
            QueueUrl=aws.queue_url, MessageBody=_message({"programSessionId": sid})
        )
    result = _tick(aws)
    assert isinstance(result, SensorResult)
    requests = result.run_requests or []
    assert len({r.run_key for r in requests}) == 3

    fake = RecordingRegistrar()
    job = build_generation_job(retry_delay_seconds=0)
    outcomes: list[str] = []
    for request in requests:
        run = job.execute_in_process(
            run_config=request.run_config,
            tags=request.tags,
            resources={"database": DatabaseResource(url=db_url), "registrar": fake_registrar(fake)},
            instance=DagsterInstance.ephemeral(),
        )
        output = next(
            e
            for e in run.events_for_node("generate_join_links")
            if e.event_type_value == "STEP_OUTPUT"
        )
        outcomes.append(str(output.step_output_data.metadata["outcome"].value))
    assert sorted(outcomes) == ["completed", "skipped", "skipped"]
    assert len(fake.calls) == 1
    assert session_row(engine, sid)["link_generation_status"] == S.COMPLETED.value


def test_defs_load_with_every_pinned_name() -> None:
    repository = defs.get_repository_def()
    assert {j.name for j in repository.get_all_jobs()} >= {
        "join_link_generation_job",
        "join_link_fallback_sweep_job",
        "join_link_backfill_job",
    }
    assert repository.get_sensor_def("join_link_sqs_sensor").job_name == "join_link_generation_job"
    schedule = repository.get_schedule_def("join_link_fallback_schedule")
    assert schedule.cron_schedule == "0 */4 * * *"
    assert schedule.execution_timezone == "UTC"
    assert schedule.job_name == "join_link_fallback_sweep_job"
    generation = repository.get_job("join_link_generation_job")
    assert generation.executor_def.name == "in_process"
    op = generation.graph.node_named("generate_join_links").definition
    assert isinstance(op, OpDefinition)
    assert op.retry_policy is not None
    assert op.retry_policy.max_retries == 5
    sweep = repository.get_job("join_link_fallback_sweep_job")
    assert sweep.graph.node_named("sweep_overdue_sessions") is not None
