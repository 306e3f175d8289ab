"""Schedule sync through the outbox (docs/design.md "Schedule sync"), on real PostgreSQL with the
real EventBridge adapter against moto: a PATCH whose AWS call fails still reaches EventBridge
through the sync; the newest intent wins whatever order calls finish in; near times go
direct; with the flag off nothing is left pending; resync rebuilds from the database."""

import json
import random
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, func, select

from devstack.ports import free_port
from jlg_pipeline.adapters.aws_scheduler import AwsScheduler, scheduler_client
from jlg_pipeline.adapters.intent_writes import IntentWrites
from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.adapters.schedule_outbox import ScheduleOutbox
from jlg_pipeline.adapters.tables import schedule_outbox
from jlg_pipeline.cli import main
from jlg_pipeline.domain.eventbridge_schedule import ScheduleTarget, schedule_request
from jlg_pipeline.domain.status import LinkGenerationStatus
from jlg_pipeline.domain.validation import SessionId
from jlg_pipeline.services.program_session import ProgramSessionService
from jlg_pipeline.services.schedule_sync import (
    ScheduleSync,
    SyncAction,
    direct_run_key,
    due_work,
)
from testkit.factories import create_session, force_state, session_row
from tests.support.fakes import FakeScheduler
from tests.support.web import ROLE_ARN, Aws, admin_headers, client_for, settings_for

S = LinkGenerationStatus
HEADERS = admin_headers(user_id=7)


def _path(sid: int) -> str:
    return f"/program-session/{sid}/link-generation"


def _later(**delta: float) -> datetime:
    return datetime.now(UTC).replace(microsecond=0) + timedelta(**(delta or {"days": 1}))


def _dead_scheduler() -> Any:
    """A boto3 scheduler client whose endpoint answers nothing: AWS unreachable."""
    return scheduler_client(region_name="us-east-1", endpoint_url=f"http://127.0.0.1:{free_port()}")


def _sync(engine: Engine, aws: Aws, client: Any = None) -> ScheduleSync:
    target = ScheduleTarget(aws.queue_arn, ROLE_ARN)
    scheduler = AwsScheduler(client if client is not None else aws.scheduler)
    return ScheduleSync(ScheduleOutbox(engine), scheduler, target, enabled=True)


def _schedule(aws: Aws, sid: int) -> dict[str, Any] | None:
    names = {s["Name"] for s in aws.scheduler.list_schedules()["Schedules"]}
    if f"join-link-{sid}" not in names:
        return None
    found: dict[str, Any] = aws.scheduler.get_schedule(Name=f"join-link-{sid}", GroupName="default")
    return found


def _pending(engine: Engine) -> list[dict[str, Any]]:
    with engine.connect() as conn:
        return [dict(r._mapping) for r in conn.execute(select(schedule_outbox)).all()]


def test_unreachable_aws_at_patch_then_the_sync_creates_the_pinned_schedule(
    engine: Engine, db_url: str, aws: Aws
) -> None:
    sid = create_session(engine)
    at = _later(days=2)
    with client_for(settings_for(db_url, aws.queue_arn), _dead_scheduler()) as http:
        response = http.patch(
            _path(sid), headers=HEADERS, json={"linkGenerationAt": at.isoformat()}
        )
    assert response.status_code == 200
    assert _schedule(aws, sid) is None
    [pending] = _pending(engine)
    assert (pending["fire_at"], pending["tries"]) == (at, 1)
    assert "EndpointConnectionError" in pending["last_error"]

    report = _sync(engine, aws).sync()
    assert (report.applied, report.failed, report.left) == (1, 0, 0)
    schedule = _schedule(aws, sid)
    assert schedule is not None
    expected = schedule_request(sid, at, 7, ScheduleTarget(aws.queue_arn, ROLE_ARN))
    for key in ("ScheduleExpression", "ScheduleExpressionTimezone", "ActionAfterCompletion"):
        assert schedule[key] == expected[key]
    assert schedule["FlexibleTimeWindow"] == {"Mode": "OFF"}
    assert schedule["Target"]["Arn"] == aws.queue_arn
    assert schedule["Target"]["RoleArn"] == ROLE_ARN
    assert schedule["Target"]["RetryPolicy"] == expected["Target"]["RetryPolicy"]
    sent, pinned = (json.loads(t["Target"]["Input"]) for t in (schedule, expected))
    assert {**sent, "timestamp": None} == {**pinned, "timestamp": None}
    assert _pending(engine) == []


