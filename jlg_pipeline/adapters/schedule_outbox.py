"""All SQL on the schedule outbox (``jlg_schedule_outbox``): the pending desired EventBridge
state per session, written with the admin's UPDATE and deleted once applied.

An applier takes a change by a lease on its row (``leased_until``; the column keeps 0006's
name, ``held_until``), in one short statement, and settles it in another, so no connection,
transaction or lock is held across the AWS call: a silent EventBridge never holds the admin's
pool. While the lease runs no other applier takes the session, so each applies the newest
change; the admin's write never waits for it (a newer change keeps the lease, and the holder
applies it next). Every settle is conditional on the version applied, so a newer change is
never lost.
"""

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import (
    CTE,
    ColumnElement,
    Engine,
    Interval,
    Select,
    and_,
    bindparam,
    delete,
    false,
    func,
    literal,
    or_,
    select,
    true,
    union_all,
    update,
)
from sqlalchemy.dialects.postgresql import insert

from jlg_pipeline.adapters.database import translate_errors
from jlg_pipeline.adapters.intent_history import newest_actor
from jlg_pipeline.adapters.metric_counts import count_set_aside
from jlg_pipeline.adapters.tables import program_session as ps
from jlg_pipeline.adapters.tables import schedule_change_version
from jlg_pipeline.adapters.tables import schedule_outbox as outbox
from jlg_pipeline.domain.constants import MAX_LAST_ERROR_CHARS
from jlg_pipeline.domain.schedule_sync import (
    APPLY_LEASE,
    FIRST_TRY_AFTER,
    MAX_BACKOFF,
    DirectLaunch,
    PendingChange,
    goes_direct,
)
from jlg_pipeline.domain.status import LinkGenerationStatus
from jlg_pipeline.domain.validation import SessionId

RESYNC_BATCH = 10_000


def _interval(value: Any) -> ColumnElement[Any]:
    return literal(value, Interval())


_NOT_LEASED = or_(outbox.c.leased_until.is_(None), outbox.c.leased_until <= func.clock_timestamp())
# Built once: the fast path runs it after every PATCH.
_TAKE = (
    update(outbox)
    .where(
        outbox.c.program_session_id == bindparam("session_id"),
        outbox.c.direct == false(),
        _NOT_LEASED,
    )
    .values(leased_until=func.clock_timestamp() + _interval(APPLY_LEASE))
    .returning(
        outbox.c.program_session_id,
        outbox.c.version,
        outbox.c.fire_at,
        outbox.c.actor_user_id,
        outbox.c.tries,
        outbox.c.leased_until.label("leased_until"),
        func.clock_timestamp().label("now"),
    )
)


_CHANGE_COLUMNS = [
    "program_session_id",
    "version",
    "fire_at",
    "actor_user_id",
    "direct",
    "next_try_at",
    "tries",
    "changed_at",
]


def _upsert_changes(
    session_id: Any,
    fire_at: Any,
    actor_user_id: Any,
    next_try_at: Any,
    *,
    keep_direct: bool = False,
) -> Any:
    """INSERT … ON CONFLICT: each session's row becomes a new change (a new version, not
    direct, no tries, no error), from a select of the given columns. An applier's lease is
    kept: it applies the newer change next. With ``keep_direct``, a change already decided
    direct is left as it is."""
    rows = select(
        session_id,
        func.next_value(schedule_change_version),
        fire_at,
        actor_user_id,
        false(),
        next_try_at,
        literal(0),
        func.now(),
    )
    statement = insert(outbox).from_select(_CHANGE_COLUMNS, rows)
    return statement.on_conflict_do_update(
        index_elements=[outbox.c.program_session_id],
        set_={
            **{c: statement.excluded[c] for c in _CHANGE_COLUMNS[1:]},
            "last_error": None,
        },
        where=outbox.c.direct == false() if keep_direct else None,
    )


def record_change(after: CTE, actor_user_id: ColumnElement[Any]) -> CTE:
    """The outbox write for each session the ``after`` CTE (an UPDATE … RETURNING id and
    link_generation_at) changed, as a CTE of the same statement: one transaction, one
    round trip. Its ``version`` column is each new change's version."""
    change: CTE = (
        _upsert_changes(
            after.c.id,
            after.c.link_generation_at,
            actor_user_id,
            func.now() + literal(FIRST_TRY_AFTER),
        )
        .returning(outbox.c.program_session_id, outbox.c.version)
        .cte("outbox")
    )
    return change


