"""Bursts (docs/design.md "Bursts"): when more messages (or due direct launches) wait than
single runs can start in time, one sensor tick's share runs of up to JLG_MAX_SESSIONS_PER_RUN,
each session still through its own claim; a lone message keeps its own run, as the design card
asks. The SQS sensor runs against moto and a
real Dagster instance, the runs against real PostgreSQL."""

import json
import threading
import time
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from dagster import DagsterInstance, RunRequest, SensorResult, SkipReason, build_sensor_context
from sqlalchemy import Engine, text

from devstack.online_session import online_session_service
from jlg_pipeline.adapters.intent_writes import IntentWrites
from jlg_pipeline.adapters.registrars.http import HttpRegistrar
from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.adapters.schedule_outbox import ScheduleOutbox
from jlg_pipeline.domain.attempts import Trigger
from jlg_pipeline.domain.errors import RegistrarRejected
from jlg_pipeline.domain.eventbridge_schedule import ScheduleTarget
from jlg_pipeline.domain.generation import BulkRegisterRequest, BulkRegisterResult
from jlg_pipeline.domain.messages import build_message
from jlg_pipeline.domain.run_sharing import ONE_RUN_EACH, RunSharing
from jlg_pipeline.domain.status import LinkGenerationStatus
from jlg_pipeline.domain.validation import SessionId
from jlg_pipeline.orchestration.fallback import join_link_fallback_sweep_job
from jlg_pipeline.orchestration.generation import build_shared_generation_job
from jlg_pipeline.orchestration.generation_runs import covering, requests_for
from jlg_pipeline.orchestration.schedule_sync import build_schedule_sync_sensor
from jlg_pipeline.orchestration.sqs_events import build_sqs_sensor
from jlg_pipeline.services.program_session import ProgramSessionService
from jlg_pipeline.services.schedule_sync import ScheduleSync
from testkit.factories import create_session, force_state, session_row
from tests.support.fakes import FakeScheduler, RecordingRegistrar
from tests.support.resources import database_scheduler_on as database
from tests.support.resources import placeholder_job, sqs_queue
from tests.support.web import ROLE_ARN, Aws

S = LinkGenerationStatus
SHARED = build_shared_generation_job(retry_delay_seconds=0.01)
SHARED_OP = "generate_join_links_shared"


class Daemon:
    """Evaluates the SQS sensor as the daemon does (one instance, the cursor carried over)
    and runs what it asks for in that instance, with real PostgreSQL behind the gate."""

    def __init__(self, aws: Aws, db_url: str, sharing: RunSharing, visibility_s: int = 120) -> None:
        self.instance = DagsterInstance.ephemeral()
        self.sensor = build_sqs_sensor(5, sharing)
        self.cursor: str | None = None
        self.queue = sqs_queue(aws.queue_url, visibility_s)
        self.db_url = db_url
        self.registrar = RecordingRegistrar()

    def tick(self, *, keep_cursor: bool = True) -> SensorResult | SkipReason:
        with build_sensor_context(
            instance=self.instance,
            cursor=self.cursor,
            resources={"sqs_queue": self.queue, "database": database(self.db_url)},
        ) as context:
            result: SensorResult | SkipReason = self.sensor(context)
        assert isinstance(result, SensorResult | SkipReason)
        if keep_cursor and isinstance(result, SensorResult):
            self.cursor = result.cursor
        return result

    def run(self, request: RunRequest) -> str:
        """Executes a shared run in the instance, with the tags the sensor gives it (but no
        tick record: Dagster's records say a person launched it)."""
        assert request.job_name == "join_link_shared_generation_job"
        outcome = SHARED.execute_in_process(
            run_config=request.run_config,
            tags=request.tags,
            instance=self.instance,
            resources={
                "database": database(self.db_url, JLG_GENERATION_CONCURRENCY="4"),
                "registrar": self.registrar,
            },
            raise_on_error=False,
        )
        return outcome.run_id


def _requests(result: SensorResult | SkipReason) -> list[RunRequest]:
    assert isinstance(result, SensorResult), result
    return list(result.run_requests or [])


def _sessions_of(request: RunRequest) -> list[int]:
    config = request.run_config["ops"][SHARED_OP]["config"]["sessions"]
    return [s["programSessionId"] for s in config]


