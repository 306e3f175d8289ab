"""The admin API served as the image serves it (``python -m web``), in its own process."""

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from jlg_pipeline.local.ports import free_port, wait_until_answers
from tests.support import ROOT
from tests.support.web import JWT_ENV
from web.server import command


@contextmanager
def served_app(db_url: str, log_path: Path, **environ: str) -> Iterator[tuple[str, int, int]]:
    """(base URL, port, pid) of the served app, stopped after."""
    port = free_port()
    env = {
        **os.environ,
        "JLG_DATABASE_URL": db_url,
        **JWT_ENV,
        "ENABLE_JOIN_LINK_SCHEDULER": "false",
        **environ,
    }
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command("127.0.0.1", port, sys.executable),
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_until_answers(
                f"http://127.0.0.1:{port}/healthz", 30, lambda: process.poll() is None
            )
            assert process.poll() is None, f"the server exited; see {log_path}"
            yield f"http://127.0.0.1:{port}", port, process.pid
        finally:
            process.terminate()
            try:
                # The app finishes what it answered first (its fast path may still wait on
                # a silent AWS): up to its own shutdown bound, then it is killed.
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)


def rss_kib(pid: int) -> int:
    """The resident memory of process ``pid``."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")
