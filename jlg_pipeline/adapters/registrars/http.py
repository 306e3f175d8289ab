"""bulkRegister over HTTP against the online-session service (docs/design.md, pinned).

One call has an overall deadline (connect, send and reading the whole answer) and reads at
most ``max_answer_bytes``: httpx's own timeouts apply per read, so an answer that trickles in
would otherwise hold the call, and the claim, for as long as the service likes. Errors keep
the status code and at most a short error code from the answer, never its body: an upstream
answer may echo our request, bearer token included, and errors reach the row, the logs and
the Dagster UI. For the same reason they are raised without their cause (``from None``):
httpx's and pydantic's exceptions quote the answer (a status line, an ``input_value``), and
Dagster shows a failure's whole chain.
"""

import json
import logging
import re
import socket
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Annotated, Any

import httpx
from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError

from jlg_pipeline.adapters.socket_deadlines import CallDeadline
from jlg_pipeline.domain import rfc3339
from jlg_pipeline.domain.constants import ONLINE_SESSION_TIMEOUT_S
from jlg_pipeline.domain.errors import ConfigError, RegistrarRejected, RegistrarUnavailable
from jlg_pipeline.domain.generation import BulkRegisterRequest, BulkRegisterResult
from jlg_pipeline.log import log_event

logger = logging.getLogger(__name__)

# httpx logs every answer's status line (reason phrase included) at INFO, and httpcore the
# raw protocol at DEBUG: both quote the service, whose answer may echo our token. Our own
# log lines say what a call did.
for _library in ("httpx", "httpcore"):
    logging.getLogger(_library).setLevel(logging.WARNING)

BULK_REGISTER_PATH = "/online-session/bulk-register"
IDEMPOTENCY_HEADER = "Idempotency-Key"
CONNECT_TIMEOUT_S = 10.0
MAX_ANSWER_BYTES = 64 * 1024
RETRYABLE_STATUSES = frozenset({408, 429})
_ERROR_CODE = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,39}")
"""The closed shape of an error code we keep: a letter, then letters, digits, underscores."""
_JOB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")
CODE_WINDOW = 6
"""An error code sharing this many characters in a row with our token is not kept."""
JOB_ID_WINDOW = 12


class _Answer(BaseModel):
    model_config = ConfigDict(extra="ignore")

    jobId: StrictStr | StrictInt
    total: Annotated[StrictInt, Field(ge=0)]


def shares_secret(text: str, secret: str, window: int) -> bool:
    """Whether ``text`` holds ``window`` characters in a row of ``secret`` (case aside), or is
    itself a part of it: what an answer echoes of our token is never kept."""
    low, hidden = text.lower(), secret.lower()
    if len(low) <= window:
        return low in hidden
    return any(low[i : i + window] in hidden for i in range(len(low) - window + 1))


def _watching(deadline: CallDeadline) -> Callable[[str, dict[str, Any]], None]:
    """httpcore's trace hook: each socket the call opens is cut at its deadline."""

    def trace(event: str, info: dict[str, Any]) -> None:
        if event != "connection.connect_tcp.complete" or info.get("return_value") is None:
            return
        sock = info["return_value"].get_extra_info("socket")
        if isinstance(sock, socket.socket):
            deadline.watch(sock)

    return trace


class HttpRegistrar:
    """``POST {base_url}/online-session/bulk-register`` with a bearer token.

    Timeouts, the deadline, an oversized answer, connection errors, 408, 429 and 5xx raise
    RegistrarUnavailable (retryable, with the service's ``Retry-After`` when given); any
    other non-2xx and any answer that is not ``{"jobId", "total"}`` raise RegistrarRejected.
    """

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout_s: float = ONLINE_SESSION_TIMEOUT_S,
        max_answer_bytes: int = MAX_ANSWER_BYTES,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ConfigError("JLG_ONLINE_SESSION_URL must be an http(s) URL")
        if not token:
            raise ConfigError("JLG_ONLINE_SESSION_TOKEN is required with JLG_REGISTRAR=http")
        if not timeout_s > 0:
            raise ConfigError("JLG_ONLINE_SESSION_TIMEOUT_S must be a positive number of seconds")
        self._timeout_s = timeout_s
        self._token = token
        self._max_answer_bytes = max_answer_bytes
        self._client = httpx.Client(
            base_url=base_url.rstrip("/"),
            headers={
                "Authorization": f"Bearer {token}",
                "Accept": "application/json",
                # Uncompressed, so the answer cap bounds what is held in memory.
                "Accept-Encoding": "identity",
            },
            timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, CONNECT_TIMEOUT_S)),
            transport=transport,
            follow_redirects=False,
            # A fresh connection per call: its deadline finds the socket as it is opened.
            limits=httpx.Limits(max_keepalive_connections=0),
        )

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> "HttpRegistrar":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def bulk_register(self, request: BulkRegisterRequest) -> BulkRegisterResult:
        body: dict[str, Any] = {
            "sessionId": request.session_id,
            "role": request.role,
            "batchSize": request.batch_size,
            "actorUserId": request.actor_user_id,
        }
        # The cycle's key: a second call for the same cycle is absorbed by the service.
        headers = {IDEMPOTENCY_HEADER: request.idempotency_key} if request.idempotency_key else {}
        deadline = CallDeadline(self._timeout_s)
        try:
            with self._client.stream(
                "POST",
                BULK_REGISTER_PATH,
                json=body,
                headers=headers,
                extensions={"trace": _watching(deadline)},
            ) as response:
                content = self._read_capped(response)
        except httpx.HTTPError as exc:
            if deadline.expired:
                raise RegistrarUnavailable(
                    f"bulkRegister exceeded its {self._timeout_s:g}s deadline"
                ) from None
            if isinstance(exc, httpx.TimeoutException):
                raise RegistrarUnavailable(
                    f"bulkRegister timed out ({type(exc).__name__})"
                ) from None
            raise RegistrarUnavailable(
                f"bulkRegister could not complete the call ({type(exc).__name__})"
            ) from None
        finally:
            deadline.close()
        return _result(response, content, self._token)

    def _read_capped(self, response: httpx.Response) -> bytes:
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self._max_answer_bytes:
            raise RegistrarUnavailable(_too_large(response.status_code, self._max_answer_bytes))
        chunks: list[bytes] = []
        size = 0
        for chunk in response.iter_bytes():
            size += len(chunk)
            if size > self._max_answer_bytes:
                raise RegistrarUnavailable(_too_large(response.status_code, self._max_answer_bytes))
            chunks.append(chunk)
        return b"".join(chunks)


