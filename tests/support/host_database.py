"""A database as an adopter has it: the host application's tables owned by the host's own
role, which has no right on anything of ours (docs/design.md "A guest"), and the roles and
writes the tests hold the migrations and the application to.

Roles are the whole server's: each gets a unique name and is dropped with its database."""

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from sqlalchemy import Connection, Engine, text

from devstack.postgres import admin_execute, create_database, drop_database
from jlg_pipeline.adapters.database import create_engine
from testkit.postgres import new_database_name

HOST_TABLES_DDL = """
CREATE TABLE hdb_program_session (
    id bigserial PRIMARY KEY,
    program_id bigint NOT NULL,
    title text,
    name text,
    hdb_online_session bigint,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    updated_by int,
    deleted_at timestamptz
);
CREATE TABLE hdb_online_session (
    id bigserial PRIMARY KEY,
    program_id bigint NOT NULL,
    program_session_id bigint NOT NULL REFERENCES hdb_program_session (id),
    template varchar(100) NOT NULL,
    CONSTRAINT uq_online_session_program_id_template UNIQUE (program_id, template)
);
INSERT INTO hdb_program_session (program_id, title) VALUES (1, 'existing'), (1, 'other')
"""
"""A brownfield host's tables: the columns the module needs and one of its own (``title``)."""

DECOY_SCHEMA = "host_private"
"""A schema of the host's, first on its search path, holding tables named like ours: nothing
of ours may ever write there."""


@dataclass(frozen=True)
class HostDatabase:
    url: str
    """The superuser's URL of this database (the migrations run as it)."""
    engine: Engine
    role: str
    """Owns the host tables and the decoy schema; no right on anything of ours."""


@contextmanager
def host_database(admin_url: str) -> Iterator[HostDatabase]:
    name = new_database_name("jlg_guest")
    url = create_database(admin_url, name)
    role = f"jlg_host_{uuid.uuid4().hex[:8]}"
    engine = create_engine(url)
    try:
        admin_execute(admin_url, f"CREATE ROLE {role} NOLOGIN")
        with engine.begin() as conn:
            conn.execute(text(f"GRANT USAGE, CREATE ON SCHEMA public TO {role}"))
            conn.execute(text(f"CREATE SCHEMA {DECOY_SCHEMA} AUTHORIZATION {role}"))
            conn.execute(text(f"SET LOCAL ROLE {role}"))
            for statement in HOST_TABLES_DDL.strip().split(";\n"):
                conn.execute(text(statement))
            conn.execute(
                text(
                    f"CREATE TABLE {DECOY_SCHEMA}.jlg_metric_count"
                    " (id bigserial, metric text, label text, delta bigint)"
                )
            )
        yield HostDatabase(url, engine, role)
    finally:
        engine.dispose()
        drop_database(admin_url, name)
        admin_execute(admin_url, f"DROP ROLE IF EXISTS {role}")


@contextmanager
def acting_as(engine: Engine, role: str, search_path: str = "public") -> Iterator[Connection]:
    """A transaction run as ``role`` with ``search_path``, committed when the block ends."""
    with engine.begin() as conn:
        conn.execute(text(f"SET LOCAL ROLE {role}"))
        conn.execute(text(f"SET LOCAL search_path = {search_path}"))
        yield conn


def host_writes(host: HostDatabase, search_path: str = "public") -> None:
    """What the host application does to its own rows with its own role: insert, update,
    soft-delete, hard-delete, and a TRUNCATE (rolled back). Raises what PostgreSQL raises."""
    with acting_as(host.engine, host.role, search_path) as conn:
        sid = conn.execute(
            text(
                "INSERT INTO hdb_program_session (program_id, title) VALUES (7, 'new') RETURNING id"
            )
        ).scalar_one()
        conn.execute(
            text(
                "UPDATE hdb_program_session SET title = 'renamed', updated_at = now()"
                " WHERE id = :id"
            ),
            {"id": sid},
        )
        conn.execute(
            text("UPDATE hdb_program_session SET deleted_at = now() WHERE id = :id"), {"id": sid}
        )
        gone = conn.execute(
            text("INSERT INTO hdb_program_session (program_id) VALUES (7) RETURNING id")
        ).scalar_one()
        conn.execute(text("DELETE FROM hdb_program_session WHERE id = :id"), {"id": gone})
    with host.engine.connect() as conn, conn.begin() as transaction:
        conn.execute(text(f"SET LOCAL ROLE {host.role}"))
        conn.execute(text("TRUNCATE hdb_program_session, hdb_online_session"))
        transaction.rollback()


def decoy_rows(host: HostDatabase) -> int:
    with host.engine.connect() as conn:
        return int(
            conn.execute(text(f"SELECT count(*) FROM {DECOY_SCHEMA}.jlg_metric_count")).scalar_one()
        )
