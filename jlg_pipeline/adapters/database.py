"""Engine creation and the translation of driver errors at the boundary."""

from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy
from sqlalchemy import Engine
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, InterfaceError, OperationalError

from jlg_pipeline.domain.errors import ConfigError, DatabaseUnavailable

APP_DRIVER = "postgresql+psycopg"


def normalize_url(url: str) -> str:
    """The application's URL with psycopg 3 as its driver (``postgresql://`` means the same)."""
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise ConfigError(f"not a database URL: {exc}") from exc
    if parsed.drivername not in ("postgresql", "postgres", APP_DRIVER):
        raise ConfigError(
            f"JLG_DATABASE_URL must be a PostgreSQL URL (postgresql+psycopg://…), "
            f"got driver {parsed.drivername!r}"
        )
    return parsed.set(drivername=APP_DRIVER).render_as_string(hide_password=False)


def create_engine(url: str, *, pool_size: int = 5, max_overflow: int = 5) -> Engine:
    """An engine that checks connections before use, so a restarted PostgreSQL costs one
    failed statement at most rather than a pool full of dead connections."""
    return sqlalchemy.create_engine(
        normalize_url(url),
        pool_pre_ping=True,
        pool_size=pool_size,
        max_overflow=max_overflow,
        connect_args={
            "connect_timeout": 10,
            "application_name": "jlg-pipeline",
            # Times come back in UTC whatever the server's timezone: a far-future time in a
            # zone ahead of UTC would otherwise lie past year 9999 and fail to load.
            "options": "-c timezone=UTC",
        },
    )


@contextmanager
def translate_errors(action: str) -> Iterator[None]:
    """Turn lost connections into :class:`DatabaseUnavailable`; other errors pass through."""
    try:
        yield
    except (OperationalError, InterfaceError) as exc:
        raise DatabaseUnavailable(f"database unavailable while {action}: {exc.orig}") from exc
    except DBAPIError as exc:
        if exc.connection_invalidated:
            raise DatabaseUnavailable(f"database connection lost while {action}") from exc
        raise


def ping(engine: Engine) -> None:
    """Raises DatabaseUnavailable unless a trivial query answers."""
    with translate_errors("checking readiness"), engine.connect() as conn:
        conn.exec_driver_sql("SELECT 1")
