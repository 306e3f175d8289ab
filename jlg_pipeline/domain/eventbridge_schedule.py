"""The one-time EventBridge schedule for a session, as plain data (docs/design.md, pinned)."""

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from jlg_pipeline.domain.constants import MAX_EVENT_AGE_SECONDS, MAX_RETRY_ATTEMPTS
from jlg_pipeline.domain.messages import build_message, correlation_id

DEFAULT_GROUP = "default"


def schedule_name(session_id: int) -> str:
    return correlation_id(session_id)


def at_expression(fire_at: datetime) -> str:
    """``at(yyyy-mm-ddThh:mm:ss)`` in UTC. Sub-seconds are dropped: the schedule may fire
    up to a second early, well inside the claim's due tolerance."""
    return f"at({fire_at.astimezone(UTC):%Y-%m-%dT%H:%M:%S})"


@dataclass(frozen=True, slots=True)
class ScheduleTarget:
    queue_arn: str
    role_arn: str
    group_name: str = DEFAULT_GROUP

    @classmethod
    def of(
        cls, queue_arn: str | None, role_arn: str | None, group_name: str | None = None
    ) -> "ScheduleTarget | None":
        """The target, or None unless both ARNs are given (no schedule change is recorded
        then, as with the scheduler off); the group is ``default`` unless named."""
        if not (queue_arn and role_arn):
            return None
        return cls(queue_arn, role_arn, group_name or DEFAULT_GROUP)


def schedule_request(
    session_id: int, fire_at: datetime, actor_user_id: int | None, target: ScheduleTarget
) -> dict[str, Any]:
    """The CreateSchedule / UpdateSchedule parameters, exactly as pinned."""
    return {
        "Name": schedule_name(session_id),
        "GroupName": target.group_name,
        "ScheduleExpression": at_expression(fire_at),
        "ScheduleExpressionTimezone": "UTC",
        "FlexibleTimeWindow": {"Mode": "OFF"},
        "Target": {
            "Arn": target.queue_arn,
            "RoleArn": target.role_arn,
            "Input": json.dumps(build_message(session_id, actor_user_id), separators=(",", ":")),
            "RetryPolicy": {
                "MaximumRetryAttempts": MAX_RETRY_ATTEMPTS,
                "MaximumEventAgeInSeconds": MAX_EVENT_AGE_SECONDS,
            },
        },
        "ActionAfterCompletion": "DELETE",
        "State": "ENABLED",
        "Description": f"Generate join links for program session {session_id}",
    }
