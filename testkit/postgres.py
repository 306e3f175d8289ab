"""The one PostgreSQL kit of the tests and the benchmarks: which server to use, a throwaway
database on it, databases reused between tests, and a server of one's own to restart. Every
embedded server (this kit's and the local stack's) is started by
``devstack.postgres.embedded``."""

import json
import os
import signal
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from devstack.postgres import (
    create_database,
    drop_database,
    embedded,
    libpq_url,
    reachable,
    with_database,
)
from jlg_pipeline.adapters.database import normalize_url
from jlg_pipeline.migrate import migrate

LOCAL_SERVER = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
"""The machine's own server (trust auth), used when it answers."""
ROOT = Path(__file__).resolve().parents[1]


@contextmanager
def server_url(
    variable: str, embedded_dir: Path | None = None, *, prefer_embedded: bool = False
) -> Iterator[str]:
    """The admin URL of a running server: ``variable``'s value if set; else the machine's
    server when it answers (unless ``prefer_embedded``); else (given ``embedded_dir``) one
    started there, stopped afterwards."""
    explicit = os.environ.get(variable)
    if explicit:
        yield normalize_url(explicit)
        return
    if embedded_dir is None or (not prefer_embedded and reachable(LOCAL_SERVER)):
        yield LOCAL_SERVER
        return
    embedded_dir.mkdir(parents=True, exist_ok=True)
    server = embedded(embedded_dir, cleanup_mode="stop")
    try:
        yield normalize_url(server.get_uri())
    finally:
        server.cleanup()


def new_database_name(prefix: str) -> str:
    return f"{prefix}_{os.getpid()}_{uuid.uuid4().hex[:8]}"


@contextmanager
def scratch_database(admin_url: str, prefix: str, *, migrated: bool = True) -> Iterator[str]:
    """A new database on ``admin_url``'s server, migrated to head unless ``migrated`` is
    False; dropped afterwards."""
    name = new_database_name(prefix)
    url = create_database(admin_url, name)
    try:
        if migrated:
            migrate(url)
        yield url
    finally:
        drop_database(admin_url, name)


SYSTEM_SCHEMAS = "('pg_catalog', 'information_schema', 'pg_toast')"
USER_SCHEMAS = f"SELECT oid FROM pg_namespace WHERE nspname NOT IN {SYSTEM_SCHEMAS}"

