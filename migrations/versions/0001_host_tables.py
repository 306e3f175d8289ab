"""Minimal host tables for a standalone install, and the local registrar's own tables.

A brownfield database that already has hdb_program_session and hdb_online_session does
not run this revision: it is stamped past it (``jlg migrate --adopt``, see the README).

Revision ID: 0001_host_tables
Revises:
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001_host_tables"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
phase: str = "expand"

_now = sa.text("now()")


def upgrade() -> None:
    op.create_table(
        "hdb_program_session",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        sa.Column("program_id", sa.BigInteger, nullable=False),
        sa.Column("name", sa.String(255), nullable=True),
        sa.Column("starts_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("hdb_online_session", sa.BigInteger, nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=_now),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False, server_default=_now),
        sa.Column("updated_by", sa.Integer, nullable=True),
        sa.Column("deleted_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_table(
        "hdb_online_session",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        sa.Column("program_id", sa.BigInteger, nullable=False),
        sa.Column(
            "program_session_id",
            sa.BigInteger,
            sa.ForeignKey("hdb_program_session.id", name="fk_online_session_program_session"),
            nullable=False,
        ),
        sa.Column("template", sa.String(255), nullable=False),
        sa.Column("provider", sa.String(32), nullable=True),
        sa.Column("meeting_id", sa.String(255), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=_now),
        sa.UniqueConstraint("program_id", "template", name="uq_online_session_program_id_template"),
    )
    op.create_foreign_key(
        "fk_program_session_online_session",
        "hdb_program_session",
        "hdb_online_session",
        ["hdb_online_session"],
        ["id"],
    )
    op.create_table(
        "jlg_local_registration",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        sa.Column("program_id", sa.BigInteger, nullable=False),
        sa.Column("user_id", sa.BigInteger, nullable=False),
        sa.Column("role", sa.String(64), nullable=False, server_default="attendee"),
        sa.Column("status", sa.String(20), nullable=False, server_default="ACTIVE"),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=_now),
        sa.CheckConstraint(
            "status IN ('ACTIVE', 'WITHDRAWN')", name="ck_local_registration_status"
        ),
        sa.UniqueConstraint(
            "program_id", "user_id", "role", name="uq_local_registration_program_user_role"
        ),
    )
    op.create_index(
        "ix_local_registration_program_role",
        "jlg_local_registration",
        ["program_id", "role", "id"],
    )
    op.create_table(
        "jlg_local_bulk_job",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("program_session_id", sa.BigInteger, nullable=False),
        sa.Column("role", sa.String(64), nullable=True),
        sa.Column("batch_size", sa.Integer, nullable=False),
        sa.Column("actor_user_id", sa.Integer, nullable=True),
        sa.Column("total", sa.Integer, nullable=False, server_default="0"),
        sa.Column("created", sa.Integer, nullable=False, server_default="0"),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False, server_default=_now),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index("ix_local_bulk_job_session", "jlg_local_bulk_job", ["program_session_id"])
    op.create_table(
        "jlg_local_join_link",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        sa.Column(
            "registration_id",
            sa.BigInteger,
            sa.ForeignKey("jlg_local_registration.id", name="fk_local_join_link_registration"),
            nullable=False,
        ),
        sa.Column("program_session_id", sa.BigInteger, nullable=False),
        sa.Column("join_url", sa.Text, nullable=False),
        sa.Column("bulk_job_id", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=_now),
        sa.UniqueConstraint(
            "registration_id", "program_session_id", name="uq_local_join_link_registration_session"
        ),
    )


def downgrade() -> None:
    op.drop_table("jlg_local_join_link")
    op.drop_table("jlg_local_bulk_job")
    op.drop_table("jlg_local_registration")
    op.drop_constraint(
        "fk_program_session_online_session", "hdb_program_session", type_="foreignkey"
    )
    op.drop_table("hdb_online_session")
    op.drop_table("hdb_program_session")
