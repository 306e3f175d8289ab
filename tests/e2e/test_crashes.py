"""Hosts that die mid-work, through the real dagster-daemon: a generation run killed before
its op claims (out of memory, node loss) leaves its message acknowledged and its session
SCHEDULED; the watchdog still has it generated, once, within 2 minutes of its time."""

import os
import signal
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine, func, select

from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.adapters.tables import generation_attempt, local_bulk_job
from jlg_pipeline.domain.messages import build_message
from jlg_pipeline.domain.status import LinkGenerationStatus
from jlg_pipeline.local.processes import run_worker_pids
from tests.e2e.conftest import Stack
from tests.support.factories import add_registrations, create_session, force_state

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
    before = run_worker_pids()
    stack.send(build_message(sid, 42))

    deadline = time.monotonic() + 60
    worker = None
    while worker is None and time.monotonic() < deadline:
        fresh = run_worker_pids() - before
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
