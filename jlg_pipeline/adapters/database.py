"""Engine creation and the translation of driver errors at the boundary."""

import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

import psycopg
import sqlalchemy
from psycopg.rows import namedtuple_row
from sqlalchemy import ColumnElement, Connection, Engine, event, literal_column, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import (
    ArgumentError,
    DataError,
    DBAPIError,
    DisconnectionError,
    IntegrityError,
    InterfaceError,
    OperationalError,
    PendingRollbackError,
)
from sqlalchemy.exc import TimeoutError as PoolTimeout

from jlg_pipeline.adapters.socket_deadlines import DEADLINES
from jlg_pipeline.domain.errors import ConfigError, DatabaseRefused, DatabaseUnavailable

APP_DRIVER = "postgresql+psycopg"


def normalize_url(url: str) -> str:
    """The application's URL with psycopg 3 as its driver (``postgresql://`` means the same)."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        # Its text repeats the URL, password and all.
        raise ConfigError("JLG_DATABASE_URL is not a database URL") from None
    if parsed.drivername not in ("postgresql", "postgres", APP_DRIVER):
        raise ConfigError(
            f"JLG_DATABASE_URL must be a PostgreSQL URL (postgresql+psycopg://…), "
            f"got driver {parsed.drivername!r}"
        )
    return parsed.set(drivername=APP_DRIVER).render_as_string(hide_password=False)


DEFAULT_POOL_TIMEOUT_S = 30.0
IDLE_IN_TRANSACTION_S = 10
"""The server ends a session idle inside a transaction this long. None of ours idles between
two statements (no call to anything else is made inside one), so such a session is one whose
client vanished mid-transaction (a statement answered into a failover, the client gone before
its COMMIT): without this it would hold its row locks until TCP noticed, and every later
write of that session would wait out its own bound behind it. PostgreSQL's own setting, not a
mechanism of ours (test_a_transaction_whose_client_vanished_frees_its_row_within_the_idle_bound
fails without it)."""


@dataclass(frozen=True)
class Bounds:
    """How long a database call may take before it fails (DatabaseUnavailable), whatever the
    server does: a PostgreSQL that stops answering (a frozen host, a failover, a partition)
    never holds a caller for longer. ``hold_s`` bounds the whole time a connection is checked
    out of the pool (every statement and the commit of one transaction); None for callers
    that run long statements on purpose (migrations). Not ``statement_timeout`` or
    ``lock_timeout``: the server keeps those, and the failure this exists for is a server that
    has stopped answering (test_a_silent_database_fails_each_call_within_its_bound_and_heals
    hangs without it)."""

    connect_s: int = 2
    """libpq's connect_timeout (2 s is its least): connecting and the server's greeting."""
    ping_s: float = 1.5
    """The check a pooled connection passes before it is handed out."""
    hold_s: float | None = 30.0


REQUEST_BOUNDS = Bounds(hold_s=4.0)
"""The admin API's: with a connection's check and a reconnect, an answer (503 at worst)
comes within 6 s."""
TCP_KEEPALIVES: dict[str, Any] = {
    "keepalives": 1,
    "keepalives_idle": 5,
    "keepalives_interval": 2,
    "keepalives_count": 3,
    # Unacknowledged data (a host that went away) fails the connection after this long.
    "tcp_user_timeout": 10_000,
}
"""libpq's TCP settings: an idle pooled connection to a host that died is found dead in
about 11 s instead of TCP's 15 minutes."""


INSTANCE_STORAGE_PARAMS: dict[str, str] = {
    "connect_timeout": "5",
    **{name: str(value) for name, value in TCP_KEEPALIVES.items()},
}
"""The same bounds for Dagster's own storage (dagster-postgres drives psycopg2, so they go
into ``DAGSTER_POSTGRES_URL``'s query, or the chart's ``postgresql.postgresqlParams``): a
connect, and a connection to a host that went away, fail within seconds. dagster-postgres has
no deadline of its own for a server that answers nothing; run monitoring and the daemon's
heartbeat cover that."""


