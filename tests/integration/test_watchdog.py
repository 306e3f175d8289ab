"""Sessions nobody took, on real PostgreSQL and a real Dagster instance: near times go direct
whatever a sync run does, the watchdog claims what no live attempt holds (and is off with the
scheduler), a shared run leaves a retryable failure to it, every run the code location asks
for is bounded, and a resync writes only valid messages and launches a near time on time."""

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from dagster import (
    DagsterInstance,
    DagsterRunStatus,
    RunRequest,
    SensorResult,
    SkipReason,
    build_sensor_context,
)
from sqlalchemy import Engine, select, text, update

from devstack.online_session import online_session_service
from jlg_pipeline.adapters.intent_writes import IntentWrites
from jlg_pipeline.adapters.queue import SessionQueue
from jlg_pipeline.adapters.registrars.http import HttpRegistrar
from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.adapters.schedule_outbox import ScheduleOutbox
from jlg_pipeline.adapters.service_view import ServiceView
from jlg_pipeline.adapters.tables import program_session, schedule_outbox
from jlg_pipeline.definitions import build_definitions
from jlg_pipeline.domain.attempts import Trigger
from jlg_pipeline.domain.constants import TimingWindows
from jlg_pipeline.domain.generation import BulkRegisterRequest, GenerationResult
from jlg_pipeline.domain.messages import parse_message
from jlg_pipeline.domain.service_view import BREAKER_FAILURES, Health, Verdict
from jlg_pipeline.domain.status import LinkGenerationStatus
from jlg_pipeline.orchestration.generation import build_generation_job, build_shared_generation_job
from jlg_pipeline.orchestration.schedule_sync import (
    build_schedule_sync_sensor,
    join_link_schedule_sync_job,
)
from jlg_pipeline.orchestration.tags import MAX_RUNTIME_TAG
from jlg_pipeline.orchestration.watchdog import build_watchdog_sensor
from jlg_pipeline.services.generation import generate_for_session
from jlg_pipeline.services.program_session import ProgramSessionService
from testkit.factories import (
    arm_cohort,
    create_session,
    end_retry_wait,
    force_state,
    session_row,
)
from tests.integration.test_schedule_sync import _schedule, _sync
from tests.support.fakes import FakeScheduler, RecordingRegistrar
from tests.support.resources import database_scheduler_on as database
from tests.support.web import (
    ROLE_ARN,
    Aws,
)

S = LinkGenerationStatus
GENERATION = build_generation_job()
SHARED = build_shared_generation_job(retry_delay_seconds=0.01)
SYNC_SENSOR = build_schedule_sync_sensor([GENERATION])
WATCHDOG = build_watchdog_sensor(SHARED)


def _sensor_tick(
    sensor: Any,
    instance: DagsterInstance,
    db_url: str,
    cursor: str | None = None,
    grace_ms: int = 1000,
    scheduler: str = "true",
) -> Any:
    resources = {
        "database": database(
            db_url,
            JLG_TEST_WATCHDOG_GRACE_MS=str(grace_ms),
            ENABLE_JOIN_LINK_SCHEDULER=scheduler,
        )
    }
    with build_sensor_context(instance=instance, resources=resources, cursor=cursor) as context:
        return sensor(context)


def _requests(result: SensorResult | SkipReason) -> list[RunRequest]:
    return list(result.run_requests or []) if isinstance(result, SensorResult) else []


def _worker(result: SensorResult | SkipReason) -> RunRequest | None:
    """The worker a watchdog tick launched: a shared run listing nothing (it drains the
    queue), on the recovery lane; None when it launched none."""
    requests = _requests(result)
    if not requests:
        return None
    [request] = requests
    assert request.job_name == "join_link_shared_generation_job"
    assert request.run_config["ops"]["generate_join_links_shared"]["config"]["sessions"] == []
    assert request.tags["jlg/trigger"] == "watchdog"
    assert request.tags["jlg/lane"] == "recovery"
    assert "jlg/session" not in request.tags, "a zombie holding a session's slot cannot block it"
    assert (request.run_key or "").startswith("worker-")
    return request


def _unattended(engine: Engine) -> bool:
    return SessionQueue(engine, TimingWindows(watchdog_grace_ms=1000)).attendance(60).unattended


