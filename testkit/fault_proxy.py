"""A TCP relay on 127.0.0.1 that can fail the way a network peer fails, for the tests and
benchmarks: ``passing`` relays both ways; ``silent`` accepts and never answers (what it is
sent is swallowed, as by a host that froze or a partition that drops replies); ``refusing``
resets every connection, open ones included (a failover: the old primary is gone); ``slow``
relays every chunk after :data:`SLOW_DELAY_S` (a congested link); ``throttling`` answers
every new connection's first request with an AWS throttling error (an HTTP peer only)."""

import contextlib
import socket
import struct
import threading
import time
from enum import StrEnum


class Mode(StrEnum):
    PASSING = "passing"
    SILENT = "silent"
    REFUSING = "refusing"
    SLOW = "slow"
    THROTTLING = "throttling"


SLOW_DELAY_S = 1.5
# What an AWS JSON or REST-JSON API answers when it throttles: botocore reads the error code
# from the header, so SQS and EventBridge Scheduler both see ThrottlingException.
_THROTTLED_BODY = b'{"__type": "ThrottlingException", "message": "Rate exceeded"}'
THROTTLED = (
    b"HTTP/1.1 400 Bad Request\r\nx-amzn-ErrorType: ThrottlingException\r\n"
    b"Content-Type: application/x-amz-json-1.0\r\nConnection: close\r\n"
    b"Content-Length: %d\r\n\r\n%s" % (len(_THROTTLED_BODY), _THROTTLED_BODY)
)


class FaultProxy:
    """Relays ``127.0.0.1:<port>`` to ``target``: a port on 127.0.0.1, or a Unix socket's
    path (an embedded PostgreSQL listens on one). Set :attr:`mode` to fail."""

    def __init__(self, target: int | str) -> None:
        self._target = target
        self._mode = Mode.PASSING
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, name="fault-proxy", daemon=True).start()

    @property
    def mode(self) -> Mode:
        return self._mode

    @mode.setter
    def mode(self, mode: Mode) -> None:
        with self._lock:
            self._mode = mode
            doomed = list(self._open) if mode is Mode.REFUSING else []
        for sock in doomed:
            _reset(sock)

    def retarget(self, target: int | str) -> None:
        """Relay new connections to ``target`` from now on (a load balancer moving to a new
        backend); connections open now stay on the old one until it closes them."""
        self._target = target

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._listener.close()
        self.mode = Mode.REFUSING

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self._mode is Mode.REFUSING:
                _reset(client)
                continue
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _track(self, *socks: socket.socket) -> None:
        with self._lock:
            self._open.update(socks)

    def _serve(self, client: socket.socket) -> None:
        upstream: socket.socket | None = None
        try:
            if self._mode is Mode.SILENT:
                self._track(client)
                while client.recv(65536):  # held until the caller gives up
                    pass
                return
            if self._mode is Mode.THROTTLING:
                client.recv(65536)
                client.sendall(THROTTLED)
                return
            upstream = _connect(self._target)
            self._track(client, upstream)
            back = threading.Thread(target=self._pipe, args=(upstream, client), daemon=True)
            back.start()
            self._pipe(client, upstream)
            back.join(timeout=60)
        except OSError:
            pass
        finally:
            with self._lock:
                self._open.discard(client)
                if upstream is not None:
                    self._open.discard(upstream)
            for sock in (client, upstream):
                if sock is not None:
                    with contextlib.suppress(OSError):
                        sock.close()

    def _pipe(self, source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                if self._mode is Mode.SLOW:
                    time.sleep(SLOW_DELAY_S)
                elif self._mode is not Mode.PASSING:
                    continue  # swallowed: the caller waits for an answer that never comes
                sink.sendall(data)
            sink.shutdown(socket.SHUT_WR)


def _connect(target: int | str) -> socket.socket:
    if isinstance(target, int):
        return socket.create_connection(("127.0.0.1", target))
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(target)
    return sock


def proxied_database(url: str) -> tuple[FaultProxy, str]:
    """A FaultProxy in front of the PostgreSQL server of SQLAlchemy ``url`` (TCP or Unix
    socket), and the same URL through the proxy."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    socket_dir = parsed.query.get("host")
    port = parsed.port or 5432
    target: int | str = f"{socket_dir}/.s.PGSQL.{port}" if socket_dir else port
    proxy = FaultProxy(target)
    through = parsed.difference_update_query(["host"]).set(host="127.0.0.1", port=proxy.port)
    return proxy, through.render_as_string(hide_password=False)


def _reset(sock: socket.socket) -> None:
    """Close with an RST, as a host that dropped the connection answers."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
