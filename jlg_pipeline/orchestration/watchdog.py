"""``join_link_watchdog_sensor``: a due session that no live attempt holds is claimed within 2
minutes of its time, whatever became of its event: never scheduled, lost, delivered late, its
run dead before it claimed, a stuck or dead sync run, a zombie run holding the session's slot
(docs/design.md "Hung parts and crashed hosts"). Every ``WATCHDOG_INTERVAL_S`` it asks the
database for SCHEDULED sessions more than the watchdog's grace (75 s) past their time or held
by the online-session service's shared view until now (``jlg_held_session``: their slot of the
budget, the pause's end, the heal), stale IN_PROGRESS ones, and FAILED ones whose retryable
failure's wait is over (docs/design.md "Whatever fails"), and launches shared runs for them
(trigger ``watchdog``, lane ``recovery``, no per-session tag, so nothing stuck on the real-time
path can hold them in the queue). A never-claimed session that a live run, or the queue of a
lane where one moves, is about to claim is left to it (domain/awaited.py): a cohort larger
than its grace's worth is draining, not lost. Each session still goes through its own claim:
the watchdog racing a late event costs a skipped claim, never a second generation. The TRD's
30-minute grace stays the sweep's, which also re-attempts FAILED sessions, the non-retryable
ones included.

It follows the online-session service's shared view (domain/service_view.py): nothing while a
pause longer than a caller waits out holds, or a probe is out; while the service is down one
session at a time, the probe; and the moment the breaker closes, every session it held, those
launched lately included. A session launched lately that its run has since tried and failed
with its wait over (a 429 held it) is launched again at once, not after RELAUNCH_AFTER_S."""

import json
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial

from dagster import (
    DagsterInstance,
    DefaultSensorStatus,
    JobDefinition,
    ResourceParam,
    SensorDefinition,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    sensor,
)

from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.adapters.service_view import PROBE_MARGIN_S
from jlg_pipeline.config import Flags
from jlg_pipeline.domain import validation
from jlg_pipeline.domain.awaited import awaited
from jlg_pipeline.domain.errors import DatabaseUnavailable, InvalidInput
from jlg_pipeline.domain.lanes import Lane
from jlg_pipeline.domain.models import BulkRegisterRequest, DueSession, Trigger
from jlg_pipeline.domain.service_view import MAX_SLOT_WAIT_S
from jlg_pipeline.domain.status import LinkGenerationStatus as S
from jlg_pipeline.orchestration.resources import RunDatabase
from jlg_pipeline.orchestration.run_requests import (
    chunks,
    generation_runs_seen,
    shared_run_request,
)
from jlg_pipeline.services.set_aside import Path, set_aside

WATCHDOG_INTERVAL_S = 5
"""Also how often a probe can go out while the service is down, and how soon after it heals
the sessions it held are launched."""
WATCHDOG_BATCH = 200
"""Sessions one tick takes at most; the next tick takes more."""
SESSIONS_PER_RUN = 50
RELAUNCH_AFTER_S = 60
"""A session the watchdog launched is asked for again only after this long (its run may be
starting): a run starts and claims in seconds, and trying again soon after a run died (its
host with it) keeps the session within 2 minutes; a run that was only slow to start costs a
skipped claim."""


def decode_launched(cursor: str | None, now: float) -> dict[int, float]:
    """Sessions launched within RELAUNCH_AFTER_S, from the cursor; {} for any other shape
    (a duplicate launch is only a skipped claim)."""
    try:
        entries = json.loads(cursor or "{}")
    except ValueError:
        return {}
    if not isinstance(entries, dict):
        return {}
    launched: dict[int, float] = {}
    for key, at in entries.items():
        # A cursor can be typed into the UI: only a time within the last RELAUNCH_AFTER_S
        # (not one in the future, which would keep its session from the watchdog for ever)
        # and an id the database can hold count.
        if not isinstance(at, int | float) or not 0 <= now - at < RELAUNCH_AFTER_S:
            continue
        try:
            launched[validation.session_id(int(key))] = float(at)
        except (ValueError, InvalidInput):
            continue
    return launched


