"""Test data: program sessions with online details, registrations, and forced states.

``force_state`` writes the link-generation columns directly, offsets measured on the
database clock, so a test can put a session anywhere in the state machine (a stale claim
is an ``updated_at`` moved 31 minutes back, not a 31-minute wait).
"""

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Engine, select, text, update

from jlg_pipeline.adapters.tables import online_session, program_session
from jlg_pipeline.domain.status import LinkGenerationStatus
from jlg_pipeline.local.seed import insert_registrations, insert_session

_seconds = "now() + make_interval(secs => {})"


def create_session(
    engine: Engine,
    *,
    program_id: int = 1,
    online: bool = True,
    template: str | None = None,
) -> int:
    """A program session inserted with only ``program_id`` (plus its online details)."""
    with engine.begin() as conn:
        return insert_session(conn, program_id, online=online, template=template)


def create_sessions(
    engine: Engine,
    count: int,
    *,
    program_id: int = 1,
    at_offset: timedelta | None = timedelta(days=1),
    status: LinkGenerationStatus = LinkGenerationStatus.SCHEDULED,
) -> list[int]:
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
        return sorted(ids)


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
