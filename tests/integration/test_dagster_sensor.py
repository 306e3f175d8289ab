"""join_link_sqs_sensor with build_sensor_context against moto SQS and a real (ephemeral)
Dagster instance: runs are asked for, messages deleted only once their runs exist."""

import json
import time
from typing import Any

import pytest
from botocore.exceptions import ClientError
from dagster import (
    DagsterInstance,
    OpDefinition,
    SensorResult,
    SkipReason,
    build_sensor_context,
)
from sqlalchemy import Engine

from jlg_pipeline.definitions import defs
from jlg_pipeline.domain.run_sharing import ONE_RUN_EACH
from jlg_pipeline.domain.status import LinkGenerationStatus
from jlg_pipeline.orchestration.generation import build_generation_job
from jlg_pipeline.orchestration.sqs_events import build_sqs_sensor
from jlg_pipeline.orchestration.tags import RUN_KEY_TAG
from testkit.factories import create_session, force_state, session_row
from tests.support.fakes import RecordingRegistrar
from tests.support.resources import database_scheduler_on as database
from tests.support.resources import placeholder_job, sqs_queue
from tests.support.web import Aws

S = LinkGenerationStatus
SENSOR = build_sqs_sensor(5, ONE_RUN_EACH)
"""The design card's shape, a run per message, whatever the count (test_bursts.py shares)."""


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


class Ticks:
    """Evaluates the sensor as the daemon does: one instance, the cursor carried over."""

    def __init__(
        self, aws: Aws, db_url: str, visibility_timeout_seconds: int = 120, scheduler: str = "true"
    ) -> None:
        self.instance = DagsterInstance.ephemeral()
        self.cursor: str | None = None
        self.resources = {
            "sqs_queue": sqs_queue(aws.queue_url, visibility_timeout_seconds),
            "database": database(db_url, ENABLE_JOIN_LINK_SCHEDULER=scheduler),
        }

    def tick(self, *, lost: bool = False) -> SensorResult | SkipReason:
        """One evaluation; ``lost`` throws its result away (a timeout, a dead code server)."""
        with build_sensor_context(
            instance=self.instance, cursor=self.cursor, resources=self.resources
        ) as context:
            result: SensorResult | SkipReason = SENSOR(context)
        assert isinstance(result, SensorResult | SkipReason)
        if not lost and isinstance(result, SensorResult):
            self.cursor = result.cursor
        return result

    def launch(self, result: SensorResult | SkipReason) -> None:
        """What the daemon does with the run requests: create the runs, run key tagged."""
        assert isinstance(result, SensorResult)
        for request in result.run_requests or []:
            self.instance.create_run_for_job(
                placeholder_job, tags={**request.tags, RUN_KEY_TAG: request.run_key or ""}
            )

    def runs(self) -> int:
        return len(self.instance.get_run_ids())


def _tick(aws: Aws, db_url: str) -> SensorResult | SkipReason:
    return Ticks(aws, db_url).tick()


def _skipped(result: SensorResult | SkipReason) -> str:
    reason = result.skip_reason if isinstance(result, SensorResult) else result
    assert isinstance(reason, SkipReason), result
    assert not isinstance(result, SensorResult) or not result.run_requests
    return reason.skip_message or ""


def test_valid_messages_become_run_requests(aws: Aws, db_url: str) -> None:
    aws.sqs.send_message(QueueUrl=aws.queue_url, MessageBody=_message({"programSessionId": 7}))
    aws.sqs.send_message(
        QueueUrl=aws.queue_url,
        MessageBody=_message(
            {"programSessionId": 8, "role": "mentor", "batchSize": 25, "actorUserId": 3},
            correlationId="join-link-8",
        ),
    )

    ticks = Ticks(aws, db_url)
    result = ticks.tick()

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
    assert aws.queue_depth() == 2, "kept until their runs exist"
    ticks.launch(result)
    assert _skipped(ticks.tick()) == "no new JOIN_LINK_GENERATION messages (2 acknowledged)"
    assert aws.queue_depth() == 0


