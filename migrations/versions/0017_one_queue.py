"""One queue, expand-only (docs/design.md "One queue").

- ``jlg_session_queue``: a session cycle's request options (role, batch size, actor) as the path
  that armed or asked for it recorded them, for whichever worker claims it. A row for another
  cycle (the session re-armed since) is not read. No reference to the host's table.
- ``jlg_programme_turn``: per programme, when it was last served (``served``, from
  ``jlg_queue_served_seq``: a strict order, not a clock) and the earliest time its waiting
  sessions fall due (``next_due_at``): the fair claim looks only at programmes with work due.
- ``jlg_queue_class_seq``: which class a fair claim prefers (every fifth: recovery).
- ``jlg_worker``: each run draining the queue, and when it last said so (its heartbeat): the
  watchdog launches a worker when work waits and none is alive, reading nothing of Dagster's.
- ``ix_psession_link_gen_programme`` on the host table, built concurrently: a programme's
  waiting sessions in time order, the fair claim's probe.

Expand: the previous release neither reads nor writes any of them.

Revision ID: 0017_one_queue
Revises: 0016_audit_rights
Create Date: 2026-12-06
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from migrations.host_index import create_concurrently

revision: str = "0017_one_queue"
down_revision: str | None = "0016_audit_rights"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
phase: str = "expand"

_TABLE = "hdb_program_session"
_INDEX = "ix_psession_link_gen_programme"


def upgrade() -> None:
    # IF NOT EXISTS: the index build below runs after these commit, so a run cut off there is
    # run again from the top.
    op.create_table(
        "jlg_session_queue",
        sa.Column("program_session_id", sa.BigInteger(), primary_key=True, autoincrement=False),
        sa.Column("cycle_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("role", sa.String(64), nullable=True),
        sa.Column("batch_size", sa.Integer(), nullable=True),
        sa.Column("actor_user_id", sa.Integer(), nullable=True),
        sa.Column(
            "recorded_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        if_not_exists=True,
    )
    op.create_table(
        "jlg_programme_turn",
        sa.Column("program_id", sa.BigInteger(), primary_key=True, autoincrement=False),
        sa.Column("served", sa.BigInteger(), nullable=True),
        sa.Column("next_due_at", sa.DateTime(timezone=True), nullable=True),
        if_not_exists=True,
    )
    op.create_index(
        "ix_programme_turn_next_due", "jlg_programme_turn", ["next_due_at"], if_not_exists=True
    )
    op.create_table(
        "jlg_worker",
        sa.Column("run_id", sa.String(64), primary_key=True),
        sa.Column("beat_at", sa.DateTime(timezone=True), nullable=False),
        if_not_exists=True,
    )
    op.execute("CREATE SEQUENCE IF NOT EXISTS jlg_queue_served_seq")
    op.execute("CREATE SEQUENCE IF NOT EXISTS jlg_queue_class_seq")
    # CONCURRENTLY: on a large brownfield table the build does not block the host's writes.
    create_concurrently(
        _INDEX,
        _TABLE,
        ["program_id", "link_generation_at", "id"],
        "deleted_at IS NULL AND link_generation_status IN ('SCHEDULED', 'IN_PROGRESS', 'FAILED')",
    )


def downgrade() -> None:
    op.drop_index(_INDEX, table_name=_TABLE)
    op.execute("DROP SEQUENCE jlg_queue_class_seq")
    op.execute("DROP SEQUENCE jlg_queue_served_seq")
    op.drop_table("jlg_worker")
    op.drop_table("jlg_programme_turn")
    op.drop_table("jlg_session_queue")
