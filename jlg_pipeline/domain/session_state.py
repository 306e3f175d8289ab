"""A session's link-generation state as the stores return it, and what an admin's write of
its time did."""

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from uuid import UUID

from jlg_pipeline.domain import validation
from jlg_pipeline.domain.status import LinkGenerationStatus
from jlg_pipeline.domain.validation import SessionId


@dataclass(frozen=True, slots=True)
class LinkGenerationState:
    """A session's link-generation fields as the database holds them now."""

    id: SessionId
    link_generation_at: datetime | None
    status: LinkGenerationStatus
    attempt: int
    last_error: str | None
    job_id: str | None
    updated_at: datetime
    deleted: bool
    stale: bool
    """True when the status is IN_PROGRESS and older than the stale window (database clock)."""
    due: bool
    """True when ``link_generation_at`` is set and within the due tolerance (database clock)."""
    retry_at: datetime | None = None
    """FAILED and retryable: when the queue takes it again (``link_generation_retry_at``)."""

    def settled(self) -> str | None:
        """Why no caller can claim this session now, whoever asks, in words an operator can
        act on; None when a claim (or a run resuming its own) may be won. Read before the
        online-session service's turn is taken, so a session nobody can generate for spends no
        slot of its budget; the claim's own predicate stays the rule."""
        if self.deleted:
            return "the program session is soft-deleted"
        if self.status is LinkGenerationStatus.COMPLETED:
            return "already COMPLETED this cycle"
        if self.status is LinkGenerationStatus.NOT_SCHEDULED or self.link_generation_at is None:
            return "link generation is not scheduled"
        if validation.out_of_range(self.link_generation_at):
            return "its time is out of range: set aside until a person sets a new one"
        if not self.due:
            return f"not due until {self.link_generation_at.isoformat()}"
        return None


class SetOutcome(StrEnum):
    UPDATED = "updated"
    NOT_FOUND = "not_found"
    IN_PROGRESS = "in_progress"
    NOT_IN_FUTURE = "not_in_future"
    """The time is not after the database clock's now (the clock that decides "due")."""
    OUT_OF_RANGE = "out_of_range"
    """The new time lies past the horizon (``LINK_GENERATION_HORIZON`` after the database
    clock's now)."""
    NO_TIME = "no_time"
    """A shift of a session with no time to shift."""
    NO_LONGER_MATCHES = "no_longer_matches"
    """A programme action's session changed since it began: its filter no longer names it."""


@dataclass(frozen=True, slots=True)
class SetResult:
    """What a set/clear did. ``state`` is the row after the write, or None when refused."""

    outcome: SetOutcome
    state: LinkGenerationState | None = None
    schedule_version: int | None = None
    """The outbox change written with it, when the schedule is synced."""


@dataclass(frozen=True, slots=True)
class IntentChange:
    """One admin set or clear of a session's time, as recorded with the UPDATE."""

    session_id: int
    changed_at: datetime
    actor_user_id: int | None
    link_generation_at: datetime | None
    previous_link_generation_at: datetime | None
    operation_id: UUID | None = None
    """The programme action the change belongs to; None for one session's PATCH."""


@dataclass(frozen=True, slots=True)
class DueSession:
    """A fallback-sweep or backfill candidate."""

    id: SessionId
    link_generation_at: datetime
    status: LinkGenerationStatus