FINGERPRINT = f"""
SELECT md5(string_agg(item, E'\\n' ORDER BY item)) FROM (
    SELECT 'database ' || concat_ws(' ', datacl::text, datconnlimit, datallowconn)
        FROM pg_database WHERE datname = current_database()
    UNION ALL SELECT 'setting ' || concat_ws(' ', setrole, setconfig::text) FROM pg_db_role_setting
        WHERE setdatabase = (SELECT oid FROM pg_database WHERE datname = current_database())
    UNION ALL SELECT 'schema ' || concat_ws(' ', nspname, nspowner, nspacl::text)
        FROM pg_namespace WHERE oid IN ({USER_SCHEMAS})
    UNION ALL SELECT 'relation ' || concat_ws(' ', oid::regclass, relkind, relowner,
            relacl::text, relrowsecurity, relforcerowsecurity, reloptions::text, relpersistence)
        FROM pg_class WHERE relnamespace IN ({USER_SCHEMAS})
    UNION ALL SELECT 'column ' || concat_ws(' ', a.attrelid::regclass, a.attnum, a.attname,
            format_type(a.atttypid, a.atttypmod), a.attnotnull, a.attacl::text,
            pg_get_expr(d.adbin, d.adrelid))
        FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
        LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
        WHERE c.relnamespace IN ({USER_SCHEMAS}) AND a.attnum > 0 AND NOT a.attisdropped
    UNION ALL SELECT 'constraint '
            || concat_ws(' ', conrelid::regclass, conname, pg_get_constraintdef(oid))
        FROM pg_constraint WHERE connamespace IN ({USER_SCHEMAS})
    UNION ALL SELECT 'index ' || pg_get_indexdef(indexrelid) FROM pg_index
        WHERE indrelid IN (SELECT oid FROM pg_class WHERE relnamespace IN ({USER_SCHEMAS}))
    UNION ALL SELECT 'trigger ' || concat_ws(' ', tgenabled, pg_get_triggerdef(oid)) FROM pg_trigger
        WHERE NOT tgisinternal
    UNION ALL SELECT 'policy ' || concat_ws(' ', polrelid::regclass, polname, polcmd,
            polroles::text, pg_get_expr(polqual, polrelid), pg_get_expr(polwithcheck, polrelid))
        FROM pg_policy
    UNION ALL SELECT 'rule ' || definition FROM pg_rules WHERE schemaname <> 'pg_catalog'
    UNION ALL SELECT 'view ' || concat_ws(' ', oid::regclass, pg_get_viewdef(oid)) FROM pg_class
        WHERE relkind IN ('v', 'm') AND relnamespace IN ({USER_SCHEMAS})
    UNION ALL SELECT 'routine ' || concat_ws(' ', oid::regprocedure, proowner, proacl::text,
            md5(prosrc), proconfig::text, prosecdef)
        FROM pg_proc WHERE pronamespace IN ({USER_SCHEMAS})
    UNION ALL SELECT 'type ' || concat_ws(' ', oid::regtype, typowner, typacl::text)
        FROM pg_type WHERE typnamespace IN ({USER_SCHEMAS}) AND typrelid = 0
    UNION ALL SELECT 'label ' || concat_ws(' ', enumtypid::regtype, enumlabel) FROM pg_enum
    UNION ALL SELECT 'extension ' || concat_ws(' ', extname, extversion) FROM pg_extension
    UNION ALL SELECT 'event trigger ' || concat_ws(' ', evtname, evtenabled) FROM pg_event_trigger
    UNION ALL SELECT 'default acl ' || concat_ws(' ', defaclrole, defaclacl::text)
        FROM pg_default_acl
    UNION ALL SELECT 'sequence ' || concat_ws(' ', schemaname, sequencename, last_value)
        FROM pg_sequences
    UNION ALL SELECT 'prepared ' || gid FROM pg_prepared_xacts
        WHERE database = current_database()
    UNION ALL SELECT 'other session' FROM pg_stat_activity
        WHERE datname = current_database() AND pid <> pg_backend_pid()
) AS everything(item)
"""
"""What a test may change in a database beyond its rows: definitions, owners, grants, settings,
sequences, prepared transactions, and other sessions still connected. Equal to the template's
(after its rows are emptied) means indistinguishable from a new clone."""

TABLES = f"""
SELECT oid::regclass::text FROM pg_class
WHERE relkind IN ('r', 'p') AND relnamespace IN ({USER_SCHEMAS})
"""

SEQUENCES = f"""
SELECT coalesce(jsonb_object_agg(format('%I.%I', schemaname, sequencename), last_value), '{{}}')
FROM pg_sequences WHERE schemaname NOT IN {SYSTEM_SCHEMAS}
"""
"""Where each sequence stands: its last value, or null if none was taken yet."""

RESTORE_SEQUENCES = f"""
SELECT setval(s.name, coalesce(t.value::bigint, s.start_value), t.value IS NOT NULL)
FROM (SELECT format('%%I.%%I', schemaname, sequencename) AS name, start_value, last_value
      FROM pg_sequences WHERE schemaname NOT IN {SYSTEM_SCHEMAS}) AS s
LEFT JOIN jsonb_each_text(%s::jsonb) AS t(name, value) ON t.name = s.name
WHERE s.last_value IS DISTINCT FROM t.value::bigint
"""
"""Every sequence back where the template's stands (given as ``SEQUENCES`` read it there): at
its start, or past the template's own seed rows (Dagster's ``secondary_indexes``)."""


