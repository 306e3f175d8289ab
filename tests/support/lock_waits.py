"""Choreography for tests that cut a migration off at a chosen moment: find its statement
while it waits for a lock, and wait until it gets there."""

import time
from collections.abc import Callable

from sqlalchemy import Engine, text


def waiting(engine: Engine, query: str) -> int | None:
    """The backend of the statement that begins with ``query``, when it waits for a lock."""
    with engine.connect() as conn:
        pid = conn.execute(
            text(
                "SELECT pid FROM pg_stat_activity WHERE ltrim(query, E' \\n') LIKE :q"
                " AND wait_event_type = 'Lock' AND datname = current_database()"
            ),
            {"q": query + "%"},
        ).scalar()
    return None if pid is None else int(pid)


def until(found: Callable[[], object]) -> None:
    """Polls ``found`` until it is truthy (at most a minute)."""
    deadline = time.monotonic() + 60
    while not found():
        assert time.monotonic() < deadline, "the migration never reached the expected wait"
        time.sleep(0.002)
