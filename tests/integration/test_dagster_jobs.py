"""The jobs with execute_in_process against real PostgreSQL and the fake registrar."""

import re
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from dagster import DagsterInstance, JobDefinition
from sqlalchemy import Engine, text

from devstack.online_session import Answer, online_session_service
from jlg_pipeline.adapters.queue import SessionQueue
from jlg_pipeline.adapters.registrars.http import HttpRegistrar
from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.domain.attempts import AttemptOutcome, Trigger
from jlg_pipeline.domain.errors import RegistrarRejected, RegistrarUnavailable
from jlg_pipeline.domain.generation import BulkRegisterRequest
from jlg_pipeline.domain.lanes import Lane
from jlg_pipeline.domain.status import LinkGenerationStatus
from jlg_pipeline.domain.validation import SessionId
from jlg_pipeline.orchestration.fallback import join_link_backfill_job, join_link_fallback_sweep_job
from jlg_pipeline.orchestration.generation import build_generation_job, build_shared_generation_job
from jlg_pipeline.orchestration.generation_runs import shared_run_request
from jlg_pipeline.orchestration.run_outcome import COUNT_TAGS
from jlg_pipeline.orchestration.tags import TRIGGER_TAG
from testkit.factories import create_session, end_retry_wait, force_state, session_row
from tests.support.fakes import RecordingRegistrar
from tests.support.resources import database

S = LinkGenerationStatus
FAST_RETRIES = build_generation_job(retry_delay_seconds=0)


def _run(
    job: JobDefinition,
    db_url: str,
    fake: RecordingRegistrar,
    *,
    run_config: dict[str, Any] | None = None,
    tags: dict[str, str] | None = None,
    partition_key: str | None = None,
    instance: DagsterInstance | None = None,
    environ: dict[str, str] | None = None,
) -> Any:
    return job.execute_in_process(
        run_config=run_config,
        resources={"database": database(db_url, **(environ or {})), "registrar": fake},
        instance=instance or DagsterInstance.ephemeral(),
        tags=tags,
        partition_key=partition_key,
        raise_on_error=False,
    )


def _generate_config(sid: int, **extra: Any) -> dict[str, Any]:
    return {"ops": {"generate_join_links": {"config": {"programSessionId": sid, **extra}}}}


def _metadata(result: Any, op: str) -> dict[str, Any]:
    for event in result.events_for_node(op):
        if event.event_type_value == "STEP_OUTPUT":
            return {k: v.value for k, v in event.step_output_data.metadata.items()}
    raise AssertionError(f"no output from {op}")


def test_generation_run_completes_with_metadata(engine: Engine, db_url: str) -> None:
    sid = create_session(engine)
    force_state(engine, sid, S.SCHEDULED)
    fake = RecordingRegistrar(total=9)
    instance = DagsterInstance.ephemeral()
    result = _run(
        FAST_RETRIES,
        db_url,
        fake,
        run_config=_generate_config(sid, role="attendee", batchSize=50, actorUserId=4),
        tags={TRIGGER_TAG: "event"},
        instance=instance,
    )
    assert result.success
    metadata = _metadata(result, "generate_join_links")
    assert metadata["outcome"] == "completed"
    assert metadata["attempt"] == 1
    assert metadata["total"] == 9
    assert metadata["jobId"] == session_row(engine, sid)["link_generation_job_id"]
    assert session_row(engine, sid)["link_generation_status"] == S.COMPLETED.value
    cycle = session_row(engine, sid)["link_generation_at"]
    assert metadata["cycle"] == cycle.isoformat()
    assert 60 <= metadata["lag_seconds"] < 70, "due a minute ago: claimed a minute late"
    stored = instance.get_run_by_id(result.run_id)
    assert stored is not None
    assert stored.tags["jlg/cycle"] == f"join-link-{sid}@{cycle:%Y-%m-%dT%H:%M:%SZ}"
    [call] = fake.calls
    assert (call.role, call.batch_size, call.actor_user_id) == ("attendee", 50, 4)