class ReusedDatabases:
    """Databases cloned from ``template`` and lent to one holder at a time, emptied between
    holders instead of dropped and cloned again: on 2 cores a clone costs 0.2-0.4 s (PostgreSQL
    15 copies the whole template, catalogs included), a reset ~45 ms, and most of
    the suite's 800 tests take a database. A database is lent again only if, once its rows are
    gone, its fingerprint (``FINGERPRINT``) and its seed rows (the template's, such as
    ``alembic_version``) are the template's; otherwise (a test altered the schema, a grant or a
    setting, or left a session behind) it is dropped, so no holder sees what an earlier one did.
    """

    def __init__(self, admin_url: str, template: str) -> None:
        self._admin_url = admin_url
        self._template = template
        self._idle: list[str] = []
        self._seeds: dict[str, str] = {}
        self._sequences = "{}"
        self._expected = ""

    @contextmanager
    def lend(self) -> Iterator[str]:
        name = self._idle.pop() if self._idle else self._clone()
        try:
            yield with_database(self._admin_url, name)
        finally:
            if self._reset(name):
                self._idle.append(name)
            else:
                drop_database(self._admin_url, name)

    def close(self) -> None:
        while self._idle:
            drop_database(self._admin_url, self._idle.pop())

    def _clone(self) -> str:
        name = new_database_name("jlg_test")
        create_database(self._admin_url, name, template=self._template)
        if not self._expected:
            with self._connect(name) as conn:
                digests = {table: _rows_digest(conn, table) for table in _tables(conn)}
                self._seeds = {table: d for table, d in digests.items() if d is not None}
                self._sequences = _sequences(conn)
                self._expected = _fingerprint(conn)
        return name

    def _reset(self, name: str) -> bool:
        """Empty ``name`` for its next holder; False if it cannot be made a new clone's equal."""
        try:
            with self._connect(name) as conn:
                # Waits up to 5 s for each to exit (and let go of its locks).
                conn.execute(
                    "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
                conn.execute("SET lock_timeout = '5s'")
                # Only the tables holding rows: a TRUNCATE makes new files for each table and
                # index it names (60 ms for all fourteen), and a test fills two or three.
                held = _holding_rows([t for t in _tables(conn) if t not in self._seeds], conn)
                if held:
                    conn.execute(f"TRUNCATE {', '.join(held)} CASCADE")
                conn.execute(RESTORE_SEQUENCES, (self._sequences,))
                seeds = {table: _rows_digest(conn, table) for table in self._seeds}
                return seeds == self._seeds and _fingerprint(conn) == self._expected
        except psycopg.Error:
            return False

    def _connect(self, name: str) -> psycopg.Connection[Any]:
        url = libpq_url(with_database(self._admin_url, name))
        return psycopg.connect(url, autocommit=True)


def _tables(conn: psycopg.Connection[Any]) -> list[str]:
    return [str(table) for (table,) in conn.execute(TABLES)]


def _holding_rows(tables: list[str], conn: psycopg.Connection[Any]) -> list[str]:
    if not tables:
        return []
    query = " UNION ALL ".join(f"SELECT %s WHERE EXISTS (SELECT FROM {t})" for t in tables)
    return [str(table) for (table,) in conn.execute(query, tables)]


def _rows_digest(conn: psycopg.Connection[Any], table: str) -> str | None:
    """A digest of ``table``'s rows; None when it has none."""
    row = conn.execute(
        f"SELECT md5(string_agg(t::text, E'\\n' ORDER BY t::text)) FROM {table} AS t"
    ).fetchone()
    return None if row is None or row[0] is None else str(row[0])


def _sequences(conn: psycopg.Connection[Any]) -> str:
    row = conn.execute(SEQUENCES).fetchone()
    assert row is not None
    return json.dumps(row[0])


def _fingerprint(conn: psycopg.Connection[Any]) -> str:
    row = conn.execute(FINGERPRINT).fetchone()
    assert row is not None
    return str(row[0])


@dataclass(frozen=True)
class OwnServer:
    """A PostgreSQL only its holder uses, so it may be restarted under the system."""

    url: str
    server: Any

    def restart(self) -> None:
        """Stop the server as ``pg_ctl -m fast`` does (SIGINT to the postmaster: clients are
        cut off, nothing is lost) and start it again on the same data."""
        os.kill(self.server.get_pid(), signal.SIGINT)
        lock = Path(self.server.pgdata) / "postmaster.pid"  # removed by a clean shutdown
        deadline = time.monotonic() + 60
        while lock.exists():
            if time.monotonic() > deadline:
                raise TimeoutError("PostgreSQL did not stop within 60 s")
            time.sleep(0.1)
        self.server.ensure_postgres_running()


@contextmanager
def own_server() -> Iterator[OwnServer]:
    """A server of one's own under ``.pgdata/`` in the checkout (not ``.data/``: see
    ``DEV_DATA_DIR``); stopped and deleted after."""
    (ROOT / ".pgdata").mkdir(exist_ok=True)
    data = Path(tempfile.mkdtemp(prefix="own-", dir=ROOT / ".pgdata"))
    server = embedded(data, cleanup_mode="delete")
    try:
        yield OwnServer(normalize_url(server.get_uri()), server)
    finally:
        server.cleanup()
