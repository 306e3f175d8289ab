"""Request and response bodies (TRD iface-01, iface-02), validated with pydantic v2."""

import json
import re
from datetime import UTC, datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
    WithJsonSchema,
    model_serializer,
)

from jlg_pipeline.domain import validation
from jlg_pipeline.domain.constants import BIGINT_MAX
from jlg_pipeline.domain.errors import InvalidInput
from jlg_pipeline.domain.models import (
    AttemptOutcome,
    AttemptRecord,
    IntentChange,
    LinkGenerationState,
)
from jlg_pipeline.domain.programme_actions import (
    MAX_OPERATION_SESSIONS,
    MAX_SHIFT_S,
    OperationRecord,
    OperationResult,
    Preview,
    ProgrammeAction,
    ProgrammeRequest,
    SessionFilter,
    Skipped,
)
from jlg_pipeline.domain.status import LinkGenerationStatus
from jlg_pipeline.domain.validation import SessionId
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


class ShowsTimes(BaseModel):
    """A body with stored times: one that no read can show as it is (past year 9999, the
    host's own write or an older release's shift) is null, and named in ``outOfRange``,
    present only then (a PATCH of a time or null repairs it)."""

    outOfRange: list[str] | None = Field(
        None, description="Times stored outside what can be shown (shown as null); absent if none"
    )

    @model_serializer(mode="wrap")
    def _without_an_empty_report(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        shown: dict[str, Any] = handler(self)
        if shown.get("outOfRange") is None:
            shown.pop("outOfRange", None)
        return shown

    @staticmethod
    def times(**stored: datetime | None) -> dict[str, Any]:
        """Each stored time as shown (UTC ending in Z, or null), and ``outOfRange`` naming
        those that cannot be."""
        unreadable = [name for name, at in stored.items() if validation.out_of_range(at)]
        shown: dict[str, Any] = {
            name: None if name in unreadable else utc_z(at) for name, at in stored.items()
        }
        return {**shown, "outOfRange": unreadable or None}


class LinkGenerationResponse(ShowsTimes):
    id: int
    linkGenerationAt: str | None = Field(description="UTC, ending in Z; null when not scheduled")
    linkGenerationStatus: LinkGenerationStatus

    @classmethod
    def of(cls, state: LinkGenerationState) -> "LinkGenerationResponse":
        return cls(
            id=state.id,
            linkGenerationStatus=state.status,
            **cls.times(linkGenerationAt=state.link_generation_at),
        )


class ProgrammeWhereDto(BaseModel):
    """Which of the programme's sessions: any of ``status``, a time in [``from``, ``to``)."""

    model_config = ConfigDict(extra="forbid")

    status: list[LinkGenerationStatus] | None = Field(
        None, min_length=1, description="Any of these statuses (omit for any)"
    )
    from_: RFC3339Text | None = Field(
        None, alias="from", description="linkGenerationAt at or after (RFC 3339)"
    )
    to: RFC3339Text | None = Field(None, description="linkGenerationAt before (RFC 3339)")


class ProgrammeActionDto(BaseModel):
    """A filter, exactly one action (``linkGenerationAt`` or ``shiftBy``) and the guard."""

    model_config = ConfigDict(extra="forbid")

    where: ProgrammeWhereDto | None = None
    linkGenerationAt: RFC3339Text | None = Field(
        None, description="Set every matched session to this future time; null clears"
    )
    shiftBy: StrictInt | None = Field(
        None,
        description="Move every matched session's time by this many seconds (not 0)",
        ge=-MAX_SHIFT_S,
        le=MAX_SHIFT_S,
    )
    expectedCount: StrictInt | None = Field(
        None,
        ge=0,
        le=MAX_OPERATION_SESSIONS,
        description="Required unless dryRun: how many sessions the dry run said match",
    )
    dryRun: StrictBool = Field(False, description="Answer what would change; change nothing")


class SkippedItem(BaseModel):
    id: int
    reason: str

    @classmethod
    def of(cls, skipped: Skipped) -> "SkippedItem":
        return cls(id=skipped.session_id, reason=skipped.reason)


class PreviewItem(ShowsTimes):
    id: int
    linkGenerationStatus: LinkGenerationStatus
    linkGenerationAt: str | None = Field(description="Now")
    newLinkGenerationAt: str | None = Field(description="After the action; null: cleared")
    skip: str | None = Field(description="Why it would be left as it is; null: it changes")

    @classmethod
    def of(cls, preview: Preview) -> "PreviewItem":
        return cls(
            id=preview.session_id,
            linkGenerationStatus=preview.status,
            skip=preview.skip,
            **cls.times(linkGenerationAt=preview.current_at, newLinkGenerationAt=preview.new_at),
        )


class OperationResponse(BaseModel):
    operationId: UUID | None = Field(description="null for a dry run (nothing is recorded)")
    matched: int
    changed: int = Field(description="Changed (a dry run: would change)")
    skipped: list[SkippedItem]
    dryRun: bool
    sessions: list[PreviewItem] | None = Field(
        None, description="A dry run's first 100 sessions by id, now and after"
    )

    @classmethod
    def of(cls, result: OperationResult) -> "OperationResponse":
        return cls(
            operationId=result.operation_id,
            matched=result.matched,
            changed=result.changed,
            skipped=[SkippedItem.of(s) for s in result.skipped],
            dryRun=result.dry_run,
            sessions=[PreviewItem.of(p) for p in result.preview] if result.dry_run else None,
        )


class OperationRecordResponse(BaseModel):
    operationId: UUID
    programId: int
    actorUserId: int
    createdAt: str
    finishedAt: str | None = Field(description="null while sessions are left to act on")
    request: dict[str, Any] = Field(description="The filter, the action and expectedCount")
    matched: int
    changed: int
    skipped: list[SkippedItem]
    pending: int = Field(description="Matched and not yet acted on (repeat with the same key)")

    @classmethod
    def of(cls, record: OperationRecord) -> "OperationRecordResponse":
        return cls(
            operationId=record.operation_id,
            programId=record.program_id,
            actorUserId=record.actor_user_id,
            createdAt=utc_z(record.created_at) or "",
            finishedAt=utc_z(record.finished_at),
            request=record.request,
            matched=record.matched,
            changed=record.changed,
            skipped=[SkippedItem.of(s) for s in record.skipped],
            pending=record.pending,
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


class ChangeResponse(ShowsTimes):
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
            **cls.times(
                linkGenerationAt=change.link_generation_at,
                previousLinkGenerationAt=change.previous_link_generation_at,
            ),
        )


class SessionListItem(ShowsTimes):
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
            linkGenerationStatus=state.status,
            attempt=state.attempt,
            **cls.times(linkGenerationAt=state.link_generation_at),
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
    matched: int | None = Field(
        None, description="With a 409 for a programme action: how many sessions match now"
    )


class ErrorEnvelope(BaseModel):
    """Every error answer: ``{"success": false, "data": null, "error": {code, message}}``."""

    success: Literal[False]
    data: None
    error: ErrorBody


def body(model: BaseModel) -> dict[str, Any]:
    """A response model as the JSON the envelope carries (the shape the OpenAPI document
    gives it)."""
    return model.model_dump(mode="json")


LISTING_PARAMETERS = {"programId", "status", "from", "to", "limit", "afterId"}
MAX_LIST_LIMIT = 500
DEFAULT_LIST_LIMIT = 50


def parse_listing_query(
    query: list[tuple[str, str]],
) -> tuple[SessionFilter, int, int]:
    """The filter a programme action takes (``programId``; ``status``, one or more of the
    five, comma-separated; ``from``/``to`` RFC 3339 bounds), ``limit`` (1-500, default 50),
    ``afterId`` (≥ 0, default 0), each at most once; anything else is InvalidInput."""
    seen: dict[str, str] = {}
    for name, value in query:
        if name not in LISTING_PARAMETERS:
            names = ", ".join(sorted(LISTING_PARAMETERS))
            raise InvalidInput(f"unknown query parameter {name[:40]!r}; use {names}")
        if name in seen:
            raise InvalidInput(f"query parameter {name} given more than once")
        seen[name] = value
    where = SessionFilter(
        program_id=_optional_whole(seen, "programId", 1, BIGINT_MAX),
        statuses=_statuses(seen["status"].split(",")) if "status" in seen else (),
        from_at=_moment(seen.get("from"), "from"),
        to_at=_moment(seen.get("to"), "to"),
    )
    limit = _whole(seen, "limit", DEFAULT_LIST_LIMIT, 1, MAX_LIST_LIMIT)
    after_id = _whole(seen, "afterId", 0, 0, BIGINT_MAX)
    return where, limit, after_id


def _statuses(values: list[str]) -> tuple[LinkGenerationStatus, ...]:
    try:
        return tuple(LinkGenerationStatus(v) for v in values)
    except ValueError:
        names = ", ".join(s.value for s in LinkGenerationStatus)
        raise InvalidInput(f"status must be one or more of {names}") from None


def _moment(text: str | None, name: str) -> datetime | None:
    return None if text is None else parse_rfc3339(text, name)


def _whole(seen: dict[str, str], name: str, default: int, low: int, high: int) -> int:
    found = _optional_whole(seen, name, low, high)
    return default if found is None else found


def _optional_whole(seen: dict[str, str], name: str, low: int, high: int) -> int | None:
    raw = seen.get(name)
    if raw is None:
        return None
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 19 and low <= int(raw) <= high):
        raise InvalidInput(f"{name} must be a whole number from {low} to {high}")
    return int(raw)


