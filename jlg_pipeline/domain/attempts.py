"""Who asked for a generation (the trigger), the claim that makes one caller a session's
attempt for its cycle, and how each attempt ended."""

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from jlg_pipeline.domain.generation import BulkRegisterRequest
from jlg_pipeline.domain.validation import SessionId


class Trigger(StrEnum):
    """Which path asked for a generation; carried into logs and run tags."""

    EVENT = "event"
    CRON = "cron"
    BACKFILL = "backfill"
    MANUAL = "manual"
    DIRECT = "direct"
    """Launched by the schedule sync sensor for a time too near for EventBridge."""
    WATCHDOG = "watchdog"
    """Launched by the watchdog sensor for a due session no live attempt holds."""
    SENSOR = "sensor"
    """A schedule sync run the sync sensor launched (it generates nothing)."""


@dataclass(frozen=True, slots=True)
class Claim:
    """The right to generate for one session, held by exactly one attempt."""

    session_id: SessionId
    program_id: int
    attempt: int
    link_generation_at: datetime
    """The cycle: the time this claim generates for."""
    claimed_at: datetime | None = None
    """The database clock when the claim was won."""
    request: "BulkRegisterRequest | None" = None
    """The options recorded for the claimed cycle (docs/design.md "One queue"); None when the
    caller asked for the session with its own."""

    @property
    def lag_seconds(self) -> float | None:
        """How late the claim came: claimed_at - link_generation_at."""
        if self.claimed_at is None:
            return None
        return round((self.claimed_at - self.link_generation_at).total_seconds(), 3)


class AttemptOutcome(StrEnum):
    IN_PROGRESS = "IN_PROGRESS"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    SUPERSEDED = "SUPERSEDED"
    """Fenced out: a newer attempt, a re-arm or a clear took the claim meanwhile."""
    RECLAIMED = "RECLAIMED"
    """Taken over after going stale (its process died or stopped)."""


@dataclass(frozen=True, slots=True)
class AttemptRecord:
    """One claim of a session and how it ended."""

    session_id: SessionId
    attempt: int
    trigger: str
    run_id: str | None
    link_generation_at: datetime
    claimed_at: datetime
    finished_at: datetime | None
    outcome: AttemptOutcome
    job_id: str | None
    total: int | None
    error: str | None

    @property
    def lag(self) -> timedelta:
        """How late the claim came after the cycle's time."""
        return self.claimed_at - self.link_generation_at
