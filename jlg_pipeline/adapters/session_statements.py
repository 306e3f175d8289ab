"""The predicates every statement on program sessions shares, all on the database clock
(stale, due, claimable), and a session's link-generation state as the statements return it.
The claim, the marks, the candidate queries, the intent writes and the reads are each built
from these functions (no store inherits from another), so each rule is written once."""

from datetime import timedelta
from typing import Any

from sqlalchemy import ColumnElement, Interval, Row, and_, func, literal, or_

from jlg_pipeline.adapters.tables import program_session as ps
from jlg_pipeline.domain.constants import TimingWindows
from jlg_pipeline.domain.programme_actions import SessionFilter
from jlg_pipeline.domain.session_state import DueSession, LinkGenerationState
from jlg_pipeline.domain.status import CLAIMABLE_STATUSES, LinkGenerationStatus

S = LinkGenerationStatus


def ms(value: int) -> ColumnElement[timedelta]:
    return literal(timedelta(milliseconds=value), Interval())


def due_session(row: Any) -> DueSession:
    return DueSession(
        id=row.id,
        link_generation_at=row.link_generation_at,
        status=S(row.link_generation_status),
        actor_user_id=row._mapping.get("actor_user_id"),
        retry_at=row._mapping.get("link_generation_retry_at"),
    )


FRESH_INDEX_STATUSES = [S.SCHEDULED.value, S.IN_PROGRESS.value]
"""The statuses ix_psession_link_gen_fresh covers (migration 0003): a predicate that repeats it
lets the planner use the index."""


def in_fresh_index() -> ColumnElement[bool]:
    return ps.c.link_generation_status.in_(FRESH_INDEX_STATUSES)


def never_claimed() -> ColumnElement[bool]:
    """Armed and not claimed this cycle."""
    return ps.c.link_generation_status == S.SCHEDULED.value


def stale(stale_ms: int) -> ColumnElement[bool]:
    """IN_PROGRESS and not renewed for the stale window: its attempt is taken for dead."""
    return and_(
        ps.c.link_generation_status == S.IN_PROGRESS.value,
        ps.c.updated_at < func.now() - ms(stale_ms),
    )


def waiting(stale_ms: int, t: Any = ps) -> ColumnElement[bool]:
    """Waits for a worker (docs/design.md "One queue"), on ``t`` (the table or an alias of it):
    not deleted, its time come, and no live attempt holds it: SCHEDULED, FAILED with its retry
    due (one left to the sweep or still in its backoff waits for neither), or IN_PROGRESS gone
    stale."""
    c = t.c
    return and_(
        c.deleted_at.is_(None),
        c.link_generation_at <= func.now(),
        or_(
            c.link_generation_status == S.SCHEDULED.value,
            and_(
                c.link_generation_status == S.FAILED.value,
                c.link_generation_retry_at <= func.now(),
            ),
            and_(
                c.link_generation_status == S.IN_PROGRESS.value,
                c.updated_at < func.now() - ms(stale_ms),
            ),
        ),
    )


def unattended(stale_ms: int) -> ColumnElement[bool]:
    """The fresh tier no live attempt holds: SCHEDULED, or IN_PROGRESS gone stale (what the
    sweep, the watchdog and the backlog go after, through ix_psession_link_gen_fresh)."""
    return and_(in_fresh_index(), or_(never_claimed(), stale(stale_ms)))


def due(windows: TimingWindows) -> ColumnElement[bool]:
    """Its time set and no later than now plus the due tolerance: the claim's due guard."""
    return and_(
        ps.c.link_generation_at.is_not(None),
        ps.c.link_generation_at <= func.now() + ms(windows.due_tolerance_ms),
    )


def claimable(windows: TimingWindows) -> ColumnElement[bool]:
    """SCHEDULED or FAILED, or IN_PROGRESS gone stale: what a claim may take."""
    # Equalities rather than IN: the claim is precompiled to plain SQL (repository.py),
    # and an IN list would need expanding at execution time.
    return or_(
        *(ps.c.link_generation_status == status.value for status in CLAIMABLE_STATUSES),
        stale(windows.stale_ms),
    )


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
    )


def matching(where: SessionFilter) -> list[ColumnElement[bool]]:
    """The sessions a filter names (the listing's and a programme action's one rule): never a
    soft-deleted one; a time bound leaves out sessions with no time."""
    return [
        ps.c.deleted_at.is_(None),
        *([ps.c.program_id == where.program_id] if where.program_id is not None else []),
        # Equalities rather than IN: a programme action's chunk is precompiled to plain SQL
        # (intent_writes.py), and an IN list would need expanding at execution time.
        *(
            [or_(*(ps.c.link_generation_status == s.value for s in where.statuses))]
            if where.statuses
            else []
        ),
        *([ps.c.link_generation_at >= where.from_at] if where.from_at is not None else []),
        *([ps.c.link_generation_at < where.to_at] if where.to_at is not None else []),
    ]