def test_a_run_for_one_session_then_takes_what_waits_in_the_queue(
    engine: Engine, db_url: str
) -> None:
    """Runs are workers (docs/design.md "One queue"): a run launched for one session claims
    it first, with its own options, then takes the other sessions that wait (another
    programme's too, with the options recorded for their cycle), lists them beside its own
    story, and leaves no heartbeat behind; a session not yet due waits on."""
    sid = create_session(engine)
    waiting = [create_session(engine, program_id=2), create_session(engine, program_id=3)]
    later = create_session(engine)
    for each in (sid, *waiting):
        force_state(engine, each, S.SCHEDULED)
    force_state(engine, later, S.SCHEDULED, at_offset=timedelta(hours=1))
    SessionQueue(engine).record([BulkRegisterRequest(waiting[0], role="host")])
    fake = RecordingRegistrar()
    result = _run(FAST_RETRIES, db_url, fake, run_config=_generate_config(sid, role="attendee"))
    assert result.success
    metadata = _metadata(result, "generate_join_links")
    assert (metadata["session_id"], metadata["outcome"]) == (sid, "completed")
    assert metadata["from_queue"] == 2
    for each in waiting:
        assert f"| {each} | completed |" in metadata["from_queue_sessions"]
    assert {c.session_id: c.role for c in fake.calls} == {
        sid: "attendee",
        waiting[0]: "host",
        waiting[1]: None,
    }
    assert fake.calls[0].session_id == sid, "its own session first"
    assert session_row(engine, later)["link_generation_status"] == S.SCHEDULED.value
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM jlg_worker")).scalar_one() == 0


def test_lost_claim_succeeds_with_the_reason(engine: Engine, db_url: str) -> None:
    sid = create_session(engine)
    force_state(engine, sid, S.COMPLETED)
    fake = RecordingRegistrar()
    result = _run(FAST_RETRIES, db_url, fake, run_config=_generate_config(sid))
    assert result.success
    metadata = _metadata(result, "generate_join_links")
    assert (metadata["outcome"], metadata["reason"]) == ("skipped", "already COMPLETED this cycle")
    assert fake.calls == []


def _retry_in(engine: Engine, sid: int) -> float | None:
    """Seconds from now until the watchdog may try the session again (None: never)."""
    with engine.connect() as conn:
        seconds = conn.execute(
            text(
                "SELECT extract(epoch FROM link_generation_retry_at - now())"
                " FROM hdb_program_session WHERE id = :sid"
            ),
            {"sid": sid},
        ).scalar_one()
    return None if seconds is None else float(seconds)


def test_a_retryable_failure_ends_the_run_and_leaves_the_session_for_the_watchdog(
    engine: Engine, db_url: str
) -> None:
    """No run waits on a failing service (its slot is free at once): the session is FAILED
    with the time a worker takes it again, and the run's failure says so."""
    sid = create_session(engine)
    force_state(engine, sid, S.SCHEDULED)
    fake = RecordingRegistrar(error=RegistrarUnavailable("upstream 503"))
    started = time.monotonic()
    result = _run(FAST_RETRIES, db_url, fake, run_config=_generate_config(sid))
    assert not result.success
    assert time.monotonic() - started < 10, "no retry waits in the run"
    assert len(fake.calls) == 1
    row = session_row(engine, sid)
    assert row["link_generation_status"] == S.FAILED.value
    assert "upstream 503" in row["link_generation_last_error"]
    retry_in = _retry_in(engine, sid)
    assert retry_in is not None
    assert 5 < retry_in <= 10, "the first backoff"
    failure = result.failure_data_for_node("generate_join_links")
    assert failure is not None
    assert "a worker takes it from the queue again in 10 s" in failure.error.message.splitlines()[0]
    queue = SessionQueue(engine)
    assert not queue.attendance(60).unattended, "not before its wait"
    end_retry_wait(engine, sid)
    assert queue.attendance(60).unattended


def test_the_watchdog_completes_it_once_the_service_is_back(engine: Engine, db_url: str) -> None:
    sid = create_session(engine)
    force_state(engine, sid, S.SCHEDULED)

    class FlakyOnce(RecordingRegistrar):
        def bulk_register(self, request: Any) -> Any:
            self.error = RegistrarUnavailable("blip") if not self.calls else None
            return super().bulk_register(request)

    fake = FlakyOnce()
    assert not _run(FAST_RETRIES, db_url, fake, run_config=_generate_config(sid)).success
    end_retry_wait(engine, sid)
    shared = build_shared_generation_job().execute_in_process(
        run_config=shared_run_request([], Trigger.WATCHDOG, Lane.RECOVERY).run_config,
        resources={"database": database(db_url), "registrar": fake},
        instance=DagsterInstance.ephemeral(),
    )
    assert shared.success
    assert len(fake.calls) == 2
    row = session_row(engine, sid)
    assert row["link_generation_status"] == S.COMPLETED.value
    assert {c.idempotency_key for c in fake.calls} == {
        f"join-link-{sid}@{row['link_generation_at']:%Y-%m-%dT%H:%M:%SZ}"
    }


