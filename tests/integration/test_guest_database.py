"""A guest in the host's database (docs/design.md "A guest"): after every revision the host's
own role still inserts, updates, soft-deletes, deletes and truncates its rows; no revision
puts a trigger, a rule, a lock or anything else on a host table; a database migrated by the
earlier revisions loses what they put there and keeps every figure right; and
``jlg migrate --adopt --plan`` shows what will touch the host's tables, applying nothing."""

from collections.abc import Iterator
from datetime import timedelta

import pytest
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, inspect, text

from jlg_pipeline.adapters.metric_counts import read_counts
from jlg_pipeline.adapters.metrics_snapshot import read_metrics_snapshot
from jlg_pipeline.cli import main
from jlg_pipeline.domain.status import LinkGenerationStatus
from jlg_pipeline.migrate import alembic_config, migrate, upgrade_statements
from jlg_pipeline.migration_plan import HOST_TABLE_REVISION, HOST_TABLES, refusals
from testkit.factories import create_session, force_state
from tests.integration.test_metric_counts import armed_full_count, full_count
from tests.support import earlier_schema
from tests.support.host_database import (
    DECOY_SCHEMA,
    HostDatabase,
    decoy_rows,
    host_database,
    host_writes,
)

S = LinkGenerationStatus


@pytest.fixture
def host(pg_admin_url: str) -> Iterator[HostDatabase]:
    with host_database(pg_admin_url) as database:
        yield database


def revisions_after_host_tables(url: str) -> list[str]:
    script = ScriptDirectory.from_config(alembic_config(url))
    ordered = [r.revision for r in reversed(list(script.walk_revisions()))]
    return ordered[ordered.index(HOST_TABLE_REVISION) + 1 :]


def test_the_host_role_keeps_writing_its_rows_after_every_revision(host: HostDatabase) -> None:
    """Its role owns only its tables; one session looks in a schema of its own first, where a
    table named like ours would catch anything of ours that ran as it."""
    host_writes(host)
    for number, revision in enumerate(revisions_after_host_tables(host.url)):
        migrate(host.url, revision, adopt=number == 0)
        try:
            host_writes(host)
            host_writes(host, search_path=f"{DECOY_SCHEMA}, public")
        except Exception as exc:
            raise AssertionError(f"after {revision} the host's own write fails: {exc}") from exc
        assert decoy_rows(host) == 0, f"after {revision} something of ours ran as the host"
    with host.engine.connect() as conn:
        on_host = conn.execute(
            text(
                "SELECT tgname FROM pg_trigger WHERE tgrelid = ANY(ARRAY["
                + ", ".join(f"'{t}'::regclass" for t in HOST_TABLES)
                + "]) AND tgconstrrelid NOT IN ("
                + ", ".join(f"'{t}'::regclass" for t in HOST_TABLES)
                + ")"
            )
        ).scalars()
        assert list(on_host) == [], "no trigger of ours (nor a foreign key's) on a host table"


def test_no_revision_puts_anything_on_a_host_table() -> None:
    """Every statement of every upgrade, read as SQL: a trigger, rule, policy, LOCK, plain
    index build, foreign key or statement over the host's rows is refused."""
    statements = upgrade_statements()
    assert {s.revision for s in statements} >= set(revisions_after_host_tables("postgresql://"))
    assert refusals(statements) == []


def test_the_earlier_revisions_leave_nothing_behind_and_every_figure_stays_right(
    host: HostDatabase,
) -> None:
    """A database the earlier 0004-0006 and 0009 migrated (their triggers and foreign keys on
    the host's table, counts of its sessions kept by them), upgraded: nothing of ours is left
    there, the host writes again, and every figure /metrics reads equals a full count."""
    migrate(host.url, "0009_metric_counts", adopt=True)
    earlier_schema.restore(host.engine)
    with pytest.raises(Exception, match="permission denied for table jlg_metric_count"):
        host_writes(host)
    history(host.engine)

    migrate(host.url)

    assert earlier_schema.left_behind(host.engine) == []
    host_writes(host)
    host_writes(host, search_path=f"{DECOY_SCHEMA}, public")
    assert decoy_rows(host) == 0
    expected = full_count(host.engine)
    with host.engine.begin() as conn:
        counts = read_counts(conn)
        leftover = conn.execute(
            text("SELECT count(*) FROM jlg_metric_count WHERE metric = 'sessions'")
        ).scalar_one()
    assert leftover == 0
    assert (counts.attempts, counts.lag_le, counts.lag_count) == (
        expected.attempts,
        expected.lag_le,
        expected.lag_count,
    )
    snapshot = read_metrics_snapshot(host.engine)
    assert snapshot.by_status == armed_full_count(host.engine)
    assert snapshot.attempts == {("event", "COMPLETED"): 1, ("event", "FAILED"): 1}
    assert snapshot.open_attempts == {"event": 2}
    assert snapshot.by_status == {"SCHEDULED": 2, "IN_PROGRESS": 2, "FAILED": 1}


