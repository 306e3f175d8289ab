"""All SQL on program sessions' link-generation fields.

Every state change is one conditional ``UPDATE … RETURNING`` decided by the database clock:
no read-then-write, no load-and-save (inv-02), and "nothing happened" is a None/False
result, never an exception. Each method runs in its own short transaction.
"""

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    CTE,
    ColumnElement,
    Engine,
    Float,
    Integer,
    Interval,
    Row,
    Select,
    Update,
    and_,
    bindparam,
    case,
    cast,
    func,
    insert,
    literal,
    or_,
    select,
    true,
    union_all,
    update,
)

from jlg_pipeline.adapters.database import translate_errors
from jlg_pipeline.adapters.intent_history import newest_actor, read_changes
from jlg_pipeline.adapters.schedule_outbox import record_change
from jlg_pipeline.adapters.service_gate import ServiceGate
from jlg_pipeline.adapters.tables import generation_attempt as attempts
from jlg_pipeline.adapters.tables import link_generation_change as changes
from jlg_pipeline.adapters.tables import program_session as ps
from jlg_pipeline.domain import validation
from jlg_pipeline.domain.constants import MAX_LAST_ERROR_CHARS, TimingWindows
from jlg_pipeline.domain.models import (
    AttemptOutcome,
    AttemptRecord,
    Claim,
    DueSession,
    IntentChange,
    LinkGenerationState,
    SetOutcome,
    SetResult,
    Trigger,
)
from jlg_pipeline.domain.retries import RETRY_BUDGET_S
from jlg_pipeline.domain.status import CLAIMABLE_STATUSES, LinkGenerationStatus

S = LinkGenerationStatus


def _ms(value: int) -> ColumnElement[timedelta]:
    return literal(timedelta(milliseconds=value), Interval())


def _close_open_attempt(changed: CTE, name: str) -> CTE:
    """A CTE closing, as RECLAIMED, the open attempt of the session ``changed`` (an UPDATE …
    RETURNING id of that session) took over: a stale reclaim, or a PATCH over a stale run."""
    closed: CTE = (
        update(attempts)
        .where(
            attempts.c.program_session_id == changed.c.id,
            attempts.c.outcome == AttemptOutcome.IN_PROGRESS.value,
        )
        .values(outcome=AttemptOutcome.RECLAIMED.value, finished_at=func.now())
        .cte(name)
    )
    return closed


def _claim(row: Any) -> Claim:
    return Claim(
        session_id=row.id,
        program_id=row.program_id,
        attempt=row.link_generation_attempt,
        link_generation_at=row.link_generation_at,
        claimed_at=row.claimed_at,
    )


def _due_session(row: Any) -> DueSession:
    return DueSession(
        id=row.id,
        link_generation_at=row.link_generation_at,
        status=S(row.link_generation_status),
        actor_user_id=row._mapping.get("actor_user_id"),
    )


