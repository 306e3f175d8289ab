"""The admin's set and clear of a session's time (``PATCH``, ``jlg`` commands, and each chunk
of a programme action), each one statement: the rows as they were (locked) and as written, a
stale attempt it takes over closed, the change recorded in the intent history and, when asked,
the schedule change written to the outbox. Refused writes change nothing and say why."""

import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID as Uuid

from sqlalchemy import (
    CTE,
    BindParameter,
    ColumnElement,
    CompoundSelect,
    Engine,
    Integer,
    Interval,
    Select,
    and_,
    bindparam,
    case,
    func,
    literal,
    null,
    or_,
    select,
    union_all,
    update,
)
from sqlalchemy.dialects.postgresql import UUID

from jlg_pipeline.adapters.attempt_history import close_open_attempt
from jlg_pipeline.adapters.database import translate_errors
from jlg_pipeline.adapters.intent_history import record_intent
from jlg_pipeline.adapters.pick import bring_forward
from jlg_pipeline.adapters.schedule_outbox import record_change
from jlg_pipeline.adapters.session_statements import (
    READABLE_FROM_AT,
    S,
    matching,
    readable,
    stale,
    state_columns,
    to_state,
)
from jlg_pipeline.adapters.tables import program_session as ps
from jlg_pipeline.adapters.tables import programme_operation_session as members
from jlg_pipeline.domain.constants import LINK_GENERATION_HORIZON, TimingWindows
from jlg_pipeline.domain.programme_actions import (
    MAX_OPERATION_SESSIONS,
    OPERATION_CHUNK,
    OPERATION_SHARE,
    PREVIEW_SHOWN,
    Preview,
    SessionFilter,
    Skipped,
    skip_reason,
)
from jlg_pipeline.domain.session_state import SetOutcome, SetResult
from jlg_pipeline.domain.validation import SessionId

ONE_SECOND = literal(timedelta(seconds=1), Interval())
HORIZON = literal(LINK_GENERATION_HORIZON, Interval())
COMPILED_CHUNKS_KEPT = 64


def _binds() -> dict[str, BindParameter[Any]]:
    return {
        "at": bindparam("at", type_=ps.c.link_generation_at.type),
        "shift": bindparam("shift_s", type_=Integer()),
        "actor": bindparam("actor", type_=ps.c.updated_by.type),
        "operation": bindparam("op_id", type_=UUID(as_uuid=True)),
    }


