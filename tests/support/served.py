"""The admin API served as the image serves it (``python -m web``), in its own process."""

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from testkit.served import start_web, stop_web
from tests.support.web import JWT_ENV


@contextmanager
def served_app(db_url: str, log_path: Path, **environ: str) -> Iterator[tuple[str, int, int]]:
    """(base URL, port, pid) of the served app, stopped after."""
    env = {
        **os.environ,
        "JLG_DATABASE_URL": db_url,
        **JWT_ENV,
        "ENABLE_JOIN_LINK_SCHEDULER": "false",
        **environ,
    }
    process, url = start_web(env, log=log_path)
    try:
        yield url, int(url.rsplit(":", 1)[1]), process.pid
    finally:
        stop_web(process)


def rss_kib(pid: int) -> int:
    """The resident memory of process ``pid``."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")
