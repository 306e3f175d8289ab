"""Programme actions, expand-only on the project's own tables (docs/design.md "Programme
actions").

``jlg_programme_operation``: one admin request acting on a programme's sessions at once: who,
when, the filter and the action as parsed, the ``Idempotency-Key`` (unique per admin) and the
request's fingerprint, and when it finished. ``jlg_programme_operation_session``: the sessions it
matched when it began, each marked done by the statement that changes it, with what happened
(``updated`` or why it was skipped): an operation interrupted part-way is finished from here.
``jlg_link_generation_change.operation_id``: the intent history names the operation a change
belongs to (NULL for a one-session PATCH).

Revision ID: 0013_programme_operations
Revises: 0012_held_sessions
Create Date: 2026-12-05
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB, UUID

revision: str = "0013_programme_operations"
down_revision: str | None = "0012_held_sessions"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
phase: str = "expand"


def upgrade() -> None:
    op.create_table(
        "jlg_programme_operation",
        sa.Column("id", UUID(as_uuid=True), primary_key=True),
        sa.Column("program_id", sa.BigInteger(), nullable=False),
        sa.Column("actor_user_id", sa.Integer(), nullable=False),
        sa.Column("idempotency_key", sa.String(200), nullable=True),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("request", JSONB(), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.UniqueConstraint(
            "actor_user_id", "idempotency_key", name="uq_programme_operation_actor_key"
        ),
    )
    op.create_table(
        "jlg_programme_operation_session",
        sa.Column(
            "operation_id",
            UUID(as_uuid=True),
            sa.ForeignKey("jlg_programme_operation.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("program_session_id", sa.BigInteger(), primary_key=True, autoincrement=False),
        sa.Column("outcome", sa.String(20), nullable=True),
    )
    op.add_column(
        "jlg_link_generation_change",
        sa.Column("operation_id", UUID(as_uuid=True), nullable=True),
    )


def downgrade() -> None:
    op.drop_column("jlg_link_generation_change", "operation_id")
    op.drop_table("jlg_programme_operation_session")
    op.drop_table("jlg_programme_operation")
