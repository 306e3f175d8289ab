"""What the gate asks the online-session service (iface-05's bulkRegister), what it answers,
and what one session's or one run's generation came to."""

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from jlg_pipeline.domain import validation
from jlg_pipeline.domain.validation import SessionId


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
