"""The facts ``services/why.py`` explains a session by (``domain/why.py``), read with the
claim's own definitions (``session_statements.claim_time``, ``waiting``, ``lease_ends``; the
pick's turn order; the watchdog's liveness window, given): the session's row, its programme's
place in the pick and the live workers in one statement, its last attempts, and the turn the
service's view would give a caller now."""

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    Engine,
    and_,
    case,
    func,
    literal,
    null,
    or_,
    select,
    tuple_,
    type_coerce,
)

from jlg_pipeline.adapters.attempt_history import read_attempts
from jlg_pipeline.adapters.database import translate_errors
from jlg_pipeline.adapters.readable_time import ReadableTime
from jlg_pipeline.adapters.service_view import ServiceView
from jlg_pipeline.adapters.session_statements import (
    claim_time,
    lease_ends,
    readable,
    state_columns,
    to_state,
    waiting,
)
from jlg_pipeline.adapters.tables import program_session as ps
from jlg_pipeline.adapters.tables import programme_turn, worker
from jlg_pipeline.domain.constants import TimingWindows
from jlg_pipeline.domain.status import LinkGenerationStatus as S
from jlg_pipeline.domain.validation import SessionId
from jlg_pipeline.domain.why import ATTEMPTS_SHOWN, Facts

NOT_SERVED = -1
"""Where a programme never served sorts in the pick (``served NULLS FIRST``)."""


def facts_statement(session_id: SessionId, windows: TimingWindows, live_within_s: float) -> Any:
    """The session's row, its claim time and predicates, its programme's place in the pick and
    the live workers, in one statement."""
    stale_ms = windows.stale_ms
    mine = programme_turn.alias("mine")
    others = programme_turn.alias("others")

    def place(t: Any) -> Any:
        return tuple_(func.coalesce(t.c.served, NOT_SERVED), t.c.program_id)

    ahead = (
        select(func.count())
        .select_from(others)
        .join(mine, mine.c.program_id == ps.c.program_id)
        .where(
            or_(others.c.ready, others.c.next_due_at <= func.now()),
            place(others) < place(mine),
        )
        .scalar_subquery()
    )
    within = func.make_interval(0, 0, 0, 0, 0, 0, literal(live_within_s))
    live = select(func.count()).where(worker.c.beat_at > func.now() - within).scalar_subquery()
    columns: list[Any] = [
        *state_columns(windows),
        func.now().label("now"),
        type_coerce(claim_time(stale_ms), ReadableTime()).label("claim_at"),
        func.coalesce(waiting(stale_ms), False).label("waits_now"),
        func.coalesce(readable(), False).label("readable"),
        case(
            (
                and_(ps.c.link_generation_status == S.IN_PROGRESS.value, ps.c.deleted_at.is_(None)),
                lease_ends(stale_ms),
            ),
            else_=null(),
        ).label("lease_ends_at"),
        ahead.label("ahead"),
        live.label("live"),
    ]
    return select(*columns).where(ps.c.id == session_id)


def read_facts(
    engine: Engine,
    session_id: SessionId,
    windows: TimingWindows,
    view: ServiceView,
    *,
    live_within_s: float,
    scheduler_enabled: bool,
    sweep_at: Callable[[datetime], datetime | None],
    watchdog_every_s: float,
) -> Facts | None:
    """The facts of ``session_id``; None when no such row exists."""
    statement = facts_statement(session_id, windows, live_within_s)
    with translate_errors("reading why a session waits"), engine.connect() as conn:
        row = conn.execute(statement).first()
    if row is None:
        return None
    now: datetime = row.now
    turn, state = view.peek()
    # The sweep takes a session once its grace has passed: the first sweep after both.
    at = row.link_generation_at if row.readable else None
    swept_from = now if at is None else max(now, at + timedelta(milliseconds=windows.grace_ms))
    return Facts(
        now=now,
        session=to_state(row),
        readable=bool(row.readable),
        waits_now=bool(row.waits_now),
        claim_at=row.claim_at,
        lease_ends_at=row.lease_ends_at,
        attempts=tuple(read_attempts(engine, session_id, ATTEMPTS_SHOWN)),
        service=turn,
        service_state=state,
        programmes_ahead=int(row.ahead),
        live_workers=int(row.live),
        scheduler_enabled=scheduler_enabled,
        sweep_at=sweep_at(swept_from),
        watchdog_grace_s=windows.watchdog_grace_ms / 1000,
        watchdog_every_s=watchdog_every_s,
    )