def instance_storage_url(url: str) -> str:
    """``url`` as Dagster's instance storage takes it: psycopg2, with
    :data:`INSTANCE_STORAGE_PARAMS` unless the URL sets them itself."""
    parsed = make_url(url)
    query = {**INSTANCE_STORAGE_PARAMS, **parsed.query}
    return parsed.set(drivername="postgresql+psycopg2", query=query).render_as_string(
        hide_password=False
    )


PREPARED_ONLY_WHEN_ASKED = 2**31 - 1
"""psycopg's ``prepare_threshold``: no statement is prepared on the server because it ran
often. PostgreSQL then plans a prepared statement once for all its values (a generic plan),
and one whose status is a value cannot be shown to fit a partial index: the watchdog's
attendance took 2.3-3.5 s at its 11th call at 10,000,000 sessions. The claims, every value
of which but their arguments is written into the SQL, ask for it (:func:`fetch_prepared`)."""


def create_engine(
    url: str,
    *,
    pool_size: int = 5,
    max_overflow: int = 5,
    pool_timeout_s: float = DEFAULT_POOL_TIMEOUT_S,
    bounds: Bounds = Bounds(),
    read_only: bool = False,
) -> Engine:
    """An engine whose every call is bounded (``bounds``), that checks a pooled connection
    before handing it out (a restarted PostgreSQL costs one failed check, not a pool of dead
    connections). Waiting longer than ``pool_timeout_s`` for a pooled connection is
    DatabaseUnavailable (a 503). ``read_only``: every transaction is read-only, so a write
    through it fails whatever the role may do (for a database that is not ours)."""
    options = ["-c timezone=UTC"]
    if bounds.hold_s is not None:
        options.append(f"-c idle_in_transaction_session_timeout={IDLE_IN_TRANSACTION_S * 1000}")
    if read_only:
        options.append("-c default_transaction_read_only=on")
    engine = sqlalchemy.create_engine(
        normalize_url(url),
        pool_size=pool_size,
        max_overflow=max_overflow,
        pool_timeout=pool_timeout_s,
        connect_args={
            "connect_timeout": bounds.connect_s,
            **TCP_KEEPALIVES,
            "application_name": "jlg-pipeline",
            "options": " ".join(options),
            "prepare_threshold": PREPARED_ONLY_WHEN_ASKED,
        },
    )
    breaker = _Breaker()
    event.listen(engine, "do_connect", partial(_connect_unless_known_down, breaker))
    event.listen(engine, "connect", partial(_connected, bounds))
    event.listen(engine, "checkout", partial(_checked_out, bounds))
    for released in ("checkin", "close", "close_detached", "detach", "invalidate"):
        event.listen(engine, released, _released)
    return engine


class _Breaker:
    """Fails connections fast while the database is known to be down: after a failed
    connect, for ``COOLDOWN_S``, a new connection is refused at once instead of
    each caller waiting out its own timeout (so a burst of requests against a silent
    database is answered 503 within the admin's bound, not queued behind one another). Then
    one caller at a time probes, and the first success closes it. Without it,
    test_the_served_api_answers_within_6_s_while_the_database_is_silent fails (tried)."""

    COOLDOWN_S = 1.0

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._closed_from = 0.0
        """The monotonic time from which a connect may be tried."""

    def try_connect(self, probe_s: float) -> bool:
        """Whether a connect may go ahead now; while one probes, the others may not."""
        with self._lock:
            now = time.monotonic()
            if now < self._closed_from:
                return False
            if self._closed_from:
                self._closed_from = now + probe_s  # half-open: this caller probes
            return True

    def failed(self) -> None:
        with self._lock:
            self._closed_from = time.monotonic() + self.COOLDOWN_S

    def succeeded(self) -> None:
        with self._lock:
            self._closed_from = 0.0


