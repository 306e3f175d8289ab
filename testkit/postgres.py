"""The one PostgreSQL kit of the tests and the benchmarks: which server to use, a throwaway
database on it, and a server of one's own to restart. Every embedded server (this kit's and
the local stack's) is started by ``jlg_pipeline.local.postgres.embedded``."""

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

from jlg_pipeline.adapters.database import normalize_url
from jlg_pipeline.local.postgres import create_database, drop_database, embedded, reachable
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
def scratch_database(
    admin_url: str, prefix: str, *, migrated: bool = True, template: str | None = None
) -> Iterator[str]:
    """A new database on ``admin_url``'s server (a copy of ``template`` if given, else
    migrated to head unless ``migrated`` is False); dropped afterwards."""
    name = new_database_name(prefix)
    url = create_database(admin_url, name, template=template)
    try:
        if migrated and template is None:
            migrate(url)
        yield url
    finally:
        drop_database(admin_url, name)


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