def _result(response: httpx.Response, content: bytes, token: str) -> BulkRegisterResult:
    status = response.status_code
    if status >= 500 or status in RETRYABLE_STATUSES:
        raise RegistrarUnavailable(
            _describe(status, content, token),
            retry_after_s=retry_after(response.headers),
            throttled=status == 429,
        )
    if not response.is_success:
        raise RegistrarRejected(_describe(status, content, token))
    invalid = f"bulkRegister answered {status} without a valid {{jobId, total}}"
    try:
        answer = _Answer.model_validate_json(content)
    except ValidationError:
        raise RegistrarRejected(invalid, unwell=True) from None
    job_id = str(answer.jobId)
    if not _JOB_ID.fullmatch(job_id) or shares_secret(job_id, token, JOB_ID_WINDOW):
        raise RegistrarRejected(invalid, unwell=True)
    return BulkRegisterResult(job_id=job_id, total=answer.total)


def _too_large(status: int, limit: int) -> str:
    return f"bulkRegister answered {status} with more than {limit} bytes"


def _describe(status: int, content: bytes, token: str) -> str:
    code = error_code(content, token)
    return f"bulkRegister answered {status}" + (f" ({code})" if code else "")


def error_code(content: bytes, token: str) -> str | None:
    """A short machine-readable code from an error answer (``code``, ``error`` or
    ``error.code``) of the closed shape ``_ERROR_CODE`` and sharing nothing with our
    ``token``, or None: never free text, which may echo what we sent."""
    try:
        answer = json.loads(content)
    except (ValueError, RecursionError):
        return None
    if not isinstance(answer, dict):
        return None
    nested = answer.get("error")
    for candidate in (
        answer.get("code"),
        nested.get("code") if isinstance(nested, dict) else nested,
    ):
        if (
            isinstance(candidate, str)
            and _ERROR_CODE.fullmatch(candidate)
            and not shares_secret(candidate, token, CODE_WINDOW)
        ):
            return candidate
    return None


def _http_date(raw: str) -> datetime | None:
    try:
        when = parsedate_to_datetime(raw)
    except (TypeError, ValueError, OverflowError, IndexError):
        return None
    return when if when.tzinfo is not None else None


_DELTA_SECONDS = re.compile(r"[0-9]{1,9}")
"""RFC 9110's delta-seconds, ASCII digits only (``str.isdigit`` takes ``²`` and ``٣``), at most
nine of them (31 years): a longer run is no wait a service means, and Python refuses to parse
thousands of digits. What is taken is then bounded by the shared view's longest pause."""
MAX_RETRY_DATE_AHEAD = timedelta(days=366)
"""An HTTP-date further ahead than this is no wait a service means (year 9999 was seen)."""


def retry_after(headers: httpx.Headers) -> float | None:
    """``Retry-After`` in seconds (delta-seconds, or a date at most a year ahead: an HTTP date,
    or an RFC 3339 date-time as Zoom sends it; a date past is 0), or None for anything else,
    with a warning naming the header: what the service sent is ignored rather than trusted, and
    parsing it never raises."""
    raw = headers.get("retry-after", "").strip()
    if not raw:
        return None
    if _DELTA_SECONDS.fullmatch(raw):
        return float(int(raw))
    when = rfc3339.date_time(raw) or _http_date(raw)
    now = datetime.now(UTC)
    if when is not None and when - now <= MAX_RETRY_DATE_AHEAD:
        return max((when - now).total_seconds(), 0.0)
    log_event(
        logger,
        logging.WARNING,
        "registrar.retry_after_ignored",
        header="Retry-After",
        reason="neither up to 9 digits of seconds nor a date within a year",
        length=len(raw),
    )
    return None
