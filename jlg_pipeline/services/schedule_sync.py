"""ScheduleSync: make the database's intent reach EventBridge, or go around it.

The admin's UPDATE writes the desired schedule state to the outbox in the same transaction.
``apply`` runs right after the response (the fast path) and in ``join_link_schedule_sync_job``
(the retries): it takes the session's newest pending change, calls EventBridge, and retires
the change only if nothing newer replaced it, so the newest intent wins whatever order calls
finish in. A time under DIRECT_WITHIN away gets no schedule: the sync sensor launches its run
when due (docs/design.md "Schedule sync").
"""

import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from enum import StrEnum
from functools import partial
from typing import Any, Literal, Protocol

from jlg_pipeline.adapters.schedule_outbox import ScheduleOutbox
from jlg_pipeline.domain.errors import ConfigError, InvalidInput, SchedulerCallFailed
from jlg_pipeline.domain.eventbridge_schedule import ScheduleTarget, schedule_name, schedule_request
from jlg_pipeline.domain.schedule_sync import (
    SYNC_BATCH_LIMIT,
    SYNC_BUDGET,
    SYNC_CONCURRENCY,
    ChangeAction,
    DirectLaunch,
    PendingChange,
    SyncReport,
)
from jlg_pipeline.domain.validation import SessionId
from jlg_pipeline.log import describe, log_event
from jlg_pipeline.services.set_aside import Path, set_aside

logger = logging.getLogger(__name__)


class Scheduler(Protocol):
    """EventBridge Scheduler's three write operations (``AwsScheduler``)."""

    def upsert(self, request: dict[str, Any]) -> Literal["updated", "created"]: ...

    def delete(self, name: str, group_name: str) -> bool: ...


class SyncAction(StrEnum):
    CREATED = "created"
    UPDATED = "updated"
    DELETED = "deleted"
    ABSENT = "absent"
    DIRECT = "direct"
    FAILED = "failed"
    NOTHING = "nothing"
    """No pending change (already applied), or another applier holds it."""


APPLIED = {SyncAction.CREATED, SyncAction.UPDATED, SyncAction.DELETED, SyncAction.ABSENT}
MAX_APPLY_ROUNDS = 3
"""Newer changes one apply follows before leaving the rest to the sync job."""


def _safe_error(exc: Exception) -> str:
    """What is kept and logged: our own messages, else only the exception's type."""
    if isinstance(exc, SchedulerCallFailed | ConfigError):
        return str(exc)
    return type(exc).__name__


