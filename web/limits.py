"""What one request may send, enforced by the app under any server (``web.server`` bounds
the connection itself): at most ``MAX_HEADERS`` header fields, and a body read within
``BODY_DEADLINE_S`` and refused as soon as it is known to be too large."""

import asyncio

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from jlg_pipeline.domain.errors import BodyTooLarge, BodyTooSlow
from web.envelope import error

MAX_HEADERS = 64
BODY_DEADLINE_S = 10.0


class HeaderCountLimit:
    """Answers 431 to a request with more than ``MAX_HEADERS`` header fields."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and len(scope["headers"]) > MAX_HEADERS:
            response = error(431, f"more than {MAX_HEADERS} header fields")
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


async def read_body(request: Request, limit: int) -> bytes:
    """The body, refused with 413 as soon as it is known to exceed ``limit`` (from its
    Content-Length before reading, or while reading a chunked one, never after), and with
    408 when it has not arrived whole within ``BODY_DEADLINE_S``."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge(f"body larger than {limit} bytes")
    received = bytearray()
    try:
        async with asyncio.timeout(BODY_DEADLINE_S):
            async for chunk in request.stream():
                received += chunk
                if len(received) > limit:
                    raise BodyTooLarge(f"body larger than {limit} bytes")
    except TimeoutError:
        raise BodyTooSlow(f"body not received within {BODY_DEADLINE_S:g} s") from None
    return bytes(received)