def test_more_than_one_batch_in_a_tick(aws: Aws, db_url: str) -> None:
    for sid in range(1, 26):
        aws.sqs.send_message(
            QueueUrl=aws.queue_url, MessageBody=_message({"programSessionId": sid})
        )
    ticks = Ticks(aws, db_url)
    result = ticks.tick()
    assert isinstance(result, SensorResult)
    assert len(result.run_requests or []) == 25
    ticks.launch(result)
    ticks.tick()
    assert aws.queue_depth() == 0


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
def test_malformed_messages_start_nothing_and_are_removed(aws: Aws, db_url: str, body: str) -> None:
    aws.sqs.send_message(QueueUrl=aws.queue_url, MessageBody=body or " ")
    assert "1 invalid dropped" in _skipped(_tick(aws, db_url))
    assert aws.queue_depth() == 0


def test_a_poison_message_does_not_block_the_good_ones(aws: Aws, db_url: str) -> None:
    aws.sqs.send_message(QueueUrl=aws.queue_url, MessageBody="{{{")
    aws.sqs.send_message(QueueUrl=aws.queue_url, MessageBody=_message({"programSessionId": 5}))
    result = _tick(aws, db_url)
    assert isinstance(result, SensorResult)
    assert [r.tags["jlg/session"] for r in result.run_requests or []] == ["5"]
    assert aws.queue_depth() == 1, "the poison one is gone; the good one waits for its run"


def test_flag_off_skips_without_touching_the_queue(aws: Aws, db_url: str) -> None:
    aws.sqs.send_message(QueueUrl=aws.queue_url, MessageBody=_message({"programSessionId": 5}))
    result = Ticks(aws, db_url, scheduler="false").tick()
    assert isinstance(result, SkipReason)
    assert "ENABLE_JOIN_LINK_SCHEDULER" in (result.skip_message or "")
    assert aws.queue_depth() == 1


def test_a_lost_tick_loses_nothing_and_a_redelivery_starts_no_second_run(
    aws: Aws, db_url: str
) -> None:
    ids = [
        aws.sqs.send_message(
            QueueUrl=aws.queue_url, MessageBody=_message({"programSessionId": sid})
        )["MessageId"]
        for sid in range(1, 16)
    ]
    ticks = Ticks(aws, db_url, visibility_timeout_seconds=1)

    lost = ticks.tick(lost=True)
    assert isinstance(lost, SensorResult)
    assert len(lost.run_requests or []) == 15
    assert aws.queue_depth() == 15, "a thrown-away evaluation deletes nothing valid"

    time.sleep(1.2)  # the visibility timeout passes: every message comes back
    again = ticks.tick()
    assert isinstance(again, SensorResult)
    assert sorted(r.run_key or "" for r in again.run_requests or []) == sorted(
        f"sqs-{i}" for i in ids
    )
    ticks.launch(again)

    # The cursor is lost too (say the acknowledging tick failed): the messages come back
    # once more, their runs exist, and they are deleted without asking for a second run.
    ticks.cursor = None
    time.sleep(1.2)
    assert _skipped(ticks.tick()) == "no new JOIN_LINK_GENERATION messages (15 acknowledged)"
    assert aws.queue_depth() == 0
    assert ticks.runs() == 15


def test_sqs_errors_fail_the_tick(aws: Aws, db_url: str) -> None:
    with (
        build_sensor_context(
            instance=DagsterInstance.ephemeral(),
            resources={
                "sqs_queue": sqs_queue(aws.queue_url + "-missing"),
                "database": database(db_url),
            },
        ) as context,
        pytest.raises(ClientError, match=r"NonExistentQueue|does not exist"),
    ):
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
    result = _tick(aws, db_url)
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
            resources={"database": database(db_url), "registrar": fake},
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
        "join_link_schedule_sync_job",
    }
    assert repository.get_sensor_def("join_link_schedule_sync_sensor") is not None
    assert {j.name for j in repository.get_sensor_def("join_link_sqs_sensor").jobs} == {
        "join_link_generation_job",
        "join_link_shared_generation_job",
    }
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
