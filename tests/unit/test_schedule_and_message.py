import json
from datetime import UTC, datetime, timedelta, timezone

import pytest
from pydantic import ValidationError

from jlg_pipeline.domain.eventbridge_schedule import ScheduleTarget, at_expression, schedule_request
from jlg_pipeline.domain.messages import JoinLinkGenerationMessage, build_message


def test_at_expression_is_utc_to_the_second() -> None:
    local = datetime(2026, 12, 3, 11, 0, 0, 750_000, tzinfo=timezone(timedelta(hours=2)))
    assert at_expression(local) == "at(2026-12-03T09:00:00)"


def test_schedule_request_is_the_pinned_shape() -> None:
    request = schedule_request(
        42, datetime(2027, 1, 1, tzinfo=UTC), None, ScheduleTarget("arn:q", "arn:r", "grp")
    )
    assert request["Name"] == "join-link-42"
    assert request["GroupName"] == "grp"
    assert request["FlexibleTimeWindow"] == {"Mode": "OFF"}
    assert request["ActionAfterCompletion"] == "DELETE"
    assert request["Target"]["RetryPolicy"] == {
        "MaximumRetryAttempts": 5,
        "MaximumEventAgeInSeconds": 86400,
    }
    message = json.loads(request["Target"]["Input"])
    assert message["data"] == {"programSessionId": 42}
    assert JoinLinkGenerationMessage.model_validate(message).data.programSessionId == 42


def test_built_message_round_trips() -> None:
    body = build_message(7, 3, now=datetime(2026, 12, 2, 10, 0, tzinfo=UTC))
    assert body == {
        "queueType": "EVENT",
        "subType": "JOIN_LINK_GENERATION",
        "timestamp": "2026-12-02T10:00:00.000Z",
        "correlationId": "join-link-7",
        "data": {"programSessionId": 7, "actorUserId": 3},
    }


@pytest.mark.parametrize(
    "data",
    [
        {},
        {"programSessionId": "7"},
        {"programSessionId": True},
        {"programSessionId": 0},
        {"programSessionId": 1.5},
        {"programSessionId": 2**63},
    ],
)
def test_message_rejects_bad_session_ids(data: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        JoinLinkGenerationMessage.model_validate(
            {"queueType": "EVENT", "subType": "JOIN_LINK_GENERATION", "data": data}
        )
