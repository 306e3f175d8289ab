"""LOCAL ONLY: ports on the loopback interface for the servers the dev stack, the tests and
the benchmarks start."""

import socket
import time
from collections.abc import Callable

import httpx

from jlg_pipeline.domain.errors import ConfigError

LOOPBACK = httpx.Client(timeout=10)
"""One client for the calls to the local servers: making one loads the CA bundle (~20 ms of
CPU), which each call paid when it made its own (a readiness poll, a moto reset per test)."""


def free_port() -> int:
    """A port nothing listens on right now (also a reliably closed port to connect to)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def require_free(port: int, what: str) -> None:
    """ConfigError unless ``port`` can be listened on. A port whose last connection is still
    in TIME_WAIT (a stack stopped a minute ago) counts as free, as it does for the servers,
    which all bind with SO_REUSEADDR."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            raise ConfigError(
                f"port {port} for {what} is taken; set the matching JLG_*_PORT"
            ) from None


def wait_until_answers(url: str, timeout: float, alive: Callable[[], bool] = lambda: True) -> None:
    """Poll ``url`` until it answers 200. Returns early if ``alive()`` turns False (the
    caller reports why); raises ConfigError if ``timeout`` seconds pass first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive():
            return
        try:
            if LOOPBACK.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise ConfigError(f"{url} did not answer within {timeout:.0f}s")
