"""LOCAL ONLY: idempotent demo data — one program, a few sessions with online details, and
eligible registrations."""

from sqlalchemy import Engine, func, insert, select, update

from jlg_pipeline.adapters.tables import local_registration, online_session, program_session

DEMO_PROGRAM_ID = 1001
DEMO_SESSIONS = ("Kick-off", "Week 2 workshop", "Demo day")
DEMO_REGISTRANTS = 25


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
        ids = []
        for name in DEMO_SESSIONS:
            session_id = existing.get(name)
            if session_id is None:
                session_id = conn.execute(
                    insert(program_session)
                    .values(program_id=DEMO_PROGRAM_ID, name=name)
                    .returning(program_session.c.id)
                ).scalar_one()
                online_id = conn.execute(
                    insert(online_session)
                    .values(
                        program_id=DEMO_PROGRAM_ID,
                        program_session_id=session_id,
                        template=f"demo-{name.lower().replace(' ', '-')}",
                        provider="zoom",
                    )
                    .returning(online_session.c.id)
                ).scalar_one()
                conn.execute(
                    update(program_session)
                    .where(program_session.c.id == session_id)
                    .values(hdb_online_session=online_id)
                )
            ids.append(int(session_id))
        have = conn.execute(
            select(func.count()).where(local_registration.c.program_id == DEMO_PROGRAM_ID)
        ).scalar_one()
        if have < DEMO_REGISTRANTS:
            conn.execute(
                insert(local_registration),
                [
                    {"program_id": DEMO_PROGRAM_ID, "user_id": 5000 + i, "role": "attendee"}
                    for i in range(have, DEMO_REGISTRANTS)
                ],
            )
    return ids
