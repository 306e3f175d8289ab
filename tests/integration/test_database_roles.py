"""Least privilege, as the kit ships it (deploy/postgres/, docs/operations.md "Database
roles"): the migrations run as a role that may alter the host's tables and owns the project's
own schema; the application does its whole work as a role with the documented grants and no
more; the admin API reads Dagster's storage as a SELECT-only role through a connection that
refuses every write, whatever the role may do."""

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest
from alembic import command as alembic_command
from dagster import DagsterInstance
from sqlalchemy import Engine, inspect, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

from devstack.postgres import admin_execute, dagster_reader
from jlg_pipeline import cli
from jlg_pipeline.adapters.aws_scheduler import AwsScheduler
from jlg_pipeline.adapters.candidates import Candidates
from jlg_pipeline.adapters.database import create_engine
from jlg_pipeline.adapters.intent_writes import IntentWrites
from jlg_pipeline.adapters.metrics_snapshot import read_metrics_snapshot
from jlg_pipeline.adapters.orchestrator_health import read_orchestrator_health, storage_engine
from jlg_pipeline.adapters.queue import SessionQueue
from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.adapters.schedule_outbox import ScheduleOutbox
from jlg_pipeline.adapters.service_view import ServiceView
from jlg_pipeline.domain.attempts import Trigger
from jlg_pipeline.domain.generation import BulkRegisterRequest
from jlg_pipeline.migrate import alembic_config, current_revision, migrate
from jlg_pipeline.services.generation import bind_gate, generate_for_session
from jlg_pipeline.services.schedule_sync import ScheduleSync
from jlg_pipeline.services.sweep import sweep_overdue_sessions
from tests.support import ROOT
from tests.support.fakes import RecordingRegistrar
from tests.support.host_database import HostDatabase, acting_as, host_database, host_writes
from tests.support.web import Aws, client_for, settings_for, token

KIT = ROOT / "deploy" / "postgres"
ADMIN = {"Authorization": f"Bearer {token()}", "X-Active-Role": "admin"}


@dataclass(frozen=True)
class Roles:
    migrator: str
    app: str
    reader: str


def run_kit_file(
    engine: Engine, name: str, roles: Roles, *, host_owner: str = "", acting: str | None = None
) -> None:
    """One of the kit's SQL files as an operator runs it with psql (as ``acting``, or the
    superuser), the roles renamed for this test (roles are the whole server's) and
    ``-v host_owner=…`` filled in."""
    sql = (KIT / name).read_text()
    for documented, ours in (
        ("jlg_migrator", roles.migrator),
        ("jlg_dagster_reader", roles.reader),
        ("jlg_app", roles.app),
    ):
        sql = sql.replace(documented, ours)
    sql = sql.replace(':"host_owner"', host_owner)
    code = "\n".join(line for line in sql.splitlines() if not line.strip().startswith("--"))
    statements = code.split(";")
    with engine.begin() as conn:
        if acting:
            conn.execute(text(f"SET LOCAL ROLE {acting}"))
        for statement in statements:
            if statement.strip():
                conn.execute(text(statement))


def as_role(url: str, role: str) -> str:
    return make_url(url).set(username=role, password=None).render_as_string(hide_password=False)


@pytest.fixture
def roles(pg_admin_url: str) -> Iterator[Roles]:
    suffix = uuid.uuid4().hex[:8]
    made = Roles(f"jlg_migrator_{suffix}", f"jlg_app_{suffix}", f"jlg_dagster_reader_{suffix}")
    yield made
    for role in (made.migrator, made.app, made.reader):
        admin_execute(pg_admin_url, f"DROP ROLE IF EXISTS {role}")


@pytest.fixture
def host(pg_admin_url: str, roles: Roles) -> Iterator[HostDatabase]:
    with host_database(pg_admin_url) as database:
        try:
            yield database
        finally:
            # The roles' grants and default privileges live in this database: gone with it.
            with database.engine.begin() as conn:
                for role in (roles.migrator, roles.app):
                    conn.execute(text(f"DROP OWNED BY {role} CASCADE"))


