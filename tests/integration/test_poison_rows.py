"""One bad row never stops a path (docs/design.md "Trust boundaries", "No single answer"): a
poison row planted in each periodic path (the schedule-sync sensor, the outbox applier, the
watchdog, the sweep) is logged with its id, set aside on the path's own backoff and counted on
/metrics, and every other row still flows.

Before, the audit's session at year 10009 failed the schedule-sync sensor on every tick, which
stopped direct launches for every programme; a direct launch or a watchdog candidate whose
request could not be built did the same to its whole tick."""

import logging
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from dagster import DagsterInstance, build_sensor_context
from sqlalchemy import Engine, text

from jlg_pipeline.adapters.candidates import Candidates
from jlg_pipeline.adapters.metrics_snapshot import read_metrics_snapshot
from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.domain.attempts import Trigger
from jlg_pipeline.domain.generation import BulkRegisterRequest, GenerationOutcome
from jlg_pipeline.domain.status import LinkGenerationStatus
from jlg_pipeline.orchestration.generation import build_generation_job, build_shared_generation_job
from jlg_pipeline.orchestration.schedule_sync import build_schedule_sync_sensor
from jlg_pipeline.services.generation import bind_gate
from jlg_pipeline.services.sweep import sweep_overdue_sessions
from testkit.factories import create_session, force_state, session_row
from tests.integration.test_watchdog import _requests, _sync_for
from tests.support.fakes import FakeScheduler, RecordingRegistrar
from tests.support.logs import fields_of
from tests.support.resources import database_scheduler_on as database

S = LinkGenerationStatus
SYNC_SENSOR = build_schedule_sync_sensor([build_generation_job()])
SHARED = build_shared_generation_job(retry_delay_seconds=0.01)


def _tick(sensor: Any, db_url: str) -> Any:
    resources = {"database": database(db_url, JLG_TEST_WATCHDOG_GRACE_MS="1000")}
    with build_sensor_context(instance=DagsterInstance.ephemeral(), resources=resources) as context:
        return sensor(context)


def _set_aside(engine: Engine) -> dict[str, int]:
    return read_metrics_snapshot(engine).set_aside


def _direct_launch(engine: Engine, sid: int, actor: int | None) -> None:
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO jlg_schedule_outbox (program_session_id, version, fire_at,"
                " actor_user_id, direct, next_try_at) VALUES (:sid,"
                " nextval('jlg_schedule_outbox_version_seq'), now() - interval '1 second',"
                " :actor, true, now() - interval '1 second')"
            ),
            {"sid": sid, "actor": actor},
        )


