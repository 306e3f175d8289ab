"""Link generation on hdb_program_session: the TRD's Data model, expand-only.

The TRD's two columns (link_generation_at, link_generation_status with a CHECK on its five
values), the partial index for the fallback sweep, and three columns the design adds:
the attempt number that fences a reclaimed run, the last error, and the bulk job id.
Every new column is nullable or defaulted, so existing rows become NOT_SCHEDULED.

Revision ID: 0002_link_generation
Revises: 0001_host_tables
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from migrations.host_index import create_concurrently

revision: str = "0002_link_generation"
down_revision: str | None = "0001_host_tables"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
phase: str = "expand"

_TABLE = "hdb_program_session"
_CHECK = "ck_psession_link_gen_status"
_STATUSES = "'NOT_SCHEDULED', 'SCHEDULED', 'IN_PROGRESS', 'COMPLETED', 'FAILED'"


def upgrade() -> None:
    # IF NOT EXISTS and the check's guard: the validation and the index build below run after
    # these commit, so a run cut off there is run again from the top.
    op.add_column(
        _TABLE,
        sa.Column("link_generation_at", sa.DateTime(timezone=True), nullable=True),
        if_not_exists=True,
    )
    op.add_column(
        _TABLE,
        sa.Column(
            "link_generation_status",
            sa.String(20),
            nullable=False,
            server_default="NOT_SCHEDULED",
        ),
        if_not_exists=True,
    )
    op.add_column(
        _TABLE,
        sa.Column("link_generation_attempt", sa.Integer, nullable=False, server_default="0"),
        if_not_exists=True,
    )
    op.add_column(
        _TABLE, sa.Column("link_generation_last_error", sa.Text, nullable=True), if_not_exists=True
    )
    op.add_column(
        _TABLE,
        sa.Column("link_generation_job_id", sa.String(255), nullable=True),
        if_not_exists=True,
    )
    # NOT VALID, committed, then VALIDATE in its own transaction, and the index CONCURRENTLY:
    # on a large brownfield table neither blocks the host application's writes for the
    # length of a scan (validated in the same transaction, the scan ran under the columns'
    # ACCESS EXCLUSIVE lock: 1.2 s at 10,000,000 rows).
    if op.get_context().as_sql or not _has_check():
        op.create_check_constraint(
            _CHECK, _TABLE, f"link_generation_status IN ({_STATUSES})", postgresql_not_valid=True
        )
    with op.get_context().autocommit_block():
        op.execute(f"ALTER TABLE {_TABLE} VALIDATE CONSTRAINT {_CHECK}")
    create_concurrently(
        "ix_psession_link_gen_due",
        _TABLE,
        ["link_generation_at"],
        "deleted_at IS NULL AND link_generation_status <> 'COMPLETED'",
    )


def _has_check() -> bool:
    """Whether a cut-off run already added the check, on the host table this path names."""
    found = op.get_bind().execute(
        sa.text(
            "SELECT 1 FROM pg_constraint WHERE conname = :name AND conrelid = to_regclass(:table)"
        ),
        {"name": _CHECK, "table": _TABLE},
    )
    return found.first() is not None


def downgrade() -> None:
    op.drop_index("ix_psession_link_gen_due", table_name=_TABLE)
    op.drop_constraint(_CHECK, _TABLE, type_="check")
    for column in (
        "link_generation_job_id",
        "link_generation_last_error",
        "link_generation_attempt",
        "link_generation_status",
        "link_generation_at",
    ):
        op.drop_column(_TABLE, column)
