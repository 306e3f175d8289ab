"""End to end through the real dagster-daemon and web app: the real-time path, the fallback
sweep when no event is sent, crash recovery by stale reclaim, and duplicate delivery."""

import os
import signal
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select

from devstack.online_session import OnlineSessionService, online_session_service
from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.adapters.tables import local_bulk_job
from jlg_pipeline.domain.messages import build_message
from jlg_pipeline.domain.status import LinkGenerationStatus
from jlg_pipeline.domain.validation import SessionId
from jlg_pipeline.orchestration.tags import RUN_KEY_TAG
from testkit.factories import add_registrations, create_session, force_state
from tests.e2e.conftest import Stack

pytestmark = pytest.mark.timeout(300)


def _bulk_jobs(engine: Engine, session_id: int) -> int:
    with engine.connect() as conn:
        return int(
            conn.execute(
                select(func.count()).where(local_bulk_job.c.program_session_id == session_id)
            ).scalar_one()
        )


def _session(engine: Engine, registrants: int = 10) -> int:
    sid = create_session(engine, program_id=500)
    add_registrations(engine, 500, registrants)
    return sid


def test_event_fires_and_completes(engine: Engine, start_stack: Callable[..., Stack]) -> None:
    stack = start_stack()
    sid = _session(engine)
    at = datetime.now(UTC) + timedelta(minutes=10)
    response = stack.patch(sid, at)
    assert response.status_code == 200, response.text
    deadline = time.monotonic() + 5  # the upsert runs just after the response is sent
    while not stack.aws.client("scheduler").list_schedules()["Schedules"]:
        assert time.monotonic() < deadline, "the schedule was never created"
        time.sleep(0.1)
    # Ten minutes pass in a moment: the session comes due and EventBridge fires.
    force_state(engine, sid, LinkGenerationStatus.SCHEDULED, at_offset=timedelta(seconds=-1))
    assert stack.standin.tick(at + timedelta(seconds=1)) == 1

    row = stack.wait_for(sid, "COMPLETED")

    assert row["link_generation_attempt"] == 1
    assert _bulk_jobs(engine, sid) == 1
    assert stack.aws.client("scheduler").list_schedules()["Schedules"] == [], (
        "ActionAfterCompletion"
    )
    [attempt] = ProgramSessionRepository(engine).attempts(SessionId(sid))
    assert attempt.trigger == "event", "the sensor's tick asked for the run: Dagster says so"

    # A person copies that run's tags, its tick included, into the Launchpad.
    [run] = [r for r in stack.runs() if r.tags.get("jlg/session") == str(sid)]
    copied = {k: run.tags[k] for k in ("jlg/trigger", "dagster/tick", "dagster/sensor_name")}
    other = create_session(engine, program_id=500)
    force_state(engine, other, LinkGenerationStatus.SCHEDULED, at_offset=timedelta(seconds=-1))
    stack.launch(
        "join_link_generation_job",
        tags=copied,
        config={"ops": {"generate_join_links": {"config": {"programSessionId": other}}}},
    )
    stack.wait_for(other, "COMPLETED")
    [attempt] = ProgramSessionRepository(engine).attempts(other)
    assert attempt.trigger == "manual", "the tick on record did not ask for this run"


def test_a_near_time_completes_through_a_direct_run(
    engine: Engine, start_stack: Callable[..., Stack]
) -> None:
    """12 s ahead is too near for EventBridge (one-minute precision): no schedule, no message;
    the sync sensor launches the generation run once the time is due."""
    stack = start_stack()
    sid = _session(engine)
    at = datetime.now(UTC) + timedelta(seconds=12)
    assert stack.patch(sid, at).status_code == 200

    row = stack.wait_for(sid, "COMPLETED", timeout=150)

    finished = row["updated_at"]
    assert finished - at < timedelta(minutes=1), f"completed {finished - at} after its time"
    assert finished >= at - timedelta(seconds=1), "never before its time"
    assert stack.aws.client("scheduler").list_schedules()["Schedules"] == []
    assert stack.queue_depth() == 0
    assert stack.standin.delivered == 0
    [run] = [r for r in stack.runs() if r.tags.get("jlg/session") == str(sid)]
    assert run.tags["jlg/trigger"] == "direct"
    [attempt] = ProgramSessionRepository(engine).attempts(SessionId(sid))
    assert attempt.trigger == "direct"
    assert _bulk_jobs(engine, sid) == 1


