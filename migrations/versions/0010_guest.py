"""A guest in the host's database: nothing of ours stays on ``hdb_program_session``
(docs/design.md "A guest").

Earlier versions of revisions 0004-0006 and 0009 put things on the host's table that made its
own writes depend on us: 0009's statement-level triggers wrote ``jlg_metric_count`` as the
*writer's* role (a host role without a grant on our table could no longer insert, update or
soft-delete its own rows), and 0004-0006's foreign keys put PostgreSQL's referential triggers
there (the host's TRUNCATE failed, its DELETE cascaded into our tables). Those revisions no
longer create any of it; this one removes it from a database that ran them. Each removal
checks first, so a database that never had them is not touched (no lock on the host's table).

Nothing is put back on downgrade: what this removes was the defect.

Revision ID: 0010_guest
Revises: 0009_metric_counts
Create Date: 2026-12-05
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0010_guest"
down_revision: str | None = "0009_metric_counts"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
phase: str = "expand"

HOST_TABLE = "hdb_program_session"
OLD_TRIGGERS = tuple(
    f"jlg_count_sessions_{event}" for event in ("insert", "update", "delete", "truncate")
)
OLD_FOREIGN_KEYS = {
    "jlg_schedule_outbox": "fk_schedule_outbox_program_session",
    "jlg_generation_attempt": "fk_generation_attempt_program_session",
    "jlg_link_generation_change": "fk_link_generation_change_program_session",
}


def _names(names: Sequence[str]) -> str:
    return ", ".join(f"'{name}'" for name in names)


def upgrade() -> None:
    drops = "\n        ".join(f"DROP TRIGGER IF EXISTS {t} ON {HOST_TABLE};" for t in OLD_TRIGGERS)
    op.execute(
        f"""
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = '{HOST_TABLE}'::regclass
               AND tgname IN ({_names(OLD_TRIGGERS)})) THEN
        {drops}
    END IF;
END $$"""
    )
    op.execute("DROP FUNCTION IF EXISTS jlg_count_sessions()")
    for table, key in OLD_FOREIGN_KEYS.items():
        op.execute(
            f"""
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_constraint WHERE conname = '{key}'
               AND conrelid = '{table}'::regclass AND confrelid = '{HOST_TABLE}'::regclass) THEN
        ALTER TABLE {table} DROP CONSTRAINT {key};
    END IF;
END $$"""
        )
    # The earlier 0009 made the counting function without a search_path of its own.
    op.execute("ALTER FUNCTION jlg_count_attempts() SET search_path FROM CURRENT")
    # The sessions by status are read from the host's table now (indexed aggregates).
    op.execute("DELETE FROM jlg_metric_count WHERE metric = 'sessions'")


def downgrade() -> None:
    """Nothing to undo: the triggers and keys removed here are not put back."""
