"""Through the real dagster-daemon, with the application's PostgreSQL behind a relay: the
online-session service answers bulkRegister, then the database goes silent and fails over
before the run can record it. The run keeps its result and records it once the database is
back; the cycle gets one call and one job at the service (before: the run skipped its own
claim, the session stayed IN_PROGRESS until stale and the watchdog called again)."""

import threading
import time
from collections.abc import Callable
from datetime import timedelta

import pytest
from sqlalchemy import Engine

from devstack.online_session import OnlineSessionService
from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.domain.attempts import AttemptOutcome
from jlg_pipeline.domain.messages import build_message, cycle_id
from jlg_pipeline.domain.status import LinkGenerationStatus
from testkit.factories import create_session, force_state
from testkit.fault_proxy import FaultProxy, Mode
from tests.e2e.conftest import Stack

pytestmark = pytest.mark.timeout(300)

SILENT_S, REFUSING_S = 3.0, 3.0
STALE_MS = 90_000
"""The completion write is retried for half of it (45 s): longer than the fault plus one call
caught mid-statement by it, which its connection's bound ends (30 s for runs; Bounds.hold_s).
With 20 s, a mark that hung on its connection for those 30 s ran out of its 10 s and the run's
retry called again (same key, same job): one call more than the test counts."""


def test_a_failover_after_bulk_register_answered_costs_no_second_call(
    engine: Engine,
    start_stack: Callable[..., Stack],
    proxied_db: tuple[FaultProxy, str],
    online_session: OnlineSessionService,
) -> None:
    proxy, url = proxied_db
    stack = start_stack(
        JLG_DATABASE_URL=url,
        JLG_REGISTRAR="http",
        JLG_ONLINE_SESSION_URL=online_session.url,
        JLG_ONLINE_SESSION_TOKEN="svc-token-e2e",
        JLG_TEST_STALE_MS=str(STALE_MS),
    )
    sid = create_session(engine)
    force_state(engine, sid, LinkGenerationStatus.SCHEDULED, at_offset=timedelta(seconds=-1))

    def fail_over_once_answered() -> None:
        deadline = time.monotonic() + 120
        while online_session.calls_for(sid) == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        proxy.mode = Mode.SILENT
        time.sleep(SILENT_S)
        proxy.mode = Mode.REFUSING
        time.sleep(REFUSING_S)
        proxy.mode = Mode.PASSING

    faults = threading.Thread(target=fail_over_once_answered, daemon=True)
    faults.start()
    stack.send(build_message(sid, None))

    row = stack.wait_for(sid, "COMPLETED", timeout=90)
    faults.join(timeout=30)

    key = cycle_id(sid, row["link_generation_at"])
    history = ProgramSessionRepository(engine).attempts(sid)
    assert online_session.calls_for(sid) == 1, (history, stack.log_tail())
    assert [c["headers"].get("Idempotency-Key") for c in online_session.received] == [key]
    assert online_session.jobs == {key: row["link_generation_job_id"]}
    [attempt] = ProgramSessionRepository(engine).attempts(sid)
    assert (attempt.outcome, attempt.job_id) == (AttemptOutcome.COMPLETED, online_session.jobs[key])