def test_a_dead_sync_run_does_not_keep_a_near_time_from_its_run(
    engine: Engine, db_url: str
) -> None:
    """A sync run STARTED with no process behind it (its host died): the sensor still decides
    the near time direct in the database and launches it when due, and says what a new sync
    waits for."""
    far, near = create_session(engine), create_session(engine)
    down = FakeScheduler(error=ConnectionError("AWS down"))
    service = ProgramSessionService(
        ProgramSessionRepository(engine), IntentWrites(engine), _sync_for(engine, down)
    )
    service.set_link_generation(far, datetime.now(UTC) + timedelta(days=1), 7)
    service.set_link_generation(near, datetime.now(UTC) + timedelta(minutes=3), 7)
    instance = DagsterInstance.ephemeral()
    zombie = instance.create_run_for_job(
        join_link_schedule_sync_job, status=DagsterRunStatus.STARTED
    )
    with engine.begin() as conn:
        conn.execute(update(schedule_outbox).values(next_try_at=text("now()")))
        # Time passes: the near session is now 1 s from its time; nobody applied it.
        conn.execute(
            update(schedule_outbox)
            .where(schedule_outbox.c.program_session_id == near)
            .values(fire_at=text("now() + interval '1 second'"))
        )
        conn.execute(
            update(program_session)
            .where(program_session.c.id == near)
            .values(link_generation_at=text("now() + interval '1 second'"))
        )

    first = _sensor_tick(SYNC_SENSOR, instance, db_url)
    assert isinstance(first, SkipReason)
    assert zombie.run_id in (first.skip_message or "")
    assert "dagster/max_runtime" in (first.skip_message or "")
    time.sleep(1.2)
    [request] = _requests(_sensor_tick(SYNC_SENSOR, instance, db_url))
    assert request.job_name == "join_link_generation_job"
    assert request.tags["jlg/trigger"] == "direct"
    assert request.run_config["ops"]["generate_join_links"]["config"] == {
        "programSessionId": near,
        "actorUserId": 7,
    }
    assert down.calls == [("upsert", f"join-link-{far}"), ("upsert", f"join-link-{near}")], (
        "no AWS call decided it"
    )
    # The direct run's bulkRegister names the admin, as the event path's message does.
    with online_session_service() as online:
        registrar = HttpRegistrar(online.url, "token")
        outcome = GENERATION.execute_in_process(
            run_config=request.run_config,
            tags=request.tags,
            resources={"database": database(db_url), "registrar": registrar},
        )
        registrar.close()
    assert outcome.success
    [sent] = online.received
    assert sent["json"] == {"sessionId": near, "role": None, "batchSize": None, "actorUserId": 7}


def _sync_for(engine: Engine, scheduler: Any) -> Any:
    from jlg_pipeline.domain.eventbridge_schedule import ScheduleTarget
    from jlg_pipeline.services.schedule_sync import ScheduleSync

    target = ScheduleTarget("arn:aws:sqs:us-east-1:123456789012:jlg-events", ROLE_ARN)
    return ScheduleSync(ScheduleOutbox(engine), scheduler, target, enabled=True)


