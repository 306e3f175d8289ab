"""All SQL on the intent history (``jlg_link_generation_change``): every admin set/clear of a
session's time. Rows are written by the set statement in ``repository.py`` (with
:func:`record_intent`) and never changed."""

from typing import Any

from sqlalchemy import CTE, BindParameter, ColumnElement, Engine, ScalarSelect, insert, select

from jlg_pipeline.adapters.database import translate_errors
from jlg_pipeline.adapters.tables import link_generation_change as changes
from jlg_pipeline.domain.session_state import IntentChange
from jlg_pipeline.domain.validation import SessionId


def record_intent(after: CTE, actor: BindParameter[Any], operation: BindParameter[Any]) -> CTE:
    """A CTE recording who changed each session's time, from what (``after``'s
    ``previous_at``, returned by the UPDATE from the row as it was) to what (``after``, the rows
    as written; nothing when a write was refused), and the programme action it belongs to
    (``operation``; NULL for one session's PATCH). No join: a join of two CTEs, whose rows the
    planner cannot count, ran as a nested loop, 500 by 500 for a programme action's chunk."""
    recorded: CTE = (
        insert(changes)
        .from_select(
            [
                "program_session_id",
                "actor_user_id",
                "link_generation_at",
                "previous_link_generation_at",
                "operation_id",
            ],
            select(after.c.id, actor, after.c.link_generation_at, after.c.previous_at, operation),
        )
        .cte("recorded")
    )
    return recorded


def newest_actor(session_id: ColumnElement[Any]) -> ScalarSelect[Any]:
    """The admin of the session's newest recorded change (NULL when none is recorded): the
    actor a schedule's message or a watchdog run names, never a host write of updated_by."""
    return (
        select(changes.c.actor_user_id)
        .where(changes.c.program_session_id == session_id)
        .order_by(changes.c.id.desc())
        .limit(1)
        .scalar_subquery()
    )


def read_changes(engine: Engine, session_id: SessionId, limit: int) -> list[IntentChange]:
    """The session's changes, newest first, at most ``limit``."""
    statement = (
        select(changes)
        .where(changes.c.program_session_id == session_id)
        .order_by(changes.c.id.desc())
        .limit(limit)
    )
    with translate_errors("reading the intent history"), engine.connect() as conn:
        rows = conn.execute(statement).all()
    return [
        IntentChange(
            session_id=r.program_session_id,
            changed_at=r.changed_at,
            actor_user_id=r.actor_user_id,
            link_generation_at=r.link_generation_at,
            previous_link_generation_at=r.previous_link_generation_at,
            operation_id=r.operation_id,
        )
        for r in rows
    ]