def _send_burst(aws: Aws, session_ids: Sequence[int], duplicates: Sequence[int]) -> None:
    for sid in [*session_ids, *duplicates]:
        aws.sqs.send_message(QueueUrl=aws.queue_url, MessageBody=json.dumps(build_message(sid, 7)))


def _due_sessions(engine: Engine, count: int) -> list[SessionId]:
    ids = [create_session(engine) for _ in range(count)]
    for sid in ids:
        force_state(engine, sid, S.SCHEDULED, at_offset=timedelta(seconds=-1))
    return ids


def test_a_burst_shares_runs_and_generates_every_session_once(
    engine: Engine, db_url: str, aws: Aws
) -> None:
    """60 messages plus 5 duplicate deliveries, sharing at 25: at most 6 runs (here 3: the
    duplicates join their session's place), every session generated once, each attempt
    naming the run that claimed it (runs are workers of one queue: the first run to start
    takes every session that waits, the others find theirs done); the messages are deleted
    once their runs exist."""
    ids = _due_sessions(engine, 60)
    _send_burst(aws, ids, duplicates=ids[:5])
    daemon = Daemon(aws, db_url, RunSharing(25))

    requests = _requests(daemon.tick())

    assert len(requests) <= 6
    assert all(len(_sessions_of(r)) <= 25 for r in requests)
    listed = [sid for r in requests for sid in _sessions_of(r)]
    assert sorted(listed) == sorted(ids), "each session once, in one run"
    assert all(
        r.tags["jlg/trigger"] == "event" and r.tags["jlg/lane"] == "realtime" for r in requests
    )
    assert sum(k.startswith("jlg/covers.sqs-") for r in requests for k in r.tags) == 65
    assert aws.queue_depth() == 65, "kept until their runs exist"
    run_ids = [daemon.run(r) for r in requests]

    acknowledged = daemon.tick()

    assert _requests(acknowledged) == []
    assert aws.queue_depth() == 0
    assert Counter(c.session_id for c in daemon.registrar.calls) == Counter(ids)
    repository = ProgramSessionRepository(engine)
    for sid in ids:
        assert session_row(engine, sid)["link_generation_status"] == "COMPLETED"
        [attempt] = repository.attempts(SessionId(sid))
        # Run here in-process, not by the daemon: no tick of Dagster's asked for it, so the
        # run is a hand launch whatever its tags say (the daemon's: tests/e2e).
        assert (attempt.trigger, attempt.run_id, attempt.outcome.value) == (
            "manual",
            run_ids[0],
            "COMPLETED",
        )
        assert attempt.lag >= timedelta(seconds=1), "its lateness is measured"
    outcomes = []
    for run_id in run_ids:
        run = daemon.instance.get_run_by_id(run_id)
        assert run is not None
        outcomes.append(run.tags["jlg/outcome"])
    assert outcomes == ["completed"] + ["skipped"] * (len(run_ids) - 1)


def test_by_default_a_lone_message_keeps_its_own_run_and_a_cohort_shares(
    engine: Engine, db_url: str, aws: Aws
) -> None:
    """The defaults: one message is the design card's run (its own, tagged with its session
    and the message it covers); sixty at once share a run."""
    lone, *cohort = _due_sessions(engine, 61)
    daemon = Daemon(aws, db_url, RunSharing())
    _send_burst(aws, [lone], duplicates=[])

    [single] = _requests(daemon.tick())

    assert single.job_name == "join_link_generation_job"
    assert single.tags["jlg/session"] == str(lone)
    assert f"jlg/covers.{single.run_key}" in single.tags
    _send_burst(aws, cohort, duplicates=[])

    [shared] = _requests(daemon.tick())

    assert shared.job_name == "join_link_shared_generation_job"
    assert sorted(_sessions_of(shared)) == sorted(cohort)


def test_a_ticks_messages_record_their_options_for_whichever_worker_claims_them(
    engine: Engine, db_url: str, aws: Aws
) -> None:
    """No path decides order (docs/design.md "One queue"): a tick records each message's
    options for its session's cycle and tells the programme's turn that work is due; a session
    with no time, or none of ours, records nothing."""
    ids = [create_session(engine, program_id=77) for _ in range(3)]
    for i, sid in enumerate(ids):
        force_state(engine, sid, S.SCHEDULED, at_offset=timedelta(seconds=-1 - i))
    _send_burst(aws, [999_999, *ids], duplicates=[])
    daemon = Daemon(aws, db_url, RunSharing(10, share_above=0))

    assert _requests(daemon.tick())

    with engine.connect() as conn:
        recorded = conn.execute(
            text("SELECT program_session_id, actor_user_id FROM jlg_session_queue")
        ).all()
        due = conn.execute(
            text("SELECT next_due_at <= now() FROM jlg_programme_turn WHERE program_id = 77")
        ).scalar_one()
    assert sorted(sid for sid, _ in recorded) == sorted(ids)
    assert due


