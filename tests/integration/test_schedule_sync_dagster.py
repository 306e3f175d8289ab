"""join_link_schedule_sync_sensor and join_link_schedule_sync_job against real PostgreSQL,
moto and a real (ephemeral) Dagster instance: nothing is launched while nothing is due, one
sync run while something is, a near time's generation run once it is due (trigger direct,
launched once), and the job's metadata."""

from datetime import UTC, datetime, timedelta
from typing import Any

from dagster import (
    DagsterInstance,
    DagsterRunStatus,
    SensorResult,
    SkipReason,
    build_sensor_context,
)
from sqlalchemy import Engine, text, update

from jlg_pipeline.adapters.intent_writes import IntentWrites
from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.adapters.schedule_outbox import ScheduleOutbox
from jlg_pipeline.adapters.tables import schedule_outbox
from jlg_pipeline.domain.eventbridge_schedule import ScheduleTarget
from jlg_pipeline.domain.status import LinkGenerationStatus
from jlg_pipeline.domain.validation import SessionId
from jlg_pipeline.orchestration.generation import build_generation_job
from jlg_pipeline.orchestration.schedule_sync import (
    SYNC_JOB,
    build_schedule_sync_sensor,
    join_link_schedule_sync_job,
)
from jlg_pipeline.orchestration.tags import RUN_KEY_TAG, TRIGGER_TAG
from jlg_pipeline.services.program_session import ProgramSessionService
from jlg_pipeline.services.schedule_sync import ScheduleSync
from testkit.factories import create_session, session_row
from tests.support.fakes import FakeScheduler, RecordingRegistrar
from tests.support.resources import database_scheduler_on as database
from tests.support.resources import placeholder_job
from tests.support.web import ROLE_ARN, Aws

S = LinkGenerationStatus
GENERATION = build_generation_job()
SENSOR = build_schedule_sync_sensor([GENERATION])


def _tick(instance: DagsterInstance, db_url: str) -> SensorResult | SkipReason:
    with build_sensor_context(
        instance=instance, resources={"database": database(db_url)}
    ) as context:
        result = SENSOR(context)
    assert isinstance(result, SensorResult | SkipReason)
    return result


def _requests(result: SensorResult | SkipReason) -> list[Any]:
    return list(result.run_requests or []) if isinstance(result, SensorResult) else []


def _sync(engine: Engine, scheduler: Any) -> ScheduleSync:
    target = ScheduleTarget("arn:aws:sqs:us-east-1:123456789012:jlg-events", ROLE_ARN)
    return ScheduleSync(ScheduleOutbox(engine), scheduler, target, enabled=True)


def _arm(engine: Engine, scheduler: Any, sid: int, at: datetime) -> None:
    service = ProgramSessionService(
        ProgramSessionRepository(engine), IntentWrites(engine), _sync(engine, scheduler)
    )
    service.set_link_generation(SessionId(sid), at, 7)


def _make_due(engine: Engine) -> None:
    with engine.begin() as conn:
        conn.execute(update(schedule_outbox).values(next_try_at=text("now()")))


def test_nothing_pending_launches_nothing(engine: Engine, db_url: str) -> None:
    create_session(engine)
    result = _tick(DagsterInstance.ephemeral(), db_url)
    assert isinstance(result, SkipReason)
    assert "no schedule change due" in (result.skip_message or "")


def test_a_pending_change_launches_one_sync_run_at_a_time(engine: Engine, db_url: str) -> None:
    sid = create_session(engine)
    failing = FakeScheduler(error=ConnectionError("AWS down"))
    _arm(engine, failing, sid, datetime.now(UTC) + timedelta(days=1))
    instance = DagsterInstance.ephemeral()
    assert _requests(_tick(instance, db_url)) == [], "its next try is not due yet"
    _make_due(engine)
    [request] = _requests(_tick(instance, db_url))
    assert request.job_name == SYNC_JOB
    assert request.tags[TRIGGER_TAG] == "sensor"
    instance.create_run_for_job(
        join_link_schedule_sync_job, status=DagsterRunStatus.STARTED, tags=request.tags
    )
    assert _requests(_tick(instance, db_url)) == [], "one sync run is already on its way"


