"""The embedded registrar honours a cycle's idempotency key, expand-only.

``jlg_local_bulk_job.idempotency_key`` (unique where set): a second bulkRegister call for the
same cycle (``join-link-<id>@<time>``) answers the first call's job instead of starting
another, as the online-session service does with its ``Idempotency-Key`` header. The table
belongs to the standalone install (``0001_host_tables``); a brownfield install that adopted
past it has no such table and nothing to change.

Revision ID: 0007_idempotent_jobs
Revises: 0006_hung_parts
Create Date: 2026-12-04
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007_idempotent_jobs"
down_revision: str | None = "0006_hung_parts"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
phase: str = "expand"

TABLE = "jlg_local_bulk_job"


def _has_table() -> bool:
    """Offline (SQL written for a plan), what would run where the table exists."""
    return op.get_context().as_sql or sa.inspect(op.get_bind()).has_table(TABLE)


def upgrade() -> None:
    if not _has_table():
        return
    op.add_column(TABLE, sa.Column("idempotency_key", sa.String(200), nullable=True))
    op.create_index(
        "uq_local_bulk_job_idempotency_key",
        TABLE,
        ["idempotency_key"],
        unique=True,
        postgresql_where=sa.text("idempotency_key IS NOT NULL"),
    )


def downgrade() -> None:
    if not _has_table():
        return
    op.drop_index("uq_local_bulk_job_idempotency_key", table_name=TABLE)
    op.drop_column(TABLE, "idempotency_key")