def test_a_few_messages_share_when_runs_already_wait_to_start(
    engine: Engine, db_url: str, aws: Aws
) -> None:
    ids = _due_sessions(engine, 3)
    daemon = Daemon(aws, db_url, RunSharing())
    for _ in range(10):
        daemon.instance.create_run_for_job(placeholder_job)  # NOT_STARTED
    _send_burst(aws, ids, duplicates=[])

    [shared] = _requests(daemon.tick())

    assert shared.job_name == "join_link_shared_generation_job"


def test_a_unit_is_found_by_the_tag_of_whatever_run_covers_it_or_by_its_run_key() -> None:
    """One lookup for many keys; a single run asked for before runs carried the tag (run key
    only) is still found, so its message is acknowledged instead of asking forever."""
    instance = DagsterInstance.ephemeral()
    covers = {"jlg/covers.sqs-a": "1", "jlg/covers.sqs-b": "1"}
    instance.create_run_for_job(placeholder_job, tags=covers)
    instance.create_run_for_job(placeholder_job, tags={"dagster/run_key": "sqs-old"})

    assert covering(instance)(["sqs-a", "sqs-b", "sqs-old", "sqs-new"]) == {
        "sqs-a",
        "sqs-b",
        "sqs-old",
    }


def test_one_run_each_when_sharing_is_off(engine: Engine, db_url: str, aws: Aws) -> None:
    ids = _due_sessions(engine, 60)
    _send_burst(aws, ids, duplicates=ids[:5])

    requests = _requests(Daemon(aws, db_url, ONE_RUN_EACH).tick())

    assert len(requests) == 65
    assert {r.job_name for r in requests} == {"join_link_generation_job"}
    assert all(r.run_key and r.run_key.startswith("sqs-") for r in requests)
    assert Counter(int(r.tags["jlg/session"]) for r in requests) == Counter([*ids, *ids[:5]])


def test_a_redelivered_message_whose_shared_run_exists_asks_for_nothing(
    engine: Engine, db_url: str, aws: Aws
) -> None:
    """The tick that asked for the runs is lost after they were created (its cursor never
    stored): the messages come back after their visibility timeout, find the runs covering
    them by their tags, and are deleted without a second run."""
    ids = _due_sessions(engine, 12)
    _send_burst(aws, ids, duplicates=[])
    daemon = Daemon(aws, db_url, RunSharing(5), visibility_s=1)
    requests = _requests(daemon.tick(keep_cursor=False))
    assert [len(_sessions_of(r)) for r in requests] == [5, 5, 2]
    for request in requests:
        daemon.run(request)
    time.sleep(1.5)

    again = daemon.tick()

    assert _requests(again) == [], "nothing more asked for"
    assert aws.queue_depth() == 0
    assert len(daemon.registrar.calls) == 12


