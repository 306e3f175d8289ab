"""What one request may send, enforced by the app under any server (``web.server`` bounds
the connection itself): at most ``MAX_HEADERS`` header fields, and a body read within
``BODY_DEADLINE_S`` and refused as soon as it is known to be too large."""

import asyncio

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from jlg_pipeline.domain.errors import BodyTooLarge, BodyTooSlow, NotJson
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
    """The body, refused with 415 when its Content-Type names anything but JSON in UTF-8
    (none given is taken as JSON), with 413 as soon as it is known to exceed ``limit`` (from
    its Content-Length before reading, or while reading a chunked one, never after), and with
    408 when it has not arrived whole within ``BODY_DEADLINE_S``."""
    declared_type = request.headers.get("content-type")
    if declared_type is not None and not _json_utf8(declared_type):
        raise NotJson("the body must be JSON (Content-Type: application/json)")
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


def _json_utf8(content_type: str) -> bool:
    """``application/json`` (or a ``+json`` type), in UTF-8 if a charset is named."""
    media, *params = (part.strip().lower() for part in content_type.split(";"))
    if media != "application/json" and not (
        media.startswith("application/") and media.endswith("+json")
    ):
        return False
    charsets = [p.partition("=")[2].strip('"') for p in params if p.startswith("charset=")]
    return all(charset in ("utf-8", "utf8") for charset in charsets)