def test_a_failure_past_the_cycles_budget_is_left_to_the_sweep(engine: Engine, db_url: str) -> None:
    """The watchdog retries a cycle for RETRY_BUDGET_S (24 h) after its time, then stops."""
    sid = create_session(engine)
    force_state(engine, sid, S.SCHEDULED, at_offset=timedelta(hours=-24, seconds=5))
    fake = RecordingRegistrar(error=RegistrarUnavailable("upstream 503"))
    assert not _run(FAST_RETRIES, db_url, fake, run_config=_generate_config(sid)).success
    assert session_row(engine, sid)["link_generation_status"] == S.FAILED.value
    assert _retry_in(engine, sid) is None


@pytest.mark.parametrize("sweep_on", [True, False])
def test_non_retryable_failure_fails_at_once_and_says_what_happens_next(
    engine: Engine, db_url: str, sweep_on: bool
) -> None:
    """The failure's first line says it is not retryable, who tries it again (the sweep at
    its next time, or nobody when it is off) and what a person can do; the run's ``jlg/next``
    tag says the same for the Runs list; no traceback of ours is chained to it."""
    sid = create_session(engine)
    force_state(engine, sid, S.SCHEDULED)
    fake = RecordingRegistrar(error=RegistrarRejected("400 unknown role"))
    instance = DagsterInstance.ephemeral()
    result = _run(
        FAST_RETRIES,
        db_url,
        fake,
        run_config=_generate_config(sid),
        instance=instance,
        environ={"ENABLE_JOIN_LINK_FALLBACK_CRON": "true" if sweep_on else "false"},
    )
    assert not result.success
    assert len(fake.calls) == 1
    assert session_row(engine, sid)["link_generation_status"] == S.FAILED.value
    failure = result.failure_data_for_node("generate_join_links")
    first_line = failure.error.message.splitlines()[0]
    assert "400 unknown role" in first_line
    run = instance.get_run_by_id(result.run_id)
    assert run is not None
    tags = run.tags
    if sweep_on:
        assert re.search(r"not retryable: the sweep at \d\d:00 UTC tries it again", first_line)
        assert re.fullmatch(r"sweep at \d{4}-\d\d-\d\dT\d\d:00:00Z", tags["jlg/next"])
    else:
        assert "not retryable, and the sweep is off" in first_line
        assert tags["jlg/next"] == "a person"
    assert failure.error.cause is None, "the message, not our stack, comes first"


def test_invalid_run_config_fails_without_writing(engine: Engine, db_url: str) -> None:
    sid = create_session(engine)
    force_state(engine, sid, S.SCHEDULED)
    before = session_row(engine, sid)
    fake = RecordingRegistrar()
    result = _run(FAST_RETRIES, db_url, fake, run_config=_generate_config(sid, batchSize=0))
    assert not result.success
    assert fake.calls == []
    assert session_row(engine, sid) == before


def _overdue(engine: Engine, count: int, minutes_back: int = 60) -> list[SessionId]:
    ids = []
    for i in range(count):
        sid = create_session(engine, online=False)
        force_state(engine, sid, S.SCHEDULED, at_offset=timedelta(minutes=-(minutes_back + i)))
        ids.append(sid)
    return ids


