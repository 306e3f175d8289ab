"""LOCAL ONLY: inserting sessions and registrations, the one seeding path for the demo data
(idempotent: one program, a few sessions with online details, eligible registrations) and
the tests' factories."""

from sqlalchemy import Connection, Engine, func, insert, literal, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert

from jlg_pipeline.adapters.tables import local_registration, online_session, program_session

DEMO_PROGRAM_ID = 1001
DEMO_SESSIONS = ("Kick-off", "Week 2 workshop", "Demo day")
DEMO_REGISTRANTS = 25


def insert_session(
    conn: Connection,
    program_id: int,
    *,
    name: str | None = None,
    online: bool = True,
    template: str | None = None,
    provider: str | None = None,
) -> int:
    """A program session with only what the host tables require (plus ``name``), and, when
    ``online``, its online session (``template``, by default one per session) linked to it."""
    session_id = int(
        conn.execute(
            insert(program_session)
            .values(program_id=program_id, name=name)
            .returning(program_session.c.id)
        ).scalar_one()
    )
    if online:
        online_id = conn.execute(
            insert(online_session)
            .values(
                program_id=program_id,
                program_session_id=session_id,
                template=template or f"template-{session_id}",
                provider=provider,
            )
            .returning(online_session.c.id)
        ).scalar_one()
        conn.execute(
            update(program_session)
            .where(program_session.c.id == session_id)
            .values(hdb_online_session=online_id)
        )
    return session_id


def insert_registrations(
    conn: Connection,
    program_id: int,
    count: int,
    *,
    role: str = "attendee",
    status: str = "ACTIVE",
    first_user_id: int = 1,
) -> None:
    """``count`` registrations of the program for the local registrar, user ids from
    ``first_user_id`` on, in one statement (the benchmarks add thousands); one already
    there is kept as it is."""
    if count <= 0:
        return
    users = func.generate_series(first_user_id, first_user_id + count - 1).column_valued("g")
    conn.execute(
        pg_insert(local_registration)
        .from_select(
            ["program_id", "user_id", "role", "status"],
            select(literal(program_id), users, literal(role), literal(status)),
        )
        .on_conflict_do_nothing()
    )


def seed_demo(engine: Engine) -> list[int]:
    """Create the demo rows that are missing; returns the demo session ids."""
    with engine.begin() as conn:
        existing = dict(
            conn.execute(
                select(program_session.c.name, program_session.c.id).where(
                    program_session.c.program_id == DEMO_PROGRAM_ID
                )
            ).all()
        )
        ids = [
            existing.get(name)
            or insert_session(
                conn,
                DEMO_PROGRAM_ID,
                name=name,
                template=f"demo-{name.lower().replace(' ', '-')}",
                provider="zoom",
            )
            for name in DEMO_SESSIONS
        ]
        have = conn.execute(
            select(func.count()).where(local_registration.c.program_id == DEMO_PROGRAM_ID)
        ).scalar_one()
        insert_registrations(
            conn, DEMO_PROGRAM_ID, DEMO_REGISTRANTS - have, first_user_id=5000 + have
        )
    return [int(i) for i in ids]
