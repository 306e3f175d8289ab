"""Sessions the online-session service's shared view held, expand-only on the project's own
tables (docs/design.md "The online-session service: one shared view").

``jlg_held_session``: a session whose caller was told to wait (its slot of the rate budget
further than a caller waits, a pause, the service down) and left it without a claim, with when
it is due again. The watchdog launches it then, not when its grace after the session's time
would find it, and forgets it once launched. No reference to the host's table: a row whose
session is gone or generated is ignored and cleared.

Revision ID: 0012_held_sessions
Revises: 0011_service_view
Create Date: 2026-12-05
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012_held_sessions"
down_revision: str | None = "0011_service_view"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
phase: str = "expand"


def upgrade() -> None:
    op.create_table(
        "jlg_held_session",
        sa.Column("program_session_id", sa.BigInteger(), primary_key=True, autoincrement=False),
        sa.Column("not_before", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_held_session_not_before", "jlg_held_session", ["not_before"])


def downgrade() -> None:
    op.drop_table("jlg_held_session")