def test_sweep_selects_oldest_within_the_limit_and_reports(engine: Engine, db_url: str) -> None:
    ids = _overdue(engine, 4)
    recent = create_session(engine, online=False)
    force_state(engine, recent, S.SCHEDULED, at_offset=timedelta(minutes=-5))
    fake = RecordingRegistrar()
    instance = DagsterInstance.ephemeral()
    result = _run(
        join_link_fallback_sweep_job,
        db_url,
        fake,
        run_config={"ops": {"sweep_overdue_sessions": {"config": {"batchLimit": 3}}}},
        instance=instance,
    )
    assert result.success
    run = instance.get_run_by_id(result.run_id)
    assert run is not None
    counts = {k: v for k, v in run.tags.items() if k.split("/")[-1] in COUNT_TAGS}
    assert counts == {
        "jlg/found": "3",
        "jlg/completed": "3",
        "jlg/skipped": "0",
        "jlg/failed": "0",
        "jlg/left_behind": "1",
    }, "the Runs list tells the sweep's story"
    metadata = _metadata(result, "sweep_overdue_sessions")
    assert (
        metadata["found"],
        metadata["completed"],
        metadata["failed"],
        metadata["left_behind"],
    ) == (3, 3, 0, 1)
    # The oldest three, generated JLG_GENERATION_CONCURRENCY at once (so called in any order);
    # the run lists them in the order taken, each with its outcome and lateness.
    assert sorted(c.session_id for c in fake.calls) == sorted(list(reversed(ids))[:3])
    listed = metadata["sessions"].splitlines()[2:]
    assert [row.split("|")[1:3] for row in listed] == [
        [f" {sid} ", " completed "] for sid in list(reversed(ids))[:3]
    ]
    assert 63 * 60 <= metadata["lag_max_seconds"] < 63 * 60 + 30
    assert 62 * 60 <= metadata["lag_median_seconds"] < 62 * 60 + 30
    assert session_row(engine, recent)["link_generation_status"] == S.SCHEDULED.value


def test_sweep_goes_past_a_failing_session_then_fails_the_run(engine: Engine, db_url: str) -> None:
    ids = _overdue(engine, 3)

    class FailsMiddle(RecordingRegistrar):
        """Decides per request, not through shared state: the sweep calls several at once."""

        def bulk_register(self, request: Any) -> Any:
            if request.session_id == ids[1]:
                with self._lock:
                    self.calls.append(request)
                raise RegistrarUnavailable("down")
            return super().bulk_register(request)

    fake = FailsMiddle()
    result = _run(join_link_fallback_sweep_job, db_url, fake)
    assert not result.success
    assert len(fake.calls) == 3
    statuses = [session_row(engine, sid)["link_generation_status"] for sid in ids]
    assert statuses == [S.COMPLETED.value, S.FAILED.value, S.COMPLETED.value]
    failure = result.failure_data_for_node("sweep_overdue_sessions")
    assert failure is not None
    first_line = failure.error.message.splitlines()[0]
    assert (
        f"retryable [{ids[1]}]: a worker takes them from the queue again after their wait"
        in first_line
    )
    assert f"| {ids[1]} | failed |" in failure.user_failure_data.metadata["sessions"].value


def test_backfill_partition_regenerates_its_day_only(engine: Engine, db_url: str) -> None:
    yesterday = (datetime.now(UTC) - timedelta(days=1)).replace(
        hour=12, minute=0, second=0, microsecond=0
    )
    day = yesterday.strftime("%Y-%m-%d")

    def at(moment: datetime, status: S) -> int:
        sid = create_session(engine, online=False)
        force_state(engine, sid, status, at_offset=moment - datetime.now(UTC))
        return sid

    in_day = [at(yesterday, S.SCHEDULED), at(yesterday + timedelta(hours=3), S.FAILED)]
    completed = at(yesterday, S.COMPLETED)
    other_day = at(yesterday - timedelta(days=1), S.SCHEDULED)
    fake = RecordingRegistrar()

    result = _run(join_link_backfill_job, db_url, fake, partition_key=day)

    assert result.success
    assert sorted(c.session_id for c in fake.calls) == sorted(in_day)
    assert session_row(engine, completed)["link_generation_job_id"] is None
    assert session_row(engine, other_day)["link_generation_status"] == S.SCHEDULED.value
    assert _metadata(result, "backfill_partition_sessions")["completed"] == 2


@pytest.mark.parametrize("job", [join_link_fallback_sweep_job, join_link_backfill_job])
def test_jobs_use_the_in_process_executor(job: JobDefinition) -> None:
    assert job.executor_def.name == "in_process"


def _http_run(db_url: str, url: str, sid: int, timeout_s: float = 5.0) -> Any:
    registrar = HttpRegistrar(url, "svc-token", timeout_s=timeout_s)
    try:
        return FAST_RETRIES.execute_in_process(
            run_config=_generate_config(sid),
            resources={
                "database": database(db_url),
                "registrar": registrar,
            },
            instance=DagsterInstance.ephemeral(),
            tags={TRIGGER_TAG: "event"},
            raise_on_error=False,
        )
    finally:
        registrar.close()


