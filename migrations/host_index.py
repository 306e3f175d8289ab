"""An index on a host table, built as a guest builds one (docs/design.md "A guest").

``CREATE INDEX CONCURRENTLY`` leaves the host's reads and writes running, but a build that
is interrupted (a cancel, a ``lock_timeout``, a lost connection) leaves an INVALID index
behind, which ``IF NOT EXISTS`` would then keep for ever and no query would use. So a leftover
invalid index of the same name is dropped first, also concurrently, and built again."""

import sqlalchemy as sa
from alembic import op


def create_concurrently(name: str, table: str, columns: list[str], where: str) -> None:
    """Build ``name`` on ``table`` without blocking the host's writes; run between migrations'
    transactions (an autocommit block), since CONCURRENTLY cannot run inside one."""
    with op.get_context().autocommit_block():
        if not op.get_context().as_sql and _invalid(name):
            op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
        op.create_index(
            name,
            table,
            columns,
            postgresql_where=sa.text(where),
            postgresql_concurrently=True,
            if_not_exists=True,
        )


def _invalid(name: str) -> bool:
    return bool(
        op.get_bind()
        .execute(
            sa.text(
                "SELECT NOT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
                " WHERE c.relname = :name AND pg_catalog.pg_table_is_visible(c.oid)"
            ),
            {"name": name},
        )
        .scalar()
    )
