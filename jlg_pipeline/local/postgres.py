"""LOCAL ONLY: the dev stack's PostgreSQL, embedded (pgserver) unless URLs are given."""

import logging
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from sqlalchemy.engine import make_url

from jlg_pipeline.adapters.database import normalize_url

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


def _libpq(url: str) -> str:
    return (
        make_url(normalize_url(url))
        .set(drivername="postgresql")
        .render_as_string(hide_password=False)
    )


def _ensure_database(admin_url: str, name: str) -> None:
    with psycopg.connect(_libpq(admin_url), autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{name}"')


def start(data_dir: Path, app_url: str | None, dagster_url: str | None) -> LocalPostgres:
    """Use the given URLs, or start the embedded server under ``data_dir`` (its data
    survives restarts) and create the two databases in it."""
    if app_url and dagster_url:
        return LocalPostgres(normalize_url(app_url), dagster_url)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
        import pgserver

    logging.getLogger("pgserver").setLevel(logging.WARNING)  # it narrates initdb otherwise
    data_dir.mkdir(parents=True, exist_ok=True)
    server = pgserver.get_server(str(data_dir), cleanup_mode="stop")  # type: ignore[attr-defined]
    admin = normalize_url(server.get_uri())
    for name in (APP_DATABASE, DAGSTER_DATABASE):
        _ensure_database(admin, name)
    base = make_url(admin)
    return LocalPostgres(
        app_url=app_url or base.set(database=APP_DATABASE).render_as_string(hide_password=False),
        dagster_url=dagster_url
        or base.set(drivername="postgresql+psycopg2", database=DAGSTER_DATABASE).render_as_string(
            hide_password=False
        ),
        server=server,
    )