def parse_session_id(raw: str) -> SessionId:
    return validation.session_id(_digits(raw, "program session id"), "program session id")


def parse_program_id(raw: str) -> int:
    return validation.program_id(_digits(raw, "programId"))


def _digits(raw: str, name: str) -> int:
    """A path segment as a whole number (its range is the domain's rule)."""
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 19):
        raise InvalidInput(f"{name} must be a positive integer, got {raw[:40]!r}")
    return int(raw)


def parse_operation_id(raw: str) -> UUID:
    try:
        return UUID(raw)
    except ValueError:
        raise InvalidInput(f"operationId must be a UUID, got {raw[:40]!r}") from None


def _json(raw: bytes) -> Any:
    """The body as JSON (UTF-8, RFC 8259); a key given twice is refused rather than the last
    one silently winning, so what was checked is what was meant."""
    try:
        return json.loads(raw.decode("utf-8"), object_pairs_hook=_once_each)
    except InvalidInput:
        raise
    except (ValueError, RecursionError):
        raise InvalidInput("body is not valid JSON") from None


def _once_each(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) != len(pairs):
        raise InvalidInput("body gives a key more than once")
    return found


def parse_set_body(raw: bytes) -> datetime | None:
    """The body's time as an aware UTC datetime, or None to clear. Whether it lies in the
    future is the database clock's to say (the one that decides "due"), not this host's.

    Raises InvalidInput with a message that names what is wrong.
    """
    try:
        dto = SetLinkGenerationDto.model_validate(_json(raw))
    except ValidationError as exc:
        raise InvalidInput(_describe(exc)) from None
    if dto.linkGenerationAt is None:
        return None
    return parse_rfc3339(dto.linkGenerationAt)