class ProgramSessionRepository:
    """The concurrency hotspot: the atomic claim, fenced marks and the sweep's query."""

    def __init__(self, engine: Engine, windows: TimingWindows | None = None) -> None:
        self._engine = engine
        self.windows = windows or TimingWindows()
        # Built once: the gate is the hot path, and building a statement costs more than
        # running it. Values arrive as bound parameters.
        claimed = (
            update(ps)
            .where(
                ps.c.id == bindparam("session_id"),
                ps.c.deleted_at.is_(None),
                self._due(),
                self._claimable(),
            )
            .values(
                link_generation_status=S.IN_PROGRESS.value,
                link_generation_attempt=ps.c.link_generation_attempt + 1,
                # updated_by is left alone: it names the admin who last changed the intent,
                # and a trigger's actorUserId is whatever a queue message says.
                updated_at=func.now(),
            )
            .returning(
                ps.c.id,
                ps.c.program_id,
                ps.c.link_generation_attempt,
                ps.c.link_generation_at,
                func.now().label("claimed_at"),
            )
            .cte("claimed")
        )
        # The same statement closes an abandoned attempt (a stale reclaim) and opens this
        # one: the history and the row change together or not at all.
        reclaimed = _close_open_attempt(claimed, "reclaimed")
        opened = (
            insert(attempts)
            .from_select(
                [
                    "program_session_id",
                    "attempt",
                    "trigger",
                    "run_id",
                    "link_generation_at",
                    "claimed_at",
                ],
                select(
                    claimed.c.id,
                    claimed.c.link_generation_attempt,
                    bindparam("trigger", type_=attempts.c.trigger.type),
                    bindparam("run_id", type_=attempts.c.run_id.type),
                    claimed.c.link_generation_at,
                    claimed.c.claimed_at,
                ),
            )
            .cte("opened")
        )
        self._claim_statement = select(claimed).add_cte(reclaimed, opened)
        # The gate runs the compiled SQL directly: SQLAlchemy's execute path cost more
        # per claim than the database did (docs/performance.md).
        compiled = self._claim_statement.compile(dialect=engine.dialect)
        self._claim_sql = str(compiled)
        self._claim_params = dict(compiled.params)
        self._complete_statement = self._mark_statement(
            S.COMPLETED,
            {"job_id": bindparam("job_id"), "total": bindparam("total", type_=Integer)},
            link_generation_job_id=bindparam("job_id"),
            link_generation_last_error=None,
        )
        retry_in_s = cast(bindparam("retry_in_s"), Float)
        retry_at = func.now() + func.make_interval(0, 0, 0, 0, 0, 0, retry_in_s)
        self._fail_statement = self._mark_statement(
            S.FAILED,
            {"error": bindparam("error")},
            link_generation_last_error=bindparam("error"),
            # A retryable failure is tried again by the watchdog after its wait, while its
            # cycle is within the budget; past it (or not retryable), NULL: the sweep's.
            link_generation_retry_at=case(
                (
                    and_(
                        retry_in_s.is_not(None),
                        retry_at < ps.c.link_generation_at + _ms(RETRY_BUDGET_S * 1000),
                    ),
                    retry_at,
                ),
                else_=None,
            ),
        )
        self._set_statements = {
            (record, future): self._set_statement(record, future)
            for record in (False, True)
            for future in (False, True)
        }
        self._renew_statement = (
            update(ps)
            .where(
                ps.c.id == bindparam("session_id"),
                ps.c.link_generation_status == S.IN_PROGRESS.value,
                ps.c.link_generation_attempt == bindparam("claim_attempt"),
            )
            .values(updated_at=func.now())
            .returning(ps.c.id)
        )

    @property
    def claim_sql(self) -> tuple[str, dict[str, Any]]:
        """The claim's SQL text and its fixed parameters (the gate benchmark sends it raw)."""
        return self._claim_sql, dict(self._claim_params)

    # Predicates, all on the database clock.
    def _stale(self) -> ColumnElement[bool]:
        return and_(
            ps.c.link_generation_status == S.IN_PROGRESS.value,
            ps.c.updated_at < func.now() - _ms(self.windows.stale_ms),
        )

    def _due(self) -> ColumnElement[bool]:
        return and_(
            ps.c.link_generation_at.is_not(None),
            ps.c.link_generation_at <= func.now() + _ms(self.windows.due_tolerance_ms),
        )

    def _claimable(self) -> ColumnElement[bool]:
        # Equalities rather than IN: the claim is precompiled to plain SQL (see __init__),
        # and an IN list would need expanding at execution time.
        return or_(
            *(ps.c.link_generation_status == status.value for status in CLAIMABLE_STATUSES),
            self._stale(),
        )

    def _state_columns(self) -> list[ColumnElement[Any]]:
        return [
            ps.c.id,
            ps.c.link_generation_at,
            ps.c.link_generation_status,
            ps.c.link_generation_attempt,
            ps.c.link_generation_last_error,
            ps.c.link_generation_job_id,
            ps.c.updated_at,
            ps.c.deleted_at.is_not(None).label("deleted"),
            self._stale().label("stale"),
            self._due().label("due"),
        ]

    @staticmethod
    def _to_state(row: Row[Any], prefix: str = "") -> LinkGenerationState:
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

    def get_state(self, session_id: int) -> LinkGenerationState | None:
        """The session's link-generation fields, soft-deleted rows included (``deleted``);
        None when no row has that id."""
        session_id = validation.session_id(session_id)
        with translate_errors("reading a session"), self._engine.connect() as conn:
            row = conn.execute(
                select(*self._state_columns()).where(ps.c.id == session_id)
            ).one_or_none()
        return None if row is None else self._to_state(row)

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
        taken_over = _close_open_attempt(after, "taken_over")
        # The intent history: who changed the time, from what to what.
        recorded = (
            insert(changes)
            .from_select(
                [
                    "program_session_id",
                    "actor_user_id",
                    "link_generation_at",
                    "previous_link_generation_at",
                ],
                select(
                    after.c.id, actor, after.c.link_generation_at, before.c.link_generation_at
                ).select_from(after.join(before, before.c.id == after.c.id)),
            )
            .cte("recorded")
        )
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

    def claim(
        self, session_id: int, trigger: Trigger = Trigger.MANUAL, run_id: str | None = None
    ) -> Claim | None:
        """The one gate: atomically move a due, claimable session to IN_PROGRESS.

        Claimable means SCHEDULED or FAILED, or IN_PROGRESS older than the stale window;
        not soft-deleted; ``link_generation_at`` set and no later than now plus the due
        tolerance. Each claim takes a new attempt number and opens its record in the attempt
        history (``trigger``, Dagster's ``run_id``); a stale attempt it takes over is closed
        RECLAIMED. Returns None when another caller holds the claim or the session is not
        claimable; exactly one of any number of concurrent callers gets a Claim.
        """
        session_id = validation.session_id(session_id)
        parameters = {
            **self._claim_params,
            "session_id": session_id,
            "trigger": Trigger(trigger).value,
            "run_id": None if run_id is None else str(run_id)[:64],
        }
        with translate_errors("claiming a session"), self._engine.begin() as conn:
            row = conn.exec_driver_sql(self._claim_sql, parameters).one_or_none()
        return None if row is None else _claim(row)

    def service_gate(self) -> ServiceGate:
        """The pauses external services asked for, in this database."""
        return ServiceGate(self._engine)

    def resume(self, session_id: int, run_id: str) -> Claim | None:
        """The claim this run already holds on the session, its lease renewed: the session is
        IN_PROGRESS under an open attempt that ``run_id`` made (a retry of the run's step
        after its completion write was lost). None otherwise, and for any other run, however
        stale: taking over another run's claim is :meth:`claim`'s job."""
        session_id = validation.session_id(session_id)
        resumed = (
            update(ps)
            .where(
                ps.c.id == session_id,
                ps.c.deleted_at.is_(None),
                ps.c.link_generation_status == S.IN_PROGRESS.value,
                attempts.c.program_session_id == ps.c.id,
                attempts.c.attempt == ps.c.link_generation_attempt,
                attempts.c.outcome == AttemptOutcome.IN_PROGRESS.value,
                attempts.c.run_id == str(run_id)[:64],
            )
            .values(updated_at=func.now())
            .returning(
                ps.c.id,
                ps.c.program_id,
                ps.c.link_generation_attempt,
                ps.c.link_generation_at,
                attempts.c.claimed_at,
            )
        )
        with translate_errors("resuming a claim"), self._engine.begin() as conn:
            row = conn.execute(resumed).one_or_none()
        return None if row is None else _claim(row)

    def _mark_statement(self, status: S, recorded: dict[str, Any], **values: Any) -> Select[Any]:
        """The fenced mark, and the attempt's record closed by the same statement: with the
        mark's outcome when it landed, SUPERSEDED when the attempt was fenced out. A record
        already closed (RECLAIMED while this attempt's bulkRegister still ran) keeps its
        outcome and time; the late result (job id, total or error) is kept on it, so two
        bulkRegister jobs in one cycle stay visible and no counter falls."""
        marked = (
            update(ps)
            .where(
                ps.c.id == bindparam("session_id"),
                ps.c.link_generation_status == S.IN_PROGRESS.value,
                ps.c.link_generation_attempt == bindparam("claim_attempt"),
            )
            .values(link_generation_status=status.value, updated_at=func.now(), **values)
            .returning(ps.c.id)
            .cte("marked")
        )
        still_open = attempts.c.outcome == AttemptOutcome.IN_PROGRESS.value
        closed = (
            update(attempts)
            .where(
                attempts.c.program_session_id == bindparam("session_id"),
                attempts.c.attempt == bindparam("claim_attempt"),
            )
            .values(
                outcome=case(
                    (and_(still_open, select(marked.c.id).exists()), status.value),
                    (still_open, AttemptOutcome.SUPERSEDED.value),
                    else_=attempts.c.outcome,
                ),
                finished_at=func.coalesce(attempts.c.finished_at, func.now()),
                **recorded,
            )
            .cte("closed")
        )
        return select(marked.c.id).add_cte(closed)

    def _mark(
        self, statement: Update | Select[Any], claim: Claim, action: str, **parameters: Any
    ) -> bool:
        # Not "attempt": a parameter named like a column of the table updated joins its SET.
        parameters.update(session_id=claim.session_id, claim_attempt=claim.attempt)
        with translate_errors(action), self._engine.begin() as conn:
            return conn.execute(statement, parameters).one_or_none() is not None

    def renew(self, claim: Claim) -> bool:
        """Extend the claim's lease (``updated_at`` is now) for the attempt holding it, so a
        live attempt never goes stale. False when fenced out (see :meth:`mark_completed`)."""
        return self._mark(self._renew_statement, claim, "renewing a claim")

    def mark_completed(self, claim: Claim, job_id: str, total: int | None = None) -> bool:
        """COMPLETED for the attempt holding the claim. False when fenced out: a stale
        reclaim, a re-arm or a clear took the session since this claim was made (its
        record then says SUPERSEDED)."""
        return self._mark(
            self._complete_statement,
            claim,
            "marking a session COMPLETED",
            job_id=str(job_id)[:255],
            total=total,
        )

    def mark_failed(self, claim: Claim, error: str, retry_in_s: float | None = None) -> bool:
        """FAILED with the error kept, for the attempt holding the claim; with ``retry_in_s``
        (a retryable failure) the watchdog tries it again that many seconds from now, if
        that is within the cycle's budget (``RETRY_BUDGET_S`` after its time). False when
        fenced out (see :meth:`mark_completed`)."""
        return self._mark(
            self._fail_statement,
            claim,
            "marking a session FAILED",
            error=error[:MAX_LAST_ERROR_CHARS],
            retry_in_s=retry_in_s,
        )

    def _fallback_candidates(self) -> ColumnElement[bool]:
        # The first two predicates are the partial index's own, so the planner can use it.
        return and_(
            ps.c.deleted_at.is_(None),
            ps.c.link_generation_status != S.COMPLETED.value,
            ps.c.link_generation_at <= func.now() - _ms(self.windows.grace_ms),
            self._claimable(),
        )

    def fallback_candidates_statement(self, limit: int) -> Select[Any]:
        """The sweep's candidates in two tiers, each served by its own partial index:
        SCHEDULED and stale IN_PROGRESS oldest first, then FAILED fewest attempts first. So
        sessions that always fail are re-attempted, but never keep another from its turn."""
        overdue = and_(
            ps.c.deleted_at.is_(None),
            ps.c.link_generation_at <= func.now() - _ms(self.windows.grace_ms),
        )

        def tier(
            number: int,
            rank: ColumnElement[Any],
            order: Sequence[ColumnElement[Any]],
            *where: ColumnElement[bool],
        ) -> Select[Any]:
            return (
                select(
                    ps.c.id,
                    ps.c.link_generation_at,
                    ps.c.link_generation_status,
                    literal(number).label("tier"),
                    rank.label("rank"),
                )
                .where(overdue, *where)
                .order_by(*order, ps.c.link_generation_at, ps.c.id)
                .limit(limit)
            )

        fresh = tier(
            0,
            literal(0),
            (),
            ps.c.link_generation_status.in_([S.SCHEDULED.value, S.IN_PROGRESS.value]),
            or_(ps.c.link_generation_status == S.SCHEDULED.value, self._stale()),
        )
        failed = tier(
            1,
            ps.c.link_generation_attempt,
            (ps.c.link_generation_attempt,),
            ps.c.link_generation_status == S.FAILED.value,
        )
        both = union_all(fresh, failed).subquery("candidates")
        return (
            select(both.c.id, both.c.link_generation_at, both.c.link_generation_status)
            .order_by(both.c.tier, both.c.rank, both.c.link_generation_at, both.c.id)
            .limit(limit)
        )

    def find_due_for_fallback_generation(self, limit: int) -> Sequence[DueSession]:
        """Overdue past the grace window, not deleted, claimable: SCHEDULED and stale
        IN_PROGRESS oldest first, then FAILED fewest attempts first; at most ``limit``."""
        statement = self.fallback_candidates_statement(validation.positive_limit(limit))
        with translate_errors("finding overdue sessions"), self._engine.connect() as conn:
            rows = conn.execute(statement).all()
        return [_due_session(r) for r in rows]

    def count_due_for_fallback_generation(self) -> int:
        """How many sessions :meth:`find_due_for_fallback_generation` would return unlimited."""
        statement = select(func.count()).select_from(ps).where(self._fallback_candidates())
        with translate_errors("counting overdue sessions"), self._engine.connect() as conn:
            return int(conn.execute(statement).scalar_one())

    def find_unattended(self, limit: int) -> Sequence[DueSession]:
        """The watchdog's candidates: due sessions no live attempt holds, whatever became of
        their event. SCHEDULED with a time more than the watchdog's grace ago (never claimed
        this cycle), IN_PROGRESS gone stale, or FAILED retryably with its wait over (a
        non-retryable failure is the sweep's and a person's); not deleted; oldest first, at
        most ``limit``; each with the admin of its newest intent change. Each tier is read
        through its own partial index."""
        limit = validation.positive_limit(limit)
        columns = [
            ps.c.id,
            ps.c.link_generation_at,
            ps.c.link_generation_status,
            newest_actor(ps.c.id).label("actor_user_id"),
        ]
        fresh = (
            select(*columns)
            .where(
                # The predicates of ix_psession_link_gen_fresh, so the planner can use it.
                ps.c.deleted_at.is_(None),
                ps.c.link_generation_status.in_([S.SCHEDULED.value, S.IN_PROGRESS.value]),
                ps.c.link_generation_at <= func.now() - _ms(self.windows.watchdog_grace_ms),
                or_(ps.c.link_generation_status == S.SCHEDULED.value, self._stale()),
            )
            .order_by(ps.c.link_generation_at, ps.c.id)
            .limit(limit)
        )
        retrying = (
            select(*columns)
            .where(
                # ix_psession_link_gen_retry's predicates.
                ps.c.deleted_at.is_(None),
                ps.c.link_generation_status == S.FAILED.value,
                ps.c.link_generation_retry_at.is_not(None),
                ps.c.link_generation_retry_at <= func.now(),
            )
            .order_by(ps.c.link_generation_retry_at, ps.c.id)
            .limit(limit)
        )
        both = union_all(fresh, retrying).subquery()
        statement = select(both).order_by(both.c.link_generation_at, both.c.id).limit(limit)
        with translate_errors("finding unattended sessions"), self._engine.connect() as conn:
            rows = conn.execute(statement).all()
        return [_due_session(r) for r in rows]

    def changes(self, session_id: int, limit: int = 50) -> list[IntentChange]:
        """The session's intent history (every admin set/clear), newest first."""
        return read_changes(self._engine, session_id, limit)

    def _in_window(self, start: datetime, end: datetime) -> ColumnElement[bool]:
        start = validation.aware_datetime(start, "start")
        end = validation.aware_datetime(end, "end")
        return and_(
            ps.c.deleted_at.is_(None),
            ps.c.link_generation_status != S.COMPLETED.value,
            ps.c.link_generation_at >= start,
            ps.c.link_generation_at < end,
            self._due(),
            self._claimable(),
        )

    def find_due_in_window(
        self, start: datetime, end: datetime, limit: int
    ) -> Sequence[DueSession]:
        """Backfill candidates: ``link_generation_at`` in [start, end), due, claimable and
        not deleted (so never COMPLETED, inv-03); oldest first, at most ``limit``."""
        statement = (
            select(ps.c.id, ps.c.link_generation_at, ps.c.link_generation_status)
            .where(self._in_window(start, end))
            .order_by(ps.c.link_generation_at, ps.c.id)
            .limit(validation.positive_limit(limit))
        )
        with translate_errors("finding sessions to backfill"), self._engine.connect() as conn:
            rows = conn.execute(statement).all()
        return [_due_session(r) for r in rows]

    def count_due_in_window(self, start: datetime, end: datetime) -> int:
        """How many sessions :meth:`find_due_in_window` would return unlimited."""
        statement = select(func.count()).select_from(ps).where(self._in_window(start, end))
        with translate_errors("counting sessions to backfill"), self._engine.connect() as conn:
            return int(conn.execute(statement).scalar_one())

    def attempts(self, session_id: int, limit: int = 50) -> list[AttemptRecord]:
        """The session's attempt history, newest first, at most ``limit``."""
        session_id = validation.session_id(session_id)
        statement = (
            select(attempts)
            .where(attempts.c.program_session_id == session_id)
            .order_by(attempts.c.attempt.desc())
            .limit(validation.positive_limit(limit))
        )
        with translate_errors("reading attempts"), self._engine.connect() as conn:
            rows = conn.execute(statement).all()
        return [
            AttemptRecord(
                session_id=r.program_session_id,
                attempt=r.attempt,
                trigger=r.trigger,
                run_id=r.run_id,
                link_generation_at=r.link_generation_at,
                claimed_at=r.claimed_at,
                finished_at=r.finished_at,
                outcome=AttemptOutcome(r.outcome),
                job_id=r.job_id,
                total=r.total,
                error=r.error,
            )
            for r in rows
        ]

    def list_sessions(
        self, status: S | None, limit: int, after_id: int
    ) -> tuple[list[LinkGenerationState], int | None]:
        """Sessions (not soft-deleted) with id above ``after_id``, by id, at most ``limit``,
        only ``status`` when given; and the id to continue after (None on the last page)."""
        limit = validation.positive_limit(limit)
        statement = (
            select(*self._state_columns())
            .where(
                ps.c.deleted_at.is_(None),
                ps.c.id > after_id,
                *([ps.c.link_generation_status == status.value] if status else []),
            )
            .order_by(ps.c.id)
            .limit(limit + 1)
        )
        with translate_errors("listing sessions"), self._engine.connect() as conn:
            rows = conn.execute(statement).all()
        states = [self._to_state(r) for r in rows[:limit]]
        return states, states[-1].id if len(rows) > limit else None