def _unattended(
    instance: DagsterInstance,
    repository: ProgramSessionRepository,
    launched: Mapping[int, float],
    now: float,
    silent_for_s: float,
) -> Sequence[DueSession]:
    """The watchdog's candidates, those it launched lately left out until their run has tried
    them (``find_unattended``), and those a live run (or its lane's queue) is about to claim
    (domain/awaited.py): a cohort draining at the budget's rate is not lost. Dagster is asked
    only when never-claimed sessions are among the candidates; then the batch is read again
    past them."""
    due = repository.find_unattended(WATCHDOG_BATCH, leave=launched)
    if not any(s.status is S.SCHEDULED for s in due):
        return due
    taken = awaited(generation_runs_seen(instance), now, silent_for_s)
    if not taken:
        return due
    return repository.find_unattended(
        WATCHDOG_BATCH, leave={**dict.fromkeys(taken, now), **launched}
    )


def _requests(due: Sequence[DueSession], count: Callable[[], None]) -> list[BulkRegisterRequest]:
    """Each session's request; one that cannot be built is set aside, the rest go on."""
    requests = []
    for session in due:
        try:
            requests.append(BulkRegisterRequest(session.id, actor_user_id=session.actor_user_id))
        except Exception as exc:  # noqa: BLE001 - one row no run can be asked for stops no other
            set_aside(Path.WATCHDOG, session.id, exc, count)
    return requests


def build_watchdog_sensor(shared_job: JobDefinition) -> SensorDefinition:
    @sensor(
        name="join_link_watchdog_sensor",
        job=shared_job,
        minimum_interval_seconds=WATCHDOG_INTERVAL_S,
        default_status=DefaultSensorStatus.RUNNING,
        description="Claims, through shared runs, every due session no live attempt holds "
        "75 s after its time, whatever became of its event.",
    )
    def join_link_watchdog_sensor(
        context: SensorEvaluationContext, database: ResourceParam[RunDatabase]
    ) -> SensorResult | SkipReason:
        if not Flags.read().scheduler_enabled:
            return SkipReason("ENABLE_JOIN_LINK_SCHEDULER is off: the watchdog is off too")
        now = time.time()
        look = database.view().look()
        held_until = look.held_until(patience_s=MAX_SLOT_WAIT_S)
        healed = look.state.healed_at.timestamp() if look.state.healed_at else 0.0
        # Sessions launched before the service came back were held by it: due again at once.
        launched = {
            sid: at for sid, at in decode_launched(context.cursor, now).items() if at > healed
        }
        if held_until is not None:
            return SensorResult(
                skip_reason=f"the online-session service holds every call until "
                f"{held_until.isoformat()} ({look.why_held()}): nothing is launched before",
                cursor=json.dumps(launched),
            )
        repository = database.repository()
        try:
            # Sessions armed by anyone, the host's own writes included, join their programme's
            # turn (adapters/queue.py): a worker's next claim can find them.
            database.queue().refresh()
        except DatabaseUnavailable as exc:
            context.log.warning(f"the programmes' turns not refreshed: {exc}")
        fresh = _unattended(
            context.instance,
            repository,
            launched,
            now,
            database.call_bound_s + PROBE_MARGIN_S,
        )
        if look.state.down:
            fresh = fresh[:1]  # one session finds out whether the service is back
        try:
            repository.forget_held([s.id for s in fresh])
        except DatabaseUnavailable as exc:
            # A hold left behind only asks for its session once more, a minute on.
            context.log.warning(f"held sessions not forgotten: {exc}")
        if not fresh:
            waiting = (
                f" ({len(launched)} launched in the last {RELAUNCH_AFTER_S} s)" if launched else ""
            )
            return SensorResult(
                skip_reason=f"no unattended due session{waiting}", cursor=json.dumps(launched)
            )
        # A session set aside is asked for again after RELAUNCH_AFTER_S, as one launched is.
        launched.update({s.id: now for s in fresh})
        wanted = _requests(fresh, partial(repository.count_set_aside, Path.WATCHDOG))
        requests = [
            shared_run_request(chunk, Trigger.WATCHDOG, Lane.RECOVERY)
            for chunk in chunks(wanted, SESSIONS_PER_RUN)
        ]
        context.log.info(f"unattended due sessions: {[s.id for s in fresh]}")
        return SensorResult(run_requests=requests, cursor=json.dumps(launched))

    return join_link_watchdog_sensor
