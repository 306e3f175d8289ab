"""Test and benchmark data (one kit for both): program sessions with online details,
registrations, forced states, cohorts sharing a time, and a populated table's history.

``force_state`` writes the link-generation columns directly, offsets measured on the
database clock, so a test can put a session anywhere in the state machine (a stale claim
is an ``updated_at`` moved 31 minutes back, not a 31-minute wait).
"""

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Engine, select, text, update

from devstack.seed import insert_registrations, insert_session
from jlg_pipeline.adapters.tables import online_session, program_session
from jlg_pipeline.domain.status import LinkGenerationStatus
from jlg_pipeline.domain.validation import SessionId

_seconds = "now() + make_interval(secs => {})"
DUE = timedelta(minutes=-1)
"""A time a minute ago: the session is due now."""
NOT_SCHEDULED = LinkGenerationStatus.NOT_SCHEDULED


def create_session(
    engine: Engine,
    *,
    program_id: int = 1,
    online: bool = True,
    template: str | None = None,
) -> SessionId:
    """A program session inserted with only ``program_id`` (plus its online details): its id,
    as the database made it."""
    with engine.begin() as conn:
        return SessionId(insert_session(conn, program_id, online=online, template=template))


def create_sessions(
    engine: Engine,
    count: int,
    *,
    program_id: int = 1,
    at_offset: timedelta | None = timedelta(days=1),
    status: LinkGenerationStatus = LinkGenerationStatus.SCHEDULED,
) -> list[SessionId]:
    """``count`` sessions of ``program_id`` in one statement (no online details), in
    ``status`` at ``now() + at_offset`` (None: no time) on the database clock."""
    at = "NULL" if at_offset is None else _seconds.format(at_offset.total_seconds())
    with engine.begin() as conn:
        ids = conn.execute(
            text(
                "INSERT INTO hdb_program_session (program_id, link_generation_at,"
                f" link_generation_status) SELECT :program, {at}, :status"
                " FROM generate_series(1, :count) RETURNING id"
            ),
            {"program": program_id, "status": status.value, "count": count},
        ).scalars()
        return sorted(SessionId(i) for i in ids)


def force_state(
    engine: Engine,
    session_id: int,
    status: LinkGenerationStatus,
    *,
    at_offset: timedelta | None = timedelta(minutes=-1),
    updated_offset: timedelta = timedelta(0),
    attempt: int | None = None,
    deleted: bool = False,
) -> None:
    """Put a session in ``status`` with ``link_generation_at = now() + at_offset`` (None
    clears it) and ``updated_at = now() + updated_offset``, on the database clock."""
    values: dict[str, Any] = {
        "link_generation_status": status.value,
        "link_generation_at": None
        if at_offset is None
        else text(_seconds.format(at_offset.total_seconds())),
        "updated_at": text(_seconds.format(updated_offset.total_seconds())),
        "deleted_at": text("now()") if deleted else None,
    }
    if attempt is not None:
        values["link_generation_attempt"] = attempt
    with engine.begin() as conn:
        conn.execute(
            update(program_session).where(program_session.c.id == session_id).values(values)
        )


def session_row(engine: Engine, session_id: int) -> dict[str, Any]:
    with engine.connect() as conn:
        return dict(
            conn.execute(select(program_session).where(program_session.c.id == session_id))
            .one()
            ._mapping
        )


def online_snapshot(engine: Engine, session_id: int) -> tuple[Any, ...]:
    """The session's online-session link and the linked row, to compare before and after."""
    with engine.connect() as conn:
        link = conn.execute(
            select(program_session.c.hdb_online_session).where(program_session.c.id == session_id)
        ).scalar_one()
        rows = conn.execute(
            select(online_session).where(online_session.c.program_session_id == session_id)
        ).all()
    return (link, tuple(tuple(r) for r in rows))


def add_registrations(engine: Engine, program_id: int, count: int, **options: Any) -> None:
    """``insert_registrations`` in its own transaction (``role``, ``status``,
    ``first_user_id`` as there)."""
    with engine.begin() as conn:
        insert_registrations(conn, program_id, count, **options)


def db_now(engine: Engine) -> datetime:
    with engine.connect() as conn:
        return conn.execute(text("SELECT now()")).scalar_one()  # type: ignore[no-any-return]


def end_retry_wait(engine: Engine, session_id: int) -> None:
    """The session's retry wait is over (the watchdog's query reads the database clock)."""
    with engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE hdb_program_session SET link_generation_retry_at = now()"
                " - interval '1 second' WHERE id = :sid"
            ),
            {"sid": session_id},
        )


