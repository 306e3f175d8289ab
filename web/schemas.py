"""Request and response bodies (TRD iface-01, iface-02), validated with pydantic v2."""

import json
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError

from jlg_pipeline.domain.constants import BIGINT_MAX
from jlg_pipeline.domain.errors import InvalidInput
from jlg_pipeline.domain.models import LinkGenerationState
from web.envelope import utc_z

MAX_BODY_BYTES = 4096


class SetLinkGenerationDto(BaseModel):
    """``{"linkGenerationAt": "<future ISO-8601 with offset>" | null}``; nothing else."""

    model_config = ConfigDict(extra="forbid")

    linkGenerationAt: StrictStr | None = Field(
        ...,
        description="Future ISO-8601 date-time with a UTC offset (e.g. 2026-12-03T09:00:00Z), "
        "or null to clear.",
        examples=["2026-12-03T09:00:00Z", None],
    )


class LinkGenerationResponse(BaseModel):
    id: int
    linkGenerationAt: str | None = Field(description="UTC, ending in Z; null when not scheduled")
    linkGenerationStatus: Literal[
        "NOT_SCHEDULED", "SCHEDULED", "IN_PROGRESS", "COMPLETED", "FAILED"
    ]


def response_data(state: LinkGenerationState) -> dict[str, Any]:
    return {
        "id": state.id,
        "linkGenerationAt": utc_z(state.link_generation_at),
        "linkGenerationStatus": state.status.value,
    }


def parse_session_id(raw: str) -> int:
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 19 and 1 <= int(raw) <= BIGINT_MAX):
        raise InvalidInput(f"program session id must be a positive integer, got {raw[:40]!r}")
    return int(raw)


def parse_set_body(raw: bytes, now: datetime) -> datetime | None:
    """The body's time as an aware UTC datetime in the future, or None to clear.

    Raises InvalidInput with a message that names what is wrong.
    """
    if len(raw) > MAX_BODY_BYTES:
        raise InvalidInput(f"body larger than {MAX_BODY_BYTES} bytes")
    try:
        payload = json.loads(raw)
    except (ValueError, RecursionError):
        raise InvalidInput("body is not valid JSON") from None
    try:
        dto = SetLinkGenerationDto.model_validate(payload)
    except ValidationError as exc:
        raise InvalidInput(_describe(exc)) from None
    if dto.linkGenerationAt is None:
        return None
    text = dto.linkGenerationAt.strip()
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidInput("linkGenerationAt must be an ISO-8601 date-time") from None
    if parsed.utcoffset() is None:
        raise InvalidInput("linkGenerationAt must carry a UTC offset (e.g. Z or +02:00)")
    try:
        at = parsed.astimezone(UTC)
    except OverflowError:
        raise InvalidInput("linkGenerationAt is out of range") from None
    if at <= now:
        raise InvalidInput("linkGenerationAt must be in the future")
    return at


def _describe(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "body"
    kind = first["type"]
    if kind == "missing":
        return f"{where} is required"
    if kind == "extra_forbidden":
        return f"unknown field {where}"
    if kind == "model_type":
        return "body must be a JSON object"
    return f"{where}: must be a string date-time or null"
