"""Ports on the loopback interface for servers the tests start."""

import socket


def free_port() -> int:
    """A port nothing listens on right now (also a reliably closed port to connect to)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port
