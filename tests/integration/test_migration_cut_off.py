"""A migration that builds an index concurrently commits what came before the build (docs/
operations.md, "Migrations"): cut off during the build, as a failover or a killed Job would
cut it, it is run again and finishes with the schema a run never cut off leaves. And 0002
validates its status check only once the host table's columns are committed, so the host's
writers never wait for that scan."""

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Connection, Engine, text

from jlg_pipeline.adapters.database import create_engine
from jlg_pipeline.migrate import migrate
from testkit.postgres import FINGERPRINT, scratch_database
from tests.support.lock_waits import until, waiting

VERSIONS = Path(__file__).parents[2] / "migrations" / "versions"
BUILDING = sorted(
    path.stem for path in VERSIONS.glob("0*.py") if "create_concurrently(" in path.read_text()
)
"""Every revision with a concurrent index build."""
SESSIONS = 2_000


def _before(revision: str) -> str:
    previous = sorted(path.stem for path in VERSIONS.glob("0*.py"))
    return previous[previous.index(revision) - 1]


@pytest.fixture
def database(pg_admin_url: str) -> Iterator[tuple[str, Engine]]:
    with scratch_database(pg_admin_url, "jlg_cut_off", migrated=False) as url:
        engine = create_engine(url)
        try:
            yield url, engine
        finally:
            engine.dispose()


def _with_sessions(url: str, engine: Engine, revision: str) -> None:
    migrate(url, _before(revision))
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO hdb_program_session (program_id, updated_at)"
                " SELECT g % 7, now() FROM generate_series(1, :n) AS g"
            ),
            {"n": SESSIONS},
        )


def _running(url: str, revision: str, failed: list[BaseException]) -> threading.Thread:
    def run() -> None:
        try:
            migrate(url, revision)
        except Exception as error:  # noqa: BLE001 - a cut-off is what the test makes
            failed.append(error)

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def _fingerprint(url: str) -> str:
    """The schema's fingerprint, read with no other connection open (it counts them)."""
    engine = create_engine(url, pool_size=1, max_overflow=0)
    try:
        with engine.connect() as conn:
            return str(conn.execute(text(FINGERPRINT)).scalar_one())
    finally:
        engine.dispose()


@pytest.mark.parametrize("revision", BUILDING)
def test_a_migration_cut_off_during_its_index_build_finishes_when_run_again(
    pg_admin_url: str, database: tuple[str, Engine], revision: str
) -> None:
    url, engine = database
    _with_sessions(url, engine, revision)
    failed: list[BaseException] = []
    # A transaction with a snapshot older than the build: a concurrent build waits for it to
    # end before it finishes, which is where the cut comes.
    with engine.connect() as old:
        old.execute(text("BEGIN ISOLATION LEVEL REPEATABLE READ"))
        old.execute(text("SELECT 1"))
        migration = _running(url, revision, failed)
        try:
            until(lambda: waiting(engine, "CREATE INDEX CONCURRENTLY"))
            with engine.connect() as conn:
                conn.execute(
                    text("SELECT pg_terminate_backend(:pid)"),
                    {"pid": waiting(engine, "CREATE INDEX CONCURRENTLY")},
                )
        finally:
            migration.join()
        old.rollback()
    assert failed, "the migration was cut off"
    migrate(url, revision)
    engine.dispose()
    with scratch_database(pg_admin_url, "jlg_never_cut", migrated=False) as straight:
        never_cut = create_engine(straight)
        try:
            _with_sessions(straight, never_cut, revision)
            migrate(straight, revision)
        finally:
            never_cut.dispose()
        assert _fingerprint(url) == _fingerprint(straight)


def test_0002_validates_its_check_once_the_columns_are_committed(
    database: tuple[str, Engine],
) -> None:
    """A reader holds the host table when 0002 starts, so it queues its columns; a lock as
    strong as the check's validation queues behind it. That lock is granted only once 0002
    has committed its columns, and the check is not yet valid then: the scan came after the
    ACCESS EXCLUSIVE lock was let go. A host write meanwhile goes through."""
    url, engine = database
    _with_sessions(url, engine, "0002_link_generation")
    failed: list[BaseException] = []
    seen: dict[str, object] = {}
    queued = threading.Event()

    def validator_sized() -> None:
        with engine.connect() as conn:
            queued.set()
            conn.execute(text("LOCK TABLE hdb_program_session IN SHARE UPDATE EXCLUSIVE MODE"))
            seen["validated"] = _validated(conn)
            with engine.connect() as writer:
                writer.execute(text("SET lock_timeout = '5s'"))
                writer.execute(text("UPDATE hdb_program_session SET updated_at = now()"))
                writer.commit()
            seen["wrote"] = True
            conn.commit()

    with engine.connect() as reader:
        reader.execute(text("SELECT 1 FROM hdb_program_session LIMIT 1"))
        migration = _running(url, "0002_link_generation", failed)
        second = threading.Thread(target=validator_sized)
        try:
            until(lambda: waiting(engine, "ALTER TABLE"))
            second.start()
            queued.wait()
            until(lambda: _lock_waiters(engine) == 2)
            reader.commit()
            second.join()
        finally:
            migration.join()
    assert not failed
    assert seen == {"validated": False, "wrote": True}
    with engine.connect() as conn:
        assert _validated(conn)


def _validated(conn: Connection) -> bool:
    return bool(
        conn.execute(
            text(
                "SELECT convalidated FROM pg_constraint"
                " WHERE conname = 'ck_psession_link_gen_status'"
            )
        ).scalar_one()
    )


def _lock_waiters(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(
            conn.execute(
                text(
                    "SELECT count(*) FROM pg_locks WHERE NOT granted"
                    " AND relation = to_regclass('hdb_program_session')"
                )
            ).scalar_one()
        )


def test_0002_adds_its_check_though_another_table_has_a_constraint_of_that_name(
    database: tuple[str, Engine],
) -> None:
    """The guard that lets 0002 run again looks for its check on the host table only: a
    constraint of the same name elsewhere in the host's database is not ours."""
    url, engine = database
    _with_sessions(url, engine, "0002_link_generation")
    with engine.begin() as conn:
        conn.execute(
            text(
                "CREATE TABLE host_other (x int CONSTRAINT ck_psession_link_gen_status"
                " CHECK (x > 0))"
            )
        )
    migrate(url, "0002_link_generation")
    with engine.connect() as conn:
        assert conn.execute(
            text(
                "SELECT convalidated FROM pg_constraint WHERE conname ="
                " 'ck_psession_link_gen_status'"
                " AND conrelid = 'hdb_program_session'::regclass"
            )
        ).scalar_one()
