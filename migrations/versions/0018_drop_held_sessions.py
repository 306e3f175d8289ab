"""Drop ``jlg_held_session``, contract: the table 0012 made for sessions the shared view held.
Since 0017 (v0.2.0) a held session waits in the one queue and nothing writes or reads the
table; this step runs once no process of a release before v0.2.0 runs (``jlg migrate head``
after the rollout: docs/operations.md, "Upgrading"). Whatever rows it still holds were written
by v0.1.0 and are read by no one: their sessions wait in the queue by their own rows.

Revision ID: 0018_drop_held_sessions
Revises: 0017_one_queue
Create Date: 2026-12-07
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018_drop_held_sessions"
down_revision: str | None = "0017_one_queue"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
phase: str = "contract"
completes: str = "0017_one_queue"
"""The expand step after which nothing uses the table."""


def upgrade() -> None:
    op.drop_table("jlg_held_session")


def downgrade() -> None:
    """The table again, empty (what it held is not restored)."""
    op.create_table(
        "jlg_held_session",
        sa.Column("program_session_id", sa.BigInteger(), primary_key=True, autoincrement=False),
        sa.Column("not_before", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_held_session_not_before", "jlg_held_session", ["not_before"])
