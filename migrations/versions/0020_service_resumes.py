"""Every resume kept, expand (issue 68): ``jlg_service_resume`` holds each operator's clear of a
service's view (``jlg service resume``): who, when, and the pause and breaker it cleared.
Before, the view's row kept only the last one, and a later resume overwrote who did the one
before. Like the other audit tables, append-only for every role but its owner (0016).

Expand: the previous release neither reads nor writes the table (its resume still writes the
view's ``resumed_at``/``resumed_by``, which this release writes too).

Revision ID: 0020_service_resumes
Revises: 0019_ready_turns
Create Date: 2026-12-08
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020_service_resumes"
down_revision: str | None = "0019_ready_turns"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
phase: str = "expand"

_TABLE = "jlg_service_resume"

APPEND_ONLY = f"""
DO $$
DECLARE r record;
BEGIN
  FOR r IN
    SELECT DISTINCT g.grantee
    FROM information_schema.role_table_grants AS g
    JOIN pg_namespace AS n ON n.nspname = g.table_schema
    JOIN pg_class AS c ON c.relnamespace = n.oid AND c.relname = g.table_name
    WHERE g.table_schema = current_schema() AND g.table_name = '{_TABLE}'
      AND g.grantee NOT IN (pg_get_userbyid(c.relowner), 'PUBLIC')
  LOOP
    EXECUTE format('REVOKE UPDATE, DELETE, TRUNCATE ON {_TABLE} FROM %I', r.grantee);
    -- A REVOKE by a role that does not own the table only warns: fail rather than stamp.
    IF EXISTS (
      SELECT 1 FROM information_schema.table_privileges AS p
      WHERE p.table_schema = current_schema() AND p.table_name = '{_TABLE}'
        AND p.grantee = r.grantee AND p.privilege_type IN ('UPDATE', 'DELETE', 'TRUNCATE')
    ) THEN
      RAISE EXCEPTION 'REVOKE on {_TABLE} from % had no effect: run jlg migrate as its owner',
        r.grantee;
    END IF;
  END LOOP;
END $$
"""


def upgrade() -> None:
    op.create_table(
        _TABLE,
        sa.Column("id", sa.BigInteger(), sa.Identity(), primary_key=True),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column(
            "resumed_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.Column("resumed_by", sa.String(64), nullable=False),
        sa.Column("paused_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("down_since", sa.DateTime(timezone=True), nullable=True),
        sa.Column("failures", sa.Integer(), nullable=False),
        if_not_exists=True,
    )
    op.create_index("ix_service_resume_name", _TABLE, ["name", "id"], if_not_exists=True)
    op.execute(APPEND_ONLY)


def downgrade() -> None:
    op.drop_table(_TABLE)