def test_the_application_does_its_work_with_the_documented_grants_and_no_more(
    host: HostDatabase, roles: Roles, aws: Aws
) -> None:
    run_kit_file(host.engine, "roles.sql", roles, host_owner=host.role)
    migrate(as_role(host.url, roles.migrator), adopt=True)
    run_kit_file(host.engine, "grants.sql", roles, acting=host.role)
    app_url = as_role(host.url, roles.app)
    app = create_engine(app_url)
    try:
        with host.engine.connect() as conn:
            ours = set(inspect(conn).get_table_names(schema="jlg"))
            public = set(inspect(conn).get_table_names(schema="public"))
        assert {"alembic_version", "jlg_generation_attempt", "jlg_schedule_outbox"} <= ours
        assert not {t for t in public if t.startswith("jlg_") or t == "alembic_version"}

        with acting_as(host.engine, host.role) as conn:
            ids = list(
                conn.execute(
                    text(
                        "INSERT INTO hdb_program_session (program_id)"
                        " SELECT 9 FROM generate_series(1, 3) RETURNING id"
                    )
                ).scalars()
            )
        near, later, swept = ids

        # The admin API: a change to the session and its schedule, its records, /metrics.
        with client_for(settings_for(app_url, aws.queue_arn), aws.scheduler) as http:
            for sid, ahead in ((near, timedelta(seconds=30)), (later, timedelta(days=1))):
                answer = http.patch(
                    f"/program-session/{sid}/link-generation",
                    headers=ADMIN,
                    json={"linkGenerationAt": _iso(app, ahead)},
                )
                assert answer.status_code == 200, answer.text
            for path in ("", "/attempts", "/changes"):
                assert (
                    http.get(
                        f"/program-session/{near}/link-generation{path}", headers=ADMIN
                    ).status_code
                    == 200
                )
            assert http.get("/program-session/link-generation", headers=ADMIN).status_code == 200
            assert http.get("/readyz").status_code == 200

        # The schedule sync, the gate, the watchdog's and the sweep's reads, the figures.
        outbox = ScheduleOutbox(app)
        sync = ScheduleSync(
            outbox,
            AwsScheduler(aws.scheduler),
            settings_for(app_url, aws.queue_arn).scheduler_target,
            enabled=True,
        )
        sync.direct_near()
        sync.sync()
        repository = ProgramSessionRepository(app)
        with app.begin() as conn:
            conn.execute(
                text(
                    "UPDATE hdb_program_session SET link_generation_at = now() - interval '1 h'"
                    " WHERE id = :id"
                ),
                {"id": near},
            )
        outcome = generate_for_session(
            BulkRegisterRequest.parse(near),
            repository=repository,
            registrar=RecordingRegistrar(total=4),
            trigger=Trigger.DIRECT,
        )
        assert outcome.result.value == "completed"
        assert not SessionQueue(app).attendance(60).unattended
        IntentWrites(app).set_link_generation(swept, _at(app, timedelta(seconds=5)), 1)
        with app.begin() as conn:
            conn.execute(
                text(
                    "UPDATE hdb_program_session SET link_generation_at = now() - interval '2 h'"
                    " WHERE id = :id"
                ),
                {"id": swept},
            )
        report = sweep_overdue_sessions(
            Candidates(app), bind_gate(repository, RecordingRegistrar(), Trigger.CRON)
        )
        assert report.completed == 1
        snapshot = read_metrics_snapshot(app)
        assert snapshot.attempts == {("direct", "COMPLETED"): 1, ("cron", "COMPLETED"): 1}

        # The audit tables are append-only, and the migrations' version is the migrator's.
        with client_for(settings_for(app_url, aws.queue_arn), aws.scheduler) as http:
            moved = http.patch(
                "/program/9/link-generation",
                headers={**ADMIN, "Idempotency-Key": "roles-1"},
                json={"shiftBy": 60, "expectedCount": 3},
            )
            assert moved.status_code == 200, moved.text
        # An operator's resume, as the application role (the runbook's "who may resume").
        ServiceView(app).resume("ops-roles")
        for refused in (
            "DELETE FROM jlg.jlg_service_resume",
            "UPDATE jlg.jlg_service_resume SET resumed_by = 'forged'",
            "DELETE FROM jlg.jlg_link_generation_change",
            "UPDATE jlg.jlg_link_generation_change SET actor_user_id = 1",
            "DELETE FROM jlg.jlg_programme_operation",
            "UPDATE jlg.jlg_programme_operation SET actor_user_id = 1",
            "UPDATE jlg.alembic_version SET version_num = 'x'",
            "DELETE FROM jlg.alembic_version",
        ):
            with pytest.raises(DBAPIError, match="permission denied"), app.begin() as conn:
                conn.execute(text(refused))

        # And no more: none of the host's other columns, no DDL.
        with pytest.raises(DBAPIError, match="permission denied"), app.begin() as conn:
            conn.execute(text("UPDATE hdb_program_session SET title = 'x'"))
        with pytest.raises(DBAPIError, match="permission denied"), app.begin() as conn:
            conn.execute(text("CREATE TABLE jlg.jlg_more (id int)"))
        with pytest.raises(DBAPIError, match="permission denied"), app.begin() as conn:
            conn.execute(text("SELECT title FROM hdb_program_session"))
    finally:
        app.dispose()
    host_writes(host)


