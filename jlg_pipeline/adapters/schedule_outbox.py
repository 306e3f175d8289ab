"""All SQL on the schedule outbox (``jlg_schedule_outbox``): the pending desired EventBridge
state per session, written with the admin's UPDATE and deleted once applied.

An applier holds a per-session advisory lock for the length of its AWS call, so two
appliers of one session never overlap and each applies the newest change; the admin's
write never waits for it (it takes no such lock). Every retire is conditional on the
version applied, so a newer change is never lost.
"""

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from psycopg.errors import LockNotAvailable
from sqlalchemy import (
    CTE,
    BigInteger,
    ColumnElement,
    Connection,
    Engine,
    Select,
    Text,
    and_,
    bindparam,
    cast,
    delete,
    false,
    func,
    literal,
    select,
    true,
    union_all,
    update,
)
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.exc import OperationalError

from jlg_pipeline.adapters.database import translate_errors
from jlg_pipeline.adapters.tables import program_session as ps
from jlg_pipeline.adapters.tables import schedule_change_version
from jlg_pipeline.adapters.tables import schedule_outbox as outbox
from jlg_pipeline.domain import validation
from jlg_pipeline.domain.constants import MAX_LAST_ERROR_CHARS
from jlg_pipeline.domain.schedule_sync import FIRST_TRY_AFTER, DirectLaunch, PendingChange
from jlg_pipeline.domain.status import LinkGenerationStatus

RESYNC_BATCH = 10_000
LOCK_WAIT = "30s"
"""How long an applier waits for another applier of the same session (a slow AWS call)."""

# Built once: the fast path runs these after every PATCH.
_LOCK_KEY = func.hashtextextended(
    literal("jlg_schedule_sync:") + cast(bindparam("session_id", type_=BigInteger), Text), 0
)
_TRY_LOCK = select(func.pg_try_advisory_xact_lock(_LOCK_KEY))
_LOCK = select(func.pg_advisory_xact_lock(_LOCK_KEY))
_PENDING = select(
    outbox.c.program_session_id,
    outbox.c.version,
    outbox.c.fire_at,
    outbox.c.actor_user_id,
    outbox.c.tries,
    func.clock_timestamp().label("now"),
).where(outbox.c.program_session_id == bindparam("session_id"), outbox.c.direct == false())


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


def _upsert_changes(session_id: Any, fire_at: Any, actor_user_id: Any, next_try_at: Any) -> Any:
    """INSERT … ON CONFLICT: each session's row becomes a new change (a new version, not
    direct, no tries, no error), from a select of the given columns."""
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
    )


def record_change(after: CTE, actor_user_id: ColumnElement[Any]) -> CTE:
    """The outbox write for the session the ``after`` CTE (an UPDATE … RETURNING id and
    link_generation_at) changed, as a CTE of the same statement: one transaction, one
    round trip. Its ``version`` column is the new change's version."""
    change: CTE = (
        _upsert_changes(
            after.c.id,
            after.c.link_generation_at,
            actor_user_id,
            func.now() + literal(FIRST_TRY_AFTER),
        )
        .returning(outbox.c.version)
        .cte("outbox")
    )
    return change


class HeldChange:
    """A pending change held by its applier (the session's advisory lock, one transaction).
    Each way of settling it is conditional on its version."""

    def __init__(self, conn: Connection, change: PendingChange) -> None:
        self.change = change
        self._conn = conn

    def _where(self) -> Any:
        return and_(
            outbox.c.program_session_id == self.change.session_id,
            outbox.c.version == self.change.version,
        )

    def retire(self) -> bool:
        """Applied: the row goes, unless a newer change replaced it meanwhile."""
        return self._conn.execute(delete(outbox).where(self._where())).rowcount == 1

    def go_direct(self) -> bool:
        """Applied as "no EventBridge schedule": the sensor launches the run at ``fire_at``."""
        statement = (
            update(outbox)
            .where(self._where())
            .values(direct=True, next_try_at=outbox.c.fire_at, tries=0, last_error=None)
        )
        return self._conn.execute(statement).rowcount == 1

    def postpone(self, error: str, next_try_at: datetime) -> bool:
        """Failed: try again at ``next_try_at``, the error kept for operators."""
        statement = (
            update(outbox)
            .where(self._where())
            .values(
                tries=outbox.c.tries + 1,
                next_try_at=next_try_at,
                last_error=error[:MAX_LAST_ERROR_CHARS],
            )
        )
        return self._conn.execute(statement).rowcount == 1


