"""Retries in time, and a pause the whole service sees, expand-only.

- ``hdb_program_session.link_generation_retry_at``: set when a session is marked FAILED by a
  retryable failure within its cycle's budget: the watchdog re-attempts it from then on
  (the partial index ``ix_psession_link_gen_retry`` serves its query). NULL for a
  non-retryable failure: the sweep and a person take those.
- ``jlg_service_gate``: a pause the online-session service asked for (``Retry-After``), seen
  by every run before it calls, so a throttling service is not called once per session.

Revision ID: 0008_retries_in_time
Revises: 0007_idempotent_jobs
Create Date: 2026-12-04
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from migrations.host_index import create_concurrently

revision: str = "0008_retries_in_time"
down_revision: str | None = "0007_idempotent_jobs"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
phase: str = "expand"

_TABLE = "hdb_program_session"
_INDEX = "ix_psession_link_gen_retry"


def upgrade() -> None:
    # IF NOT EXISTS: the index build below runs after these commit, so a run cut off there is
    # run again from the top.
    op.add_column(
        _TABLE,
        sa.Column("link_generation_retry_at", sa.DateTime(timezone=True), nullable=True),
        if_not_exists=True,
    )
    op.create_table(
        "jlg_service_gate",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("paused_until", sa.DateTime(timezone=True), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        if_not_exists=True,
    )
    # CONCURRENTLY: on a large brownfield table the build does not block the host's writes.
    create_concurrently(
        _INDEX,
        _TABLE,
        ["link_generation_retry_at", "id"],
        "deleted_at IS NULL AND link_generation_status = 'FAILED' "
        "AND link_generation_retry_at IS NOT NULL",
    )


def downgrade() -> None:
    op.drop_index(_INDEX, table_name=_TABLE)
    op.drop_table("jlg_service_gate")
    op.drop_column(_TABLE, "link_generation_retry_at")
