"""How the admin API is served: ``python -m web --host … --port …`` runs the app under
uvicorn with the bounds a server facing any client needs, written here once for the image,
the manifests, the local stack, the tests and the benchmarks.

uvicorn's default (httptools) takes headers of any size and keeps a connection that never
finishes its headers for ever. Here: the h11 parser with the header block (request line
included) capped at ``HEADER_BYTES``, every request's, pipelined ones too; a deadline for the
headers of each request; at most ``MAX_CONNECTIONS`` open connections, and at most
``MAX_CONNECTIONS_PER_CLIENT`` from one IPv4 /24 or IPv6 /64 (so one client's idle sockets
cannot take them all; behind a proxy every client shares its address, and the proxy caps each
client: ``--max-connections-per-client 0``); idle keep-alive connections closed after
``KEEP_ALIVE_S``. Every refusal is the API's error envelope. The header count and the body's
own deadline are the app's (``web.limits``), so they hold under any server."""

import argparse
import asyncio
import ipaddress
import sys
from collections.abc import Sequence
from typing import ClassVar

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from web.envelope import error_bytes

HEADER_BYTES = 16 * 1024
HEADER_DEADLINE_S = 10.0
MAX_CONNECTIONS = 512
MAX_CONNECTIONS_PER_CLIENT = 64
KEEP_ALIVE_S = 5


class BoundedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol, bounded: a connection past ``MAX_CONNECTIONS`` gets 503 once it
    sends its request, one past ``per_client`` from the same address 503 at once; a request
    line and headers over ``HEADER_BYTES`` 431, headers not complete within
    ``HEADER_DEADLINE_S`` 408; then the connection is closed. An answer given before the
    request's body ended (a refusal) closes the connection too, instead of keeping it."""

    per_client: ClassVar[int] = MAX_CONNECTIONS_PER_CLIENT
    """Connections one address may hold; 0: no cap (behind a proxy that caps each client)."""
    _headers_due: asyncio.TimerHandle | None = None
    _over_limit = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        # Refused once it has sent its request, so the client reads the answer instead of
        # a reset.
        self._over_limit = len(self.connections) > MAX_CONNECTIONS
        if self._over_client_cap():
            # At once: an idle socket would otherwise hold its place until the deadline.
            self._refuse(503, "too many connections from this client; try again shortly")
            return
        self._await_headers()

    def handle_events(self) -> None:
        """Before h11 parses the next request, whether read now or waiting behind a pipelined
        one, its header block is held to the bounds."""
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            if self._over_limit:
                self._refuse(503, "too many connections; try again shortly")
                return
            if self._head_too_large():
                self._refuse(431, f"request line and headers larger than {HEADER_BYTES} bytes")
                return
        super().handle_events()
        if self.conn.their_state is not h11.IDLE:
            self._headers_in()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.transport.is_closing():
            return
        if self.conn.their_state is h11.SEND_BODY:
            self.transport.close()
        elif self.conn.their_state is h11.IDLE:
            self._await_headers()

    def connection_lost(self, exc: Exception | None) -> None:
        self._headers_in()
        super().connection_lost(exc)

    def send_400_response(self, msg: str) -> None:
        self._refuse(400, "not a valid HTTP/1.1 request")

    def _over_client_cap(self) -> bool:
        if not self.per_client or self.client is None:
            return False
        key = client_key(str(self.client[0]))
        held = [c for c in self.connections if (a := _address(c)) and client_key(a) == key]
        return len(held) > self.per_client

    def _head_too_large(self) -> bool:
        """Whether the header block h11 holds unparsed is over HEADER_BYTES (h11's own cap
        covers only a block still incomplete when a read ends, not one complete behind
        another request)."""
        pending = self.conn.trailing_data[0][: HEADER_BYTES + 4]
        end = pending.find(b"\r\n\r\n")
        return end > HEADER_BYTES or (end == -1 and len(pending) > HEADER_BYTES)

    def _await_headers(self) -> None:
        self._headers_in()
        self._headers_due = self.loop.call_later(HEADER_DEADLINE_S, self._headers_late)

    def _headers_in(self) -> None:
        if self._headers_due is not None:
            self._headers_due.cancel()
            self._headers_due = None

    def _headers_late(self) -> None:
        self._headers_due = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self._refuse(408, f"headers not complete within {HEADER_DEADLINE_S:g} s")

    def _refuse(self, status: int, message: str) -> None:
        """Answer outside h11 (which only answers a request it has parsed) and close."""
        self._headers_in()
        body = error_bytes(status, message)
        head = (
            f"HTTP/1.1 {status} {_REASONS[status]}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
        )
        if not self.transport.is_closing():
            self.transport.write(head.encode() + body)
            self.transport.close()


def client_key(address: str) -> str:
    """Whom a connection counts against: an IPv4 address's /24 or an IPv6 address's /64 (one
    host holds a whole /64, or many aliases of one IPv4 network, and would otherwise be a new
    client at every address of it: 8 loopback aliases filled the global cap)."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        else:
            return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ipaddress.IPv4Network((ip, 24), strict=False))


def _address(connection: object) -> str | None:
    client = getattr(connection, "client", None)
    return str(client[0]) if client else None


_REASONS = {
    400: "Bad Request",
    408: "Request Timeout",
    431: "Request Header Fields Too Large",
    503: "Service Unavailable",
}


def command(host: str, port: int, python: str = sys.executable) -> list[str]:
    """The command that serves the app: for the local stack, the tests and the benchmarks."""
    return [python, "-m", "web", "--host", host, "--port", str(port)]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m web", description=__doc__.split("\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument(
        "--proxy-headers",
        action="store_true",
        help="trust X-Forwarded-For/-Proto from the addresses in FORWARDED_ALLOW_IPS",
    )
    parser.add_argument("--no-access-log", action="store_true")
    parser.add_argument(
        "--max-connections-per-client",
        type=int,
        default=MAX_CONNECTIONS_PER_CLIENT,
        help="connections one address may hold (0: no cap, for behind a proxy that caps "
        "each client, as the kit's ingress does)",
    )
    args = parser.parse_args(argv)
    protocol = type(
        "BoundedH11Protocol",
        (BoundedH11Protocol,),
        {"per_client": max(args.max_connections_per_client, 0)},
    )
    uvicorn.run(
        "web.app:create_app",
        factory=True,
        host=args.host,
        port=args.port,
        http=protocol,
        h11_max_incomplete_event_size=HEADER_BYTES,
        timeout_keep_alive=KEEP_ALIVE_S,
        proxy_headers=args.proxy_headers,
        access_log=not args.no_access_log,
    )
