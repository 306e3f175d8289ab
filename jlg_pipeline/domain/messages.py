"""The JOIN_LINK_GENERATION SQS message (TRD event-01), pinned in docs/design.md.

Built by the scheduler as the schedule's target input; parsed by the queue consumer.
"""

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from jlg_pipeline.domain import validation
from jlg_pipeline.domain.errors import InvalidMessage
from jlg_pipeline.domain.generation import BulkRegisterRequest

QUEUE_TYPE = "EVENT"
SUB_TYPE = "JOIN_LINK_GENERATION"
SCHEDULE_NAME_PREFIX = "join-link-"


def correlation_id(session_id: int) -> str:
    """Also the deterministic schedule name: ``join-link-<id>``."""
    return f"{SCHEDULE_NAME_PREFIX}{session_id}"


def cycle_id(session_id: int, link_generation_at: datetime) -> str:
    """``join-link-<id>@<time>``: one cycle of a session (the message's correlation id,
    ``join-link-<id>``, is the same for every cycle). The ``jlg/cycle`` tag, and the
    idempotency key of the cycle's bulkRegister calls."""
    return f"{correlation_id(session_id)}@{link_generation_at.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}"


class JoinLinkGenerationData(BaseModel):
    """The event's data. Its field rules are the domain's (``validation``, through
    :class:`BulkRegisterRequest`): the message only says which fields exist."""

    model_config = ConfigDict(extra="ignore")

    programSessionId: Any
    role: Any = None
    batchSize: Any = None
    actorUserId: Any = None
    _request: BulkRegisterRequest | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _domain_rules(self) -> "JoinLinkGenerationData":
        # InvalidInput is a ValueError: pydantic reports it at this model's location.
        self._request = BulkRegisterRequest.parse(
            self.programSessionId, self.role, self.batchSize, self.actorUserId
        )
        return self

    def request(self) -> BulkRegisterRequest:
        """The bulkRegister request the message asks for (its fields already checked)."""
        assert self._request is not None, "validated when parsed"
        return self._request


def _message_text(value: object, info: ValidationInfo) -> str | None:
    return validation.text(value, str(info.field_name), validation.MAX_MESSAGE_TEXT_CHARS)


class JoinLinkGenerationMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    queueType: Literal["EVENT"]
    subType: Literal["JOIN_LINK_GENERATION"]
    timestamp: Any = None
    correlationId: Any = None
    data: JoinLinkGenerationData

    _text = field_validator("timestamp", "correlationId")(_message_text)


def build_message(
    session_id: int, actor_user_id: int | None, now: datetime | None = None
) -> dict[str, Any]:
    """The message body a schedule delivers for this session (optional fields omitted),
    its actor checked by the message's own rule (the id is a SessionId already): a schedule
    never carries a message the queue's reader would drop (InvalidInput instead, before any
    call)."""
    data: dict[str, Any] = {"programSessionId": session_id}
    if actor_user_id is not None:
        data["actorUserId"] = validation.actor_user_id(actor_user_id)
    stamp = (now or datetime.now(UTC)).astimezone(UTC)
    return {
        "queueType": QUEUE_TYPE,
        "subType": SUB_TYPE,
        "timestamp": stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "correlationId": correlation_id(session_id),
        "data": data,
    }


def parse_message(body: str) -> JoinLinkGenerationMessage:
    """The validated message, or InvalidMessage naming what is wrong (non-retryable)."""
    try:
        return JoinLinkGenerationMessage.model_validate_json(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        if first["type"] == "json_invalid":
            raise InvalidMessage("body is not JSON") from None
        reason = first["msg"].removeprefix("Value error, ")
        raise InvalidMessage(f"{where}: {reason}") from None