def test_the_watchdog_launches_a_worker_when_a_session_waits_unattended_and_none_is_alive(
    engine: Engine, db_url: str
) -> None:
    """No event at all: 75 s (here 10 s) past its time a session is unattended, and with no
    worker alive the watchdog launches one, reading only our tables; the worker drains what
    waits (the session due a moment ago too), each through the gate (trigger watchdog, the
    admin as actor). A session a live attempt holds and a FAILED one left to the sweep are
    left alone; a second tick asks under the same run key (Dagster drops the repeat)."""
    lost, live, failed, early, stale = (create_session(engine) for _ in range(5))
    service = ProgramSessionService(
        ProgramSessionRepository(engine), IntentWrites(engine), _sync_for(engine, FakeScheduler())
    )
    service.set_link_generation(lost, datetime.now(UTC) + timedelta(days=1), 42)
    force_state(engine, lost, S.SCHEDULED, at_offset=timedelta(seconds=-30))
    force_state(engine, live, S.IN_PROGRESS, at_offset=timedelta(seconds=-30))
    force_state(engine, failed, S.FAILED, at_offset=timedelta(seconds=-30))
    # Well inside the grace: with 1 s, a loaded machine's tick came after it had passed.
    force_state(engine, early, S.SCHEDULED, at_offset=timedelta(seconds=-0.2))
    force_state(
        engine,
        stale,
        S.IN_PROGRESS,
        at_offset=timedelta(hours=-1),
        updated_offset=timedelta(minutes=-31),
    )
    instance = DagsterInstance.ephemeral()

    result = _sensor_tick(WATCHDOG, instance, db_url, grace_ms=10_000)

    request = _worker(result)
    assert request is not None
    again = _worker(_sensor_tick(WATCHDOG, instance, db_url, grace_ms=10_000))
    assert again is not None
    assert again.run_key == request.run_key, "one worker a launch slot"

    registrar = RecordingRegistrar()
    outcome = SHARED.execute_in_process(
        run_config=request.run_config,
        tags=request.tags,
        resources={"database": database(db_url), "registrar": registrar},
    )

    assert outcome.success
    assert {c.session_id: c.actor_user_id for c in registrar.calls} == {
        lost: 42,
        stale: None,
        early: None,
    }
    repository = ProgramSessionRepository(engine)
    for sid in (lost, stale, early):
        assert session_row(engine, sid)["link_generation_status"] == "COMPLETED"
        [newest, *_] = repository.attempts(sid)
        # Run in-process, no tick of Dagster's behind it: a hand launch, whatever its tags
        # say (the daemon's own watchdog runs: tests/e2e).
        assert (newest.trigger, newest.run_id) == ("manual", outcome.run_id)
    for sid, status in ((live, "IN_PROGRESS"), (failed, "FAILED")):
        assert session_row(engine, sid)["link_generation_status"] == status
    assert isinstance(_sensor_tick(WATCHDOG, instance, db_url, grace_ms=10_000), SkipReason)
    with engine.connect() as conn:
        workers = conn.execute(text("SELECT count(*) FROM jlg_worker")).scalar_one()
    assert workers == 0, "the worker said it ended"


def test_the_watchdog_leaves_the_queue_to_a_live_worker_and_not_to_a_dead_one(
    engine: Engine, db_url: str
) -> None:
    """A cohort draining through a worker when the grace passes is not given a second one: a
    worker that beat within a call's bound is alive; one silent past it (its process gone) is
    not, and a new one is launched. Nothing of Dagster's is read: the instance has no runs."""
    ids, _ = arm_cohort(engine, 3, lead_s=-30)
    queue = SessionQueue(engine)
    queue.beat("run-alive")
    instance = DagsterInstance.ephemeral()

    alive = _sensor_tick(WATCHDOG, instance, db_url, grace_ms=10_000)
    assert _worker(alive) is None
    assert "1 live worker(s)" in str(alive.skip_message)
    with engine.begin() as conn:
        conn.execute(text("UPDATE jlg_worker SET beat_at = now() - interval '5 minutes'"))
    assert _worker(_sensor_tick(WATCHDOG, instance, db_url, grace_ms=10_000)) is not None
    assert [s for s in ids if session_row(engine, s)["link_generation_status"] == "SCHEDULED"]


def test_the_skip_reason_names_the_oldest_waiting_session_and_its_hold(
    engine: Engine, db_url: str
) -> None:
    """An operator reading the watchdog's ticks in the UI sees which session waits longest and
    what holds it (``services/why.py``), in one line: here its programme's turn, behind two
    programmes served less recently, while a live worker drains them."""
    repository = ProgramSessionRepository(engine)
    ids, _ = arm_cohort(engine, 1, lead_s=-40)
    SessionQueue(engine).refresh()
    assert (claim := repository.claim_next(Trigger.WATCHDOG, "run-w")) is not None
    assert claim.session_id == ids[0]
    later = [create_session(engine, program_id=p) for p in (1, 2, 3)]
    for seconds, sid in zip((-30, -20, -10), later, strict=True):
        force_state(engine, sid, S.SCHEDULED, at_offset=timedelta(seconds=seconds))
    SessionQueue(engine).beat("run-alive")
    instance = DagsterInstance.ephemeral()

    skipped = _sensor_tick(WATCHDOG, instance, db_url, grace_ms=10_000)

    assert isinstance(skipped, SkipReason)
    assert f"the oldest waiting, session {later[0]} (SCHEDULED): held by programme turn" in str(
        skipped.skip_message
    ), skipped.skip_message
    assert "next: the queue now, after the 2 programme(s) ahead" in str(skipped.skip_message)