def test_a_clear_that_failed_still_deletes(engine: Engine, db_url: str, aws: Aws) -> None:
    sid = create_session(engine)
    with client_for(settings_for(db_url, aws.queue_arn), aws.scheduler) as http:
        http.patch(_path(sid), headers=HEADERS, json={"linkGenerationAt": _later().isoformat()})
    assert _schedule(aws, sid) is not None
    with client_for(settings_for(db_url, aws.queue_arn), _dead_scheduler()) as http:
        assert (
            http.patch(_path(sid), headers=HEADERS, json={"linkGenerationAt": None}).status_code
            == 200
        )
    assert _schedule(aws, sid) is not None, "AWS was down: the schedule is still there"
    assert _sync(engine, aws).sync().applied == 1
    assert _schedule(aws, sid) is None
    assert _pending(engine) == []


class FlakyClient:
    """A boto3 scheduler client that fails the calls ``fails`` picks and may sleep first."""

    def __init__(self, client: Any, fails: Callable[[], bool], delay: Callable[[], float]) -> None:
        self._client = client
        self._fails = fails
        self._delay = delay

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._client, name)
        if not name.endswith("_schedule"):
            return attribute

        def call(**kwargs: Any) -> Any:
            time.sleep(self._delay())
            if self._fails():
                # What botocore raises when the endpoint is unreachable.
                return getattr(_dead_scheduler(), name)(**kwargs)
            return attribute(**kwargs)

        return call


def test_many_changes_while_aws_fails_leave_exactly_the_newest(
    engine: Engine, db_url: str, aws: Aws
) -> None:
    sid = create_session(engine)
    rng = random.Random(13)
    flaky = FlakyClient(aws.scheduler, lambda: rng.random() < 0.7, lambda: 0.0)
    newest = _later(days=5)
    intents: list[datetime | None] = [_later(days=1), _later(days=2), _later(days=3)]
    intents += [None, _later(days=4), None, newest]
    with client_for(settings_for(db_url, aws.queue_arn), flaky) as http:
        for at in intents:
            body = {"linkGenerationAt": None if at is None else at.isoformat()}
            assert http.patch(_path(sid), headers=HEADERS, json=body).status_code == 200
    _sync(engine, aws).sync()
    schedule = _schedule(aws, sid)
    assert schedule is not None
    assert schedule["ScheduleExpression"] == f"at({newest:%Y-%m-%dT%H:%M:%S})"
    assert _pending(engine) == []


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_concurrent_changes_with_delayed_calls_leave_the_newest(
    engine: Engine, aws: Aws, seed: int
) -> None:
    """Eight admins change one session at once; each change's fast path runs in its own
    thread after a random delay, and AWS answers after a random delay: EventBridge ends up
    holding exactly what the database holds."""
    sid = create_session(engine)
    rng = random.Random(seed)
    flaky = FlakyClient(aws.scheduler, lambda: False, lambda: rng.random() * 0.1)
    sync = _sync(engine, aws, flaky)
    service = ProgramSessionService(ProgramSessionRepository(engine), IntentWrites(engine), sync)
    threads: list[threading.Thread] = []

    def later(call: Callable[[], Any]) -> None:
        delay = rng.random() * 0.2

        def run() -> None:
            time.sleep(delay)
            call()

        thread = threading.Thread(target=run)
        threads.append(thread)
        thread.start()

    def admin(i: int) -> None:
        at = None if i % 4 == 3 else _later(days=1 + i)
        service.set_link_generation(sid, at, 7, later)

    admins = [threading.Thread(target=admin, args=(i,)) for i in range(8)]
    for thread in admins:
        thread.start()
    for thread in admins:
        thread.join()
    while any(t.is_alive() for t in threads):
        time.sleep(0.05)
    assert _pending(engine) == [], "every fast path succeeded: nothing is left pending"
    final = session_row(engine, sid)["link_generation_at"]
    schedule = _schedule(aws, sid)
    if final is None:
        assert schedule is None
    else:
        assert schedule is not None
        assert schedule["ScheduleExpression"] == f"at({final:%Y-%m-%dT%H:%M:%S})"


