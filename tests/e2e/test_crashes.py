"""Hosts that die mid-work, through the real dagster-daemon: a generation run killed before
its op claims (out of memory, node loss) leaves its message acknowledged and its session
SCHEDULED; the watchdog still has it generated, once, within 2 minutes of its time. A shared
run killed mid-way leaves each of its sessions to the watchdog, none generated twice."""

import os
import signal
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine, func, select

from devstack.online_session import Answer, online_session_service
from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.adapters.tables import generation_attempt, local_bulk_job
from jlg_pipeline.domain.messages import build_message
from jlg_pipeline.domain.status import LinkGenerationStatus
from testkit.factories import add_registrations, create_session, force_state
from testkit.processes import run_worker_pids
from tests.e2e.conftest import Stack

pytestmark = pytest.mark.timeout(300)


def _count(engine: Engine, table: object, session_id: int) -> int:
    column = table.c.program_session_id  # type: ignore[attr-defined]
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).where(column == session_id)).scalar_one())


def test_a_run_killed_before_it_claims_is_still_generated_within_two_minutes(
    engine: Engine, start_stack: Callable[..., Stack]
) -> None:
    stack = start_stack(JLG_TEST_WATCHDOG_GRACE_MS="15000")
    sid = create_session(engine, program_id=501)
    add_registrations(engine, 501, 5)
    force_state(engine, sid, LinkGenerationStatus.SCHEDULED, at_offset=timedelta(0))
    due_at = datetime.now(UTC)
    before = run_worker_pids(stack.daemon_group)
    stack.send(build_message(sid, 42))

    deadline = time.monotonic() + 60
    worker = None
    while worker is None and time.monotonic() < deadline:
        fresh = run_worker_pids(stack.daemon_group) - before
        worker = min(fresh) if fresh else None
        time.sleep(0.02)
    assert worker is not None, f"no run worker started\n{stack.log_tail()}"
    os.kill(worker, signal.SIGSTOP)
    assert _count(engine, generation_attempt, sid) == 0, "stopped before its op claimed"
    os.kill(worker, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while stack.queue_depth() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert stack.queue_depth() == 0, "the message was acknowledged: its run exists"

    row = stack.wait_for(sid, "COMPLETED", timeout=120)

    assert row["updated_at"] - due_at < timedelta(minutes=2)
    assert _count(engine, local_bulk_job, sid) == 1, "generated once"
    [attempt] = ProgramSessionRepository(engine).attempts(sid)
    assert attempt.trigger == "watchdog"
    assert attempt.lag < timedelta(minutes=2)


def test_a_shared_run_killed_mid_way_leaves_no_session_behind_or_twice(
    engine: Engine, start_stack: Callable[..., Stack]
) -> None:
    """Sharing forced on (``JLG_SHARE_RUNS_ABOVE=0``; docs/design.md "Bursts"): a burst's
    shared run is killed while some of its
    sessions are generated, some in bulkRegister and some not yet claimed. Its messages were
    acknowledged (the run exists), so the watchdog claims the ones left (SCHEDULED at once,
    the killed claims once stale): every session ends COMPLETED by exactly one attempt, and
    the ones generated before the kill are never called again."""
    with online_session_service() as online:
        online.answer = Answer(delay=1.0)
        stack = start_stack(
            JLG_MAX_SESSIONS_PER_RUN="25",
            JLG_SHARE_RUNS_ABOVE="0",
            JLG_GENERATION_CONCURRENCY="2",
            JLG_REGISTRAR="http",
            JLG_ONLINE_SESSION_URL=online.url,
            JLG_ONLINE_SESSION_TOKEN="e2e-token",
            # Long enough that the SQS sensor, not the watchdog, launches the burst's run.
            JLG_TEST_WATCHDOG_GRACE_MS="15000",
            JLG_TEST_STALE_MS="6000",
            JLG_ONLINE_SESSION_TIMEOUT_S="2.5",
        )
        ids = [create_session(engine, program_id=502) for _ in range(8)]
        for sid in ids:
            force_state(engine, sid, LinkGenerationStatus.SCHEDULED, at_offset=timedelta(0))
        before = run_worker_pids(stack.daemon_group)
        stack.send_together([build_message(sid, 42) for sid in ids])

        def generated() -> set[int]:
            repository = ProgramSessionRepository(engine)
            return {
                sid
                for sid in ids
                if (attempts := repository.attempts(sid))
                and attempts[0].outcome.value == "COMPLETED"
            }

        # Mid-way: some generated, another in bulkRegister.
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            done = generated()
            if done and online.calls > len(done):
                break
            time.sleep(0.02)
        workers = run_worker_pids(stack.daemon_group) - before
        assert workers, f"no run worker\n{stack.log_tail()}"
        for worker in workers:
            os.kill(worker, signal.SIGKILL)
        done_before = generated()
        assert 0 < len(done_before) < len(ids), "killed mid-way"
        deadline = time.monotonic() + 30
        while stack.queue_depth() and time.monotonic() < deadline:
            time.sleep(0.5)
        assert stack.queue_depth() == 0, "acknowledged: the run covering them exists"

        for sid in ids:
            stack.wait_for(sid, "COMPLETED", timeout=120)

        repository = ProgramSessionRepository(engine)
        for sid in ids:
            outcomes = [a.outcome.value for a in repository.attempts(sid)]
            assert outcomes.count("COMPLETED") == 1, (sid, outcomes)
            assert set(outcomes) <= {"COMPLETED", "RECLAIMED"}, (sid, outcomes)
        for generated_id in done_before:
            assert online.calls_for(generated_id) == 1, "generated before the kill: never again"
        event_runs = {
            a.run_id for sid in ids for a in repository.attempts(sid) if a.trigger == "event"
        }
        triggers = {sid: [a.trigger for a in repository.attempts(sid)] for sid in ids}
        assert len(event_runs) == 1, f"the burst shared one run: {triggers}"
        for sid in set(ids) - done_before:
            [completed] = [a for a in repository.attempts(sid) if a.outcome.value == "COMPLETED"]
            assert completed.trigger == "watchdog"