class ScheduleOutbox:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def take(self, session_id: SessionId) -> PendingChange | None:
        """The session's pending change (not yet applied, not direct), leased to the caller
        for APPLY_LEASE; None when there is none or another applier holds it. The lease ends
        with a settle (:meth:`retire`, :meth:`go_direct`, :meth:`postpone`) or :meth:`release`;
        an applier that dies holding it delays the change by the lease at most."""
        params = {"session_id": session_id}
        with translate_errors("taking a schedule change"), self._engine.begin() as conn:
            row = conn.execute(_TAKE, params).one_or_none()
        if row is None:
            return None
        return PendingChange(
            session_id=row.program_session_id,
            version=row.version,
            fire_at=row.fire_at,
            actor_user_id=row.actor_user_id,
            tries=row.tries,
            now=row.now,
            leased_until=row.leased_until,
        )

    def _settle(self, change: PendingChange, statement: Any, action: str) -> bool:
        """Run a settle conditional on the change still being the session's pending one."""
        condition = and_(
            outbox.c.program_session_id == change.session_id,
            outbox.c.version == change.version,
            outbox.c.direct == false(),
        )
        with translate_errors(action), self._engine.begin() as conn:
            return conn.execute(statement.where(condition)).rowcount == 1

    def retire(self, change: PendingChange) -> bool:
        """Applied: the row goes, unless a newer change replaced it (or it went direct)."""
        return self._settle(change, delete(outbox), "retiring a schedule change")

    def go_direct(self, change: PendingChange) -> bool:
        """Applied as "no EventBridge schedule": the sensor launches the run at ``fire_at``."""
        statement = update(outbox).values(
            direct=True, next_try_at=outbox.c.fire_at, tries=0, last_error=None, leased_until=None
        )
        return self._settle(change, statement, "turning a schedule change direct")

    def postpone(self, change: PendingChange, error: str, next_try_at: datetime) -> bool:
        """Failed: try again at ``next_try_at``, the error kept for operators."""
        statement = update(outbox).values(
            tries=outbox.c.tries + 1,
            next_try_at=next_try_at,
            last_error=error[:MAX_LAST_ERROR_CHARS],
            leased_until=None,
        )
        return self._settle(change, statement, "postponing a schedule change")

    def set_aside(self, session_id: int, error: str, path: str, version: int | None = None) -> None:
        """Acting on the session's row failed for a reason of the row's own (a launch no run
        can be asked for, a change no schedule can be built from, a row no applier can take):
        tried again on its own backoff, the error kept, and counted for ``path``; the other
        rows go on. With ``version``, only while that change is still the session's."""
        seconds = func.least(
            FIRST_TRY_AFTER.total_seconds() * func.power(2, func.least(outbox.c.tries, 10)),
            MAX_BACKOFF.total_seconds(),
        )
        statement = (
            update(outbox)
            .where(
                outbox.c.program_session_id == session_id,
                true() if version is None else outbox.c.version == version,
            )
            .values(
                tries=outbox.c.tries + 1,
                next_try_at=func.now() + func.make_interval(0, 0, 0, 0, 0, 0, seconds),
                last_error=error[:MAX_LAST_ERROR_CHARS],
                leased_until=None,
            )
        )
        with translate_errors("setting a schedule change aside"), self._engine.begin() as conn:
            conn.execute(statement)
            count_set_aside(conn, path)

    def release(self, change: PendingChange) -> None:
        """End the caller's lease without settling (a newer change came meanwhile)."""
        statement = (
            update(outbox)
            .where(
                outbox.c.program_session_id == change.session_id,
                outbox.c.leased_until == change.leased_until,
            )
            .values(leased_until=None)
        )
        with translate_errors("releasing a schedule change"), self._engine.begin() as conn:
            conn.execute(statement)

    def direct_near(self) -> int:
        """Every pending change whose time is near (``goes_direct``) goes direct, decided in
        the database without an AWS call (an applier holding one, even one stuck on a silent
        AWS, finds it settled). Any schedule left from an earlier arm is harmless: the claim
        refuses it before the session's time (less its tolerance) and after the cycle ran."""
        statement = (
            update(outbox)
            .where(
                outbox.c.direct == false(),
                outbox.c.fire_at.is_not(None),
                goes_direct(outbox.c.fire_at, func.now()),
            )
            .values(direct=True, next_try_at=outbox.c.fire_at, tries=0, last_error=None)
        )
        with translate_errors("deciding near times direct"), self._engine.begin() as conn:
            return conn.execute(statement).rowcount

    def pending_session_ids(self, limit: int) -> Sequence[SessionId]:
        """Sessions with a change to apply, due or not, nearest fire time first (clears,
        which no stale schedule can make harmful, last), not held by another applier."""
        statement = (
            select(outbox.c.program_session_id)
            .where(outbox.c.direct == false(), _NOT_LEASED)
            .order_by(
                outbox.c.fire_at.asc().nulls_last(),
                outbox.c.next_try_at,
                outbox.c.program_session_id,
            )
            .limit(limit)
        )
        with translate_errors("listing schedule changes"), self._engine.connect() as conn:
            return list(conn.execute(statement).scalars())

    def due_work_statement(self, direct_limit: int) -> Select[Any]:
        """The sensor's check, two probes of one index: the direct launches now due, and
        whether any change is due for a try (at most one such row)."""
        due = outbox.c.next_try_at <= func.now()
        columns = (
            outbox.c.program_session_id,
            outbox.c.version,
            outbox.c.fire_at,
            outbox.c.actor_user_id,
            outbox.c.direct,
        )
        launches = (
            select(*columns)
            .where(outbox.c.direct == true(), due)
            .order_by(outbox.c.next_try_at)
            .limit(direct_limit)
        )
        tries = select(*columns).where(outbox.c.direct == false(), due, _NOT_LEASED).limit(1)
        both = union_all(launches, tries).subquery("due")
        return select(both)

    def due_work(self, direct_limit: int = 100) -> tuple[list[DirectLaunch], bool]:
        statement = self.due_work_statement(direct_limit)
        with translate_errors("checking schedule changes"), self._engine.connect() as conn:
            rows = conn.execute(statement).all()
        launches = [
            DirectLaunch(r.program_session_id, r.version, r.fire_at, r.actor_user_id)
            for r in rows
            if r.direct
        ]
        return launches, any(not r.direct for r in rows)

    def retire_direct(self, launch: DirectLaunch) -> bool:
        """The launch's run exists: its row goes, unless a newer change replaced it."""
        statement = delete(outbox).where(
            outbox.c.program_session_id == launch.session_id,
            outbox.c.version == launch.version,
            outbox.c.direct == true(),
        )
        with translate_errors("retiring a direct launch"), self._engine.begin() as conn:
            return conn.execute(statement).rowcount == 1

    def any_rows(self) -> bool:
        with translate_errors("checking schedule changes"), self._engine.connect() as conn:
            return conn.execute(select(select(outbox).exists())).scalar_one()

    def drop_all(self) -> int:
        """Every pending change goes (the scheduler flag is off: nothing is left pending)."""
        with translate_errors("dropping schedule changes"), self._engine.begin() as conn:
            return conn.execute(delete(outbox)).rowcount

    def backlog(self) -> tuple[int, float]:
        """Changes not yet applied, and the age in seconds of the oldest (0 when none)."""
        statement = select(
            func.count(),
            func.coalesce(func.extract("epoch", func.now() - func.min(outbox.c.changed_at)), 0),
        ).where(outbox.c.direct == false())
        with translate_errors("measuring the schedule backlog"), self._engine.connect() as conn:
            count, oldest = conn.execute(statement).one()
        return int(count), float(oldest)

    def resync(self, batch: int = RESYNC_BATCH) -> int:
        """Every armed, not-yet-due session becomes a pending change due now, so the next sync
        rebuilds EventBridge from the database; a change already decided direct stays direct.
        The message names the admin of the session's newest recorded change (or no one),
        never ``updated_by``, which a host application may write. Batches by id; each locks
        its sessions against a concurrent PATCH, so a change written meanwhile is never
        undone."""
        marked = 0
        after_id = 0
        while True:
            sessions = (
                select(ps.c.id, ps.c.link_generation_at, newest_actor(ps.c.id).label("actor"))
                .where(
                    ps.c.id > bindparam("after_id"),
                    ps.c.deleted_at.is_(None),
                    ps.c.link_generation_status == LinkGenerationStatus.SCHEDULED.value,
                    ps.c.link_generation_at > func.now(),
                )
                .order_by(ps.c.id)
                .limit(batch)
                .with_for_update(read=True)
                .cte("armed")
            )
            written = (
                _upsert_changes(
                    sessions.c.id,
                    sessions.c.link_generation_at,
                    sessions.c.actor,
                    func.now(),
                    keep_direct=True,
                )
                .returning(outbox.c.program_session_id)
                .cte("written")
            )
            # Paged by the sessions read, not by the rows written: direct ones are skipped.
            summary = select(
                select(func.count()).select_from(sessions).scalar_subquery(),
                select(func.max(sessions.c.id)).scalar_subquery(),
                select(func.count()).select_from(written).scalar_subquery(),
            )
            with translate_errors("resyncing schedules"), self._engine.begin() as conn:
                read, last_id, wrote = conn.execute(summary, {"after_id": after_id}).one()
            marked += int(wrote)
            if read < batch:
                return marked
            after_id = int(last_id)
