"""One shared view of the online-session service, expand-only on the project's own tables
(docs/design.md "The online-session service: one shared view").

``jlg_service_view``: one row per service, read and changed by every caller under a row lock:
the rate budget's next slot, the pause a ``Retry-After`` asked for, the breaker (unwell answers
in a row, down since when, the probe's hold, when it last changed and last healed). It replaces
``jlg_service_gate`` (a pause only), whose pause still holding is carried over.

Revision ID: 0011_service_view
Revises: 0010_guest
Create Date: 2026-12-05
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011_service_view"
down_revision: str | None = "0010_guest"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
phase: str = "expand"


def _moment(name: str) -> sa.Column:  # type: ignore[type-arg]
    return sa.Column(name, sa.DateTime(timezone=True), nullable=True)


def upgrade() -> None:
    op.create_table(
        "jlg_service_view",
        sa.Column("name", sa.String(64), primary_key=True),
        _moment("next_slot_at"),
        _moment("paused_until"),
        sa.Column("failures", sa.Integer(), nullable=False, server_default="0"),
        _moment("down_since"),
        _moment("probe_until"),
        _moment("changed_at"),
        _moment("healed_at"),
    )
    op.execute(
        "INSERT INTO jlg_service_view (name, paused_until)"
        " SELECT name, paused_until FROM jlg_service_gate WHERE paused_until > now()"
    )
    op.drop_table("jlg_service_gate")


def downgrade() -> None:
    op.create_table(
        "jlg_service_gate",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("paused_until", sa.DateTime(timezone=True), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
    )
    op.execute(
        "INSERT INTO jlg_service_gate (name, paused_until) SELECT name, paused_until"
        " FROM jlg_service_view WHERE paused_until IS NOT NULL"
    )
    op.drop_table("jlg_service_view")