def test_one_failing_session_leaves_the_others_of_its_shared_run_completed(
    engine: Engine, db_url: str
) -> None:
    """A non-retryable failure: the session is FAILED with its error on record and the run
    fails (so its status says one did), its neighbours are COMPLETED with one call each, and
    the sweep re-attempts the failed one later, as after a one-session run."""
    ids = _due_sessions(engine, 5)
    for sid in ids:
        force_state(engine, sid, S.SCHEDULED, at_offset=timedelta(minutes=-40))
    broken = ids[2]

    class RejectsOnce(RecordingRegistrar):
        rejected = False

        def bulk_register(self, request: BulkRegisterRequest) -> BulkRegisterResult:
            if request.session_id == broken and not self.rejected:
                self.rejected = True
                raise RegistrarRejected("bulkRegister answered 422 (INVALID_ROLE)")
            return super().bulk_register(request)

    registrar = RejectsOnce()
    instance = DagsterInstance.ephemeral()
    outcome = SHARED.execute_in_process(
        run_config={
            "ops": {SHARED_OP: {"config": {"sessions": [{"programSessionId": s} for s in ids]}}}
        },
        tags={"jlg/trigger": "event"},
        instance=instance,
        resources={"database": database(db_url), "registrar": registrar},
        raise_on_error=False,
    )

    assert not outcome.success, "the run's status says a session failed"
    run = instance.get_run_by_id(outcome.run_id)
    assert run is not None
    assert run.tags["jlg/outcome"] == "failed"
    assert registrar.rejected
    assert Counter(c.session_id for c in registrar.calls) == Counter(
        sid for sid in ids if sid != broken
    ), "the others once each, never twice"
    for sid in ids:
        status = session_row(engine, sid)["link_generation_status"]
        assert status == ("FAILED" if sid == broken else "COMPLETED")
    failed = session_row(engine, broken)
    assert failed["link_generation_last_error"].startswith("RegistrarRejected")
    [attempt] = ProgramSessionRepository(engine).attempts(SessionId(broken))
    assert (attempt.outcome.value, attempt.run_id) == ("FAILED", outcome.run_id)

    sweep = join_link_fallback_sweep_job.execute_in_process(
        resources={"database": database(db_url), "registrar": registrar},
        instance=instance,
        tags={"jlg/trigger": "cron"},
    )

    assert sweep.success
    assert session_row(engine, broken)["link_generation_status"] == "COMPLETED"
    assert [
        a.outcome.value for a in ProgramSessionRepository(engine).attempts(SessionId(broken))
    ] == [
        "COMPLETED",
        "FAILED",
    ]


def test_a_hung_call_for_one_session_never_holds_its_neighbours(
    engine: Engine, db_url: str
) -> None:
    """Over real HTTP, the online-session service accepts one session's call and answers
    nothing: the run's other sessions are generated meanwhile (two calls at a time, one of
    them hung); the hung one completes once the service answers."""
    ids = _due_sessions(engine, 6)
    hung = ids[0]
    with online_session_service(hold_first_call=True) as online:
        stop = threading.Event()

        def answer_all_but_the_hung_one() -> None:
            while not stop.is_set():
                for sid in ids[1:]:
                    if online.wait_first_call(sid, 0):
                        online.release(sid)
                time.sleep(0.02)

        helper = threading.Thread(target=answer_all_but_the_hung_one, daemon=True)
        helper.start()
        registrar = HttpRegistrar(online.url, "token", timeout_s=60)
        outcome: dict[str, Any] = {}

        def run() -> None:
            outcome["result"] = SHARED.execute_in_process(
                run_config={
                    "ops": {
                        SHARED_OP: {"config": {"sessions": [{"programSessionId": s} for s in ids]}}
                    }
                },
                tags={"jlg/trigger": "event"},
                resources={
                    "database": database(db_url, JLG_GENERATION_CONCURRENCY="2"),
                    "registrar": registrar,
                },
            )

        worker = threading.Thread(target=run)
        worker.start()
        try:
            assert online.wait_first_call(hung, 20), "the hung call was made"
            deadline = time.monotonic() + 20
            done: list[int] = []
            while time.monotonic() < deadline:
                done = [
                    s
                    for s in ids
                    if session_row(engine, s)["link_generation_status"] == "COMPLETED"
                ]
                if len(done) == len(ids) - 1:
                    break
                time.sleep(0.1)
            assert sorted(done) == sorted(ids[1:]), "the others did not wait for the hung call"
            assert session_row(engine, hung)["link_generation_status"] == "IN_PROGRESS"
        finally:
            online.release(hung)
            worker.join(timeout=60)
            stop.set()
            registrar.close()
        assert outcome["result"].success
        assert session_row(engine, hung)["link_generation_status"] == "COMPLETED"
        assert all(online.calls_for(s) == 1 for s in ids), "each session called once"


