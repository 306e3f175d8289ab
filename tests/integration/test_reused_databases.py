"""The tests' databases are reused between tests (testkit.postgres.ReusedDatabases): the next
holder gets a database indistinguishable from a new clone of the template, or a new clone."""

import psycopg
import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from devstack.postgres import libpq_url
from jlg_pipeline.adapters.database import create_engine
from jlg_pipeline.domain.status import LinkGenerationStatus
from testkit.factories import add_registrations, create_session, force_state
from testkit.postgres import ReusedDatabases, scratch_database


def _name(url: str) -> str:
    name = make_url(url).database
    assert name is not None
    return name


def _exists(admin_url: str, name: str) -> bool:
    with psycopg.connect(libpq_url(admin_url)) as conn:
        return (
            conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
            is not None
        )


def _rows(url: str) -> dict[str, int]:
    """Every user table's row count."""
    with psycopg.connect(libpq_url(url)) as conn:
        tables = [
            t
            for (t,) in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        ]
        return {t: conn.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in tables}  # type: ignore[index]


def test_a_returned_database_is_lent_again_as_a_new_clone_would_be(
    reused_databases: ReusedDatabases,
) -> None:
    with reused_databases.lend() as first:
        fresh = _rows(first)
        engine = create_engine(first)
        try:
            ids = [create_session(engine) for _ in range(3)]
            force_state(engine, ids[0], LinkGenerationStatus.IN_PROGRESS, attempt=1)
            add_registrations(engine, 1, 5)
        finally:
            engine.dispose()
        assert _rows(first) != fresh
        left_open = psycopg.connect(libpq_url(first))
    with reused_databases.lend() as second:
        assert _name(second) == _name(first)
        assert _rows(second) == fresh
        engine = create_engine(second)
        try:
            assert create_session(engine) == ids[0]  # the sequences start again
        finally:
            engine.dispose()
    with pytest.raises(psycopg.OperationalError):  # ended by the reset, not left to the next
        left_open.execute("SELECT 1")


@pytest.mark.parametrize(
    "change",
    [
        "ALTER TABLE hdb_program_session ADD COLUMN extra integer",
        "CREATE TABLE extra (id integer)",
        "CREATE INDEX extra ON hdb_program_session (program_id)",
        "GRANT SELECT ON hdb_program_session TO PUBLIC",
        "ALTER DATABASE {database} SET timezone = 'Asia/Tokyo'",
        "CREATE FUNCTION extra() RETURNS integer LANGUAGE sql AS 'SELECT 1'",
        "CREATE SCHEMA extra",
        "DELETE FROM alembic_version",
        "UPDATE jlg_lag_bucket SET bound_s = bound_s + 1",
        "CREATE SEQUENCE extra",
        "ALTER TABLE jlg_generation_attempt DISABLE TRIGGER ALL",
    ],
)
def test_a_database_a_holder_changed_beyond_its_rows_is_dropped(
    reused_databases: ReusedDatabases, pg_admin_url: str, change: str
) -> None:
    with (
        reused_databases.lend() as first,
        psycopg.connect(libpq_url(first), autocommit=True) as conn,
    ):
        conn.execute(change.format(database=f'"{_name(first)}"'))
    assert not _exists(pg_admin_url, _name(first))
    with reused_databases.lend() as second:
        assert _name(second) != _name(first)
        engine = create_engine(second)
        try:
            with engine.connect() as conn:
                assert conn.execute(text("SELECT count(*) FROM alembic_version")).scalar_one() == 1
        finally:
            engine.dispose()


def test_a_template_whose_seed_rows_advanced_a_sequence_is_reused_with_it_where_it_was(
    pg_admin_url: str,
) -> None:
    """Dagster's storage seeds rows with serial ids (``secondary_indexes``): its sequence stands
    where the template left it, and a reset must put it back there, not at its start."""
    with scratch_database(pg_admin_url, "jlg_seeded", migrated=False) as template:
        with psycopg.connect(libpq_url(template), autocommit=True) as conn:
            conn.execute("CREATE TABLE seeded (id serial PRIMARY KEY, name text)")
            conn.execute("INSERT INTO seeded (name) VALUES ('a'), ('b'), ('c')")
            conn.execute("CREATE TABLE held (id serial PRIMARY KEY)")
        databases = ReusedDatabases(pg_admin_url, _name(template))
        try:
            with databases.lend() as first, psycopg.connect(libpq_url(first)) as conn:
                conn.execute("INSERT INTO held DEFAULT VALUES")
            with databases.lend() as second, psycopg.connect(libpq_url(second)) as conn:
                assert _name(second) == _name(first)
                assert conn.execute("SELECT nextval('seeded_id_seq')").fetchone() == (4,)
                assert conn.execute("INSERT INTO held DEFAULT VALUES RETURNING id").fetchone() == (
                    1,
                )
        finally:
            databases.close()
