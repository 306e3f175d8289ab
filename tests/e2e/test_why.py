"""Why is it waiting, where the hold is the daemon's: a session the host armed (no event, no
worker alive) is held by "no worker" until the watchdog's next tick after its grace; asked
through the served API, the answer names that time, and the real daemon's watchdog launches the
worker that generates it then."""

from collections.abc import Callable
from datetime import datetime, timedelta

import httpx
import pytest
from sqlalchemy import Engine

from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.domain.status import LinkGenerationStatus
from jlg_pipeline.domain.validation import SessionId
from testkit.factories import add_registrations, create_session, force_state
from tests.e2e.conftest import Stack
from tests.support.web import admin_headers

pytestmark = pytest.mark.timeout(300)

GRACE_MS = 3000
STARTS_WITHIN_S = 20.0
"""A launched run's claim after the tick that launched it: the run worker's process starts
and loads the code location (8 to 12 s seen on this 2-core machine while the suite runs)."""


def test_no_worker_names_the_watchdog_tick_and_the_daemon_keeps_it(
    engine: Engine, start_stack: Callable[..., Stack]
) -> None:
    stack = start_stack(JLG_TEST_WATCHDOG_GRACE_MS=str(GRACE_MS))
    sid = create_session(engine, program_id=700)
    add_registrations(engine, 700, 5)
    # The host's own write: no event is on its way, and no worker is alive.
    force_state(engine, sid, LinkGenerationStatus.SCHEDULED, at_offset=timedelta(seconds=5))

    answer = httpx.get(
        f"{stack.web_url}/program-session/{sid}/link-generation/why",
        headers=admin_headers(),
        timeout=30,
    )

    assert answer.status_code == 200, answer.text
    data = answer.json()["data"]
    # "not due" as well while its time is ahead (the request may come after it on a slow host).
    assert [h["hold"] for h in data["holds"]][-1] == "no worker"
    named = datetime.fromisoformat(data["nextAt"])
    at = datetime.fromisoformat(data["linkGenerationAt"])
    assert named == at + timedelta(milliseconds=GRACE_MS, seconds=5)
    assert "a worker the watchdog launches" in data["next"]
    stack.wait_for(sid, "COMPLETED", timeout=120)
    [attempt] = ProgramSessionRepository(engine).attempts(SessionId(sid))
    assert attempt.trigger == "watchdog"
    assert attempt.claimed_at >= named - timedelta(seconds=5), "a tick comes every 5 s"
    assert attempt.claimed_at <= named + timedelta(seconds=STARTS_WITHIN_S), (
        attempt.claimed_at - named
    )