def test_a_near_time_is_launched_once_when_due(engine: Engine, db_url: str) -> None:
    sid = create_session(engine)
    _arm(engine, FakeScheduler(), sid, datetime.now(UTC) + timedelta(seconds=40))
    instance = DagsterInstance.ephemeral()
    assert _requests(_tick(instance, db_url)) == [], "not due yet"
    _make_due(engine)
    [request] = _requests(_tick(instance, db_url))
    assert request.job_name == "join_link_generation_job"
    assert request.tags[TRIGGER_TAG] == "direct"
    assert request.tags["jlg/session"] == str(sid)
    assert request.run_key.startswith(f"direct-{sid}-")
    assert request.run_config == {
        "ops": {"generate_join_links": {"config": {"programSessionId": sid, "actorUserId": 7}}}
    }, "the admin who set the time reaches bulkRegister, as on the event path"
    [again] = _requests(_tick(instance, db_url))
    assert again.run_key == request.run_key, "same run key: Dagster launches it once"
    instance.create_run_for_job(
        placeholder_job, tags={**request.tags, RUN_KEY_TAG: request.run_key}
    )
    assert _requests(_tick(instance, db_url)) == []
    assert ScheduleOutbox(engine).any_rows() is False, "the launch is done"


def test_the_sync_job_applies_and_reports(engine: Engine, db_url: str, aws: Aws) -> None:
    ok, failing, near = (create_session(engine) for _ in range(3))
    down = FakeScheduler(error=ConnectionError("AWS down"))
    _arm(engine, down, ok, datetime.now(UTC) + timedelta(days=1))
    _arm(engine, down, failing, datetime.now(UTC) + timedelta(days=2))
    _arm(engine, down, near, datetime.now(UTC) + timedelta(minutes=10))
    with engine.begin() as conn:
        conn.execute(
            update(schedule_outbox)
            .where(schedule_outbox.c.program_session_id == near)
            .values(fire_at=text("now() + interval '30 seconds'"))
        )

    class OneFails(FakeScheduler):
        def upsert(self, request: dict[str, Any]) -> Any:
            if request["Name"] == f"join-link-{failing}":
                raise ConnectionError("still down for this one")
            return super().upsert(request)

    scheduler = OneFails()
    result = join_link_schedule_sync_job.execute_in_process(
        resources={
            "database": database(db_url),
            "schedule_sync": _sync(engine, scheduler),
        },
        instance=DagsterInstance.ephemeral(),
    )
    assert result.success
    [materialization] = [e for e in result.all_node_events if e.event_type_value == "STEP_OUTPUT"]
    metadata = {k: v.value for k, v in materialization.event_specific_data.metadata.items()}  # type: ignore[union-attr]
    assert metadata == {"applied": 1, "failed": 1, "direct": 1, "left": 1, "dropped": 0}
    assert set(scheduler.schedules) == {f"join-link-{ok}"}
    assert session_row(engine, near)["link_generation_status"] == "SCHEDULED"


def test_a_direct_run_generates(engine: Engine, db_url: str) -> None:
    sid = create_session(engine)
    _arm(engine, FakeScheduler(), sid, datetime.now(UTC) + timedelta(seconds=2))
    _make_due(engine)
    [request] = _requests(_tick(DagsterInstance.ephemeral(), db_url))
    registrar = RecordingRegistrar()
    result = GENERATION.execute_in_process(
        run_config=request.run_config,
        resources={"database": database(db_url), "registrar": registrar},
        instance=DagsterInstance.ephemeral(),
        tags=request.tags,
    )
    assert result.success
    assert session_row(engine, sid)["link_generation_status"] == "COMPLETED"
    assert len(registrar.calls) == 1
