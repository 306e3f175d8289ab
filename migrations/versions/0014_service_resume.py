"""Who cleared the online-session service's shared view, expand-only on the project's own
tables (docs/design.md "Trust boundaries", "No single answer").

``jlg_service_view.resumed_at`` / ``resumed_by``: when an operator last cleared a pause or an
open breaker with ``jlg service resume``, and who. Two nullable columns: the previous release
reads and writes the row by name and never sees them.

Revision ID: 0014_service_resume
Revises: 0013_programme_operations
Create Date: 2026-12-06
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014_service_resume"
down_revision: str | None = "0013_programme_operations"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
phase: str = "expand"


def upgrade() -> None:
    op.add_column(
        "jlg_service_view", sa.Column("resumed_at", sa.DateTime(timezone=True), nullable=True)
    )
    op.add_column("jlg_service_view", sa.Column("resumed_by", sa.String(64), nullable=True))


def downgrade() -> None:
    op.drop_column("jlg_service_view", "resumed_by")
    op.drop_column("jlg_service_view", "resumed_at")