def _connect_unless_known_down(
    breaker: _Breaker, dialect: Any, _record: Any, cargs: Any, cparams: Any
) -> Any:
    if not breaker.try_connect(float(cparams.get("connect_timeout", 2)) + 1):
        raise psycopg.OperationalError("the database failed moments ago; not tried again yet")
    try:
        connection = dialect.connect(*cargs, **cparams)
    except Exception:
        breaker.failed()
        raise
    breaker.succeeded()
    return connection


_FRESH = "jlg_fresh"
_HOLD = "jlg_hold_deadline"


def _fd(dbapi_connection: Any) -> int:
    return int(dbapi_connection.pgconn.socket)


def _connected(bounds: Bounds, dbapi_connection: Any, record: Any) -> None:
    with DEADLINES.bounded(_fd(dbapi_connection), bounds.ping_s):
        _session_in_utc(dbapi_connection)
    record.info[_FRESH] = True


def _checked_out(bounds: Bounds, dbapi_connection: Any, record: Any, _proxy: Any) -> None:
    """Check a pooled connection (a new one was checked by connecting), then bound its use.
    A failed check is a DisconnectionError: the pool drops it and connects afresh. Not
    SQLAlchemy's ``pool_pre_ping``: it pings before any checkout event, with no deadline, so
    against a database that accepts and never answers it waits for ever (tried in this
    check's place: test_a_silent_database_fails_each_call_within_its_bound_and_heals and
    test_the_served_api_answers_within_6_s_while_the_database_is_silent hang)."""
    if not record.info.pop(_FRESH, False):
        try:
            with DEADLINES.bounded(_fd(dbapi_connection), bounds.ping_s):
                _outside_a_transaction(dbapi_connection, "SELECT 1")
        except psycopg.Error as exc:
            # Not the breaker's business: after a restart the old connections fail their
            # check while a new one would connect at once.
            raise DisconnectionError(f"pooled connection failed its check: {exc}") from exc
    if bounds.hold_s is not None:
        record.info[_HOLD] = DEADLINES.arm(_fd(dbapi_connection), bounds.hold_s)


def _released(*args: Any) -> None:
    """checkin, close, detach, invalidate: every event's record is its second argument."""
    record = args[1]
    if record is not None and (token := record.info.pop(_HOLD, None)) is not None:
        DEADLINES.disarm(token)


def _session_in_utc(dbapi_connection: Any) -> None:
    """Times come back in UTC whatever the server's or the client's time zone: a far-future
    time in a zone ahead of UTC would lie past year 9999 and fail to load. libpq sends the
    client's ``PGTZ`` as a startup parameter, which wins over ``options``, so the session's
    zone is set once more on every new connection, committed so no rollback undoes it."""
    _outside_a_transaction(dbapi_connection, "SET TIME ZONE 'UTC'")


def _outside_a_transaction(dbapi_connection: Any, sql: str) -> None:
    """``sql`` on its own, in one round trip: no transaction begun, and none rolled back
    (psycopg forgets what it prepared on a rollback: the claims' plans, made once each)."""
    autocommit = dbapi_connection.autocommit
    dbapi_connection.autocommit = True
    try:
        dbapi_connection.execute(sql)
    finally:
        dbapi_connection.autocommit = autocommit


@contextmanager
def translate_errors(action: str) -> Iterator[None]:
    """Turn lost connections and an exhausted pool into :class:`DatabaseUnavailable` (worth
    retrying), refused values and constraints into :class:`DatabaseRefused` (not); other
    errors pass through."""
    try:
        yield
    except PoolTimeout as exc:
        raise DatabaseUnavailable(f"no database connection free while {action}") from exc
    except (DisconnectionError, PendingRollbackError, psycopg.OperationalError) as exc:
        # What a pool gives up with after its connections kept failing their check, or a
        # driver error raised outside a statement (a reconnect): the database, not us.
        raise DatabaseUnavailable(f"database connection lost while {action}: {exc}") from exc
    except (OperationalError, InterfaceError) as exc:
        raise DatabaseUnavailable(f"database unavailable while {action}: {exc.orig}") from exc
    except (DataError, IntegrityError, psycopg.DataError, psycopg.IntegrityError) as exc:
        # The driver's text names the statement and its parameters: kept out of the message.
        refused = exc.orig if isinstance(exc, DBAPIError) else exc
        raise DatabaseRefused(
            f"the database refused a value while {action} ({type(refused).__name__})"
        ) from None
    except DBAPIError as exc:
        if exc.connection_invalidated:
            raise DatabaseUnavailable(f"database connection lost while {action}") from exc
        raise