def arm_cohort(
    engine: Engine, count: int, lead_s: float, spread_s: float = 0.0
) -> tuple[list[int], float]:
    """``count`` sessions of program 1 SCHEDULED for one shared time ``lead_s`` ahead, or, with
    ``spread_s``, for times spread evenly over that many seconds from it (ids in time order);
    (ids, the first time as Unix seconds, on the database clock)."""
    with engine.begin() as conn:
        fire_at = conn.execute(
            text("SELECT extract(epoch FROM now()) + :lead"), {"lead": lead_s}
        ).scalar_one()
        ids = conn.execute(
            text(
                "INSERT INTO hdb_program_session"
                " (program_id, link_generation_at, link_generation_status)"
                " SELECT 1, to_timestamp(:at + (i - 1) * :step), 'SCHEDULED'"
                " FROM generate_series(1, :n) AS i ORDER BY i"
                " RETURNING id"
            ),
            {"at": float(fire_at), "n": count, "step": spread_s / count},
        ).scalars()
        return sorted(SessionId(i) for i in ids), float(fire_at)


RUNNING = 50
"""Generations running right now in a :func:`populate`d table."""


def populate(
    engine: Engine, rows: int, due: int, *, armed: int | None = None, running: int = RUNNING
) -> None:
    """History dominated by COMPLETED sessions, 10% never scheduled, 1% soft-deleted, and
    ``armed`` sessions scheduled in the future (5% of the rows unless given); ``running``
    generations running right now (fresh IN_PROGRESS, claimed in the last minutes); and
    ``due`` overdue, claimable ones (SCHEDULED, FAILED or stale IN_PROGRESS) spread over the
    last 30 days."""
    history = rows - due - running
    every = 20 if armed is None else max(history // armed, 1) if armed else history + 1
    with engine.begin() as conn:
        conn.execute(
            text(
                """
                INSERT INTO hdb_program_session
                    (program_id, link_generation_at, link_generation_status, updated_at, deleted_at)
                SELECT g % 500,
                       CASE WHEN g % :every = 0 THEN now() + make_interval(mins => 60 + g % 50000)
                            WHEN g % 10 = 1 THEN NULL
                            ELSE now() - make_interval(mins => 60 + g % 500000) END,
                       CASE WHEN g % :every = 0 THEN 'SCHEDULED'
                            WHEN g % 10 = 1 THEN 'NOT_SCHEDULED'
                            ELSE 'COMPLETED' END,
                       now() - make_interval(mins => g % 500000),
                       CASE WHEN g % 100 = 7 THEN now() ELSE NULL END
                FROM generate_series(1, :rows) AS g
                """
            ),
            {"rows": history, "every": every},
        )
        conn.execute(
            text(
                """
                INSERT INTO hdb_program_session
                    (program_id, link_generation_at, link_generation_status, updated_at)
                SELECT g % 500, now() - make_interval(mins => g % 60), 'IN_PROGRESS',
                       now() - make_interval(secs => g % 300)
                FROM generate_series(1, :running) AS g
                """
            ),
            {"running": running},
        )
        conn.execute(
            text(
                """
                INSERT INTO hdb_program_session
                    (program_id, link_generation_at, link_generation_status, updated_at)
                SELECT g % 500,
                       now() - make_interval(mins => 40 + g % 43200),
                       (ARRAY['SCHEDULED', 'FAILED', 'IN_PROGRESS'])[1 + g % 3],
                       now() - interval '2 hours'
                FROM generate_series(1, :due) AS g
                """
            ),
            {"due": due},
        )
        conn.execute(text("VACUUM ANALYZE hdb_program_session"))


def add_attempts(engine: Engine) -> None:
    """An attempt record per COMPLETED or FAILED session, claimed up to an hour late."""
    with engine.begin() as conn:
        conn.execute(
            text(
                """
                INSERT INTO jlg_generation_attempt (program_session_id, attempt, trigger,
                    link_generation_at, claimed_at, finished_at, outcome)
                SELECT id, 1, (ARRAY['event', 'cron', 'direct'])[1 + id % 3], link_generation_at,
                       link_generation_at + make_interval(secs => (id % 3600)::int),
                       link_generation_at + make_interval(secs => (id % 3600)::int + 5),
                       CASE WHEN link_generation_status = 'FAILED' THEN 'FAILED'
                            ELSE 'COMPLETED' END
                FROM hdb_program_session
                WHERE link_generation_status IN ('COMPLETED', 'FAILED')
                  AND link_generation_at IS NOT NULL
                ON CONFLICT DO NOTHING
                """
            )
        )
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("VACUUM ANALYZE"))