class ScheduleSync:
    def __init__(
        self,
        outbox: ScheduleOutbox,
        scheduler: Scheduler | None,
        target: ScheduleTarget | None,
        *,
        enabled: bool,
    ) -> None:
        self._outbox = outbox
        self._scheduler = scheduler
        self._target = target
        self._enabled = enabled

    @property
    def enabled(self) -> bool:
        """Whether changes are recorded and applied: the scheduler flag is on and its target
        (queue and role ARNs) is configured."""
        return self._enabled and self._target is not None

    def apply(self, session_id: SessionId) -> SyncAction:
        """Apply the session's newest pending change. NOTHING when there is none, or another
        applier holds it (it applies the newest next). A change that arrives while the call
        runs is applied next, up to MAX_APPLY_ROUNDS; no connection is held meanwhile."""
        for _ in range(MAX_APPLY_ROUNDS):
            change = self._outbox.take(session_id)
            if change is None:
                break
            result = self._settle(change)
            if result is not None:
                return result
            self._outbox.release(change)
        return SyncAction.NOTHING

    def apply_after_response(self, session_id: SessionId) -> None:
        """The fast path: never raises. Whatever it leaves pending, the sync job retries."""
        try:
            self.apply(session_id)
        except Exception as exc:  # noqa: BLE001 - after the response nobody else would log it
            log_event(
                logger,
                logging.ERROR,
                "schedule_sync.deferred",
                session_id=session_id,
                error=_safe_error(exc),
                note="left pending; join_link_schedule_sync_job retries it",
            )

    def _settle(self, change: PendingChange) -> SyncAction | None:
        """Call EventBridge for the change, then settle it; None when the settle found a newer
        change (or the database had decided it direct) meanwhile."""
        action = change.action
        try:
            result = self._call(action, change)
        except Exception as exc:  # noqa: BLE001 - any failure leaves the change pending
            if isinstance(exc, InvalidInput):
                # The row's own fault (no schedule can be built from it), not AWS's.
                return self._set_aside(change.session_id, exc, describe(exc), change.version)
            error = _safe_error(exc)
            if action is not ChangeAction.DIRECT:
                retry_at = change.next_try_at()
                if not self._outbox.postpone(change, error, retry_at):
                    return None
                log_event(
                    logger,
                    logging.WARNING,
                    "schedule_sync.failed",
                    session_id=change.session_id,
                    version=change.version,
                    operation=action.value,
                    tries=change.tries + 1,
                    next_try_at=retry_at.isoformat(),
                    error=error,
                )
                return SyncAction.FAILED
            # The old schedule is harmless: its event finds the session not yet due, or
            # already generated, and is skipped by the claim. It deletes itself after.
            result = SyncAction.DIRECT
            log_event(
                logger,
                logging.WARNING,
                "schedule_sync.stale_schedule_left",
                session_id=change.session_id,
                error=error,
            )
        settled = (
            self._outbox.go_direct(change)
            if result is SyncAction.DIRECT
            else self._outbox.retire(change)
        )
        if not settled:
            return None
        log_event(
            logger,
            logging.INFO,
            f"schedule_sync.{result.value}",
            session_id=change.session_id,
            version=change.version,
            fire_at=None if change.fire_at is None else change.fire_at.isoformat(),
        )
        return result

    def _call(self, action: ChangeAction, change: PendingChange) -> SyncAction:
        session_id = change.session_id
        if self._scheduler is None or self._target is None:
            raise ConfigError(
                "AWS_SCHEDULER_TARGET_QUEUE_ARN and AWS_SCHEDULER_EXECUTION_ROLE_ARN must be set"
            )
        if action is ChangeAction.UPSERT:
            assert change.fire_at is not None  # an UPSERT has a time
            request = schedule_request(
                session_id, change.fire_at, change.actor_user_id, self._target
            )
            return SyncAction(self._scheduler.upsert(request))
        existed = self._scheduler.delete(schedule_name(session_id), self._target.group_name)
        if action is ChangeAction.DIRECT:
            return SyncAction.DIRECT
        return SyncAction.DELETED if existed else SyncAction.ABSENT

    def _set_aside(
        self, session_id: int, exc: Exception, error: str, version: int | None = None
    ) -> SyncAction:
        """A change this applier cannot act on: set aside on its own backoff and counted
        (services/set_aside.py); the others go on."""
        set_aside(
            Path.OUTBOX,
            session_id,
            exc,
            partial(self._outbox.set_aside, session_id, error, Path.OUTBOX, version),
        )
        return SyncAction.FAILED

    def direct_near(self) -> int:
        """Decide in the database, without AWS, every pending change whose time is under
        DIRECT_WITHIN away: it goes direct (the sync sensor launches its run when due)."""
        decided = self._outbox.direct_near()
        if decided:
            log_event(logger, logging.INFO, "schedule_sync.direct_decided", changes=decided)
        return decided

    def sync(self, limit: int = SYNC_BATCH_LIMIT) -> SyncReport:
        """Apply every pending change, due or not, at most ``limit``: near times go direct in
        the database first (no AWS call), then the rest, nearest fire time first, up to
        SYNC_CONCURRENCY at once (each call bounded by the client's timeouts), taking no new
        one after SYNC_BUDGET. A change another applier holds is left to it. With the
        scheduler off, every pending change is dropped (a resync rebuilds them when it is
        turned on)."""
        if not self.enabled:
            dropped = self._outbox.drop_all()
            if dropped:
                log_event(
                    logger,
                    logging.INFO,
                    "schedule_sync.dropped",
                    changes=dropped,
                    reason="the scheduler is off or unconfigured",
                )
            return SyncReport(dropped=dropped)
        decided = self.direct_near()
        counts = dict.fromkeys(SyncAction, 0)
        session_ids = self._outbox.pending_session_ids(limit)
        deadline = time.monotonic() + SYNC_BUDGET.total_seconds()

        def apply_in_budget(session_id: SessionId) -> SyncAction:
            if time.monotonic() > deadline:
                return SyncAction.NOTHING  # left pending for the next run
            try:
                return self.apply(session_id)
            except Exception as exc:  # noqa: BLE001 - one row no applier can take stops no other
                return self._set_aside(session_id, exc, _safe_error(exc))

        if session_ids:
            with ThreadPoolExecutor(
                max_workers=min(SYNC_CONCURRENCY, len(session_ids)),
                thread_name_prefix="schedule-sync",
            ) as pool:
                for result in pool.map(apply_in_budget, session_ids):
                    counts[result] += 1
        return SyncReport(
            applied=sum(counts[a] for a in APPLIED),
            failed=counts[SyncAction.FAILED],
            direct=counts[SyncAction.DIRECT] + decided,
            left=self._outbox.backlog()[0],
        )

    def resync(self) -> int:
        """Mark every armed, not-yet-due session as pending, due now; how many."""
        if not self.enabled:
            raise ConfigError(
                "the scheduler is off or unconfigured (ENABLE_JOIN_LINK_SCHEDULER, "
                "AWS_SCHEDULER_TARGET_QUEUE_ARN, AWS_SCHEDULER_EXECUTION_ROLE_ARN): "
                "nothing to resync"
            )
        marked = self._outbox.resync()
        log_event(logger, logging.INFO, "schedule_sync.resync", sessions=marked)
        return marked


def direct_run_key(launch: DirectLaunch) -> str:
    """One run per session and change: a re-arm is a new change, so a new cycle."""
    return f"direct-{launch.session_id}-{launch.version}"


@dataclass(frozen=True, slots=True)
class DueWork:
    """What the sync sensor's tick has to ask for."""

    launches: list[DirectLaunch]
    """Direct launches due whose runs are still to be asked for."""
    done: int
    """Direct launches whose runs exist: retired this tick."""
    sync_due: bool
    """Whether a schedule change is due for a try (a sync run is wanted)."""


def due_work(outbox: ScheduleOutbox, covered: Callable[[Sequence[str]], set[str]]) -> DueWork:
    """Decided in the database, whatever a sync run (stuck, dead or behind a hung AWS) does:
    near changes go direct; of the due direct launches, those whose runs exist (``covered``
    looks their run keys up) are retired and the rest returned."""
    decided = outbox.direct_near()
    if decided:
        log_event(logger, logging.INFO, "schedule_sync.direct_decided", changes=decided)
    launches, sync_due = outbox.due_work()
    existing = covered([direct_run_key(launch) for launch in launches])
    waiting = []
    for launch in launches:
        if direct_run_key(launch) in existing:
            outbox.retire_direct(launch)
        else:
            waiting.append(launch)
    return DueWork(waiting, len(launches) - len(waiting), sync_due)
