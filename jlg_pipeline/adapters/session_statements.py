"""When a claim may take a program session (:func:`claim_time`, the one definition, on the
database clock), the predicates every statement on program sessions builds from it, and a
session's link-generation state as the statements return it.

- :func:`claim_time`: the moment a claim may take the row, NULL when none may without a new
  write. Every other rule is a named variant of it: :func:`waiting` (the queue's: the claim of
  the next, the watchdog, the backlog), :func:`claimable` (a claim that names its session: an
  event, the sweep, a backfill, a hand launch), :func:`stale` (a claim's lease ended).
- Every time a row holds that someone else may write (the host's columns) is bounded before
  any arithmetic: a row whose time no read can load is taken by no claim (the queue sets it
  aside: ``SessionQueue.refresh``), and a heartbeat in the future counts as now.

The claim, the marks, the candidate queries, the intent writes and the reads are each built
from these functions (no store inherits from another), so each rule is written once."""

from datetime import timedelta
from typing import Any

from sqlalchemy import (
    ColumnElement,
    DateTime,
    Interval,
    Row,
    and_,
    case,
    func,
    literal,
    null,
    or_,
    select,
    union_all,
)

from jlg_pipeline.adapters.tables import program_session as ps
from jlg_pipeline.domain.constants import READABLE_FROM, READABLE_UNTIL, TimingWindows
from jlg_pipeline.domain.programme_actions import SessionFilter
from jlg_pipeline.domain.session_state import DueSession, LinkGenerationState
from jlg_pipeline.domain.status import WRITTEN_STATUSES, LinkGenerationStatus

S = LinkGenerationStatus
READABLE_FROM_AT = literal(READABLE_FROM, DateTime(timezone=True))
READABLE_UNTIL_AT = literal(READABLE_UNTIL, DateTime(timezone=True))


def ms(value: int) -> ColumnElement[timedelta]:
    return literal(timedelta(milliseconds=value), Interval())


def due_session(row: Any) -> DueSession:
    return DueSession(
        id=row.id,
        link_generation_at=row.link_generation_at,
        status=S(row.link_generation_status),
    )


FRESH_INDEX_STATUSES = [S.SCHEDULED.value, S.IN_PROGRESS.value]
"""The statuses ix_psession_link_gen_fresh covers (migration 0003): a predicate that repeats it
lets the planner use the index."""


def in_fresh_index(t: Any = ps) -> ColumnElement[bool]:
    status: ColumnElement[str] = t.c.link_generation_status
    return status.in_(FRESH_INDEX_STATUSES)


def readable(t: Any = ps) -> ColumnElement[bool]:
    """Its time is one every read can load (``ReadableTime``; a read at a bound is shown as
    out of range): no claim takes another."""
    at: ColumnElement[Any] = t.c.link_generation_at
    return and_(at > READABLE_FROM_AT, at < READABLE_UNTIL_AT)


def lease_ends(stale_ms: int, t: Any = ps) -> ColumnElement[Any]:
    """When an IN_PROGRESS row's claim goes stale: its heartbeat (``updated_at``, renewed by the
    attempt holding it) plus the stale window. A heartbeat in the future counts as now (the
    queue then stores it as now, so it ages: ``SessionQueue.refresh``), and no arithmetic
    touches the stored value."""
    return func.least(t.c.updated_at, func.now()) + ms(stale_ms)


def claim_time(
    stale_ms: int, t: Any = ps, *, honour_retry: bool = True, early_ms: int = 0
) -> ColumnElement[Any]:
    """When a claim may take the row of ``t`` (the table or an alias of it); NULL when none may
    without a new write: deleted, its time unset or unreadable, NOT_SCHEDULED or COMPLETED.
    Its time come (``early_ms`` before it: the due guard's tolerance for a claim that names
    its session), then by status: SCHEDULED at once; FAILED once its retry is due when
    ``honour_retry`` (the queue's rule: a failure for good, or one in its backoff, waits for
    neither; a claim that names it may take it any time); IN_PROGRESS once its lease ends."""
    c = t.c
    status = c.link_generation_status
    # Behind the readable guard: CASE evaluates a branch only once the ones before it failed,
    # so no arithmetic touches a time out of range.
    at = c.link_generation_at - ms(early_ms) if early_ms else c.link_generation_at
    retry_due = case(
        (c.link_generation_retry_at.is_(None), null()),
        else_=func.greatest(at, c.link_generation_retry_at),
    )
    return case(
        (or_(c.deleted_at.is_not(None), ~readable(t)), null()),
        (status == S.SCHEDULED.value, at),
        (status == S.FAILED.value, retry_due if honour_retry else at),
        (status == S.IN_PROGRESS.value, func.greatest(at, lease_ends(stale_ms, t))),
        else_=null(),
    )


