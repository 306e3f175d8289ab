"""Hung parts and the record of intent, expand-only.

- ``jlg_schedule_outbox.held_until``: an applier holds a change by a lease on its row, taken
  and released in short transactions, so no connection, transaction or lock is held across
  the AWS call (a silent EventBridge never holds the admin's pool). A partial index on the
  pending changes' fire times lets the sync sensor turn near times direct in the database.
- ``jlg_link_generation_change``: every admin set/clear (who, when, from what to what),
  written by the same statement as the UPDATE; resync takes a schedule's actor from here,
  never from a host write of ``updated_by``. No foreign key to the host's table (see 0004).

Revision ID: 0006_hung_parts
Revises: 0005_attempt_history
Create Date: 2026-12-03
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006_hung_parts"
down_revision: str | None = "0005_attempt_history"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
phase: str = "expand"


def upgrade() -> None:
    op.add_column(
        "jlg_schedule_outbox", sa.Column("held_until", sa.DateTime(timezone=True), nullable=True)
    )
    op.create_index(
        "ix_schedule_outbox_pending_fire",
        "jlg_schedule_outbox",
        ["fire_at"],
        postgresql_where=sa.text("NOT direct"),
    )
    op.create_table(
        "jlg_link_generation_change",
        sa.Column("id", sa.BigInteger(), sa.Identity(), nullable=False),
        sa.Column("program_session_id", sa.BigInteger(), nullable=False),
        sa.Column(
            "changed_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.Column("actor_user_id", sa.Integer(), nullable=True),
        sa.Column("link_generation_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("previous_link_generation_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        "ix_link_generation_change_session",
        "jlg_link_generation_change",
        ["program_session_id", "id"],
    )


def downgrade() -> None:
    op.drop_index("ix_link_generation_change_session", table_name="jlg_link_generation_change")
    op.drop_table("jlg_link_generation_change")
    op.drop_index("ix_schedule_outbox_pending_fire", table_name="jlg_schedule_outbox")
    op.drop_column("jlg_schedule_outbox", "held_until")