def test_the_sync_sensor_launches_the_others_past_a_launch_no_run_can_be_asked_for(
    engine: Engine, db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    poison, good = create_session(engine), create_session(engine)
    _direct_launch(engine, poison, actor=-5)  # no admin has that id: an older release's row
    _direct_launch(engine, good, actor=7)
    with caplog.at_level(logging.ERROR):
        result = _tick(SYNC_SENSOR, db_url)
    launched = [r.run_config["ops"]["generate_join_links"]["config"] for r in _requests(result)]
    assert [c["programSessionId"] for c in launched] == [good]
    assert [f["row_id"] for f in fields_of(caplog, "schedule_sync.row_set_aside")] == [poison]
    assert _set_aside(engine) == {"schedule_sync": 1}
    with engine.connect() as conn:
        tries, error, ahead = conn.execute(
            text(
                "SELECT tries, last_error, extract(epoch FROM next_try_at - now())"
                " FROM jlg_schedule_outbox WHERE program_session_id = :sid"
            ),
            {"sid": poison},
        ).one()
    assert tries == 1
    assert "actorUserId" in error
    assert 20 < ahead <= 30, "its own backoff: not again on the next tick"
    assert _requests(_tick(SYNC_SENSOR, db_url)) == [] or all(
        r.run_config["ops"]["generate_join_links"]["config"]["programSessionId"] != poison
        for r in _requests(_tick(SYNC_SENSOR, db_url))
    )


def test_the_outbox_applier_applies_the_others_past_a_change_no_schedule_can_be_built_from(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    poison, good = create_session(engine), create_session(engine)
    with engine.begin() as conn:
        for sid, actor, at in ((poison, -5, "1 day"), (good, 7, "2 days")):
            conn.execute(
                text(
                    "INSERT INTO jlg_schedule_outbox (program_session_id, version, fire_at,"
                    " actor_user_id, next_try_at) VALUES (:sid,"
                    " nextval('jlg_schedule_outbox_version_seq'), now() + CAST(:at AS interval),"
                    " :actor, now())"
                ),
                {"sid": sid, "actor": actor, "at": at},
            )
    scheduler = FakeScheduler()
    with caplog.at_level(logging.ERROR):
        report = _sync_for(engine, scheduler).sync()
    assert (report.applied, report.failed) == (1, 1)
    assert list(scheduler.schedules) == [f"join-link-{good}"]
    assert [f["row_id"] for f in fields_of(caplog, "outbox.row_set_aside")] == [poison]
    assert _set_aside(engine) == {"outbox": 1}
    with engine.connect() as conn:
        tries, ahead = conn.execute(
            text(
                "SELECT tries, extract(epoch FROM next_try_at - now()) FROM jlg_schedule_outbox"
                " WHERE program_session_id = :sid"
            ),
            {"sid": poison},
        ).one()
    assert tries == 1
    assert 20 < ahead <= 30


class BrokenFor(RecordingRegistrar):
    """Fails with an error of ours (not the service's) for one session."""

    def __init__(self, broken: int) -> None:
        super().__init__()
        self.broken = broken

    def bulk_register(self, request: BulkRegisterRequest) -> Any:
        if request.session_id == self.broken:
            raise ZeroDivisionError("a bug met by one row")
        return super().bulk_register(request)


def test_the_sweep_generates_the_others_past_a_session_it_fails_on(
    engine: Engine, repository: ProgramSessionRepository, caplog: pytest.LogCaptureFixture
) -> None:
    ids = [create_session(engine) for _ in range(3)]
    for sid in ids:
        force_state(engine, sid, S.SCHEDULED, at_offset=timedelta(hours=-1))
    gate = bind_gate(repository, BrokenFor(ids[0]), Trigger.CRON)

    def failing_before_the_claim(request: BulkRegisterRequest, *, resume: bool = True) -> Any:
        if request.session_id == ids[1]:
            raise RuntimeError("a row the gate cannot read")
        outcome: GenerationOutcome = gate(request, resume=resume)
        return outcome

    with caplog.at_level(logging.ERROR):
        report = sweep_overdue_sessions(Candidates(engine), failing_before_the_claim, limit=50)
    assert [session_row(engine, sid)["link_generation_status"] for sid in ids] == [
        "FAILED",
        "SCHEDULED",
        "COMPLETED",
    ]
    assert report.completed == 1
    assert [f["row_id"] for f in fields_of(caplog, "sweep.row_set_aside")] == [ids[1]]
    assert _set_aside(engine) == {"sweep": 1}


def test_a_worker_drains_the_others_past_a_session_the_gate_fails_on(
    engine: Engine, db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A run draining the queue meets an error after one session's claim that is no failure of
    the service's (here its result cannot be recorded: a total past what the column holds):
    that session is set aside (its claim goes stale and it waits again), the others are
    generated; and a session whose recorded actor no longer passes the rules is asked for with
    the defaults."""
    broken, good, odd_actor = (create_session(engine) for _ in range(3))
    for sid in (broken, good, odd_actor):
        force_state(engine, sid, S.SCHEDULED, at_offset=timedelta(minutes=-3))
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO jlg_link_generation_change (program_session_id, actor_user_id)"
                " VALUES (:sid, 0)"
            ),
            {"sid": odd_actor},
        )
    registrar = OutOfRange(broken)
    with caplog.at_level(logging.WARNING):
        outcome = SHARED.execute_in_process(
            run_config={"ops": {"generate_join_links_shared": {"config": {"sessions": []}}}},
            resources={"database": database(db_url), "registrar": registrar},
            raise_on_error=False,
        )
    assert not outcome.success, "a session is left failed"
    assert sorted(c.session_id for c in registrar.calls) == sorted([broken, good, odd_actor])
    assert [c.actor_user_id for c in registrar.calls if c.session_id == odd_actor] == [None]
    assert [f["row_id"] for f in fields_of(caplog, "worker.row_set_aside")] == [broken]
    assert [f["session_id"] for f in fields_of(caplog, "queue.options_ignored")] == [odd_actor]
    assert _set_aside(engine) == {"worker": 1}


class OutOfRange(RecordingRegistrar):
    """Answers one session with a total no column holds."""

    def __init__(self, broken: int) -> None:
        super().__init__()
        self.broken = broken

    def bulk_register(self, request: BulkRegisterRequest) -> Any:
        result = super().bulk_register(request)
        if request.session_id == self.broken:
            return replace(result, total=2**40)
        return result
