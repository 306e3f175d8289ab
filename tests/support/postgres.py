"""A real PostgreSQL for the tests: the configured or local server, else an embedded one.

Order: ``JLG_TEST_ADMIN_DATABASE_URL`` if set; the machine's server on 127.0.0.1:5432
(unless ``JLG_TEST_PG=embedded``); otherwise a PostgreSQL started from the ``pgserver``
wheel under ``.pgdata/test`` in the checkout, stopped when the tests end.
Each test gets its own database cloned from a migrated template.
"""

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from jlg_pipeline.adapters.database import normalize_url
from jlg_pipeline.local.postgres import (
    TEST_DATA_DIR,
    create_database,
    drop_database,
    reachable,
)
from tests.support import ROOT

__all__ = ["create_database", "drop_database", "new_database_name", "server_url"]

LOCAL_SERVER = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
EMBEDDED_DIR = ROOT / TEST_DATA_DIR


@contextmanager
def server_url() -> Iterator[str]:
    """The admin URL of a running server for the whole test session."""
    explicit = os.environ.get("JLG_TEST_ADMIN_DATABASE_URL")
    if explicit:
        yield normalize_url(explicit)
        return
    if os.environ.get("JLG_TEST_PG") != "embedded" and reachable(LOCAL_SERVER):
        yield LOCAL_SERVER
        return
    import pgserver

    EMBEDDED_DIR.mkdir(parents=True, exist_ok=True)
    server: Any = pgserver.get_server(str(EMBEDDED_DIR), cleanup_mode="stop")  # type: ignore[attr-defined]
    try:
        yield normalize_url(server.get_uri())
    finally:
        server.cleanup()


def new_database_name(prefix: str) -> str:
    return f"{prefix}_{os.getpid()}_{uuid.uuid4().hex[:8]}"
