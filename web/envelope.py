"""The pinned response envelope, and the one place errors become HTTP statuses."""

import json
import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from jlg_pipeline.domain.errors import (
    BodyTooLarge,
    BodyTooSlow,
    CountChanged,
    DatabaseUnavailable,
    GenerationInProgress,
    IdempotencyKeyReused,
    InvalidInput,
    JlgError,
    NotJson,
    OperationNotFound,
    SessionNotFound,
    TooManySessions,
)
from jlg_pipeline.log import log_event

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ErrorKind:
    code: str
    description: str
    """What it means to a client; also the OpenAPI document's description of the status."""


# The one error table: the envelope's codes and the OpenAPI document both come from it.
ERRORS: dict[int, ErrorKind] = {
    400: ErrorKind(
        "BAD_REQUEST",
        "Invalid id or body: not JSON, not an object, missing or unknown key, a time that is "
        "not RFC 3339, has no offset, or is not in the future",
    ),
    401: ErrorKind(
        "UNAUTHENTICATED",
        "Missing, malformed, wrongly signed or expired bearer token; an exp that is not a "
        "number or too far ahead; an iss or aud other than the configured ones",
    ),
    403: ErrorKind(
        "FORBIDDEN",
        "Not acting as admin: no X-Active-Role, a role the token does not hold, a role other "
        "than admin, or an X-User-Id that is not the token's sub",
    ),
    404: ErrorKind(
        "NOT_FOUND",
        "No such program session, or it is soft-deleted; no such operation in that programme",
    ),
    405: ErrorKind("METHOD_NOT_ALLOWED", "Method not allowed on this path"),
    408: ErrorKind("REQUEST_TIMEOUT", "Headers or body not received within the server's deadline"),
    409: ErrorKind(
        "CONFLICT",
        "A generation holds the session and is not stale (retry when it ends); or a programme "
        "action's expectedCount is not what matches now (the error's matched says the count; "
        "nothing changed)",
    ),
    413: ErrorKind("PAYLOAD_TOO_LARGE", "Body larger than 4 KiB (refused while reading)"),
    415: ErrorKind(
        "UNSUPPORTED_MEDIA_TYPE",
        "The body is declared as something other than JSON in UTF-8 (Content-Type)",
    ),
    422: ErrorKind(
        "UNPROCESSABLE",
        "A programme action matching more than 10,000 sessions (narrow the filter), or an "
        "Idempotency-Key already used for another request",
    ),
    431: ErrorKind(
        "REQUEST_HEADER_FIELDS_TOO_LARGE",
        "Request line and headers over 16 KiB, or more than 64 header fields",
    ),
    500: ErrorKind("INTERNAL_ERROR", "Unexpected error (logged; no details are returned)"),
    503: ErrorKind("SERVICE_UNAVAILABLE", "The database is unavailable"),
}
_JLG_ERRORS: list[tuple[type[JlgError], int]] = [
    (InvalidInput, 400),
    (BodyTooLarge, 413),
    (BodyTooSlow, 408),
    (NotJson, 415),
    (SessionNotFound, 404),
    (OperationNotFound, 404),
    (GenerationInProgress, 409),
    (CountChanged, 409),
    (TooManySessions, 422),
    (IdempotencyKeyReused, 422),
    (DatabaseUnavailable, 503),
]


UNAVAILABLE_MESSAGE = "the database is unavailable; try again shortly"


def utc_z(value: datetime | None) -> str | None:
    """A time in UTC ending in ``Z``, with milliseconds."""
    if value is None:
        return None
    return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _code(status_code: int) -> str:
    kind = ERRORS.get(status_code)
    return kind.code if kind else "ERROR"


def success(data: Any, status_code: int = 200) -> JSONResponse:
    return JSONResponse({"success": True, "data": data, "error": None}, status_code=status_code)


def _error_envelope(
    status_code: int, message: str, code: str | None = None, **details: Any
) -> dict[str, Any]:
    return {
        "success": False,
        "data": None,
        "error": {"code": code or _code(status_code), "message": message, **details},
    }


def error(
    status_code: int,
    message: str,
    code: str | None = None,
    headers: dict[str, str] | None = None,
    **details: Any,
) -> JSONResponse:
    return JSONResponse(
        _error_envelope(status_code, message, code, **details),
        status_code=status_code,
        headers=headers,
    )


def error_bytes(status_code: int, message: str) -> bytes:
    """The envelope as the server writes it when it refuses a connection before the app."""
    return json.dumps(_error_envelope(status_code, message), separators=(",", ":")).encode()


async def http_exception(request: Request, exc: Exception) -> Response:
    if not isinstance(exc, HTTPException):
        return await unexpected(request, exc)
    if exc.status_code == 404:
        return error(404, f"no route {request.url.path}")
    if exc.status_code == 405:
        allow = (exc.headers or {}).get("Allow", "")
        return error(405, f"{request.method} is not allowed here", headers={"Allow": allow})
    return error(exc.status_code, str(exc.detail))


async def jlg_error(request: Request, exc: Exception) -> Response:
    for error_type, status_code in _JLG_ERRORS:
        if isinstance(exc, error_type):
            if status_code >= 500:
                # The driver's text names hosts, ports and roles: the log has it, not the client.
                log_event(
                    logger,
                    logging.ERROR,
                    "http.unavailable",
                    exc_info=exc,
                    method=request.method,
                    path=request.url.path,
                )
                return error(status_code, UNAVAILABLE_MESSAGE)
            if isinstance(exc, CountChanged):
                return error(status_code, str(exc), matched=exc.matched)
            return error(status_code, str(exc))
    return await unexpected(request, exc)


async def unexpected(request: Request, exc: Exception) -> Response:
    log_event(
        logger,
        logging.ERROR,
        "http.unexpected_error",
        exc_info=exc,
        method=request.method,
        path=request.url.path,
        error=type(exc).__name__,
    )
    return error(500, "internal error; it has been logged")
