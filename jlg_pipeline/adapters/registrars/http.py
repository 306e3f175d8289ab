"""bulkRegister over HTTP against the online-session service (DESIGN.md, pinned).

One call has an overall deadline (connect, send and reading the whole answer) and reads at
most ``max_answer_bytes``: httpx's own timeouts apply per read, so an answer that trickles in
would otherwise hold the call, and the claim, for as long as the service likes. Errors keep
the status code and at most a short error code from the answer, never its body: an upstream
answer may echo our request, bearer token included, and errors reach the row, the logs and
the Dagster UI.
"""

import json
import re
import socket
import threading
import time
from contextlib import suppress
from email.utils import parsedate_to_datetime
from typing import Annotated, Any

import httpx
from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError

from jlg_pipeline.domain.errors import ConfigError, RegistrarRejected, RegistrarUnavailable
from jlg_pipeline.domain.models import BulkRegisterRequest, BulkRegisterResult

BULK_REGISTER_PATH = "/online-session/bulk-register"
DEFAULT_TIMEOUT_S = 300.0
CONNECT_TIMEOUT_S = 10.0
MAX_ANSWER_BYTES = 64 * 1024
RETRYABLE_STATUSES = frozenset({408, 429})
_ERROR_CODE = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,39}")


class _Answer(BaseModel):
    model_config = ConfigDict(extra="ignore")

    jobId: StrictStr | StrictInt
    total: Annotated[StrictInt, Field(ge=0)]


class _Watchdog:
    """Shuts the call's socket down at the deadline, wherever the call is blocked."""

    def __init__(self, seconds: float) -> None:
        self.expired = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def trace(self, event: str, info: dict[str, Any]) -> None:
        """httpcore's trace hook: remember each socket this call opens."""
        if event != "connection.connect_tcp.complete" or info.get("return_value") is None:
            return
        sock = info["return_value"].get_extra_info("socket")
        if isinstance(sock, socket.socket):
            with self._lock:
                self._sockets.append(sock)
                if self.expired:
                    self._shutdown(sock)

    def _fire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self._sockets:
                self._shutdown(sock)

    @staticmethod
    def _shutdown(sock: socket.socket) -> None:
        with suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)

    def cancel(self) -> None:
        self._timer.cancel()


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
        timeout_s: float = DEFAULT_TIMEOUT_S,
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
            # A fresh connection per call: the watchdog finds the socket as it is opened.
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
        watchdog = _Watchdog(self._timeout_s)
        started = time.monotonic()
        try:
            with self._client.stream(
                "POST", BULK_REGISTER_PATH, json=body, extensions={"trace": watchdog.trace}
            ) as response:
                content = self._read_capped(response)
        except httpx.HTTPError as exc:
            if watchdog.expired or time.monotonic() - started >= self._timeout_s:
                raise RegistrarUnavailable(
                    f"bulkRegister exceeded its {self._timeout_s:g}s deadline"
                ) from exc
            if isinstance(exc, httpx.TimeoutException):
                raise RegistrarUnavailable(
                    f"bulkRegister timed out ({type(exc).__name__})"
                ) from exc
            raise RegistrarUnavailable(
                f"bulkRegister could not complete the call ({type(exc).__name__})"
            ) from exc
        finally:
            watchdog.cancel()
        return _result(response, content)

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


def _result(response: httpx.Response, content: bytes) -> BulkRegisterResult:
    status = response.status_code
    if status >= 500 or status in RETRYABLE_STATUSES:
        raise RegistrarUnavailable(
            _describe(status, content), retry_after_s=retry_after(response.headers)
        )
    if not response.is_success:
        raise RegistrarRejected(_describe(status, content))
    try:
        answer = _Answer.model_validate_json(content)
    except ValidationError as exc:
        raise RegistrarRejected(
            f"bulkRegister answered {status} without a valid {{jobId, total}}"
        ) from exc
    return BulkRegisterResult(job_id=str(answer.jobId), total=answer.total)


def _too_large(status: int, limit: int) -> str:
    return f"bulkRegister answered {status} with more than {limit} bytes"


def _describe(status: int, content: bytes) -> str:
    code = error_code(content)
    return f"bulkRegister answered {status}" + (f" ({code})" if code else "")


def error_code(content: bytes) -> str | None:
    """A short machine-readable code from an error answer (``code``, ``error`` or
    ``error.code``), or None: never free text, which may echo what we sent."""
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
        if isinstance(candidate, str) and _ERROR_CODE.fullmatch(candidate):
            return candidate
    return None


def retry_after(headers: httpx.Headers) -> float | None:
    """``Retry-After`` in seconds (delta-seconds or an HTTP date), or None."""
    raw = headers.get("retry-after", "").strip()
    if not raw:
        return None
    if raw.isdigit():
        return float(raw)
    try:
        when = parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max(when.timestamp() - time.time(), 0.0)
