"""Engine creation and the translation of driver errors at the boundary."""

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy
from sqlalchemy import Engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import (
    ArgumentError,
    DataError,
    DBAPIError,
    IntegrityError,
    InterfaceError,
    OperationalError,
)
from sqlalchemy.exc import TimeoutError as PoolTimeout

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


def create_engine(
    url: str,
    *,
    pool_size: int = 5,
    max_overflow: int = 5,
    pool_timeout_s: float = DEFAULT_POOL_TIMEOUT_S,
) -> Engine:
    """An engine that checks connections before use, so a restarted PostgreSQL costs one
    failed statement at most rather than a pool full of dead connections. Waiting longer
    than ``pool_timeout_s`` for a pooled connection is DatabaseUnavailable (a 503)."""
    engine = sqlalchemy.create_engine(
        normalize_url(url),
        pool_pre_ping=True,
        pool_size=pool_size,
        max_overflow=max_overflow,
        pool_timeout=pool_timeout_s,
        connect_args={
            "connect_timeout": 10,
            "application_name": "jlg-pipeline",
            "options": "-c timezone=UTC",
        },
    )
    event.listen(engine, "connect", _session_in_utc)
    return engine


def _session_in_utc(dbapi_connection: Any, _record: Any) -> None:
    """Times come back in UTC whatever the server's or the client's time zone: a far-future
    time in a zone ahead of UTC would lie past year 9999 and fail to load. libpq sends the
    client's ``PGTZ`` as a startup parameter, which wins over ``options``, so the session's
    zone is set once more on every new connection, committed so no rollback undoes it."""
    autocommit = dbapi_connection.autocommit
    dbapi_connection.autocommit = True
    try:
        with dbapi_connection.cursor() as cursor:
            cursor.execute("SET TIME ZONE 'UTC'")
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
    except (OperationalError, InterfaceError) as exc:
        raise DatabaseUnavailable(f"database unavailable while {action}: {exc.orig}") from exc
    except (DataError, IntegrityError) as exc:
        # The driver's text names the statement and its parameters: kept out of the message.
        raise DatabaseRefused(
            f"the database refused a value while {action} ({type(exc.orig).__name__})"
        ) from None
    except DBAPIError as exc:
        if exc.connection_invalidated:
            raise DatabaseUnavailable(f"database connection lost while {action}") from exc
        raise


def ping(engine: Engine) -> None:
    """Raises DatabaseUnavailable unless a trivial query answers."""
    with translate_errors("checking readiness"), engine.connect() as conn:
        conn.exec_driver_sql("SELECT 1")