def argument(name: str, sql_type: str) -> ColumnElement[Any]:
    """A value given at each run of a statement :func:`compiled` (``%(name)s`` of ``sql_type``)."""
    return literal_column(f"__argument_{name}__{sql_type}__")


def compiled(statement: Any, dialect: Any) -> str:
    """``statement``'s SQL with every value written into it but its :func:`argument`s, which
    stay psycopg's placeholders: built and compiled once by its owner, not at every run (a
    statement's tree and cache key cost more Python than its run), and planned alike for any
    arguments (no status or time left as a parameter that a partial index cannot be proven
    against)."""
    sql = str(statement.compile(dialect=dialect, compile_kwargs={"literal_binds": True}))
    return re.sub(r"__argument_(\w+?)__(\w+)__", r"%(\1)s::\2", sql)


T = TypeVar("T")
_COMPILED: dict[tuple[Any, ...], Any] = {}


def compiled_once(key: tuple[Any, ...], dialect: Any, build: Callable[[], T]) -> T:
    """What ``build`` makes of :func:`compiled` statements, made once for ``key`` and the
    dialect: resources are built afresh at every sensor tick and every run, and compiling a
    store's statements cost more than a tick's reads (10 ms for the queue's)."""
    full = (*key, dialect.name, dialect.driver)
    if full not in _COMPILED:
        _COMPILED[full] = build()
    return _COMPILED[full]  # type: ignore[no-any-return]


def fetch_prepared(conn: Connection, sql: str, parameters: dict[str, Any]) -> Any:
    """The first row of ``sql`` (psycopg's placeholders) run in ``conn``'s transaction as a
    statement prepared once for the connection, planned once for all ``parameters``: for a
    statement that holds no other value (a plan costs it more than its run); None when it
    returns none."""
    driver = conn.connection.driver_connection
    assert driver is not None, "a connection in a transaction has its driver's"
    with driver.cursor(row_factory=namedtuple_row) as cursor:
        cursor.execute(sql, parameters, prepare=True)
        return cursor.fetchone()


def small_reads(conn: Connection) -> None:
    """For this transaction, no parallel workers and no JIT: its reads touch a few rows
    through partial indexes, but the planner sizes a range of times from the whole table's
    history and starts workers (10-20 ms for 0.3 ms of work at 3-10M sessions)."""
    conn.execute(
        text(
            "SELECT set_config('max_parallel_workers_per_gather', '0', true),"
            " set_config('jit', 'off', true)"
        )
    )


READY_DEADLINE_S = 2.5


def ping(url: str, deadline_s: float = READY_DEADLINE_S) -> None:
    """Raises DatabaseUnavailable unless a connection of its own (no pool to wait for, none
    of the app's connections taken) answers ``SELECT 1`` within ``deadline_s``."""
    started = time.monotonic()
    conninfo = make_url(normalize_url(url)).set(drivername="postgresql")
    try:
        with psycopg.connect(
            conninfo.render_as_string(hide_password=False),
            connect_timeout=Bounds().connect_s,
            autocommit=True,
            **TCP_KEEPALIVES,
        ) as conn:
            left = max(deadline_s - (time.monotonic() - started), 0.1)
            with DEADLINES.bounded(_fd(conn), left):
                conn.execute("SELECT 1")
    except psycopg.Error as exc:
        raise DatabaseUnavailable(f"database unavailable while checking readiness: {exc}") from exc