def _at(engine: Engine, ahead: timedelta):  # type: ignore[no-untyped-def]
    with engine.connect() as conn:
        return conn.execute(text("SELECT now() + :ahead"), {"ahead": ahead}).scalar_one()


def _iso(engine: Engine, ahead: timedelta) -> str:
    return str(_at(engine, ahead).isoformat())


def test_the_orchestrators_health_is_read_by_a_select_only_role_and_never_written(
    dagster_storage_url: str, roles: Roles, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "dagster.yaml").write_text((ROOT / "dagster.yaml").read_text())
    monkeypatch.setenv("DAGSTER_POSTGRES_URL", dagster_storage_url)
    with DagsterInstance.from_config(str(tmp_path)):
        pass  # Dagster creates its tables
    owner = create_engine(dagster_storage_url.replace("+psycopg2", "+psycopg"))
    try:
        run_kit_file(owner, "dagster-reader.sql", roles)
        with owner.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO runs (run_id, pipeline_name, status, run_body)"
                    " VALUES ('r1', 'join_link_generation_job', 'QUEUED', '{}')"
                )
            )
        for url in (as_role(dagster_storage_url, roles.reader), dagster_storage_url):
            reader = storage_engine(url, pool_size=1, max_overflow=0)
            try:
                snapshot = read_orchestrator_health(reader)
                assert snapshot.runs == {("", "queued"): 1}
                with (
                    pytest.raises(DBAPIError, match="read-only transaction"),
                    reader.begin() as conn,
                ):
                    conn.execute(text("UPDATE runs SET status = 'STARTED' WHERE run_id = 'r1'"))
            finally:
                reader.dispose()
        with owner.connect() as conn:
            assert conn.execute(text("SELECT status FROM runs")).scalar_one() == "QUEUED"
            reader_grants = conn.execute(
                text(
                    "SELECT DISTINCT privilege_type FROM information_schema.role_table_grants"
                    " WHERE grantee = :role"
                ),
                {"role": roles.reader},
            ).scalars()
            assert set(reader_grants) == {"SELECT"}
    finally:
        with owner.begin() as conn:
            conn.execute(text(f"DROP OWNED BY {roles.reader}"))
        owner.dispose()


