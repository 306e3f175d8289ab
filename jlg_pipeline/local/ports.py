"""LOCAL ONLY: ports on the loopback interface for the servers the dev stack, the tests and
the benchmarks start."""

import socket

from jlg_pipeline.domain.errors import ConfigError


def free_port() -> int:
    """A port nothing listens on right now (also a reliably closed port to connect to)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def require_free(port: int, what: str) -> None:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            raise ConfigError(
                f"port {port} for {what} is taken; set the matching JLG_*_PORT"
            ) from None
