"""The admin's set and clear of a session's time (``PATCH``, ``jlg`` commands), each one
statement: the row as it was (locked) and as written, a stale attempt it takes over closed,
the change recorded in the intent history and, when asked, the schedule change written to the
outbox. Refused writes change nothing and say why."""

from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Engine,
    Select,
    bindparam,
    case,
    func,
    or_,
    select,
    true,
    update,
)

from jlg_pipeline.adapters.attempt_history import close_open_attempt
from jlg_pipeline.adapters.database import translate_errors
from jlg_pipeline.adapters.intent_history import record_intent
from jlg_pipeline.adapters.schedule_outbox import record_change
from jlg_pipeline.adapters.session_statements import S, SessionStatements
from jlg_pipeline.adapters.tables import program_session as ps
from jlg_pipeline.domain import validation
from jlg_pipeline.domain.constants import TimingWindows
from jlg_pipeline.domain.models import SetOutcome, SetResult


class IntentWrites(SessionStatements):
    def __init__(self, engine: Engine, windows: TimingWindows | None = None) -> None:
        super().__init__(engine, windows)
        self._set_statements = {
            (record, future): self._set_statement(record, future)
            for record in (False, True)
            for future in (False, True)
        }

    def _set_statement(self, record_schedule_change: bool, future_only: bool) -> Select[Any]:
        """Set/clear as one statement: the row as it was (locked) and the row as written, if
        it was, and optionally the outbox write. Both read the newest committed version, so
        the outcome and the prior state agree. Built once: the PATCH runs it."""
        at = bindparam("at", type_=ps.c.link_generation_at.type)
        actor = bindparam("actor", type_=ps.c.updated_by.type)
        before = (
            select(*self._state_columns())
            .where(ps.c.id == bindparam("session_id"))
            .with_for_update()
            .cte("before")
        )
        # "In the future" on the database clock, the one that decides "due" (not the app
        # host's, which may drift from it).
        acceptable = or_(at.is_(None), at > func.now()) if future_only else true()
        after = (
            update(ps)
            .where(
                ps.c.id == bindparam("session_id"),
                ps.c.deleted_at.is_(None),
                acceptable,
                or_(ps.c.link_generation_status != S.IN_PROGRESS.value, self._stale()),
            )
            .values(
                link_generation_at=at,
                link_generation_status=case(
                    (at.is_(None), S.NOT_SCHEDULED.value), else_=S.SCHEDULED.value
                ),
                link_generation_last_error=None,
                link_generation_job_id=None,
                updated_at=func.now(),
                updated_by=actor,
            )
            .returning(*self._state_columns())
            .cte("after")
        )
        # Re-arming or clearing over a stale attempt takes it over: its record closes.
        taken_over = close_open_attempt(after, "taken_over")
        recorded = record_intent(after, before, actor)
        joined = before.outerjoin(after, true())
        version: list[ColumnElement[Any]] = []
        if record_schedule_change:
            change = record_change(after, actor)
            joined = joined.outerjoin(change, true())
            version = [change.c.version.label("schedule_version")]
        return (
            select(
                *(c.label(f"before_{c.name}") for c in before.c),
                *(c.label(f"after_{c.name}") for c in after.c),
                acceptable.label("acceptable"),
                *version,
            )
            .select_from(joined)
            .add_cte(taken_over, recorded)
        )

    def set_link_generation(
        self,
        session_id: int,
        link_generation_at: datetime | None,
        actor_user_id: int | None,
        *,
        record_schedule_change: bool = False,
        future_only: bool = False,
    ) -> SetResult:
        """Arm (a time → SCHEDULED) or clear (None → NOT_SCHEDULED) in one direct UPDATE;
        with ``record_schedule_change``, the schedule change it implies is written to the
        outbox by the same statement (``SetResult.schedule_version``). With ``future_only``
        (the API's rule) a time not after the database clock's now is refused.

        Refused, with nothing written, when the session is missing or soft-deleted
        (NOT_FOUND), the time is not after the database's now (NOT_IN_FUTURE), or a
        generation holds the claim and is not stale (IN_PROGRESS). Every write is recorded in
        the intent history (:meth:`changes`), by the same statement. Arming
        starts a new cycle: the last error and job id are cleared. The attempt counter is
        never reset, so a crashed run from an earlier cycle stays fenced out.
        """
        session_id = validation.session_id(session_id)
        actor_user_id = validation.actor_user_id(actor_user_id)
        if link_generation_at is not None:
            link_generation_at = validation.aware_datetime(link_generation_at)
        statement = self._set_statements[record_schedule_change, future_only]
        with translate_errors("setting link generation"), self._engine.begin() as conn:
            row = conn.execute(
                statement,
                {"session_id": session_id, "at": link_generation_at, "actor": actor_user_id},
            ).one_or_none()
        if row is None:
            return SetResult(SetOutcome.NOT_FOUND)
        if row.after_id is not None:
            return SetResult(
                SetOutcome.UPDATED,
                self._to_state(row, "after_"),
                schedule_version=row._mapping.get("schedule_version"),
            )
        prior = self._to_state(row, "before_")
        if prior.deleted:
            return SetResult(SetOutcome.NOT_FOUND)
        if not row.acceptable:
            return SetResult(SetOutcome.NOT_IN_FUTURE, prior)
        return SetResult(SetOutcome.IN_PROGRESS, prior)
