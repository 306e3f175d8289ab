"""Request and response bodies (TRD iface-01, iface-02), validated with pydantic v2."""

import json
import re
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError, WithJsonSchema

from jlg_pipeline.domain.constants import BIGINT_MAX
from jlg_pipeline.domain.errors import InvalidInput
from jlg_pipeline.domain.models import (
    AttemptOutcome,
    AttemptRecord,
    IntentChange,
    LinkGenerationState,
)
from jlg_pipeline.domain.status import LinkGenerationStatus
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
    linkGenerationStatus: LinkGenerationStatus

    @classmethod
    def of(cls, state: LinkGenerationState) -> "LinkGenerationResponse":
        return cls(
            id=state.id,
            linkGenerationAt=utc_z(state.link_generation_at),
            linkGenerationStatus=state.status,
        )


class AttemptResponse(BaseModel):
    """One claim of the session and how it ended; ``lagMs`` = claimedAt - the cycle's time."""

    attempt: int
    trigger: str = Field(description="event, cron, backfill, manual, direct or watchdog")
    runId: str | None = Field(description="The Dagster run that claimed, when one did")
    claimedAt: str
    finishedAt: str | None
    outcome: AttemptOutcome
    jobId: str | None
    total: int | None
    error: str | None
    lagMs: int

    @classmethod
    def of(cls, record: AttemptRecord) -> "AttemptResponse":
        return cls(
            attempt=record.attempt,
            trigger=record.trigger,
            runId=record.run_id,
            claimedAt=utc_z(record.claimed_at) or "",
            finishedAt=utc_z(record.finished_at),
            outcome=record.outcome,
            jobId=record.job_id,
            total=record.total,
            error=record.error,
            lagMs=round(record.lag.total_seconds() * 1000),
        )


class ChangeResponse(BaseModel):
    """One admin set or clear of the session's time, as recorded with the UPDATE."""

    changedAt: str
    actorUserId: int | None = Field(description="The admin (the token's sub)")
    linkGenerationAt: str | None = Field(description="The time set; null for a clear")
    previousLinkGenerationAt: str | None = Field(description="The time it replaced")

    @classmethod
    def of(cls, change: IntentChange) -> "ChangeResponse":
        return cls(
            changedAt=utc_z(change.changed_at) or "",
            actorUserId=change.actor_user_id,
            linkGenerationAt=utc_z(change.link_generation_at),
            previousLinkGenerationAt=utc_z(change.previous_link_generation_at),
        )


class SessionListItem(BaseModel):
    id: int
    linkGenerationAt: str | None
    linkGenerationStatus: LinkGenerationStatus
    attempt: int
    lastError: str | None
    updatedAt: str

    @classmethod
    def of(cls, state: LinkGenerationState) -> "SessionListItem":
        return cls(
            id=state.id,
            linkGenerationAt=utc_z(state.link_generation_at),
            linkGenerationStatus=state.status,
            attempt=state.attempt,
            lastError=state.last_error,
            updatedAt=utc_z(state.updated_at) or "",
        )


class SessionPage(BaseModel):
    items: list[SessionListItem]
    nextAfterId: int | None = Field(
        description="Pass as afterId for the next page; null at the end"
    )


class ErrorBody(BaseModel):
    code: str
    message: str


class ErrorEnvelope(BaseModel):
    """Every error answer: ``{"success": false, "data": null, "error": {code, message}}``."""

    success: Literal[False]
    data: None
    error: ErrorBody


def body(model: BaseModel) -> dict[str, Any]:
    """A response model as the JSON the envelope carries (the shape the OpenAPI document
    gives it)."""
    return model.model_dump(mode="json")


LISTING_PARAMETERS = {"status", "limit", "afterId"}
MAX_LIST_LIMIT = 500
DEFAULT_LIST_LIMIT = 50


def parse_listing_query(
    query: list[tuple[str, str]],
) -> tuple[LinkGenerationStatus | None, int, int]:
    """``status`` (one of the five), ``limit`` (1-500, default 50), ``afterId`` (≥ 0,
    default 0), each at most once; anything else is InvalidInput."""
    seen: dict[str, str] = {}
    for name, value in query:
        if name not in LISTING_PARAMETERS:
            raise InvalidInput(f"unknown query parameter {name[:40]!r}; use status, limit, afterId")
        if name in seen:
            raise InvalidInput(f"query parameter {name} given more than once")
        seen[name] = value
    status = None
    if "status" in seen:
        try:
            status = LinkGenerationStatus(seen["status"])
        except ValueError:
            names = ", ".join(s.value for s in LinkGenerationStatus)
            raise InvalidInput(f"status must be one of {names}") from None
    limit = _whole(seen, "limit", DEFAULT_LIST_LIMIT, 1, MAX_LIST_LIMIT)
    after_id = _whole(seen, "afterId", 0, 0, BIGINT_MAX)
    return status, limit, after_id


def _whole(seen: dict[str, str], name: str, default: int, low: int, high: int) -> int:
    raw = seen.get(name)
    if raw is None:
        return default
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 19 and low <= int(raw) <= high):
        raise InvalidInput(f"{name} must be a whole number from {low} to {high}")
    return int(raw)


def parse_session_id(raw: str) -> int:
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 19 and 1 <= int(raw) <= BIGINT_MAX):
        raise InvalidInput(f"program session id must be a positive integer, got {raw[:40]!r}")
    return int(raw)


def parse_set_body(raw: bytes) -> datetime | None:
    """The body's time as an aware UTC datetime, or None to clear. Whether it lies in the
    future is the database clock's to say (the one that decides "due"), not this host's.

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
    return parse_rfc3339(dto.linkGenerationAt)


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