def test_the_dev_stack_reads_dagsters_storage_as_the_kits_select_only_role(
    dagster_storage_url: str,
    roles: Roles,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    """The audit: the development stack handed the admin API Dagster's owner URL, read-only
    only by the session's default."""
    (tmp_path / "dagster.yaml").write_text((ROOT / "dagster.yaml").read_text())
    monkeypatch.setenv("DAGSTER_POSTGRES_URL", dagster_storage_url)
    with DagsterInstance.from_config(str(tmp_path)):
        pass  # Dagster creates its tables
    kit = KIT / "dagster-reader.sql"
    request.addfinalizer(
        lambda: admin_execute(
            dagster_storage_url.replace("+psycopg2", ""), f"DROP OWNED BY {roles.reader}"
        )
    )
    dagster_reader(dagster_storage_url, kit, role=roles.reader)
    url = dagster_reader(dagster_storage_url, kit, role=roles.reader)  # a restart: no error
    assert make_url(url).username == roles.reader
    reader = storage_engine(url, pool_size=1, max_overflow=0)
    try:
        assert read_orchestrator_health(reader).runs == {}
    finally:
        reader.dispose()
    libpq = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(libpq, autocommit=True) as conn:
        conn.execute("SET default_transaction_read_only = off")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("DELETE FROM runs")


def test_migrations_refuse_a_role_that_does_not_own_the_project_tables(
    host: HostDatabase, roles: Roles, capsys: pytest.CaptureFixture[str]
) -> None:
    """The re-audit: as the application role, ``jlg migrate`` and ``migrate expand`` exited 0
    and changed nothing, a migration's REVOKE (which PostgreSQL only warns about for a
    non-owner) was stamped as applied, and ``jlg downgrade`` ended in a raw SQLAlchemy line.
    Now every form but ``--plan`` refuses in one line naming the role it needs."""
    run_kit_file(host.engine, "roles.sql", roles, host_owner=host.role)
    migrator_url = as_role(host.url, roles.migrator)
    migrate(migrator_url, "0014_service_resume", adopt=True)
    run_kit_file(host.engine, "grants.sql", roles, acting=host.role)
    app_url = as_role(host.url, roles.app)
    capsys.readouterr()

    for command in (
        ["migrate", "0016_audit_rights"],
        ["migrate", "expand"],
        ["migrate"],
        ["downgrade", "base"],
    ):
        assert cli.main(["--database-url", app_url, *command]) == 2, command
        err = capsys.readouterr().err
        assert err.count("\n") == 1, err
        assert f"owned by {roles.migrator}" in err, err
        assert f"this connection is {roles.app}" in err, err
        assert "Background on this error" not in err
    assert current_revision(migrator_url) == "0014_service_resume", "nothing stamped"
    assert cli.main(["--database-url", app_url, "migrate", "--plan"]) == 0

    migrate(migrator_url)
    app = create_engine(app_url)
    try:
        with pytest.raises(DBAPIError, match="permission denied"), app.begin() as conn:
            conn.execute(text("DELETE FROM jlg.jlg_link_generation_change"))
    finally:
        app.dispose()


def test_a_revoke_that_has_no_effect_fails_the_migration(host: HostDatabase, roles: Roles) -> None:
    """Past the gate (Alembic driven directly, as the application role): PostgreSQL only warns
    when a non-owner revokes, and 0016 fails instead of being stamped as applied."""
    run_kit_file(host.engine, "roles.sql", roles, host_owner=host.role)
    migrator_url = as_role(host.url, roles.migrator)
    migrate(migrator_url, "0015_readable_times", adopt=True)
    run_kit_file(host.engine, "grants.sql", roles, acting=host.role)
    app_url = as_role(host.url, roles.app)

    with pytest.raises(DBAPIError, match="had no effect"):
        alembic_command.upgrade(alembic_config(app_url), "0016_audit_rights")
    assert current_revision(migrator_url) == "0015_readable_times"
