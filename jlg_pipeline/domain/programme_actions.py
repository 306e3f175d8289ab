"""Programme actions: one admin request that re-arms, moves or clears many sessions of a
programme at once (docs/design.md "Programme actions"). Each matched session changes exactly
as its own PATCH would: the same statement decides (``adapters/intent_writes.py``), and what it
refuses is skipped with the reason here."""

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

from jlg_pipeline.domain import validation
from jlg_pipeline.domain.errors import InvalidInput
from jlg_pipeline.domain.session_state import SetOutcome
from jlg_pipeline.domain.status import LinkGenerationStatus

MAX_OPERATION_SESSIONS = 10_000
"""More matches than this are refused: narrow the filter."""
OPERATION_CHUNK = 250
"""Sessions one statement (one transaction) changes: the host's rows are locked that long."""
OPERATION_SHARE = 0.25
"""The share of the database's time a programme action takes: after each chunk it leaves the
database to the other requests for three times that chunk's time. Unpaced, 10,000 sessions
moved in 0.5 s while the other admin requests' p99 rose to 1.7-2.4x idle; so paced, in 2.1 s
and 1.4x (bench.timing.programme_move; docs/performance.md, "Programme actions")."""
PREVIEW_SHOWN = 100
"""Sessions a dry run lists with their current and new times."""
MAX_SHIFT_S = 10 * 366 * 24 * 3600
"""``shiftBy`` bound (about ten years either way): a typo, not a schedule, beyond it."""

SKIP_REASONS = {
    SetOutcome.IN_PROGRESS: "generating now",
    SetOutcome.NOT_IN_FUTURE: "the new time is not in the future",
    SetOutcome.NO_TIME: "no time to shift",
    SetOutcome.OUT_OF_RANGE: "out of range",
    SetOutcome.NOT_FOUND: "deleted",
    SetOutcome.NO_LONGER_MATCHES: "changed since the operation began: no longer matches",
}
"""Why a matched session was left as it was, for each way its own PATCH would refuse."""


@dataclass(frozen=True, slots=True)
class SessionFilter:
    """Sessions of a programme (when given), with one of ``statuses`` (any when empty), whose
    time lies in [``from_at``, ``to_at``) (a bound given leaves out sessions with no time).
    Soft-deleted sessions never match."""

    program_id: int | None = None
    statuses: tuple[LinkGenerationStatus, ...] = ()
    from_at: datetime | None = None
    to_at: datetime | None = None

    def __post_init__(self) -> None:
        # Each status once, in the order given: the filter and its fingerprint are the same
        # however often a caller repeats one.
        object.__setattr__(self, "statuses", tuple(dict.fromkeys(self.statuses)))
        if self.program_id is not None:
            validation.program_id(self.program_id)
        if self.from_at is not None:
            validation.aware_datetime(self.from_at, "from")
        if self.to_at is not None:
            validation.aware_datetime(self.to_at, "to")
        if self.from_at is not None and self.to_at is not None and self.from_at >= self.to_at:
            raise InvalidInput("from must be before to")

    def as_json(self) -> dict[str, Any]:
        return {
            "status": [s.value for s in self.statuses],
            "from": None if self.from_at is None else self.from_at.isoformat(),
            "to": None if self.to_at is None else self.to_at.isoformat(),
        }


@dataclass(frozen=True, slots=True)
class ProgrammeAction:
    """Either move every matched session's time by ``shift_s`` seconds, or (``shift_s`` None)
    set it to ``set_at``, None clearing it. Made by :meth:`setting` or :meth:`shifting`."""

    set_at: datetime | None = None
    shift_s: int | None = None

    def __post_init__(self) -> None:
        if self.shift_s is None:
            if self.set_at is not None:
                validation.aware_datetime(self.set_at)
            return
        if self.set_at is not None:
            raise InvalidInput("give exactly one of linkGenerationAt and shiftBy")
        checked = validation.int_between(self.shift_s, -MAX_SHIFT_S, MAX_SHIFT_S)
        if checked is None or checked == 0:
            raise InvalidInput(
                f"shiftBy must be a whole number of seconds, not 0, at most {MAX_SHIFT_S} "
                "either way"
            )

    @classmethod
    def setting(cls, at: datetime | None) -> "ProgrammeAction":
        return cls(set_at=at)

    @classmethod
    def shifting(cls, seconds: int) -> "ProgrammeAction":
        return cls(shift_s=seconds)

    def as_json(self) -> dict[str, Any]:
        if self.shift_s is not None:
            return {"shiftBy": self.shift_s}
        return {"linkGenerationAt": None if self.set_at is None else self.set_at.isoformat()}


@dataclass(frozen=True, slots=True)
class ProgrammeRequest:
    """What an admin asked, checked: the programme, the filter, the action, the guard."""

    where: SessionFilter
    action: ProgrammeAction
    expected_count: int | None
    dry_run: bool

    def __post_init__(self) -> None:
        if self.where.program_id is None:
            raise InvalidInput("a programme action needs its programId")
        if not self.dry_run:
            if self.expected_count is None:
                raise InvalidInput(
                    "expectedCount is required (run with dryRun: true first to see the count)"
                )
            if validation.int_between(self.expected_count, 0, MAX_OPERATION_SESSIONS) is None:
                raise InvalidInput(
                    f"expectedCount must be a whole number from 0 to {MAX_OPERATION_SESSIONS}"
                )

    @property
    def program_id(self) -> int:
        assert self.where.program_id is not None  # checked when made
        return self.where.program_id

    def as_json(self) -> dict[str, Any]:
        return {
            "programId": self.program_id,
            "where": self.where.as_json(),
            "action": self.action.as_json(),
            "expectedCount": self.expected_count,
        }

    def fingerprint(self) -> str:
        """What an ``Idempotency-Key`` is bound to: the same key with another request is
        refused rather than answered with the first one's result."""
        canonical = json.dumps(self.as_json(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Skipped:
    session_id: int
    reason: str


@dataclass(frozen=True, slots=True)
class Preview:
    """One matched session in a dry run: its time now and the time the action would give it
    (None for a skip; ``skip`` says why)."""

    session_id: int
    current_at: datetime | None
    new_at: datetime | None
    status: LinkGenerationStatus
    skip: str | None


@dataclass(frozen=True, slots=True)
class OperationResult:
    """What an operation did (or, for a dry run, would do)."""

    operation_id: UUID | None
    matched: int
    changed: int
    skipped: list[Skipped]
    dry_run: bool
    preview: list[Preview] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class OperationRecord:
    """An operation as recorded: who, when, what was asked, and what happened so far."""

    operation_id: UUID
    program_id: int
    actor_user_id: int
    created_at: datetime
    finished_at: datetime | None
    request: dict[str, Any]
    matched: int
    changed: int
    skipped: list[Skipped]
    pending: int


def skip_reason(outcome: SetOutcome) -> str | None:
    """None for a change; else why its own PATCH would have refused it."""
    return None if outcome is SetOutcome.UPDATED else SKIP_REASONS[outcome]
