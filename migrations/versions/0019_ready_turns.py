"""The programmes whose turn has come, kept apart, expand (docs/design.md "Nothing stops the
queue"): ``jlg_programme_turn.ready`` says a programme's turn has come (its ``next_due_at`` is
past), so the pick reads the 64 served least recently through one index in that order
(``ix_programme_turn_ready``) instead of sorting every programme with work due (2.5 ms of a
claim at 5,000 such programmes); the ones whose time is still ahead are kept by that time
(``ix_programme_turn_ahead``). ``ix_programme_turn_next_due`` goes: nothing reads by the time
alone any more.

Expand: the previous release neither reads nor writes ``ready`` (its rows default to not
ready, and the pick takes a not-ready programme whose time has come as well); without
``ix_programme_turn_next_due`` its own pick reads the small table whole.

Revision ID: 0019_ready_turns
Revises: 0018_drop_held_sessions
Create Date: 2026-12-07
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019_ready_turns"
down_revision: str | None = "0018_drop_held_sessions"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
phase: str = "expand"

_TABLE = "jlg_programme_turn"


def upgrade() -> None:
    op.add_column(
        _TABLE,
        sa.Column("ready", sa.Boolean(), nullable=False, server_default=sa.false()),
        if_not_exists=True,
    )
    op.create_index(
        "ix_programme_turn_ready",
        _TABLE,
        [sa.text("served NULLS FIRST"), "program_id"],
        postgresql_where=sa.text("ready"),
        if_not_exists=True,
    )
    op.create_index(
        "ix_programme_turn_ahead",
        _TABLE,
        ["next_due_at"],
        postgresql_where=sa.text("NOT ready"),
        if_not_exists=True,
    )
    op.drop_index("ix_programme_turn_next_due", table_name=_TABLE, if_exists=True)


def downgrade() -> None:
    op.create_index("ix_programme_turn_next_due", _TABLE, ["next_due_at"])
    op.drop_index("ix_programme_turn_ahead", table_name=_TABLE)
    op.drop_index("ix_programme_turn_ready", table_name=_TABLE)
    op.drop_column(_TABLE, "ready")