class ScheduleOutbox:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    @contextmanager
    def hold(self, session_id: int, *, wait: bool) -> Iterator[HeldChange | None]:
        """The session's pending change (not yet applied, not direct), held until the block
        ends; None when there is none, or when another applier holds it and ``wait`` is
        False. Waiting is bounded by the lock timeout (then None: the sync job retries)."""
        params = {"session_id": validation.session_id(session_id)}
        with translate_errors("holding a schedule change"), self._engine.begin() as conn:
            locked = conn.execute(_TRY_LOCK, params).scalar_one()
            if not locked and not (wait and self._wait_for_lock(conn, params)):
                yield None
                return
            # Read after the lock: the newest change, whatever the caller was handed.
            row = conn.execute(_PENDING, params).one_or_none()
            if row is None:
                yield None
                return
            yield HeldChange(
                conn,
                PendingChange(
                    session_id=row.program_session_id,
                    version=row.version,
                    fire_at=row.fire_at,
                    actor_user_id=row.actor_user_id,
                    tries=row.tries,
                    now=row.now,
                ),
            )

    @staticmethod
    def _wait_for_lock(conn: Connection, params: dict[str, int]) -> bool:
        conn.exec_driver_sql(f"SET LOCAL lock_timeout = '{LOCK_WAIT}'")
        try:
            with conn.begin_nested():
                conn.execute(_LOCK, params)
        except OperationalError as exc:
            if not isinstance(exc.orig, LockNotAvailable):
                raise
            return False
        return True

    def pending_session_ids(self, limit: int) -> Sequence[int]:
        """Sessions with a change to apply, due or not, the most overdue first."""
        statement = (
            select(outbox.c.program_session_id)
            .where(outbox.c.direct == false())
            .order_by(outbox.c.next_try_at, outbox.c.program_session_id)
            .limit(validation.positive_limit(limit))
        )
        with translate_errors("listing schedule changes"), self._engine.connect() as conn:
            return list(conn.execute(statement).scalars())

    def due_work_statement(self, direct_limit: int) -> Select[Any]:
        """The sensor's check, two probes of one index: the direct launches now due, and
        whether any change is due for a try (at most one such row)."""
        due = outbox.c.next_try_at <= func.now()
        columns = (outbox.c.program_session_id, outbox.c.version, outbox.c.fire_at, outbox.c.direct)
        launches = (
            select(*columns)
            .where(outbox.c.direct == true(), due)
            .order_by(outbox.c.next_try_at)
            .limit(direct_limit)
        )
        tries = select(*columns).where(outbox.c.direct == false(), due).limit(1)
        both = union_all(launches, tries).subquery("due")
        return select(both)

    def due_work(self, direct_limit: int = 100) -> tuple[list[DirectLaunch], bool]:
        statement = self.due_work_statement(validation.positive_limit(direct_limit))
        with translate_errors("checking schedule changes"), self._engine.connect() as conn:
            rows = conn.execute(statement).all()
        launches = [
            DirectLaunch(r.program_session_id, r.version, r.fire_at) for r in rows if r.direct
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
        rebuilds EventBridge from the database. Batches by id; each locks its sessions
        against a concurrent PATCH, so a change written meanwhile is never undone."""
        marked = 0
        after_id = 0
        while True:
            sessions = (
                select(ps.c.id, ps.c.link_generation_at, ps.c.updated_by)
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
            write = _upsert_changes(
                sessions.c.id,
                sessions.c.link_generation_at,
                sessions.c.updated_by,
                func.now(),
            ).returning(outbox.c.program_session_id)
            with translate_errors("resyncing schedules"), self._engine.begin() as conn:
                ids = list(conn.execute(write, {"after_id": after_id}).scalars())
            if not ids:
                return marked
            marked += len(ids)
            after_id = max(ids)
            if len(ids) < batch:
                return marked
