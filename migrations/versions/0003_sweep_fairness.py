"""Sweep fairness: an index per tier of the fallback sweep's candidates, expand-only.

The sweep takes SCHEDULED and stale IN_PROGRESS sessions first (oldest first), then FAILED
ones, fewest attempts first. Each tier is its own partial index, so neither tier's query
reads past the other's rows: any number of always-failing sessions costs the first tier
nothing, and the second reads only as many rows as it returns.

Revision ID: 0003_sweep_fairness
Revises: 0002_link_generation
Create Date: 2026-12-03
"""

from collections.abc import Sequence

from alembic import op

from migrations.host_index import create_concurrently

revision: str = "0003_sweep_fairness"
down_revision: str | None = "0002_link_generation"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
phase: str = "expand"

_TABLE = "hdb_program_session"
INDEXES = {
    "ix_psession_link_gen_fresh": (
        ["link_generation_at", "id"],
        "deleted_at IS NULL AND link_generation_status IN ('SCHEDULED', 'IN_PROGRESS')",
    ),
    "ix_psession_link_gen_failed": (
        ["link_generation_attempt", "link_generation_at", "id"],
        "deleted_at IS NULL AND link_generation_status = 'FAILED'",
    ),
}


def upgrade() -> None:
    # CONCURRENTLY: on a large brownfield table the build does not block the host's writes.
    for name, (columns, where) in INDEXES.items():
        create_concurrently(name, _TABLE, columns, where)


def downgrade() -> None:
    for name in INDEXES:
        op.drop_index(name, table_name=_TABLE)
