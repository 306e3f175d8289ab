"""Migration 0009's starting count of the closed attempts (docs/performance.md, "Each migration
at scale"): taken in batches, each under its own brief lock, while our writers go on between
them, and still exact: every closed attempt counted once, by the starting count or by the
triggers, whichever saw it close."""

import threading
from collections.abc import Iterator

import pytest
from sqlalchemy import Connection, Engine, text

from jlg_pipeline.adapters.database import create_engine
from jlg_pipeline.adapters.metric_counts import read_counts
from jlg_pipeline.migrate import migrate
from testkit.postgres import scratch_database
from tests.integration.test_metric_counts import full_count
from tests.support.lock_waits import until, waiting

BEFORE = "0008_retries_in_time"
SESSIONS = 3_000
ATTEMPTS_PER_SESSION = 40


@pytest.fixture
def before_counts(pg_admin_url: str) -> Iterator[tuple[str, Engine]]:
    """A database one revision before 0009 with 120,000 attempts, most of them closed."""
    with scratch_database(pg_admin_url, "jlg_count_start", migrated=False) as url:
        migrate(url, BEFORE)
        engine = create_engine(url)
        try:
            with engine.begin() as conn:
                conn.execute(
                    text(
                        "INSERT INTO hdb_program_session (program_id, updated_at)"
                        " SELECT g % 7, now() FROM generate_series(1, :n) AS g"
                    ),
                    {"n": SESSIONS},
                )
                conn.execute(
                    text(
                        "INSERT INTO jlg_generation_attempt (program_session_id, attempt, trigger,"
                        " link_generation_at, claimed_at, finished_at, outcome)"
                        " SELECT s.id, a, 'event', now() - make_interval(secs => a * 37),"
                        " now(), now(), CASE WHEN a % 9 = 0 THEN 'IN_PROGRESS' ELSE 'COMPLETED'"
                        " END FROM hdb_program_session s, generate_series(1, :k) AS a"
                    ),
                    {"k": ATTEMPTS_PER_SESSION},
                )
            yield url, engine
        finally:
            engine.dispose()


def _closed_so_far(engine: Engine) -> int:
    with engine.connect() as conn:
        if conn.execute(text("SELECT to_regclass('jlg_metric_count') IS NULL")).scalar_one():
            return 0
        return int(
            conn.execute(
                text(
                    "SELECT coalesce(sum(delta), 0) FROM jlg_metric_count"
                    " WHERE metric = 'lag_count'"
                )
            ).scalar_one()
        )


def _keep_writing(engine: Engine, stop: threading.Event, written: list[int]) -> None:
    """Our writers as they run: close open attempts and add new ones, open and closed, across
    every session's id, so some land in ranges already counted and some in ranges not yet."""
    step = 0
    while not stop.is_set():
        session = 1 + (step * 997) % SESSIONS
        with engine.begin() as conn:
            conn.execute(
                text(
                    "UPDATE jlg_generation_attempt SET outcome = 'FAILED', finished_at = now()"
                    " WHERE program_session_id = :s AND outcome = 'IN_PROGRESS'"
                ),
                {"s": session},
            )
            conn.execute(
                text(
                    "INSERT INTO jlg_generation_attempt (program_session_id, attempt, trigger,"
                    " link_generation_at, claimed_at, outcome) VALUES"
                    " (:s, 1000 + :n, 'sweep', now() - interval '3 seconds', now(), :o)"
                ),
                {"s": session, "n": step, "o": "SUPERSEDED" if step % 2 else "IN_PROGRESS"},
            )
        written.append(step)
        step += 1


