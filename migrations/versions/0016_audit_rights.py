"""The audit tables are append-only for everyone but their owner, and ``alembic_version`` is the
migrating role's alone (docs/design.md "Trust boundaries"; docs/operations.md "Database roles").

The kit's default privileges give the application role every row right on the project's tables.
Here, as their owner, every other role's UPDATE, DELETE and TRUNCATE on the intent history
(``jlg_link_generation_change``) and the programme actions' record (``jlg_programme_operation``,
whose ``finished_at`` alone may still be stamped) is revoked, and every write of
``alembic_version``. A standalone install, where one role owns everything, changes nothing.
Expand: no code of the previous release writes those rows other than by INSERT.

Revision ID: 0016_audit_rights
Revises: 0015_readable_times
Create Date: 2026-12-06
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0016_audit_rights"
down_revision: str | None = "0015_readable_times"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
phase: str = "expand"

APPEND_ONLY = """
DO $$
DECLARE r record;
BEGIN
  FOR r IN
    SELECT DISTINCT g.table_name, g.grantee
    FROM information_schema.role_table_grants AS g
    JOIN pg_namespace AS n ON n.nspname = g.table_schema
    JOIN pg_class AS c ON c.relnamespace = n.oid AND c.relname = g.table_name
    WHERE g.table_schema = current_schema()
      AND g.table_name IN
        ('jlg_link_generation_change', 'jlg_programme_operation', 'alembic_version')
      AND g.grantee NOT IN (pg_get_userbyid(c.relowner), 'PUBLIC')
  LOOP
    IF r.table_name = 'alembic_version' THEN
      EXECUTE format('REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON %I FROM %I',
                     r.table_name, r.grantee);
    ELSE
      EXECUTE format('REVOKE UPDATE, DELETE, TRUNCATE ON %I FROM %I', r.table_name, r.grantee);
      IF r.table_name = 'jlg_programme_operation' THEN
        EXECUTE format('GRANT UPDATE (finished_at) ON %I TO %I', r.table_name, r.grantee);
      END IF;
    END IF;
    -- A REVOKE by a role that does not own the table only warns: fail rather than stamp.
    IF EXISTS (
      SELECT 1 FROM information_schema.table_privileges AS p
      WHERE p.table_schema = current_schema() AND p.table_name = r.table_name
        AND p.grantee = r.grantee AND p.privilege_type IN ('DELETE', 'TRUNCATE')
    ) THEN
      RAISE EXCEPTION 'REVOKE on % from % had no effect: run jlg migrate as the tables'' owner',
        r.table_name, r.grantee;
    END IF;
  END LOOP;
END $$
"""


def upgrade() -> None:
    op.execute(APPEND_ONLY)


def downgrade() -> None:
    """The rights come back with the kit's default privileges for tables made anew; revoked
    ones stay revoked (a narrower right is never a fault)."""
