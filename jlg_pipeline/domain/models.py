"""Value objects that cross the seams between repository, services and registrars."""

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from uuid import UUID

from jlg_pipeline.domain import validation
from jlg_pipeline.domain.status import LinkGenerationStatus
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


@dataclass(frozen=True, slots=True)
class DueSession:
    """A fallback-sweep, backfill or watchdog candidate."""

    id: SessionId
    link_generation_at: datetime
    status: LinkGenerationStatus
    actor_user_id: int | None = None
    """The admin of the session's newest intent change, when the query asks (the watchdog)."""
    retry_at: datetime | None = None
    """The watchdog's candidates: when the session last became due again, a FAILED one's wait
    or a held one's ``not_before`` (so the watchdog sees a session its run tried since)."""


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
class BulkRegisterRequest:
    """iface-05: ``bulkRegister({sessionId, role, batchSize}, actorUserId)``. Made by
    :meth:`parse` where the values enter (a queue message, run config, a stored row), so every
    registrar can trust it and nothing after checks it again."""

    session_id: SessionId
    role: str | None = None
    batch_size: int | None = None
    actor_user_id: int | None = None
    idempotency_key: str | None = None
    """``join-link-<id>@<cycle>``, set by the gate once it has claimed: every call for one
    cycle carries the same key, so the service absorbs a second one."""

    @classmethod
    def parse(
        cls,
        session_id: object,
        role: object = None,
        batch_size: object = None,
        actor_user_id: object = None,
    ) -> "BulkRegisterRequest":
        """The request these values ask for, or InvalidInput naming the bad field."""
        return cls(
            validation.session_id(session_id),
            validation.role(role),
            validation.batch_size(batch_size),
            validation.actor_user_id(actor_user_id),
        )


@dataclass(frozen=True, slots=True)
class BulkRegisterResult:
    job_id: str
    total: int
    """Eligible registrants the job covered (iface-05's ``total``)."""
    created: int | None = None
    """Of those, links that did not exist before; None when the registrar does not say."""


class GenerationResult(StrEnum):
    COMPLETED = "completed"
    SKIPPED = "skipped"
    SUPERSEDED = "superseded"
    """bulkRegister ran, but a stale reclaim took the claim meanwhile: the mark was fenced out."""
    FAILED = "failed"
    """Only in a run's records (a session's row, the ``jlg/outcome`` tag):
    ``generate_for_session`` raises GenerationFailed instead of returning it."""


@dataclass(frozen=True, slots=True)
class GenerationOutcome:
    session_id: SessionId
    result: GenerationResult
    attempt: int | None = None
    job_id: str | None = None
    total: int | None = None
    reason: str | None = None
    """Why it was skipped or superseded, in words an operator can act on."""
    cycle: datetime | None = None
    """The ``link_generation_at`` the claim generated for (None when nothing was claimed)."""
    lag_seconds: float | None = None
    """How late the claim came after that time."""
    created: int | None = None
    """Join links newly created, when the registrar says (``total`` counts every eligible
    registrant covered, links that already existed included)."""


@dataclass(frozen=True, slots=True)
class SweepReport:
    found: int
    completed: int
    skipped: int
    failed: int
    left_behind: int
    """Due sessions past this sweep's limit, left for the next sweep (or a larger limit)."""
    failed_session_ids: tuple[int, ...] = ()
    sessions: tuple["SessionResult", ...] = ()
    """Each session handled, in order."""


@dataclass(frozen=True, slots=True)
class SessionResult:
    """One session of a sweep or backfill: what happened and how late."""

    session_id: SessionId
    outcome: GenerationResult
    lag_seconds: float | None = None
    retryable: bool | None = None
    """For a failure: whether retrying soon may help."""
    retry_in_s: float | None = None
    """For a retryable failure left to the watchdog: the wait before it tries again (None
    when the run's own retry finishes it)."""
