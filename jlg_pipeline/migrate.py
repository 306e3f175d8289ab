"""Applying the Alembic migrations under ``migrations/`` to a database: upgrade (optionally
adopting a brownfield database's host tables), downgrade, and the plan of what an upgrade
would run, read without applying it. Used by ``jlg migrate``, the local stack, the tests and
the benchmarks."""

import re
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, text

import migrations
from jlg_pipeline.adapters.database import create_engine, normalize_url
from jlg_pipeline.domain.errors import JlgError
from jlg_pipeline.migration_plan import HOST_TABLE_REVISION, Statement, render, steps
from jlg_pipeline.own_table_locks import own_steps, render_own

# The checkout holding migrations/, workspace.yaml and dagster.yaml (an editable install).
REPOSITORY_ROOT = Path(migrations.__file__).resolve().parent.parent
REQUIRED_HOST_COLUMNS = {
    "hdb_program_session": {"id", "program_id", "updated_at", "updated_by", "deleted_at"},
    "hdb_online_session": {"id", "program_id", "program_session_id", "template"},
}


def alembic_config(database_url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(Path(migrations.__file__).parent))
    config.attributes["database_url"] = normalize_url(database_url)
    return config


EXPAND = "expand"
"""The revision argument that means: every expand step still to apply, up to the first
contract step (the upgrade's first command, while the previous release still runs)."""
PHASES = (EXPAND, "contract")


def phases() -> list[tuple[str, str]]:
    """Every revision, oldest first, with its phase: ``expand`` (safe while the previous
    release runs) or ``contract`` (only once every process runs this release)."""
    script = ScriptDirectory.from_config(alembic_config(OFFLINE_URL))
    revisions = reversed(list(script.walk_revisions()))
    return [(r.revision, str(getattr(r.module, "phase", ""))) for r in revisions]


def expand_head(current: str | None) -> str:
    """The last revision before the first contract step after ``current`` (None: an empty
    database); ``current`` itself when the next step is a contract one."""
    ordered = phases()
    names = [name for name, _ in ordered]
    start = names.index(current) + 1 if current is not None else 0
    last = current
    for name, phase in ordered[start:]:
        if phase != EXPAND:
            break
        last = name
    return last or "base"


def migrate(database_url: str, revision: str = "head", *, adopt: bool = False) -> None:
    """Upgrade to ``revision`` (``expand``: every expand step still to apply). With
    ``adopt``, a brownfield database whose host tables exist is first stamped past the
    host-table revision, so only the additive one runs."""
    _check_owner(database_url)
    config = alembic_config(database_url)
    if adopt:
        _check_brownfield(database_url)
        command.stamp(config, HOST_TABLE_REVISION)
    if revision == EXPAND:
        revision = expand_head(current_revision(database_url))
    command.upgrade(config, revision)


def downgrade(database_url: str, revision: str) -> None:
    _check_owner(database_url)
    command.downgrade(alembic_config(database_url), revision)


class _Collected:
    """Alembic's offline output, one write per statement, each kept with its revision (the
    transaction boundaries it writes around them left out)."""

    _RUNNING = re.compile(r"^-- Running upgrade .* -> (\S+)")

    def __init__(self) -> None:
        self.revision = "base"
        self.statements: list[Statement] = []

    def write(self, text: str) -> None:
        running = self._RUNNING.match(text)
        if running:
            self.revision = running.group(1)
        elif text.strip() and text.strip().upper() not in ("BEGIN;", "COMMIT;"):
            self.statements.append(Statement(self.revision, text.strip()))

    def flush(self) -> None:
        pass


OFFLINE_URL = "postgresql+psycopg://offline/plan"
"""Alembic writes SQL for this dialect without connecting anywhere."""


def upgrade_statements(start: str | None = None, end: str = "head") -> list[Statement]:
    """The SQL an upgrade from ``start`` (the beginning when None) to ``end`` runs, written
    by Alembic's offline mode: nothing connects, nothing is applied."""
    config = alembic_config(OFFLINE_URL)
    collected = _Collected()
    config.attributes["output_buffer"] = collected
    command.upgrade(config, f"{start}:{end}" if start else end, sql=True)
    return collected.statements


def plan(database_url: str, revision: str = "head", *, adopt: bool = False) -> str:
    """What :func:`migrate` would run from the database's current revision (past the host
    tables when adopting), the statements that touch a host table shown with their locks, then
    those that act on our own tables with theirs.
    Reads the database, applies nothing."""
    if adopt:
        _check_brownfield(database_url)
        start: str | None = HOST_TABLE_REVISION
    else:
        start = current_revision(database_url)
    if revision == EXPAND:
        revision = expand_head(start)
    statements = upgrade_statements(start, revision)
    return render(steps(statements), len(statements)) + "\n\n" + render_own(own_steps(statements))


def current_revision(database_url: str) -> str | None:
    engine = create_engine(database_url)
    try:
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    finally:
        engine.dispose()


OWNER = text(
    "SELECT pg_get_userbyid(c.relowner), current_user,"
    " pg_has_role(current_user, c.relowner, 'USAGE')"
    " FROM pg_class AS c WHERE c.oid = to_regclass('alembic_version')"
)


def _check_owner(database_url: str) -> None:
    """Only the role that owns the project's tables (the kit's migrator) migrates them: another
    role's ALTER fails, and its REVOKE only warns (PostgreSQL lets a non-owner revoke nothing),
    so a migration would be stamped as applied having done nothing. A database without
    migration history passes: whoever creates the tables owns them."""
    engine = create_engine(database_url)
    try:
        with engine.connect() as conn:
            row = conn.execute(OWNER).first()
    finally:
        engine.dispose()
    if row is not None and not row[2]:
        raise JlgError(
            f"the project's tables are owned by {row[0]} and this connection is {row[1]}: run "
            f"jlg migrate and jlg downgrade as {row[0]} (the kit's migrator)"
        )


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