def test_a_sweep_opens_at_most_its_concurrency_of_calls_at_once(
    engine: Engine, db_url: str
) -> None:
    """The sweep no longer takes overdue sessions one after another: up to the documented
    JLG_GENERATION_CONCURRENCY at once, never more."""
    import threading

    ids = _due_sessions(engine, 12)
    for sid in ids:
        force_state(engine, sid, S.SCHEDULED, at_offset=timedelta(minutes=-40))

    class Slow(RecordingRegistrar):
        open_now = 0
        most = 0
        guard = threading.Lock()

        def bulk_register(self, request: BulkRegisterRequest) -> BulkRegisterResult:
            with self.guard:
                self.open_now += 1
                self.most = max(self.most, self.open_now)
            time.sleep(0.3)
            with self.guard:
                self.open_now -= 1
            return super().bulk_register(request)

    registrar = Slow()
    started = time.monotonic()
    result = join_link_fallback_sweep_job.execute_in_process(
        resources={
            "database": database(db_url, JLG_GENERATION_CONCURRENCY="3"),
            "registrar": registrar,
        },
        tags={"jlg/trigger": "cron"},
    )

    assert result.success
    assert registrar.most == 3
    assert time.monotonic() - started < 12 * 0.3, "not one after another"
    assert all(session_row(engine, s)["link_generation_status"] == "COMPLETED" for s in ids)


def test_near_times_due_together_share_a_direct_run(engine: Engine, db_url: str) -> None:
    """The direct path groups the same way: due direct launches share a run covering each
    launch by its tag, and once it exists the launches are retired, not asked for again."""
    scheduler = FakeScheduler()
    sync = ScheduleSync(
        ScheduleOutbox(engine), scheduler, ScheduleTarget("arn:q", ROLE_ARN), enabled=True
    )
    service = ProgramSessionService(ProgramSessionRepository(engine), IntentWrites(engine), sync)
    ids = [create_session(engine) for _ in range(7)]
    for sid in ids:
        service.set_link_generation(sid, datetime.now(UTC) + timedelta(seconds=1), 42)
    time.sleep(1.2)
    sensor = build_schedule_sync_sensor([SHARED], RunSharing(4, share_above=0))
    instance = DagsterInstance.ephemeral()

    def tick() -> Any:
        with build_sensor_context(
            instance=instance, resources={"database": database(db_url)}
        ) as context:
            return sensor(context)

    requests = [r for r in _requests(tick()) if r.job_name == SHARED.name]

    assert [len(_sessions_of(r)) for r in requests] == [4, 3]
    assert all(r.tags["jlg/trigger"] == "direct" for r in requests)
    registrar = RecordingRegistrar()
    for request in requests:
        outcome = SHARED.execute_in_process(
            run_config=request.run_config,
            tags=request.tags,
            instance=instance,
            resources={"database": database(db_url), "registrar": registrar},
        )
        assert outcome.success
    again = tick()
    assert not isinstance(again, SensorResult) or not [
        r for r in again.run_requests or [] if r.job_name == SHARED.name
    ]
    assert {c.session_id: c.actor_user_id for c in registrar.calls} == dict.fromkeys(ids, 42)
    assert ScheduleOutbox(engine).due_work()[0] == [], "every launch retired"


def test_a_tick_with_no_units_asks_the_instance_nothing() -> None:
    """The sync sensor asks for runs every 10 s, mostly with nothing due: no run count then."""

    class Untouchable:
        def __getattr__(self, name: str) -> Any:
            raise AssertionError(f"the instance was asked {name}")

    assert requests_for(Untouchable(), [], Trigger.DIRECT, RunSharing()) == []  # type: ignore[arg-type]


def test_a_shared_run_calls_its_sessions_in_the_queues_order(engine: Engine, db_url: str) -> None:
    """Whatever order its config lists them in, a run calls its sessions as the queue gives
    them: the one on time (due a minute ago) first, then the recovery ones by time."""
    offsets = [-3, -9, -1, -7, -5]
    ids = [create_session(engine) for _ in offsets]
    for sid, minutes in zip(ids, offsets, strict=True):
        force_state(engine, sid, S.SCHEDULED, at_offset=timedelta(minutes=minutes))
    registrar = RecordingRegistrar()
    outcome = SHARED.execute_in_process(
        run_config={
            "ops": {SHARED_OP: {"config": {"sessions": [{"programSessionId": s} for s in ids]}}}
        },
        resources={
            "database": database(db_url, JLG_GENERATION_CONCURRENCY="1"),
            "registrar": registrar,
        },
        raise_on_error=False,
    )
    assert outcome.success
    by_time = [sid for _, sid in sorted(zip(offsets, ids, strict=True))]
    assert [call.session_id for call in registrar.calls] == [by_time[-1], *by_time[:-1]]