def history(engine: Engine) -> None:
    """Sessions in every held status, attempts completed, failed and open, written as that
    release's claim and marks wrote them (today's claim also sends the programme to the back
    of the one queue's turns, a table the earlier revision does not have)."""
    ids = [create_session(engine, online=False) for _ in range(6)]
    for sid in ids:
        force_state(engine, sid, S.SCHEDULED, at_offset=timedelta(minutes=-2))
    outcomes = {ids[0]: "COMPLETED", ids[1]: "FAILED", ids[2]: "IN_PROGRESS", ids[3]: "IN_PROGRESS"}
    with engine.begin() as conn:
        for sid, outcome in outcomes.items():
            conn.execute(
                text(
                    "UPDATE hdb_program_session SET link_generation_status = :status,"
                    " link_generation_attempt = 1, updated_at = now(),"
                    " link_generation_retry_at = CASE WHEN CAST(:status AS varchar) = 'FAILED'"
                    " THEN now() + interval '30 seconds' END WHERE id = :sid"
                ),
                {"sid": sid, "status": outcome},
            )
            conn.execute(
                text(
                    "INSERT INTO jlg_generation_attempt (program_session_id, attempt, trigger,"
                    " run_id, link_generation_at, claimed_at, outcome, finished_at, job_id,"
                    " total, error) SELECT id, 1, 'event', 'run-1', link_generation_at, now(),"
                    " 'IN_PROGRESS', NULL, NULL, NULL, NULL FROM hdb_program_session"
                    " WHERE id = :sid"
                ),
                {"sid": sid},
            )
            if outcome != "IN_PROGRESS":
                conn.execute(
                    text(
                        "UPDATE jlg_generation_attempt SET outcome = :outcome,"
                        " finished_at = now(), job_id = :job, total = :total, error = :error"
                        " WHERE program_session_id = :sid"
                    ),
                    {
                        "sid": sid,
                        "outcome": outcome,
                        "job": "job-1" if outcome == "COMPLETED" else None,
                        "total": 3 if outcome == "COMPLETED" else None,
                        "error": "boom" if outcome == "FAILED" else None,
                    },
                )


def test_adopt_plan_shows_each_host_statement_with_its_lock_and_applies_nothing(
    host: HostDatabase, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--database-url", host.url, "migrate", "--adopt", "--plan"]) == 0
    shown = capsys.readouterr().out
    assert "Nothing has been applied" in shown
    column = "a nullable or defaulted column on hdb_program_session, lock ACCESS EXCLUSIVE"
    assert f"[0002_link_generation] {column}" in shown
    assert "lock SHARE UPDATE EXCLUSIVE" in shown
    assert "CREATE INDEX CONCURRENTLY IF NOT EXISTS ix_psession_link_gen_fresh" in shown
    assert "REFUSED" not in shown
    assert "jlg_generation_attempt (" not in shown, "only what touches a host table is shown"
    assert "alembic_version" not in inspect(host.engine).get_table_names()
    columns = {c["name"] for c in inspect(host.engine).get_columns("hdb_program_session")}
    assert not any(c.startswith("link_generation") for c in columns), "nothing applied"

    assert main(["--database-url", host.url, "migrate", "--adopt"]) == 0
    assert main(["--database-url", host.url, "migrate", "--plan"]) == 0
    assert "0 statement(s) to run" in capsys.readouterr().out


def test_an_index_build_left_half_done_is_built_again(host: HostDatabase) -> None:
    """A concurrent build interrupted (here: it fails) leaves an INVALID index that
    ``IF NOT EXISTS`` alone would keep for ever; the next run drops and builds it."""
    autocommit = host.engine.connect().execution_options(isolation_level="AUTOCOMMIT")
    with autocommit as conn, pytest.raises(Exception, match="could not create unique index"):
        conn.execute(
            text(
                "CREATE UNIQUE INDEX CONCURRENTLY ix_psession_link_gen_fresh"
                " ON hdb_program_session (program_id)"
            )
        )
    migrate(host.url, adopt=True)
    with host.engine.connect() as conn:
        valid, definition = conn.execute(
            text(
                "SELECT i.indisvalid, pg_get_indexdef(i.indexrelid) FROM pg_index i"
                " JOIN pg_class c ON c.oid = i.indexrelid"
                " WHERE c.relname = 'ix_psession_link_gen_fresh'"
            )
        ).one()
    assert valid
    assert "(link_generation_at, id)" in definition