def test_a_retry_after_pauses_every_caller_for_that_long(engine: Engine, db_url: str) -> None:
    """A 429 with Retry-After: the session waits that long, and so does every other one:
    nothing calls the service until the pause is over. The run, a worker of the queue, waits
    out a pause this short (holding no claim; a longer one leaves the sessions for then:
    test_service_view) and then takes both from the queue; the next run finds nothing left."""
    sid, other = create_session(engine), create_session(engine)
    force_state(engine, sid, S.SCHEDULED)
    force_state(engine, other, S.SCHEDULED)
    with online_session_service() as service:
        service.queue = [Answer(status=429, body=b"{}", headers={"Retry-After": "2"})]
        first = _http_run(db_url, service.url, sid)
        second = _http_run(db_url, service.url, other)
    assert first.success, "its own session ended completed, taken again after the pause"
    assert _metadata(first, "generate_join_links")["outcome"] == "completed"
    assert _metadata(first, "generate_join_links")["from_queue"] == 2
    assert _metadata(second, "generate_join_links")["outcome"] == "skipped"
    throttled, *called = (call["at"] for call in service.received)
    assert len(called) == 2
    assert min(called) - throttled >= 1.9, "nothing called the service during the pause"
    for each in (sid, other):
        assert session_row(engine, each)["link_generation_status"] == S.COMPLETED.value
    first_attempt = ProgramSessionRepository(engine).attempts(sid)[-1]
    assert first_attempt.attempt == 1
    assert first_attempt.outcome is AttemptOutcome.FAILED


def test_408_backs_off_without_pausing_the_others(engine: Engine, db_url: str) -> None:
    sid, other = create_session(engine), create_session(engine)
    force_state(engine, sid, S.SCHEDULED)
    force_state(engine, other, S.SCHEDULED)
    with online_session_service() as service:
        service.queue = [Answer(status=408, body=b"{}")]
        assert not _http_run(db_url, service.url, sid).success
        assert _http_run(db_url, service.url, other).success
    retry_in = _retry_in(engine, sid)
    assert retry_in is not None
    assert 5 < retry_in <= 10


def test_422_is_not_retried(engine: Engine, db_url: str) -> None:
    sid = create_session(engine)
    force_state(engine, sid, S.SCHEDULED)
    with online_session_service() as service:
        service.answer = Answer(status=422, body=b'{"code": "NO_MEETING"}')
        result = _http_run(db_url, service.url, sid)
    assert not result.success
    assert service.calls == 1
    row = session_row(engine, sid)
    assert row["link_generation_status"] == S.FAILED.value
    assert (
        row["link_generation_last_error"]
        == "RegistrarRejected: bulkRegister answered 422 (NO_MEETING)"
    )


def test_a_trickling_answer_hits_the_deadline_and_is_left_for_the_watchdog(
    engine: Engine, db_url: str
) -> None:
    sid = create_session(engine)
    force_state(engine, sid, S.SCHEDULED)
    with online_session_service() as service:
        service.queue = [Answer(trickle_interval=0.3)]
        started = time.monotonic()
        result = _http_run(db_url, service.url, sid, timeout_s=1.5)
    assert not result.success
    assert service.calls == 1
    assert time.monotonic() - started < 6
    assert session_row(engine, sid)["link_generation_status"] == S.FAILED.value
    assert _retry_in(engine, sid) is not None


def test_each_generation_run_is_tagged_with_what_it_did(engine: Engine, db_url: str) -> None:
    sid = create_session(engine)
    force_state(engine, sid, S.SCHEDULED)
    instance = DagsterInstance.ephemeral()

    def run(fake: RecordingRegistrar, session_id: int) -> str | None:
        result = FAST_RETRIES.execute_in_process(
            run_config=_generate_config(session_id),
            resources={"database": database(db_url), "registrar": fake},
            instance=instance,
            raise_on_error=False,
        )
        stored = instance.get_run_by_id(result.run_id)
        assert stored is not None
        return stored.tags.get("jlg/outcome")

    assert run(RecordingRegistrar(), sid) == "completed"
    assert run(RecordingRegistrar(), sid) == "skipped"
    failing = create_session(engine)
    force_state(engine, failing, S.SCHEDULED)
    assert (
        run(RecordingRegistrar(error=RegistrarRejected("bulkRegister answered 422")), failing)
        == "failed"
    )


def test_a_manually_launched_sweep_carries_a_trigger_tag() -> None:
    assert join_link_fallback_sweep_job.tags[TRIGGER_TAG] == "manual"


def test_backfill_partitions_include_today() -> None:
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    assert join_link_backfill_job.partitions_def is not None
    assert join_link_backfill_job.partitions_def.get_partition_keys()[-1] == today
