"""Attempt history: one row per claim of a session, expand-only.

A claim opens a row (trigger, Dagster run id, the cycle's time, when it was claimed); a mark
closes it (COMPLETED with job id and total, FAILED with the sanitised error, SUPERSEDED when
fenced out) and a stale reclaim closes the abandoned one (RECLAIMED), each in the same
statement as the session's state change. No foreign key to the host's table (see 0004): the
history of a session the host deletes outright stays on record.

Revision ID: 0005_attempt_history
Revises: 0004_schedule_outbox
Create Date: 2026-12-03
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005_attempt_history"
down_revision: str | None = "0004_schedule_outbox"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
phase: str = "expand"

OUTCOMES = "'IN_PROGRESS', 'COMPLETED', 'FAILED', 'SUPERSEDED', 'RECLAIMED'"


def upgrade() -> None:
    op.create_table(
        "jlg_generation_attempt",
        sa.Column("program_session_id", sa.BigInteger(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("trigger", sa.String(16), nullable=False),
        sa.Column("run_id", sa.String(64), nullable=True),
        sa.Column("link_generation_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("outcome", sa.String(16), server_default="IN_PROGRESS", nullable=False),
        sa.Column("job_id", sa.String(255), nullable=True),
        sa.Column("total", sa.Integer(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.CheckConstraint(f"outcome IN ({OUTCOMES})", name="ck_generation_attempt_outcome"),
        sa.PrimaryKeyConstraint("program_session_id", "attempt"),
    )
    op.create_index(
        "ix_generation_attempt_open",
        "jlg_generation_attempt",
        ["program_session_id"],
        postgresql_where=sa.text("outcome = 'IN_PROGRESS'"),
    )


def downgrade() -> None:
    op.drop_index("ix_generation_attempt_open", table_name="jlg_generation_attempt")
    op.drop_table("jlg_generation_attempt")
