"""The pinned response envelope, and the one place errors become HTTP statuses."""

import logging
from datetime import UTC, datetime
from typing import Any

from starlette.background import BackgroundTask
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from jlg_pipeline.domain.errors import (
    BodyTooLarge,
    DatabaseUnavailable,
    GenerationInProgress,
    InvalidInput,
    JlgError,
    SessionNotFound,
)
from jlg_pipeline.log import log_event

logger = logging.getLogger(__name__)

_STATUS_CODES = {
    400: "BAD_REQUEST",
    401: "UNAUTHENTICATED",
    403: "FORBIDDEN",
    404: "NOT_FOUND",
    405: "METHOD_NOT_ALLOWED",
    409: "CONFLICT",
    413: "PAYLOAD_TOO_LARGE",
    415: "UNSUPPORTED_MEDIA_TYPE",
    500: "INTERNAL_ERROR",
    503: "SERVICE_UNAVAILABLE",
}
_JLG_ERRORS: list[tuple[type[JlgError], int]] = [
    (InvalidInput, 400),
    (BodyTooLarge, 413),
    (SessionNotFound, 404),
    (GenerationInProgress, 409),
    (DatabaseUnavailable, 503),
]


UNAVAILABLE_MESSAGE = "the database is unavailable; try again shortly"


def utc_z(value: datetime | None) -> str | None:
    """A time in UTC ending in ``Z``, with milliseconds."""
    if value is None:
        return None
    return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def success(
    data: Any, status_code: int = 200, background: BackgroundTask | None = None
) -> JSONResponse:
    return JSONResponse(
        {"success": True, "data": data, "error": None},
        status_code=status_code,
        background=background,
    )


def error(
    status_code: int,
    message: str,
    code: str | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    return JSONResponse(
        {
            "success": False,
            "data": None,
            "error": {"code": code or _STATUS_CODES.get(status_code, "ERROR"), "message": message},
        },
        status_code=status_code,
        headers=headers,
    )


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
