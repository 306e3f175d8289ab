"""bulkRegister over HTTP against the online-session service (DESIGN.md, pinned)."""

from typing import Annotated, Any

import httpx
from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError

from jlg_pipeline.domain.errors import ConfigError, RegistrarRejected, RegistrarUnavailable
from jlg_pipeline.domain.models import BulkRegisterRequest, BulkRegisterResult

BULK_REGISTER_PATH = "/online-session/bulk-register"
DEFAULT_TIMEOUT = httpx.Timeout(30.0, connect=5.0)
_BODY_EXCERPT_CHARS = 300


class _Answer(BaseModel):
    model_config = ConfigDict(extra="ignore")

    jobId: StrictStr | StrictInt
    total: Annotated[StrictInt, Field(ge=0)]


class HttpRegistrar:
    """``POST {base_url}/online-session/bulk-register`` with a bearer token.

    Timeouts, connection errors and 5xx raise RegistrarUnavailable (retryable); any other
    non-2xx and any answer that is not ``{"jobId", "total"}`` raise RegistrarRejected.
    """

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: httpx.Timeout = DEFAULT_TIMEOUT,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ConfigError("JLG_ONLINE_SESSION_URL must be an http(s) URL")
        if not token:
            raise ConfigError("JLG_ONLINE_SESSION_TOKEN is required with JLG_REGISTRAR=http")
        self._client = httpx.Client(
            base_url=base_url.rstrip("/"),
            headers={"Authorization": f"Bearer {token}", "Accept": "application/json"},
            timeout=timeout,
            transport=transport,
            follow_redirects=False,
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
        try:
            response = self._client.post(BULK_REGISTER_PATH, json=body)
        except httpx.TimeoutException as exc:
            raise RegistrarUnavailable(f"bulkRegister timed out: {exc!r}") from exc
        except httpx.TransportError as exc:
            raise RegistrarUnavailable(f"bulkRegister could not connect: {exc!r}") from exc
        if response.status_code >= 500:
            raise RegistrarUnavailable(
                f"bulkRegister answered {response.status_code}: {_excerpt(response)}"
            )
        if not response.is_success:
            raise RegistrarRejected(
                f"bulkRegister answered {response.status_code}: {_excerpt(response)}"
            )
        try:
            answer = _Answer.model_validate_json(response.content)
        except ValidationError as exc:
            raise RegistrarRejected(
                f"bulkRegister answered 200 without a valid {{jobId, total}}: {_excerpt(response)}"
            ) from exc
        return BulkRegisterResult(job_id=str(answer.jobId), total=answer.total)


def _excerpt(response: httpx.Response) -> str:
    return response.text[:_BODY_EXCERPT_CHARS] or "(empty body)"