def test_a_near_time_gets_no_schedule_and_an_earlier_one_is_deleted(
    engine: Engine, db_url: str, aws: Aws
) -> None:
    sid = create_session(engine)
    with client_for(settings_for(db_url, aws.queue_arn), aws.scheduler) as http:
        http.patch(_path(sid), headers=HEADERS, json={"linkGenerationAt": _later().isoformat()})
        assert _schedule(aws, sid) is not None
        near = _later(seconds=40)
        assert (
            http.patch(
                _path(sid), headers=HEADERS, json={"linkGenerationAt": near.isoformat()}
            ).status_code
            == 200
        )
    assert _schedule(aws, sid) is None
    [pending] = _pending(engine)
    assert pending["direct"] is True
    assert pending["next_try_at"] == near
    launches, sync_due = ScheduleOutbox(engine).due_work()
    assert (launches, sync_due) == ([], False), "not due yet"


def test_a_near_time_goes_direct_even_while_aws_is_down(
    engine: Engine, db_url: str, aws: Aws
) -> None:
    sid = create_session(engine)
    with client_for(settings_for(db_url, aws.queue_arn), _dead_scheduler()) as http:
        near = _later(seconds=30)
        assert (
            http.patch(
                _path(sid), headers=HEADERS, json={"linkGenerationAt": near.isoformat()}
            ).status_code
            == 200
        )
    [pending] = _pending(engine)
    assert pending["direct"] is True


def test_the_sync_sensors_step_retires_launches_whose_runs_exist_and_returns_the_rest(
    engine: Engine,
) -> None:
    """services/schedule_sync.due_work, without Dagster: near changes go direct in the
    database; of the due launches, the ones a run covers are retired, the others returned."""
    sync = ScheduleSync(
        ScheduleOutbox(engine), FakeScheduler(), ScheduleTarget("arn:q", ROLE_ARN), enabled=True
    )
    service = ProgramSessionService(ProgramSessionRepository(engine), IntentWrites(engine), sync)
    ids = [create_session(engine) for _ in range(3)]
    # Whole seconds, so 2-3 s ahead: a second ahead was at times 0.1 s, gone by the last PATCH.
    times = [_later(seconds=3) for _ in ids]
    for sid, at in zip(ids, times, strict=True):
        service.set_link_generation(sid, at, 42)
    time.sleep(max(0.0, (max(times) - datetime.now(UTC)).total_seconds()) + 0.2)
    launched = {f"direct-{ids[0]}-"}

    def covered(keys: Sequence[str]) -> set[str]:
        return {k for k in keys if any(k.startswith(prefix) for prefix in launched)}

    due = due_work(ScheduleOutbox(engine), covered)

    assert sorted(launch.session_id for launch in due.launches) == ids[1:]
    assert due.done == 1
    assert [direct_run_key(launch) for launch in due.launches] == [
        f"direct-{launch.session_id}-{launch.version}" for launch in due.launches
    ]
    again = due_work(ScheduleOutbox(engine), covered)
    assert (len(again.launches), again.done) == (2, 0), "the retired one is gone"


