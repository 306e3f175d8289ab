"""Migrations on fresh databases: upgrade, downgrade, the schema they build equals
tables.py, a standalone insert needs only program_id, and a brownfield database adopts
only the additive revision."""

from collections.abc import Iterator

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, create_engine, insert, inspect, text
from sqlalchemy.exc import IntegrityError

from jlg_pipeline.adapters.database import normalize_url
from jlg_pipeline.adapters.tables import metadata, online_session, program_session
from jlg_pipeline.cli import main
from jlg_pipeline.migrate import alembic_config, migrate
from testkit.postgres import scratch_database
from tests.support.host_database import HOST_TABLES_DDL


@pytest.fixture
def empty_db(pg_admin_url: str) -> Iterator[str]:
    with scratch_database(pg_admin_url, "jlg_migrate", migrated=False) as url:
        yield url


@pytest.fixture
def empty_engine(empty_db: str) -> Iterator[Engine]:
    engine = create_engine(normalize_url(empty_db))
    try:
        yield engine
    finally:
        engine.dispose()


def _tables(engine: Engine) -> set[str]:
    return set(inspect(engine).get_table_names())


def test_upgrade_matches_the_schema_definition(empty_db: str, empty_engine: Engine) -> None:
    migrate(empty_db)
    with empty_engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), metadata)
    assert diff == []


def test_downgrade_to_base_and_up_again(empty_db: str, empty_engine: Engine) -> None:
    assert main(["--database-url", empty_db, "migrate"]) == 0
    assert main(["--database-url", empty_db, "downgrade", "0001_host_tables"]) == 0
    columns = {c["name"] for c in inspect(empty_engine).get_columns("hdb_program_session")}
    assert not any(c.startswith("link_generation") for c in columns)
    assert main(["--database-url", empty_db, "downgrade", "base"]) == 0
    assert _tables(empty_engine) == {"alembic_version"}
    assert main(["--database-url", empty_db, "migrate"]) == 0
    assert {"hdb_program_session", "hdb_online_session", "jlg_local_join_link"} <= _tables(
        empty_engine
    )


def test_standalone_rows_need_only_the_minimum(empty_db: str, empty_engine: Engine) -> None:
    migrate(empty_db)
    with empty_engine.begin() as conn:
        sid = conn.execute(
            insert(program_session).values(program_id=3).returning(program_session.c.id)
        ).scalar_one()
        conn.execute(
            insert(online_session).values(program_id=3, program_session_id=sid, template="t")
        )
        row = conn.execute(
            text("SELECT * FROM hdb_program_session WHERE id = :id"), {"id": sid}
        ).one()
    assert row.link_generation_status == "NOT_SCHEDULED"
    assert row.link_generation_at is None
    assert row.link_generation_attempt == 0


def test_status_check_and_online_uniqueness_hold(empty_db: str, empty_engine: Engine) -> None:
    migrate(empty_db)
    with (
        pytest.raises(IntegrityError, match="ck_psession_link_gen_status"),
        empty_engine.begin() as conn,
    ):
        conn.execute(insert(program_session).values(program_id=1, link_generation_status="DONE"))
    with empty_engine.begin() as conn:
        sid = conn.execute(
            insert(program_session).values(program_id=1).returning(program_session.c.id)
        ).scalar_one()
        conn.execute(
            insert(online_session).values(program_id=1, program_session_id=sid, template="t")
        )
    with (
        pytest.raises(IntegrityError, match="uq_online_session_program_id_template"),
        empty_engine.begin() as conn,
    ):
        conn.execute(
            insert(online_session).values(program_id=1, program_session_id=sid, template="t")
        )


def test_brownfield_adopts_only_the_additive_revision(empty_db: str, empty_engine: Engine) -> None:
    with empty_engine.begin() as conn:
        for statement in HOST_TABLES_DDL.strip().split(";\n"):
            conn.execute(text(statement))
    assert main(["--database-url", empty_db, "migrate", "--adopt"]) == 0
    assert "jlg_local_registration" not in _tables(empty_engine), "host-table revision was skipped"
    with empty_engine.connect() as conn:
        rows = conn.execute(
            text("SELECT title, link_generation_status FROM hdb_program_session ORDER BY id")
        ).all()
        version = conn.execute(text("SELECT version_num FROM alembic_version")).scalar_one()
    assert rows == [("existing", "NOT_SCHEDULED"), ("other", "NOT_SCHEDULED")]
    assert version == ScriptDirectory.from_config(alembic_config(empty_db)).get_current_head()
    indexes = {i["name"] for i in inspect(empty_engine).get_indexes("hdb_program_session")}
    assert indexes >= {
        "ix_psession_link_gen_due",
        "ix_psession_link_gen_fresh",
        "ix_psession_link_gen_failed",
    }


def test_adopt_refuses_a_database_without_host_tables(
    empty_db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--database-url", empty_db, "migrate", "--adopt"]) == 2
    assert "needs the host table hdb_program_session" in capsys.readouterr().err


def test_unreachable_database_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--database-url", "postgresql://postgres@127.0.0.1:1/none", "migrate"])
    assert code == 2
    assert "cannot reach the database" in capsys.readouterr().err


def test_rows_a_shift_left_past_year_9999_are_brought_back_cleared_and_on_record(
    empty_db: str, empty_engine: Engine
) -> None:
    """The audit's row: 9999-06-01 shifted by 316,224,000 s stored 10009-06-08 (an older
    release had no horizon). Migration 0015 clears it with an intent-history entry and a
    schedule delete; a readable far time, a COMPLETED one and a deleted one are left."""
    migrate(empty_db, "0014_service_resume")
    with empty_engine.begin() as conn:
        ids = [
            conn.execute(
                text(
                    "INSERT INTO hdb_program_session (program_id, link_generation_at,"
                    " link_generation_status, deleted_at) VALUES (1, :at, :status, :deleted)"
                    " RETURNING id"
                ),
                {"at": at, "status": status, "deleted": deleted},
            ).scalar_one()
            for at, status, deleted in [
                ("10009-06-08T00:00:00Z", "SCHEDULED", None),
                ("infinity", "FAILED", None),
                ("4000-01-01 BC", "SCHEDULED", None),
                ("2030-01-01T00:00:00Z", "SCHEDULED", None),
                ("10009-06-08T00:00:00Z", "COMPLETED", None),
                ("10009-06-08T00:00:00Z", "SCHEDULED", "2026-01-01T00:00:00Z"),
            ]
        ]
    migrate(empty_db)
    with empty_engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT id, link_generation_at IS NULL, link_generation_status"
                " FROM hdb_program_session ORDER BY id"
            )
        ).all()
        history = conn.execute(
            text(
                "SELECT program_session_id, link_generation_at,"
                " extract(year FROM previous_link_generation_at)"
                " FROM jlg_link_generation_change ORDER BY program_session_id"
            )
        ).all()
        outbox = conn.execute(
            text("SELECT program_session_id, fire_at FROM jlg_schedule_outbox ORDER BY 1")
        ).all()
    cleared = ids[:3]
    assert [(r[1], r[2]) for r in rows[:3]] == [(True, "NOT_SCHEDULED")] * 3
    assert [(r[1], r[2]) for r in rows[3:]] == [
        (False, "SCHEDULED"),
        (False, "COMPLETED"),
        (False, "SCHEDULED"),
    ]
    assert history == [(cleared[0], None, 9999), (cleared[1], None, 9999), (cleared[2], None, 1)]
    assert outbox == [(sid, None) for sid in cleared]
