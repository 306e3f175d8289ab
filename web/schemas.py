"""Request and response bodies (TRD iface-01, iface-02), validated with pydantic v2."""

from datetime import datetime
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
    WithJsonSchema,
    model_serializer,
)

from jlg_pipeline.domain import validation
from jlg_pipeline.domain.attempts import AttemptOutcome, AttemptRecord
from jlg_pipeline.domain.programme_actions import (
    MAX_OPERATION_SESSIONS,
    MAX_SHIFT_S,
    OperationRecord,
    OperationResult,
    Preview,
    Skipped,
)
from jlg_pipeline.domain.session_state import IntentChange, LinkGenerationState
from jlg_pipeline.domain.status import LinkGenerationStatus
from jlg_pipeline.services.why import HoldKind, Why, why_body
from web.envelope import utc_z

RFC3339Text = Annotated[StrictStr, WithJsonSchema({"type": "string", "format": "date-time"})]
TimeText = Annotated[str, WithJsonSchema({"type": "string", "format": "date-time"})]
"""A time in an answer: UTC, ending in Z, declared so a generated client parses it."""


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
    linkGenerationAt: TimeText | None = Field(
        description="UTC, ending in Z; null when not scheduled"
    )
    linkGenerationStatus: LinkGenerationStatus

    @classmethod
    def of(cls, state: LinkGenerationState) -> "LinkGenerationResponse":
        return cls(
            id=state.id,
            linkGenerationStatus=state.status,
            **cls.times(linkGenerationAt=state.link_generation_at),
        )


class LinkGenerationReadResponse(LinkGenerationResponse):
    """The GET's answer: the PATCH's, and when the queue retries a FAILED session."""

    retryAt: TimeText | None = Field(
        description="FAILED and retryable: when the queue takes it again (UTC, ending in Z); "
        "null otherwise (GET .../why says what holds it)"
    )

    @classmethod
    def of(cls, state: LinkGenerationState) -> "LinkGenerationReadResponse":
        failed = state.status is LinkGenerationStatus.FAILED
        return cls(
            id=state.id,
            linkGenerationStatus=state.status,
            **cls.times(
                linkGenerationAt=state.link_generation_at,
                retryAt=state.retry_at if failed else None,
            ),
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
    linkGenerationAt: TimeText | None = Field(description="Now")
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
    createdAt: TimeText
    finishedAt: TimeText | None = Field(description="null while sessions are left to act on")
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
    claimedAt: TimeText
    finishedAt: TimeText | None
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


class WhyHold(BaseModel):
    hold: str = Field(description="What holds it: " + ", ".join(k.value for k in HoldKind))
    until: TimeText | None = Field(description="When it ends (UTC); null: a person ends it")
    byPerson: bool = Field(description="Only a person ends it")
    endsLast: bool = Field(description="Of two or more holds, the one that ends last")
    detail: str


class WhyAttempt(BaseModel):
    attempt: int
    trigger: str
    runId: str | None
    outcome: AttemptOutcome
    error: str | None
    claimedAt: TimeText | None
    lagMs: int


class WhyResponse(BaseModel):
    """Why a session is not generated yet (``jlg why`` prints the same answer)."""

    id: int
    linkGenerationStatus: LinkGenerationStatus
    linkGenerationAt: TimeText | None = Field(description="null when not set or out of range")
    attempt: int
    now: TimeText = Field(description="The database clock the queue decides by")
    waitsNow: bool = Field(description="A worker's claim may take it now (the queue's predicate)")
    claimableAt: TimeText | None = Field(
        description="When the queue may take it; null: not without a person's write"
    )
    holds: list[WhyHold]
    next: str = Field(description="The next thing that happens to it, in one line")
    nextAt: TimeText | None = Field(description="When; null: nothing until a person acts")
    attempts: list[WhyAttempt] = Field(description="Its last attempts, newest first")

    @classmethod
    def of(cls, why: Why) -> "WhyResponse":
        return cls.model_validate(why_body(why))


class ChangeResponse(ShowsTimes):
    """One admin set or clear of the session's time, as recorded with the UPDATE."""

    changedAt: TimeText
    actorUserId: int | None = Field(description="The admin (the token's sub)")
    linkGenerationAt: TimeText | None = Field(description="The time set; null for a clear")
    previousLinkGenerationAt: TimeText | None = Field(description="The time it replaced")

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
    linkGenerationAt: TimeText | None
    linkGenerationStatus: LinkGenerationStatus
    attempt: int
    lastError: str | None
    updatedAt: TimeText

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
