"""Request and response bodies (TRD iface-01, iface-02), validated with pydantic v2."""

import json
import re
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError, WithJsonSchema

from jlg_pipeline.domain.constants import BIGINT_MAX
from jlg_pipeline.domain.errors import InvalidInput
from jlg_pipeline.domain.models import LinkGenerationState
from web.envelope import utc_z

MAX_BODY_BYTES = 4096
# RFC 3339's date-time, nothing looser: fromisoformat alone also takes a space separator,
# basic format, week dates and second-fraction offsets.
RFC3339 = re.compile(
    r"(\d{4}-\d{2}-\d{2})[Tt](\d{2}:\d{2}:\d{2})(?:\.(\d+))?([Zz]|[+-]\d{2}:\d{2})", re.ASCII
)


RFC3339Text = Annotated[StrictStr, WithJsonSchema({"type": "string", "format": "date-time"})]


class SetLinkGenerationDto(BaseModel):
    """``{"linkGenerationAt": "<future RFC 3339 date-time with offset>" | null}``; nothing
    else."""

    model_config = ConfigDict(extra="forbid")

    linkGenerationAt: RFC3339Text | None = Field(
        ...,
        description="Future RFC 3339 date-time with a UTC offset (e.g. 2026-12-03T09:00:00Z), "
        "or null to clear.",
        examples=["2026-12-03T09:00:00Z", None],
    )


class LinkGenerationResponse(BaseModel):
    id: int
    linkGenerationAt: str | None = Field(description="UTC, ending in Z; null when not scheduled")
    linkGenerationStatus: Literal[
        "NOT_SCHEDULED", "SCHEDULED", "IN_PROGRESS", "COMPLETED", "FAILED"
    ]


class ErrorBody(BaseModel):
    code: str
    message: str


class ErrorEnvelope(BaseModel):
    """Every error answer: ``{"success": false, "data": null, "error": {code, message}}``."""

    success: Literal[False]
    data: None
    error: ErrorBody


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
    at = parse_rfc3339(dto.linkGenerationAt)
    if at <= now:
        raise InvalidInput("linkGenerationAt must be in the future")
    return at


def parse_rfc3339(text: str) -> datetime:
    """An RFC 3339 date-time with its offset (``Z`` or ``±HH:MM``), as an aware UTC datetime."""
    match = RFC3339.fullmatch(text)
    if match is None:
        raise InvalidInput(
            "linkGenerationAt must be an RFC 3339 date-time with an offset, "
            "e.g. 2026-12-03T09:00:00Z or 2026-12-03T10:00:00+01:00"
        )
    date, clock, fraction, offset = match.groups()
    microseconds = f".{(fraction or '')[:6]:0<6}"
    offset = "+00:00" if offset in ("Z", "z") else offset
    try:
        return datetime.fromisoformat(f"{date}T{clock}{microseconds}{offset}").astimezone(UTC)
    except (ValueError, OverflowError):
        raise InvalidInput("linkGenerationAt is not a valid date-time in range") from None


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