def parse_programme_body(raw: bytes, program_id: int) -> ProgrammeRequest:
    """A programme action's body as the domain's checked request (InvalidInput names what
    is wrong): exactly one of ``linkGenerationAt`` (null clears) and ``shiftBy``."""
    try:
        dto = ProgrammeActionDto.model_validate(_json(raw))
    except ValidationError as exc:
        raise InvalidInput(_describe(exc, "")) from None
    given = dto.model_fields_set & {"linkGenerationAt", "shiftBy"}
    if len(given) != 1:
        raise InvalidInput("give exactly one action: linkGenerationAt or shiftBy")
    where = dto.where or ProgrammeWhereDto()
    return ProgrammeRequest(
        where=SessionFilter(
            program_id=program_id,
            statuses=tuple(where.status or ()),
            from_at=_moment(where.from_, "from"),
            to_at=_moment(where.to, "to"),
        ),
        action=_action(dto, given),
        expected_count=dto.expectedCount,
        dry_run=dto.dryRun,
    )


def _action(dto: ProgrammeActionDto, given: set[str]) -> ProgrammeAction:
    """The action the body names, by the field given, not by its value: a ``"shiftBy": null``
    is a mistake to refuse, never a clear."""
    if "shiftBy" not in given:
        return ProgrammeAction.setting(_moment(dto.linkGenerationAt, "linkGenerationAt"))
    if dto.shiftBy is None:
        raise InvalidInput("shiftBy must be a whole number of seconds, not null")
    return ProgrammeAction.shifting(dto.shiftBy)


def parse_rfc3339(text: str, name: str = "linkGenerationAt") -> datetime:
    """An RFC 3339 date-time with its offset (``Z`` or ``±HH:MM``), as an aware UTC datetime."""
    match = RFC3339.fullmatch(text)
    if match is None:
        raise InvalidInput(
            f"{name} must be an RFC 3339 date-time with an offset, "
            "e.g. 2026-12-03T09:00:00Z or 2026-12-03T10:00:00+01:00"
        )
    date, clock, fraction, offset = match.groups()
    microseconds = f".{(fraction or '')[:6]:0<6}"
    offset = "+00:00" if offset in ("Z", "z") else offset
    try:
        return datetime.fromisoformat(f"{date}T{clock}{microseconds}{offset}").astimezone(UTC)
    except (ValueError, OverflowError):
        raise InvalidInput(f"{name} is not a valid date-time in range") from None


def _describe(exc: ValidationError, fallback: str = ": must be a string date-time or null") -> str:
    """The first error, named by its field; never the input itself. ``fallback`` for a
    wrong type ('' says pydantic's own words, which name the type, not the value)."""
    first = exc.errors()[0]
    # A field name is the client's own text: bounded and escaped before it is repeated.
    where = validation.shown(".".join(str(p) for p in first["loc"])) or "body"
    kind = first["type"]
    if kind == "missing":
        return f"{where} is required"
    if kind == "extra_forbidden":
        return f"unknown field {where}"
    if kind == "model_type":
        return "body must be a JSON object"
    return f"{where}{fallback or ': ' + first['msg']}"