def test_with_the_flag_off_nothing_is_recorded_and_the_sync_drops_leftovers(
    engine: Engine, db_url: str, aws: Aws
) -> None:
    sid, other = create_session(engine), create_session(engine)
    with client_for(
        settings_for(db_url, aws.queue_arn, scheduler_enabled=False), aws.scheduler
    ) as http:
        http.patch(_path(sid), headers=HEADERS, json={"linkGenerationAt": _later().isoformat()})
    assert _pending(engine) == []
    with client_for(settings_for(db_url, aws.queue_arn), _dead_scheduler()) as http:
        http.patch(_path(other), headers=HEADERS, json={"linkGenerationAt": _later().isoformat()})
    assert len(_pending(engine)) == 1
    off = ScheduleSync(ScheduleOutbox(engine), AwsScheduler(aws.scheduler), None, enabled=False)
    assert off.sync().dropped == 1
    assert _pending(engine) == []


def test_resync_marks_every_armed_future_session_and_the_sync_rebuilds_eventbridge(
    engine: Engine, aws: Aws
) -> None:
    armed = [create_session(engine) for _ in range(3)]
    for sid in armed:
        force_state(engine, sid, S.SCHEDULED, at_offset=timedelta(days=1))
    past = create_session(engine)
    force_state(engine, past, S.SCHEDULED, at_offset=timedelta(minutes=-5))
    done = create_session(engine)
    force_state(engine, done, S.COMPLETED, at_offset=timedelta(days=1))
    deleted = create_session(engine)
    force_state(engine, deleted, S.SCHEDULED, at_offset=timedelta(days=1), deleted=True)
    sync = _sync(engine, aws)
    assert sync.resync() == 3
    launches, sync_due = ScheduleOutbox(engine).due_work()
    assert sync_due
    assert launches == []
    assert sync.sync().applied == 3
    assert {s["Name"] for s in aws.scheduler.list_schedules()["Schedules"]} == {
        f"join-link-{sid}" for sid in armed
    }


def test_resync_refuses_when_the_scheduler_is_off(engine: Engine) -> None:
    off = ScheduleSync(ScheduleOutbox(engine), None, None, enabled=False)
    with pytest.raises(Exception, match="nothing to resync"):
        off.resync()


def test_an_applier_already_at_work_is_left_alone_by_the_job(engine: Engine, aws: Aws) -> None:
    sid = create_session(engine)
    service = ProgramSessionService(
        ProgramSessionRepository(engine), IntentWrites(engine), _sync(engine, aws)
    )
    service.set_link_generation(sid, _later(), 7, lambda call: None)
    outbox = ScheduleOutbox(engine)
    held = outbox.take(SessionId(sid))
    assert held is not None
    assert outbox.take(SessionId(sid)) is None, "one applier at a time"
    assert _sync(engine, aws).apply(SessionId(sid)) is SyncAction.NOTHING
    outbox.release(held)
    assert _sync(engine, aws).apply(SessionId(sid)) is SyncAction.CREATED


def test_metrics_show_the_backlog_and_its_age(engine: Engine, db_url: str, aws: Aws) -> None:
    sid = create_session(engine)
    with client_for(settings_for(db_url, aws.queue_arn), _dead_scheduler()) as http:
        text = http.get("/metrics").text
        assert "jlg_schedule_sync_pending 0.0" in text
        assert "jlg_schedule_sync_oldest_pending_seconds 0.0" in text
        http.patch(_path(sid), headers=HEADERS, json={"linkGenerationAt": _later().isoformat()})
        time.sleep(0.2)
        http.app.state.figures.refresh()  # type: ignore[attr-defined]
        lines = dict(
            line.split(" ")
            for line in http.get("/metrics").text.splitlines()
            if line.startswith("jlg_schedule_sync")
        )
    assert lines["jlg_schedule_sync_pending"] == "1.0"
    assert 0.2 <= float(lines["jlg_schedule_sync_oldest_pending_seconds"]) < 10