def waiting(stale_ms: int, t: Any = ps) -> ColumnElement[bool]:
    """Waits for a worker (docs/design.md "One queue"): the queue may take it now."""
    return claim_time(stale_ms, t) <= func.now()


def claimable(windows: TimingWindows, t: Any = ps) -> ColumnElement[bool]:
    """A claim naming the session may take it now: due (within the due tolerance), not held by
    a live claim, and a FAILED one whatever its retry time."""
    return (
        claim_time(windows.stale_ms, t, honour_retry=False, early_ms=windows.due_tolerance_ms)
        <= func.now()
    )


def stale(stale_ms: int, t: Any = ps) -> ColumnElement[bool]:
    """IN_PROGRESS and its lease ended: its attempt is taken for dead."""
    return and_(
        t.c.link_generation_status == S.IN_PROGRESS.value, lease_ends(stale_ms, t) <= func.now()
    )


def due(windows: TimingWindows) -> ColumnElement[bool]:
    """Its time set and no later than now plus the due tolerance (a state's ``due``)."""
    return ps.c.link_generation_at <= func.now() + ms(windows.due_tolerance_ms)


def waiting_rows(
    stale_ms: int, *columns: ColumnElement[Any], where: ColumnElement[bool] | None = None
) -> Any:
    """``columns`` of every waiting row (``where`` too, if given), read through the two partial
    indexes that hold them (SCHEDULED or IN_PROGRESS by time, ix_psession_link_gen_fresh;
    FAILED by retry time, ix_psession_link_gen_retry): never the sessions failed for good or
    done, however many."""
    live = and_(ps.c.deleted_at.is_(None), *([] if where is None else [where]))
    fresh = select(*columns).where(
        live, in_fresh_index(), ps.c.link_generation_at <= func.now(), waiting(stale_ms)
    )
    retried = select(*columns).where(
        live,
        ps.c.link_generation_status == S.FAILED.value,
        ps.c.link_generation_retry_at.is_not(None),
        ps.c.link_generation_retry_at <= func.now(),
        waiting(stale_ms),
    )
    return union_all(fresh, retried)


def state_columns(windows: TimingWindows) -> list[ColumnElement[Any]]:
    """A session's link-generation state, as :func:`to_state` reads it back."""
    return [
        ps.c.id,
        ps.c.link_generation_at,
        ps.c.link_generation_status,
        ps.c.link_generation_attempt,
        ps.c.link_generation_last_error,
        ps.c.link_generation_job_id,
        ps.c.updated_at,
        ps.c.deleted_at.is_not(None).label("deleted"),
        stale(windows.stale_ms).label("stale"),
        due(windows).label("due"),
        ps.c.link_generation_retry_at,
    ]


def to_state(row: Row[Any], prefix: str = "") -> LinkGenerationState:
    values = row._mapping
    return LinkGenerationState(
        id=values[f"{prefix}id"],
        link_generation_at=values[f"{prefix}link_generation_at"],
        status=S(values[f"{prefix}link_generation_status"]),
        attempt=values[f"{prefix}link_generation_attempt"],
        last_error=values[f"{prefix}link_generation_last_error"],
        job_id=values[f"{prefix}link_generation_job_id"],
        updated_at=values[f"{prefix}updated_at"],
        deleted=bool(values[f"{prefix}deleted"]),
        stale=bool(values[f"{prefix}stale"]),
        due=bool(values[f"{prefix}due"]),
        retry_at=values[f"{prefix}link_generation_retry_at"],
    )


def matching(where: SessionFilter) -> list[ColumnElement[bool]]:
    """The sessions a filter names (the listing's and a programme action's one rule): never a
    soft-deleted one; a time bound leaves out sessions with no time."""
    return [
        ps.c.deleted_at.is_(None),
        *([ps.c.program_id == where.program_id] if where.program_id is not None else []),
        # Equalities rather than IN: a programme action's chunk is precompiled to plain SQL
        # (intent_writes.py), and an IN list would need expanding at execution time.
        *([or_(*(_has_status(s) for s in where.statuses))] if where.statuses else []),
        *([ps.c.link_generation_at >= where.from_at] if where.from_at is not None else []),
        *([ps.c.link_generation_at < where.to_at] if where.to_at is not None else []),
    ]


def _has_status(status: LinkGenerationStatus) -> ColumnElement[bool]:
    """The row holds ``status``; UNKNOWN: any value outside the five (``KnownStatus``)."""
    column: ColumnElement[str] = ps.c.link_generation_status
    if status is S.UNKNOWN:
        return and_(*(column != s.value for s in WRITTEN_STATUSES))
    return column == status.value
