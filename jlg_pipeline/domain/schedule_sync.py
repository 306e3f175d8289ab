"""Schedule sync as plain decisions: what applying a pending change does, and when a change
that failed is tried again (docs/design.md "Schedule sync", pinned)."""

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, overload

from jlg_pipeline.domain.backoff import backoff_s
from jlg_pipeline.domain.validation import SessionId

DIRECT_WITHIN = timedelta(minutes=2)
"""A time closer than this when its change is applied gets no EventBridge schedule: its
precision is one minute and it refuses times in the past. The sync sensor launches it."""
FIRST_TRY_AFTER = timedelta(seconds=30)
"""When a change written by the PATCH becomes due for the sync job: the app applies it right
after the response, so the job only sees it if that call failed or was lost."""
MAX_BACKOFF = timedelta(minutes=10)
SYNC_BATCH_LIMIT = 500
SYNC_CONCURRENCY = 8
"""Changes a sync run applies at once: one hung call never holds up the others."""
SYNC_BUDGET = timedelta(minutes=10)
"""A sync run takes no new change after this long (behind a hung AWS each call takes its
full timeout): it ends well inside its 15-minute bound and the next run goes on."""
APPLY_LEASE = timedelta(seconds=90)
"""How long an applier holds a change: longer than its calls can take (an upsert is at most
three calls, each bounded by the client's connect and read timeouts and two attempts), so a
live applier never loses it; an applier that died holds it this long at most."""


class ChangeAction(StrEnum):
    UPSERT = "upsert"
    DELETE = "delete"
    DIRECT = "direct"


@overload
def goes_direct(fire_at: datetime, now: datetime) -> bool: ...
@overload
def goes_direct(fire_at: Any, now: Any) -> Any: ...
def goes_direct(fire_at: Any, now: Any) -> Any:
    """Whether a time ``fire_at`` is too near ``now`` for EventBridge (under DIRECT_WITHIN): it
    goes direct. The one rule, for a change in hand (datetimes: a bool) and in the database
    (SQL expressions: the condition the outbox's statements filter on)."""
    return fire_at < now + DIRECT_WITHIN


@dataclass(frozen=True, slots=True)
class PendingChange:
    """The newest desired schedule state of one session, not yet applied. ``fire_at`` None
    means no schedule (a clear); ``now`` is the database clock when it was read."""

    session_id: SessionId
    version: int
    fire_at: datetime | None
    actor_user_id: int | None
    tries: int
    now: datetime
    leased_until: datetime | None = None
    """The applier's lease on it (its token for releasing it)."""

    @property
    def action(self) -> ChangeAction:
        if self.fire_at is None:
            return ChangeAction.DELETE
        if goes_direct(self.fire_at, self.now):
            return ChangeAction.DIRECT
        return ChangeAction.UPSERT

    def next_try_at(self) -> datetime:
        """After this try failed: back off (30 s, 1, 2, 4, 8 min, then every 10), but try
        again before the time comes within DIRECT_WITHIN, when no AWS call is needed."""
        delay = backoff_s(FIRST_TRY_AFTER.total_seconds(), self.tries, MAX_BACKOFF.total_seconds())
        retry: datetime = self.now + timedelta(seconds=delay)
        if self.fire_at is not None:
            retry = min(retry, max(self.fire_at - DIRECT_WITHIN, self.now + FIRST_TRY_AFTER))
        return retry


@dataclass(frozen=True, slots=True)
class DirectLaunch:
    """A session that goes around EventBridge: launch its generation once ``fire_at`` is due.
    ``version`` names the change, so each cycle launches once."""

    session_id: SessionId
    version: int
    fire_at: datetime
    actor_user_id: int | None = None
    """The admin who made the change, for bulkRegister (as the event path's message says)."""


@dataclass(frozen=True, slots=True)
class SyncReport:
    applied: int = 0
    failed: int = 0
    direct: int = 0
    left: int = 0
    dropped: int = 0
