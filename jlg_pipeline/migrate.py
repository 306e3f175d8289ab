"""Applying the Alembic migrations under ``migrations/`` to a database: upgrade (optionally
adopting a brownfield database's host tables) and downgrade. Used by ``jlg migrate``, the
local stack, the tests and the benchmarks."""

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import inspect

import migrations
from jlg_pipeline.adapters.database import create_engine, normalize_url
from jlg_pipeline.domain.errors import JlgError

# The checkout holding migrations/, workspace.yaml and dagster.yaml (an editable install).
REPOSITORY_ROOT = Path(migrations.__file__).resolve().parent.parent
HOST_TABLE_REVISION = "0001_host_tables"
REQUIRED_HOST_COLUMNS = {
    "hdb_program_session": {"id", "program_id", "updated_at", "updated_by", "deleted_at"},
    "hdb_online_session": {"id", "program_id", "program_session_id", "template"},
}


def alembic_config(database_url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(Path(migrations.__file__).parent))
    config.attributes["database_url"] = normalize_url(database_url)
    return config


def migrate(database_url: str, revision: str = "head", *, adopt: bool = False) -> None:
    """Upgrade to ``revision``. With ``adopt``, a brownfield database whose host tables exist
    is first stamped past the host-table revision, so only the additive one runs."""
    config = alembic_config(database_url)
    if adopt:
        _check_brownfield(database_url)
        command.stamp(config, HOST_TABLE_REVISION)
    command.upgrade(config, revision)


def downgrade(database_url: str, revision: str) -> None:
    command.downgrade(alembic_config(database_url), revision)


def _check_brownfield(database_url: str) -> None:
    engine = create_engine(database_url)
    try:
        inspector = inspect(engine)
        if inspector.has_table("alembic_version"):
            raise JlgError("--adopt is for a database without migration history; run `jlg migrate`")
        for table, needed in REQUIRED_HOST_COLUMNS.items():
            if not inspector.has_table(table):
                raise JlgError(f"--adopt needs the host table {table}; it does not exist")
            missing = needed - {c["name"] for c in inspector.get_columns(table)}
            if missing:
                raise JlgError(f"host table {table} lacks columns {sorted(missing)}")
    finally:
        engine.dispose()