class IntentWrites:
    """The admin's writes to a session's time: a PATCH's set or clear, a programme action's
    chunks and its dry run's forecast, each one statement with its intent history."""

    clock: Callable[[], float] = staticmethod(time.monotonic)
    chunk_wait: Callable[[float], None] = staticmethod(time.sleep)
    """How a programme action's chunk is timed and the database left to others after it."""

    def __init__(self, engine: Engine, windows: TimingWindows | None = None) -> None:
        self._engine = engine
        self.windows = windows or TimingWindows()
        one = ps.c.id == bindparam("session_id")
        self._set_statements = {
            (record, future): self._write_statement(one, record, future)
            for record in (False, True)
            for future in (False, True)
        }
        self._compiled_chunks: dict[tuple[SessionFilter, bool], tuple[str, dict[str, Any]]] = {}

    def refusal(
        self, new_at: ColumnElement[Any], shift: ColumnElement[Any], *, future_only: bool
    ) -> ColumnElement[Any]:
        """Why a set (or a shift) of the session to ``new_at`` would be refused, a
        ``SetOutcome`` value; NULL when it would be written. The one rule for a PATCH, a
        ``jlg`` command, each session of a programme action and a dry run's forecast: deleted;
        a shift with no time to shift; not after the database clock's now (the one that
        decides "due"), with ``future_only`` (the API's rule); a generation holding the claim
        and not stale."""
        in_future = or_(and_(new_at.is_(None), shift.is_(None)), new_at > func.now())
        return case(
            (ps.c.deleted_at.is_not(None), SetOutcome.NOT_FOUND.value),
            (and_(shift.is_not(None), new_at.is_(None)), SetOutcome.NO_TIME.value),
            *([(~in_future, SetOutcome.NOT_IN_FUTURE.value)] if future_only else []),
            (
                or_(new_at > func.now() + HORIZON, new_at < READABLE_FROM_AT),
                SetOutcome.OUT_OF_RANGE.value,
            ),
            (
                and_(
                    ps.c.link_generation_status == S.IN_PROGRESS.value,
                    ~stale(self.windows.stale_ms),
                ),
                SetOutcome.IN_PROGRESS.value,
            ),
            else_=null(),
        )

    @staticmethod
    def new_time(at: ColumnElement[Any], shift: ColumnElement[Any]) -> ColumnElement[Any]:
        """The time a set (``at``; None clears) or a shift (``shift`` seconds) gives; a stored
        time out of range stays as it is (no arithmetic on it), and is refused as such."""
        return case(
            (shift.is_(None), at),
            (~readable(), ps.c.link_generation_at),
            else_=ps.c.link_generation_at + shift * ONE_SECOND,
        )

    def _chunk_sql(
        self, where: SessionFilter, record_schedule_change: bool
    ) -> tuple[str, dict[str, Any]]:
        """The chunk's SQL text and its fixed parameters, built and compiled once per
        operation rather than for each of its chunks: the operation runs in the web process,
        beside other requests (bench/timing/programme_move.py)."""
        key = (where, record_schedule_change)
        if key not in self._compiled_chunks:
            compiled = self._chunk_statement(where, record_schedule_change).compile(
                dialect=self._engine.dialect
            )
            if len(self._compiled_chunks) >= COMPILED_CHUNKS_KEPT:
                self._compiled_chunks.clear()
            self._compiled_chunks[key] = (str(compiled), dict(compiled.params))
        return self._compiled_chunks[key]

    def _chunk_statement(
        self, where: SessionFilter, record_schedule_change: bool
    ) -> Select[Any] | CompoundSelect[Any]:
        """One chunk of a programme action: up to OPERATION_CHUNK of the operation's sessions
        not yet acted on (another finisher's chunk is skipped, not waited for), each changed
        exactly as its own PATCH would change it, and marked with what happened. A session
        the filter no longer names (changed since the operation began) is left as it is, so
        each session ends as if the operation ran at one moment, before or after each other
        write to it. Built per operation: its filter is part of it."""
        b = _binds()
        picked = (
            select(members.c.program_session_id)
            .where(members.c.operation_id == b["operation"], members.c.outcome.is_(None))
            .order_by(members.c.program_session_id)
            .limit(OPERATION_CHUNK)
            .with_for_update(skip_locked=True)
            .cte("picked")
        )
        which = ps.c.id.in_(select(picked.c.program_session_id))
        return self._write_statement(
            which, record_schedule_change, True, b, picked=picked, where=where
        )

    def _write_statement(
        self,
        which: ColumnElement[bool],
        record_schedule_change: bool,
        future_only: bool,
        b: dict[str, BindParameter[Any]] | None = None,
        *,
        picked: CTE | None = None,
        where: SessionFilter | None = None,
    ) -> Select[Any] | CompoundSelect[Any]:
        """Set/clear/shift as one statement: the rows ``which`` names as they were (locked,
        in id order, so two writers never deadlock) and as written, when they were; the
        intent history; optionally the outbox write. All read the newest committed version,
        so the outcome and the prior state agree. Built once for the PATCH, once per operation
        for a programme action's chunks (``picked``)."""
        b = b or _binds()
        new_at = self.new_time(b["at"], b["shift"])
        refusal = self.refusal(new_at, b["shift"], future_only=future_only)
        if where is not None:
            refusal = case(
                (refusal.is_not(None), refusal),
                (~and_(*matching(where)), SetOutcome.NO_LONGER_MATCHES.value),
                else_=null(),
            )
        before = (
            select(*state_columns(self.windows), new_at.label("new_at"), refusal.label("refusal"))
            .where(which)
            .order_by(ps.c.id)
            .with_for_update()
            .cte("before")
        )
        after = (
            update(ps)
            .where(ps.c.id == before.c.id, before.c.refusal.is_(None))
            .values(
                link_generation_at=before.c.new_at,
                link_generation_status=case(
                    (before.c.new_at.is_(None), S.NOT_SCHEDULED.value), else_=S.SCHEDULED.value
                ),
                link_generation_last_error=None,
                link_generation_job_id=None,
                updated_at=func.now(),
                updated_by=b["actor"],
            )
            .returning(
                *state_columns(self.windows),
                before.c.link_generation_at.label("previous_at"),
                ps.c.program_id,
            )
            .cte("after")
        )
        # Re-arming or clearing over a stale attempt takes it over: its record closes.
        taken_over = close_open_attempt(after, "taken_over")
        recorded = record_intent(after, b["actor"], b["operation"])
        change = record_change(after, b["actor"]) if record_schedule_change else None
        outcome = func.coalesce(before.c.refusal, SetOutcome.UPDATED.value)
        # An armed session's programme has its turn no later than the session's time.
        armed = (
            select(after.c.program_id, func.min(after.c.link_generation_at))
            .where(after.c.link_generation_status == S.SCHEDULED.value)
            .group_by(after.c.program_id)
        )
        ctes = [taken_over, recorded, bring_forward(armed).cte("turn_forward")]
        if picked is not None:
            # A programme action's chunk: each picked session is marked with what happened to
            # it by the statement that acted on it, a row gone meanwhile as not found. Each is
            # an index lookup from one CTE: a join of two CTEs (whose rows the planner cannot
            # count) ran as a 500 by 500 nested loop.
            of_operation = members.c.operation_id == b["operation"]
            marked = (
                update(members)
                .where(of_operation, members.c.program_session_id == before.c.id)
                .values(outcome=outcome)
                .returning(members.c.program_session_id, members.c.outcome)
                .cte("marked")
            )
            gone = (
                update(members)
                .where(
                    of_operation,
                    members.c.program_session_id.in_(select(picked.c.program_session_id)),
                    members.c.program_session_id.not_in(select(before.c.id)),
                )
                .values(outcome=SetOutcome.NOT_FOUND.value)
                .returning(members.c.program_session_id, members.c.outcome)
                .cte("gone")
            )
            ctes += [after] if change is None else [after, change]
            return union_all(select(marked), select(gone)).add_cte(*ctes)
        joined = before.outerjoin(after, after.c.id == before.c.id)
        version: list[ColumnElement[Any]] = []
        if change is not None:
            joined = joined.outerjoin(change, change.c.program_session_id == before.c.id)
            version = [change.c.version.label("schedule_version")]
        return (
            select(
                *(c.label(f"before_{c.name}") for c in before.c),
                *(c.label(f"after_{c.name}") for c in after.c),
                outcome.label("outcome"),
                *version,
            )
            .select_from(joined)
            .add_cte(*ctes)
        )

    def set_link_generation(
        self,
        session_id: SessionId,
        link_generation_at: datetime | None,
        actor_user_id: int | None,
        *,
        record_schedule_change: bool = False,
        future_only: bool = False,
    ) -> SetResult:
        """Arm (a time → SCHEDULED) or clear (None → NOT_SCHEDULED) in one single UPDATE;
        with ``record_schedule_change``, the schedule change it implies is written to the
        outbox by the same statement (``SetResult.schedule_version``). With ``future_only``
        (the API's rule) a time not after the database clock's now is refused.

        Refused, with nothing written, for each reason :meth:`refusal` gives. The intent
        history, and an armed session's programme turn, are written by the same statement.
        Arming starts a new cycle (last error and job id cleared); the attempt counter is never
        reset, so a crashed run from an earlier cycle stays fenced out."""
        statement = self._set_statements[record_schedule_change, future_only]
        with translate_errors("setting link generation"), self._engine.begin() as conn:
            row = conn.execute(
                statement,
                {
                    "session_id": session_id,
                    "at": link_generation_at,
                    "shift_s": None,
                    "actor": actor_user_id,
                    "op_id": None,
                },
            ).one_or_none()
        if row is None:
            return SetResult(SetOutcome.NOT_FOUND)
        outcome = SetOutcome(row.outcome)
        if outcome is SetOutcome.UPDATED:
            return SetResult(
                outcome,
                to_state(row, "after_"),
                schedule_version=row._mapping.get("schedule_version"),
            )
        if outcome is SetOutcome.NOT_FOUND:
            return SetResult(outcome)
        return SetResult(outcome, to_state(row, "before_"))

    def act_on_chunk(
        self,
        operation_id: Uuid,
        where: SessionFilter,
        at: datetime | None,
        shift_s: int | None,
        actor_user_id: int,
        *,
        record_schedule_change: bool,
    ) -> list[tuple[int, SetOutcome]]:
        """One chunk of a programme action, in one statement (one transaction): up to
        OPERATION_CHUNK of its sessions not yet acted on, each set to ``at`` (None clears) or
        moved by ``shift_s`` exactly as its own PATCH would, and marked with the outcome.
        [] when none is left (or another finisher holds the rest). Having acted, it waits to
        keep the operation to its OPERATION_SHARE of the database's time."""
        sql, defaults = self._chunk_sql(where, record_schedule_change)
        params = {
            **defaults,
            "op_id": operation_id,
            "at": at,
            "shift_s": shift_s,
            "actor": actor_user_id,
        }
        started = self.clock()
        with translate_errors("acting on a programme's sessions"), self._engine.begin() as conn:
            rows = conn.exec_driver_sql(sql, params).all()
        if rows:
            self.chunk_wait((self.clock() - started) * (1 / OPERATION_SHARE - 1))
        return [(r.program_session_id, SetOutcome(r.outcome)) for r in rows]

    def forecast(
        self, where: SessionFilter, at: datetime | None, shift_s: int | None
    ) -> tuple[int, list[Preview], list[Skipped]]:
        """What a programme action would do now to the sessions ``where`` names, by the same
        rule as the write, read without a lock (a dry run changes and holds nothing): how many
        match (counted to MAX_OPERATION_SESSIONS + 1: one more says "too many"), the first
        PREVIEW_SHOWN of them, and every one it would skip, with why. Only those rows leave
        the database: the answer is built in the web process, beside other requests."""
        b = _binds()
        new_at = self.new_time(b["at"], b["shift"])
        refusal = self.refusal(new_at, b["shift"], future_only=True)
        matched = (
            select(
                ps.c.id,
                ps.c.link_generation_at,
                ps.c.link_generation_status,
                new_at.label("new_at"),
                refusal.label("refusal"),
                func.row_number().over(order_by=ps.c.id).label("n"),
            )
            .where(*matching(where))
            .order_by(ps.c.id)
            .limit(MAX_OPERATION_SESSIONS + 1)
            .subquery("matched")
        )
        statement = select(
            matched,
            select(func.count()).select_from(matched).scalar_subquery().label("how_many"),
        ).where(or_(matched.c.n <= PREVIEW_SHOWN, matched.c.refusal.is_not(None)))
        with translate_errors("forecasting a programme action"), self._engine.connect() as conn:
            rows = conn.execute(statement, {"at": at, "shift_s": shift_s}).all()
        shown = [
            Preview(
                session_id=r.id,
                current_at=r.link_generation_at,
                new_at=None if r.refusal else r.new_at,
                status=S(r.link_generation_status),
                skip=None if r.refusal is None else skip_reason(SetOutcome(r.refusal)),
            )
            for r in rows
            if r.n <= PREVIEW_SHOWN
        ]
        skipped = [
            Skipped(r.id, skip_reason(SetOutcome(r.refusal)) or "")
            for r in rows
            if r.refusal is not None
        ]
        return (int(rows[0].how_many) if rows else 0), shown, skipped
