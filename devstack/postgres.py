"""LOCAL ONLY: PostgreSQL plumbing for the dev stack, the tests and the benchmarks: the
embedded server (pgserver) unless URLs are given, and creating and dropping databases."""

import logging
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from sqlalchemy.engine import make_url

from jlg_pipeline.adapters.database import instance_storage_url, normalize_url

APP_DATABASE = "jlg"
DAGSTER_DATABASE = "dagster"
# Outside .data: run as root, pgserver opens every parent of its data folder to other users
# (its server runs as a `pgserver` user), and .data holds the secret and the logs.
DEV_DATA_DIR = Path(".pgdata") / "dev"
TEST_DATA_DIR = Path(".pgdata") / "test"


@dataclass
class LocalPostgres:
    app_url: str
    dagster_url: str
    server: Any = None

    def stop(self) -> None:
        if self.server is not None:
            self.server.cleanup()
            self.server = None


def libpq_url(url: str) -> str:
    """A SQLAlchemy URL as libpq (psycopg.connect) takes it."""
    return (
        make_url(normalize_url(url))
        .set(drivername="postgresql")
        .render_as_string(hide_password=False)
    )


def with_database(url: str, name: str) -> str:
    return make_url(url).set(database=name).render_as_string(hide_password=False)


def reachable(url: str) -> bool:
    try:
        with psycopg.connect(libpq_url(url), connect_timeout=3):
            return True
    except psycopg.OperationalError:
        return False


def admin_execute(admin_url: str, *statements: str) -> None:
    with psycopg.connect(libpq_url(admin_url), autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)


def create_database(admin_url: str, name: str, template: str | None = None) -> str:
    """Create database ``name`` (from ``template`` if given); its URL."""
    clause = f' TEMPLATE "{template}"' if template else ""
    admin_execute(admin_url, f'CREATE DATABASE "{name}"{clause}')
    return with_database(admin_url, name)


def drop_database(admin_url: str, name: str) -> None:
    admin_execute(admin_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _ensure_database(admin_url: str, name: str) -> None:
    with psycopg.connect(libpq_url(admin_url), autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{name}"')


def start(data_dir: Path, app_url: str | None, dagster_url: str | None) -> LocalPostgres:
    """Use the given URLs, or start the embedded server under ``data_dir`` (its data
    survives restarts) and create the two databases in it."""
    if app_url and dagster_url:
        return LocalPostgres(normalize_url(app_url), dagster_url)
    data_dir.mkdir(parents=True, exist_ok=True)
    server = embedded(data_dir, cleanup_mode="stop")
    admin = normalize_url(server.get_uri())
    for name in (APP_DATABASE, DAGSTER_DATABASE):
        _ensure_database(admin, name)
    base = make_url(admin)
    return LocalPostgres(
        app_url=app_url or base.set(database=APP_DATABASE).render_as_string(hide_password=False),
        dagster_url=dagster_url
        or instance_storage_url(
            base.set(database=DAGSTER_DATABASE).render_as_string(hide_password=False)
        ),
        server=server,
    )


DAGSTER_READER = "jlg_dagster_reader"


def dagster_reader(dagster_url: str, kit_sql: Path, role: str = DAGSTER_READER) -> str:
    """The SELECT-only role the admin API reads Dagster's storage with, made as the kit makes
    it (``kit_sql``: deploy/postgres/dagster-reader.sql) once Dagster's tables exist; its URL
    (no password: the embedded server trusts its local socket)."""
    statements = [
        s.strip().replace(DAGSTER_READER, role)
        for s in "\n".join(
            line for line in kit_sql.read_text().splitlines() if not line.startswith("--")
        ).split(";")
        if s.strip()
    ]
    owner = make_url(dagster_url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(owner, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone()
        for statement in statements:
            if not (exists and statement.upper().startswith("CREATE ROLE")):
                conn.execute(statement.encode())
    return make_url(dagster_url).set(username=role, password=None).render_as_string()


def embedded(data_dir: Path, cleanup_mode: str) -> Any:
    """The pgserver wheel's PostgreSQL on ``data_dir`` (created there on first use), the one
    way every embedded server here starts; ``cleanup_mode`` "stop" keeps its data, "delete"
    removes it. Its ``cleanup()`` ends it."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
        import pgserver

    logging.getLogger("pgserver").setLevel(logging.WARNING)  # it narrates initdb otherwise
    return pgserver.get_server(str(data_dir), cleanup_mode=cleanup_mode)  # type: ignore[attr-defined]
