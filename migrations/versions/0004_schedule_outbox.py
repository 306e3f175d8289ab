"""Schedule sync: the outbox of desired EventBridge schedule states, expand-only.

The admin's UPDATE writes its session's row here in the same transaction; the app applies
it after the response and deletes it, and ``join_link_schedule_sync_job`` retries what
failed. Only pending work lives here, so the table stays small.

No foreign key to ``hdb_program_session``: PostgreSQL would put its triggers on the host's
table, lock it while the key is made, and make the host's own TRUNCATE fail (docs/design.md
"A guest"). A row whose session is gone is harmless: its schedule fires into a claim that
finds nothing.

Revision ID: 0004_schedule_outbox
Revises: 0003_sweep_fairness
Create Date: 2026-12-03
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004_schedule_outbox"
down_revision: str | None = "0003_sweep_fairness"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
phase: str = "expand"

SEQUENCE = "jlg_schedule_outbox_version_seq"


def upgrade() -> None:
    op.execute(sa.schema.CreateSequence(sa.Sequence(SEQUENCE), if_not_exists=True))
    op.create_table(
        "jlg_schedule_outbox",
        sa.Column("program_session_id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("fire_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("actor_user_id", sa.Integer(), nullable=True),
        sa.Column("direct", sa.Boolean(), server_default="false", nullable=False),
        sa.Column("next_try_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("tries", sa.Integer(), server_default="0", nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column(
            "changed_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.PrimaryKeyConstraint("program_session_id"),
    )
    op.create_index("ix_schedule_outbox_due", "jlg_schedule_outbox", ["direct", "next_try_at"])


def downgrade() -> None:
    op.drop_index("ix_schedule_outbox_due", table_name="jlg_schedule_outbox")
    op.drop_table("jlg_schedule_outbox")
    op.execute(sa.schema.DropSequence(sa.Sequence(SEQUENCE)))