def test_the_starting_count_is_taken_in_batches_and_counts_each_closed_attempt_once(
    before_counts: tuple[str, Engine],
) -> None:
    url, engine = before_counts
    with engine.connect() as conn:
        closed_before = conn.execute(
            text("SELECT count(*) FROM jlg_generation_attempt WHERE outcome <> 'IN_PROGRESS'")
        ).scalar_one()
    stop = threading.Event()
    written: list[int] = []
    writer = threading.Thread(target=_keep_writing, args=(engine, stop, written))
    seen: set[int] = set()
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            seen.add(_closed_so_far(engine))

    watcher = threading.Thread(target=watch)
    writer.start()
    watcher.start()
    try:
        migrate(url, "0009_metric_counts")
        during = len(written)
    finally:
        done.set()
        watcher.join()
        stop.set()
        writer.join()
    partial = {n for n in seen if 0 < n < closed_before}
    assert partial, "the count committed in one piece: our writers waited for all of it"
    assert during > 0
    expected = full_count(engine)
    with engine.begin() as conn:
        counts = read_counts(conn)
    assert counts == expected
    with engine.connect() as conn:
        assert conn.execute(text("SELECT to_regclass('jlg_metric_count_start')")).scalar() is None


def _counted_to(engine: Engine) -> int | None:
    with engine.connect() as conn:
        if conn.execute(text("SELECT to_regclass('jlg_metric_count_start') IS NULL")).scalar():
            return None
        return int(conn.execute(text("SELECT counted_to FROM jlg_metric_count_start")).scalar_one())


def _write(conn: Connection, attempt: int) -> None:
    conn.execute(
        text(
            "INSERT INTO jlg_generation_attempt (program_session_id, attempt, trigger,"
            " link_generation_at, claimed_at, outcome) VALUES"
            " (:s, :a, 'sweep', now() - interval '2 seconds', now(), 'COMPLETED')"
        ),
        {"s": SESSIONS, "a": attempt},
    )


def test_a_count_cut_off_between_two_batches_goes_on_from_its_mark_when_run_again(
    before_counts: tuple[str, Engine],
) -> None:
    """The migration's connection is cut after a batch, while the next waits for a writer (as
    a failover between two statements would): run again, it goes on from its mark, and every
    closed attempt, including those the writers added meanwhile, is counted once."""
    url, engine = before_counts
    failed: list[BaseException] = []
    queued = threading.Event()
    go_on = threading.Event()
    release = threading.Event()

    def run() -> None:
        try:
            migrate(url, "0009_metric_counts")
        except Exception as error:  # noqa: BLE001 - the cut is the point
            failed.append(error)

    def writer() -> None:
        """Queued behind the triggers' creation, so the first batch waits for it; then behind
        the first batch, so the next waits for it."""
        with engine.connect() as conn:
            queued.set()
            _write(conn, 2001)
            go_on.wait()
            conn.commit()
            _write(conn, 2002)
            release.wait()
            conn.commit()

    migration = threading.Thread(target=run)
    second = threading.Thread(target=writer)
    try:
        with engine.connect() as first:
            _write(first, 2000)
            migration.start()
            until(lambda: waiting(engine, "CREATE TRIGGER"))
            second.start()
            queued.wait()
            until(lambda: _lock_waiters(engine) == 2)
            first.commit()
        until(lambda: waiting(engine, "DO $$"))
        go_on.set()
        until(lambda: (_counted_to(engine) or -1) > 0 and waiting(engine, "DO $$"))
        with engine.connect() as conn:
            conn.execute(
                text("SELECT pg_terminate_backend(:pid)"), {"pid": waiting(engine, "DO $$")}
            )
        migration.join()
        assert failed, "the migration was cut off"
        mark = _counted_to(engine)
        assert mark is not None
        assert 0 < mark < SESSIONS
    finally:
        go_on.set()
        release.set()
        if second.is_alive():
            second.join()
        migration.join()
    migrate(url, "0009_metric_counts")
    with engine.begin() as conn:
        counts = read_counts(conn)
    assert counts == full_count(engine)
    assert _counted_to(engine) is None


def _lock_waiters(engine: Engine) -> int:
    """Those waiting for a lock on the attempts."""
    with engine.connect() as conn:
        return int(
            conn.execute(
                text(
                    "SELECT count(*) FROM pg_locks WHERE NOT granted"
                    " AND relation = to_regclass('jlg_generation_attempt')"
                )
            ).scalar_one()
        )