def test_without_the_event_the_sweep_completes_after_grace(
    engine: Engine, start_stack: Callable[..., Stack]
) -> None:
    stack = start_stack(ENABLE_JOIN_LINK_SCHEDULER="false", JLG_TEST_GRACE_MS="1500")
    sid = _session(engine)
    assert stack.patch(sid, datetime.now(UTC) + timedelta(seconds=1)).status_code == 200
    time.sleep(3)  # past the grace window; also long enough for any deferred upsert to land
    assert stack.aws.client("scheduler").list_schedules()["Schedules"] == [], (
        "flag off: no schedule"
    )

    stack.launch_sweep()

    stack.wait_for(sid, "COMPLETED")
    assert _bulk_jobs(engine, sid) == 1


@pytest.fixture
def online_session() -> Iterator[OnlineSessionService]:
    with online_session_service(hold_first_call=True) as service:
        yield service


def _pid_owning_local_port(port: int) -> int | None:
    """The process whose TCP socket has this local port: the run calling bulkRegister."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(fields[9])
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            for fd in (proc / "fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:[") and target[8:-1] in inodes:
                    return int(proc.name)
        except OSError:
            continue
    return None


def test_killed_run_is_reclaimed_after_the_stale_window(
    engine: Engine, start_stack: Callable[..., Stack], online_session: OnlineSessionService
) -> None:
    stack = start_stack(
        JLG_REGISTRAR="http",
        JLG_ONLINE_SESSION_URL=online_session.url,
        JLG_ONLINE_SESSION_TOKEN="e2e-token",
        JLG_TEST_STALE_MS="8000",
        JLG_TEST_GRACE_MS="1000",
        # A call's bound stays under half the stale window (docs/design.md, bulkRegister).
        JLG_ONLINE_SESSION_TIMEOUT_S="3",
    )
    sid = _session(engine)
    assert stack.patch(sid, datetime.now(UTC) + timedelta(seconds=2)).status_code == 200
    assert online_session.wait_first_call(sid, 90), stack.log_tail()
    worker = _pid_owning_local_port(online_session.received[0]["client_port"])
    assert worker is not None, "the run worker is inside bulkRegister"
    os.kill(worker, signal.SIGKILL)
    time.sleep(1)
    stuck = stack.wait_for(sid, "IN_PROGRESS", timeout=5)
    assert stuck["link_generation_attempt"] == 1
    time.sleep(8.5)  # past the (shortened) stale window

    stack.launch_sweep()

    row = stack.wait_for(sid, "COMPLETED")
    assert row["link_generation_attempt"] == 2
    assert row["link_generation_job_id"] == f"job-{sid}-2"
    assert online_session.calls == 2


def test_the_same_message_delivered_several_times_generates_once(
    engine: Engine, start_stack: Callable[..., Stack]
) -> None:
    stack = start_stack()
    sid = _session(engine)
    # Due just now: a time the watchdog's grace (75 s) had passed would let it launch a run
    # of its own, rightly, whenever the deliveries' runs are slow to start.
    force_state(engine, sid, LinkGenerationStatus.SCHEDULED, at_offset=timedelta(seconds=-1))
    message = build_message(sid, 1)
    sent = [stack.send(message) for _ in range(4)]

    stack.wait_for(sid, "COMPLETED")
    deadline = time.monotonic() + 90
    while stack.queue_depth() and time.monotonic() < deadline:
        time.sleep(1)
    assert stack.queue_depth() == 0, "every message deleted once its run exists"
    assert _bulk_jobs(engine, sid) == 1
    run_keys = sorted(run.tags[RUN_KEY_TAG] for run in stack.runs())
    assert run_keys == sorted(f"sqs-{message_id}" for message_id in sent)
