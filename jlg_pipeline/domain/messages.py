"""The JOIN_LINK_GENERATION SQS message (TRD event-01), pinned in DESIGN.md.

Built by the scheduler as the schedule's target input; parsed by the queue consumer.
"""

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError

from jlg_pipeline.domain.constants import BIGINT_MAX, INT_MAX, MAX_REGISTRAR_BATCH_SIZE
from jlg_pipeline.domain.errors import InvalidMessage
from jlg_pipeline.domain.models import BulkRegisterRequest

QUEUE_TYPE = "EVENT"
SUB_TYPE = "JOIN_LINK_GENERATION"
SCHEDULE_NAME_PREFIX = "join-link-"


def correlation_id(session_id: int) -> str:
    """Also the deterministic schedule name: ``join-link-<id>``."""
    return f"{SCHEDULE_NAME_PREFIX}{session_id}"


class JoinLinkGenerationData(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    programSessionId: Annotated[StrictInt, Field(ge=1, le=BIGINT_MAX)]
    role: Annotated[StrictStr, Field(min_length=1, max_length=64)] | None = None
    batchSize: Annotated[StrictInt, Field(ge=1, le=MAX_REGISTRAR_BATCH_SIZE)] | None = None
    actorUserId: Annotated[StrictInt, Field(ge=1, le=INT_MAX)] | None = None

    def request(self) -> BulkRegisterRequest:
        """The bulkRegister request the message asks for (its fields already checked)."""
        return BulkRegisterRequest(
            self.programSessionId, self.role, self.batchSize, self.actorUserId
        )


class JoinLinkGenerationMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    queueType: Literal["EVENT"]
    subType: Literal["JOIN_LINK_GENERATION"]
    timestamp: StrictStr | None = None
    correlationId: StrictStr | None = None
    data: JoinLinkGenerationData


def build_message(
    session_id: int, actor_user_id: int | None, now: datetime | None = None
) -> dict[str, Any]:
    """The message body a schedule delivers for this session (optional fields omitted)."""
    data: dict[str, Any] = {"programSessionId": session_id}
    if actor_user_id is not None:
        data["actorUserId"] = actor_user_id
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
        raise InvalidMessage(f"{where}: {first['msg']}") from None
