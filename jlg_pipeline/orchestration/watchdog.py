"""``join_link_watchdog_sensor``: a due session that no live attempt holds is claimed within 2
minutes of its time, whatever became of its event: never scheduled, lost, delivered late, its
run dead before it claimed, a stuck or dead sync run, a zombie run holding the session's slot
(docs/design.md "Hung parts and crashed hosts").

The waiting work is in the database (docs/design.md "One queue"), and the watchdog only makes
sure a worker drains it. Every ``WATCHDOG_INTERVAL_S`` it refreshes the programmes' turns (so
sessions armed by anyone join the queue) and asks the queue two things, reading only our
tables: does a session wait that no path is on its way to (SCHEDULED more than the watchdog's
grace, 75 s, past its time; FAILED with its retry due; IN_PROGRESS gone stale), and is a worker
alive (a run draining the queue that beat within ``liveness_s``)? Work unattended and no live
worker: it launches one (a shared run listing nothing, trigger ``watchdog``, lane ``recovery``,
at most one a ``WORKER_LAUNCH_EVERY_S`` by its run key). The worker takes what the queue gives
next, the sessions of every path and class in the queue's order, until none waits. Each
session still goes through its own claim: a worker racing a late event costs a skipped claim,
never a second generation. The TRD's 30-minute grace stays the sweep's, which also re-attempts
FAILED sessions, the non-retryable ones included.

It follows the online-session service's shared view (domain/service_view.py): nothing while a
pause longer than a caller waits out holds, or a probe is out; a worker launched while the
service is down makes the one probe the view allows, and ends when it is told to wait."""

import time

from dagster import (
    DefaultSensorStatus,
    JobDefinition,
    ResourceParam,
    SensorDefinition,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    sensor,
)

from jlg_pipeline.domain.attempts import Trigger
from jlg_pipeline.domain.constants import WATCHDOG_INTERVAL_S
from jlg_pipeline.domain.errors import DatabaseUnavailable, SessionNotFound
from jlg_pipeline.domain.lanes import Lane
from jlg_pipeline.domain.service_view import MAX_SLOT_WAIT_S
from jlg_pipeline.domain.validation import SessionId
from jlg_pipeline.orchestration.generation_runs import shared_run_request
from jlg_pipeline.orchestration.resources import RunDatabase
from jlg_pipeline.orchestration.sensor_ticks import minimum_interval
from jlg_pipeline.services.drain import liveness_s
from jlg_pipeline.services.why import one_line

WORKER_LAUNCH_EVERY_S = 30
"""A worker the watchdog launched has this long to start and beat before another is launched
(Dagster drops a second request under the same run key): a run starts in seconds."""


def build_watchdog_sensor(shared_job: JobDefinition) -> SensorDefinition:
    @sensor(
        name="join_link_watchdog_sensor",
        job=shared_job,
        minimum_interval_seconds=minimum_interval(WATCHDOG_INTERVAL_S),
        default_status=DefaultSensorStatus.RUNNING,
        description="Launches a worker of the one queue when a due session waits unattended "
        "(75 s after its time, a retry due, a stale claim) and no worker is alive.",
    )
    def join_link_watchdog_sensor(
        context: SensorEvaluationContext, database: ResourceParam[RunDatabase]
    ) -> SensorResult | SkipReason:
        if not database.scheduler_enabled:
            return SkipReason("ENABLE_JOIN_LINK_SCHEDULER is off: the watchdog is off too")
        look = database.view().look()
        held_until = look.held_until(patience_s=MAX_SLOT_WAIT_S)
        queue = database.queue()
        if held_until is None:
            try:
                # Sessions armed by anyone, the host's own writes included, join their
                # programme's turn (adapters/pick.py): a worker's next claim finds them.
                queue.refresh()
            except DatabaseUnavailable as exc:
                context.log.warning(f"the programmes' turns not refreshed: {exc}")
        attendance = queue.attendance(liveness_s(database.call_bound_s))
        oldest = _oldest(context, database, attendance.oldest)
        if held_until is not None:
            return SkipReason(
                f"the online-session service holds every call until "
                f"{held_until.isoformat()} ({look.why_held()}): nothing is launched before"
                f"{oldest}"
            )
        if not attendance.unattended:
            return SkipReason(f"no due session waits unattended{oldest}")
        if attendance.live_workers:
            return SkipReason(
                f"sessions wait; {attendance.live_workers} live worker(s) drain the queue{oldest}"
            )
        slot = int(time.time() // WORKER_LAUNCH_EVERY_S)
        context.log.info("due sessions wait unattended and no worker is alive: launching one")
        return SensorResult(
            run_requests=[
                shared_run_request([], Trigger.WATCHDOG, Lane.RECOVERY, run_key=f"worker-{slot}")
            ]
        )

    return join_link_watchdog_sensor


def _oldest(
    context: SensorEvaluationContext, database: RunDatabase, session_id: SessionId | None
) -> str:
    """The oldest waiting session and what holds it, for the skip reason ("" if none waits)."""
    if session_id is None:
        return ""
    try:
        return f"; the oldest waiting, {one_line(database.why(session_id))}"
    except (DatabaseUnavailable, SessionNotFound) as exc:
        context.log.warning(f"why session {session_id} waits, not read: {exc}")
        return f"; the oldest waiting: session {session_id}"