def test_jlg_schedules_resync_marks_armed_sessions(
    engine: Engine,
    db_url: str,
    aws: Aws,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    sid = create_session(engine)
    force_state(engine, sid, S.SCHEDULED, at_offset=timedelta(days=1))
    monkeypatch.setenv("JLG_DATABASE_URL", db_url)
    monkeypatch.setenv("ENABLE_JOIN_LINK_SCHEDULER", "true")
    monkeypatch.setenv("AWS_SCHEDULER_TARGET_QUEUE_ARN", aws.queue_arn)
    monkeypatch.setenv("AWS_SCHEDULER_EXECUTION_ROLE_ARN", ROLE_ARN)
    assert main(["schedules", "resync"]) == 0
    assert "1 armed session(s) marked pending" in capsys.readouterr().out
    assert [p["program_session_id"] for p in _pending(engine)] == [sid]
    monkeypatch.setenv("ENABLE_JOIN_LINK_SCHEDULER", "false")
    assert main(["schedules", "resync"]) == 2
    assert "nothing to resync" in capsys.readouterr().err


class BlockingClient:
    """A boto3 scheduler client whose first call blocks until ``release`` is set: an applier
    inside a slow AWS call."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.entered = threading.Event()
        self.release = threading.Event()
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._client, name)
        if not name.endswith("_schedule"):
            return attribute

        def call(**kwargs: Any) -> Any:
            self.calls.append(name)
            if not self.entered.is_set():
                self.entered.set()
                assert self.release.wait(20), "the test never released the call"
            return attribute(**kwargs)

        return call


def _app_transactions(engine: Engine) -> int:
    """Connections of the application (not this probe) inside a transaction now."""
    with engine.connect() as conn:
        return int(
            conn.exec_driver_sql(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND xact_start IS NOT NULL"
            ).scalar_one()
        )


def test_an_applier_inside_a_slow_call_holds_no_connection_and_applies_the_newest_after(
    engine: Engine, aws: Aws
) -> None:
    sid = create_session(engine)
    blocking = BlockingClient(aws.scheduler)
    sync = _sync(engine, aws, blocking)
    service = ProgramSessionService(ProgramSessionRepository(engine), IntentWrites(engine), sync)
    service.set_link_generation(sid, _later(days=1), 7, lambda call: None)
    results: list[SyncAction] = []
    first = threading.Thread(target=lambda: results.append(sync.apply(SessionId(sid))))
    first.start()
    assert blocking.entered.wait(10)
    assert _app_transactions(engine) == 0, "no transaction or lock across the AWS call"
    newest = _later(days=2)
    started = time.monotonic()
    service.set_link_generation(sid, newest, 8, lambda call: None)
    assert time.monotonic() - started < 1, "the admin's write never waits for an applier"
    assert sync.apply(SessionId(sid)) is SyncAction.NOTHING, "the applier at work applies it next"
    blocking.release.set()
    first.join(timeout=20)
    assert results == [SyncAction.UPDATED]
    schedule = _schedule(aws, sid)
    assert schedule is not None
    assert schedule["ScheduleExpression"] == f"at({newest:%Y-%m-%dT%H:%M:%S})"
    assert json.loads(schedule["Target"]["Input"])["data"]["actorUserId"] == 8
    assert _pending(engine) == []


def test_an_applier_that_died_holding_a_change_delays_it_by_the_lease_only(
    engine: Engine, aws: Aws
) -> None:
    sid = create_session(engine)
    ProgramSessionService(
        ProgramSessionRepository(engine), IntentWrites(engine), _sync(engine, aws)
    ).set_link_generation(sid, _later(), 7, lambda call: None)
    assert ScheduleOutbox(engine).take(SessionId(sid)) is not None  # and its process dies
    assert _sync(engine, aws).sync().applied == 0
    with engine.begin() as conn:
        conn.execute(
            schedule_outbox.update().values(leased_until=func.now() - timedelta(seconds=1))
        )
    assert _sync(engine, aws).sync().applied == 1
    assert _schedule(aws, sid) is not None