@pytest.mark.parametrize("waiting", ["failed", "stale"])
def test_a_retry_due_or_a_stale_claim_is_unattended_at_once(
    engine: Engine, db_url: str, waiting: str
) -> None:
    """No event comes for a retry or a dead attempt: whatever the grace, such a session is
    unattended as soon as it waits; one still in its backoff, or held by a live attempt, is
    not."""
    (sid,), _ = arm_cohort(engine, 1, lead_s=-30)
    force_state(
        engine,
        sid,
        S.FAILED if waiting == "failed" else S.IN_PROGRESS,
        at_offset=timedelta(seconds=-30),
    )
    instance = DagsterInstance.ephemeral()
    with engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE hdb_program_session"
                " SET link_generation_retry_at = now() + interval '1 minute'"
            )
        )
    assert _worker(_sensor_tick(WATCHDOG, instance, db_url, grace_ms=600_000)) is None
    with engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE hdb_program_session"
                " SET link_generation_retry_at = now() - interval '1 second',"
                " updated_at = now() - interval '31 minutes'"
            )
        )
    assert _worker(_sensor_tick(WATCHDOG, instance, db_url, grace_ms=600_000)) is not None


def test_the_switch_is_the_one_the_code_location_loaded_with(
    engine: Engine, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Configure once: the switches come from Settings, read when the code location loads;
    the environment seen at a tick changes nothing (before, every tick read it again)."""
    monkeypatch.setenv("ENABLE_JOIN_LINK_SCHEDULER", "false")
    sid = create_session(engine)
    force_state(engine, sid, S.SCHEDULED, at_offset=timedelta(minutes=-5))
    assert _worker(_sensor_tick(WATCHDOG, DagsterInstance.ephemeral(), db_url)) is not None


def test_the_watchdog_is_off_with_the_scheduler(engine: Engine, db_url: str) -> None:
    sid = create_session(engine)
    force_state(engine, sid, S.SCHEDULED, at_offset=timedelta(minutes=-5))
    result = _sensor_tick(WATCHDOG, DagsterInstance.ephemeral(), db_url, scheduler="false")
    assert isinstance(result, SkipReason)


def test_a_shared_run_leaves_a_retryable_failure_to_the_watchdog_and_finishes_the_rest(
    engine: Engine, db_url: str
) -> None:
    """One session's retryable failure neither fails nor holds the others' run: it is left
    FAILED with its wait (the run does not sleep on it), and the watchdog's next run for it
    completes it; the others are called once."""
    from jlg_pipeline.domain.errors import RegistrarUnavailable
    from jlg_pipeline.domain.generation import BulkRegisterResult

    ok, flaky = create_session(engine), create_session(engine)
    for sid in (ok, flaky):
        force_state(engine, sid, S.SCHEDULED, at_offset=timedelta(minutes=-2))

    class FailsOnce(RecordingRegistrar):
        def bulk_register(self, request: BulkRegisterRequest) -> BulkRegisterResult:
            if request.session_id == flaky and not any(c.session_id == flaky for c in self.calls):
                self.calls.append(request)
                raise RegistrarUnavailable("bulkRegister answered 503")
            return super().bulk_register(request)

    registrar = FailsOnce()
    config = {"sessions": [{"programSessionId": ok}, {"programSessionId": flaky}]}

    def shared_run() -> Any:
        return SHARED.execute_in_process(
            run_config={"ops": {"generate_join_links_shared": {"config": config}}},
            tags={"jlg/trigger": "watchdog"},
            resources={"database": database(db_url), "registrar": registrar},
            raise_on_error=False,
        )

    started = time.monotonic()
    failed_run = shared_run()
    assert not failed_run.success, "a session is left failed"
    assert time.monotonic() - started < 10, "no sleeping on the failed one"
    # Its story, as the Runs list tells it: which session, and when it is tried next.
    [failure] = [e for e in failed_run.all_events if e.event_type_value == "STEP_FAILURE"]
    first_line = failure.step_failure_data.error.message.splitlines()[0]
    assert f"1 session(s) failed ({flaky}); the first is tried again from the queue at " in (
        first_line
    )
    tags = failed_run.dagster_run.tags
    assert tags.get("jlg/next", "").startswith("queue at "), tags
    assert session_row(engine, ok)["link_generation_status"] == "COMPLETED"
    assert session_row(engine, flaky)["link_generation_status"] == "FAILED"
    assert not _unattended(engine), "in its backoff"
    end_retry_wait(engine, flaky)
    assert _unattended(engine)
    assert shared_run().success
    assert [c.session_id for c in registrar.calls].count(ok) == 1, "never twice for the others"
    assert [c.session_id for c in registrar.calls].count(flaky) == 2
    for sid in (ok, flaky):
        assert session_row(engine, sid)["link_generation_status"] == "COMPLETED"
    outcomes = [a.outcome.value for a in ProgramSessionRepository(engine).attempts(flaky)]
    assert outcomes == ["COMPLETED", "FAILED"]


def test_every_run_the_code_location_asks_for_is_bounded() -> None:
    """Each job's tags carry dagster/max_runtime within the pinned limits (15 min for the
    sync, 3 h for any other), so every run of it does, sensor, schedule or hand launch."""
    defs = build_definitions(
        {"JLG_DATABASE_URL": "postgresql://u@127.0.0.1/db", "JLG_SQS_QUEUE_URL": "http://q"}
    )
    repository = defs.get_repository_def()
    limits = {"join_link_schedule_sync_job": 15 * 60}
    jobs = repository.get_all_jobs()
    assert {j.name for j in jobs} >= {
        "join_link_generation_job",
        "join_link_shared_generation_job",
        "join_link_fallback_sweep_job",
        "join_link_backfill_job",
        "join_link_schedule_sync_job",
        "join_link_dagster_prune_job",
    }
    for job_def in jobs:
        if job_def.name.startswith("__"):
            continue
        bound = float(job_def.tags[MAX_RUNTIME_TAG])
        assert 0 < bound <= limits.get(job_def.name, 3 * 3600), job_def.name
        assert job_def.tags.get("jlg/lane"), job_def.name
    for sensor_def in repository.sensor_defs:
        for target in sensor_def.targets:
            assert MAX_RUNTIME_TAG in repository.get_job(target.job_name).tags
    for schedule_def in repository.schedule_defs:
        assert MAX_RUNTIME_TAG in repository.get_job(schedule_def.job_name).tags


def test_resync_names_the_admin_never_a_host_write_of_updated_by(engine: Engine, aws: Aws) -> None:
    armed, zero, huge, direct = (create_session(engine) for _ in range(4))
    sync = _sync(engine, aws)
    service = ProgramSessionService(ProgramSessionRepository(engine), IntentWrites(engine), sync)
    for sid in (armed, zero, huge):
        service.set_link_generation(sid, datetime.now(UTC) + timedelta(days=1), 42)
    service.set_link_generation(direct, datetime.now(UTC) + timedelta(seconds=50), 42)
    assert _schedule(aws, direct) is None
    with engine.begin() as conn:
        conn.execute(text("ALTER TABLE hdb_program_session ALTER COLUMN updated_by TYPE bigint"))
        # A host application writes updated_by itself: 0, or a bigint beyond any user id.
        for sid, written in ((zero, 0), (huge, 2**40)):
            conn.execute(
                text("UPDATE hdb_program_session SET updated_by = :by WHERE id = :id"),
                {"by": written, "id": sid},
            )
    never_armed_by_us = create_session(engine)
    force_state(engine, never_armed_by_us, S.SCHEDULED, at_offset=timedelta(days=2))

    assert sync.resync() == 4, "the direct change stays direct"
    with engine.connect() as conn:
        [direct_row] = conn.execute(
            select(schedule_outbox).where(schedule_outbox.c.program_session_id == direct)
        ).all()
    assert direct_row.direct is True
    sync.sync()

    for sid, actor in ((armed, 42), (zero, 42), (huge, 42), (never_armed_by_us, None)):
        schedule = _schedule(aws, sid)
        assert schedule is not None
        message = parse_message(schedule["Target"]["Input"])
        assert message.data.actorUserId == actor


def test_resync_of_thousands_still_launches_a_near_one_on_time(engine: Engine, db_url: str) -> None:
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO hdb_program_session (program_id, link_generation_at, "
                "link_generation_status) SELECT 1, now() + interval '1 day' + g * interval '1 s', "
                "'SCHEDULED' FROM generate_series(1, 3000) AS g"
            )
        )
    near = create_session(engine)
    force_state(engine, near, S.SCHEDULED, at_offset=timedelta(seconds=2))
    hung = FakeScheduler(error=TimeoutError("AWS answers nothing"))
    sync = _sync_for(engine, hung)
    assert sync.resync() == 3001

    instance = DagsterInstance.ephemeral()
    _sensor_tick(SYNC_SENSOR, instance, db_url)
    deadline = time.monotonic() + 10
    launched: list[RunRequest] = []
    while not launched and time.monotonic() < deadline:
        time.sleep(0.5)
        launched = [
            r
            for r in _requests(_sensor_tick(SYNC_SENSOR, instance, db_url))
            if r.job_name == "join_link_generation_job"
        ]
    [request] = launched
    assert request.tags["jlg/session"] == str(near)
    assert hung.calls == [], "decided without AWS, ahead of 3,000 pending changes"


def _sessions_in(requests: list[RunRequest]) -> list[int]:
    return [
        entry["programSessionId"]
        for request in requests
        for entry in request.run_config["ops"]["generate_join_links_shared"]["config"]["sessions"]
    ]


def test_the_watchdog_follows_the_online_session_services_shared_view(
    engine: Engine, db_url: str
) -> None:
    """Down: a worker goes (the view lets one of its callers probe), none while a probe is
    out; a pause: nothing; back: a worker at once."""
    arm_cohort(engine, 4, lead_s=-600)
    view = ServiceView(engine)
    for _ in range(BREAKER_FAILURES):
        view.report(Health.UNWELL, None, view.take_turn())
    with engine.begin() as conn:
        conn.execute(text("UPDATE jlg_service_view SET probe_until = now()"))
    instance = DagsterInstance.ephemeral()

    assert _worker(_sensor_tick(WATCHDOG, instance, db_url)) is not None, "a worker probes"
    turn = view.take_turn()
    assert turn.verdict is Verdict.PROBE
    held = _sensor_tick(WATCHDOG, instance, db_url)
    assert _worker(held) is None
    assert "a probe is out" in str(held.skip_message)

    view.report(Health.THROTTLED, 30, turn)
    paused = _sensor_tick(WATCHDOG, instance, db_url)
    assert _worker(paused) is None
    assert "it asked for a pause" in str(paused.skip_message)
    # The oldest waiting session and its holds, in the same line (services/why.py).
    assert "the oldest waiting, session " in str(paused.skip_message)
    assert "held by service pause until " in str(paused.skip_message)

    with engine.begin() as conn:
        conn.execute(text("UPDATE jlg_service_view SET paused_until = now()"))
    view.report(Health.ANSWERED, None, view.take_turn())
    assert _worker(_sensor_tick(WATCHDOG, instance, db_url)) is not None


def test_a_pause_shorter_than_a_callers_patience_does_not_stop_a_launch(
    engine: Engine, db_url: str
) -> None:
    """A run takes seconds to start and its callers wait out a pause that ends within their
    patience, so the watchdog launches through a short pause (the budget bench: with the
    service's own 1 s pauses, half the ticks after a heal launched nothing); a long pause
    still holds it."""
    arm_cohort(engine, 1, lead_s=-300)
    view = ServiceView(engine)
    view.report(Health.THROTTLED, 2, view.take_turn())
    assert _worker(_sensor_tick(WATCHDOG, DagsterInstance.ephemeral(), db_url)) is not None
    view.report(Health.THROTTLED, 30, view.take_turn())
    assert _worker(_sensor_tick(WATCHDOG, DagsterInstance.ephemeral(), db_url)) is None


def test_a_session_the_breaker_held_waits_in_the_queue_and_is_taken_when_the_service_heals(
    engine: Engine, db_url: str, repository: ProgramSessionRepository
) -> None:
    """A session skipped while the service is down holds nothing of its own: it waits in the
    queue, and once the first probe answers, the watchdog's worker takes it."""
    (sid,), _ = arm_cohort(engine, 1, lead_s=-5)
    view = ServiceView(engine)
    for _ in range(BREAKER_FAILURES):
        view.report(Health.UNWELL, None, view.take_turn())
    outcome = generate_for_session(
        BulkRegisterRequest.parse(sid),
        repository=repository,
        registrar=RecordingRegistrar(),
        trigger=Trigger.EVENT,
        view=view,
    )
    assert outcome.result is GenerationResult.SKIPPED
    assert session_row(engine, sid)["link_generation_status"] == "SCHEDULED"
    with engine.begin() as conn:
        conn.execute(text("UPDATE jlg_service_view SET probe_until = now()"))
    probe = view.take_turn()
    assert probe.verdict is Verdict.PROBE
    view.report(Health.ANSWERED, None, probe)
    request = _worker(_sensor_tick(WATCHDOG, DagsterInstance.ephemeral(), db_url))
    assert request is not None
    registrar = RecordingRegistrar()
    SHARED.execute_in_process(
        run_config=request.run_config,
        tags=request.tags,
        resources={"database": database(db_url), "registrar": registrar},
    )
    assert [c.session_id for c in registrar.calls] == [sid]
