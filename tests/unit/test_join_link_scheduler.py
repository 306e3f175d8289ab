"""The best-effort scheduler service on a fake EventBridge Scheduler: the pinned request,
create then update, delete, and every failure swallowed with a log line."""

import json
import logging
from datetime import UTC, datetime

import pytest

from jlg_pipeline.domain.schedule import ScheduleTarget
from jlg_pipeline.services.join_link_scheduler import JoinLinkScheduler, ScheduleAction
from tests.support.fakes import FakeScheduler
from tests.support.logs import fields_of

TARGET = ScheduleTarget("arn:aws:sqs:us-east-1:123456789012:q", "arn:aws:iam::1:role/r", "jlg")
AT = datetime(2030, 1, 2, 3, 4, 5, 600000, tzinfo=UTC)


def test_the_first_call_creates_the_pinned_schedule_and_the_next_updates_it() -> None:
    fake = FakeScheduler()
    service = JoinLinkScheduler(fake, enabled=True, target=TARGET)
    assert service.create_link_schedule(7, AT, 3) is ScheduleAction.CREATED
    assert service.create_link_schedule(7, AT, 3) is ScheduleAction.UPDATED
    # The request's every pinned field is tested in test_schedule_and_message.py.
    request = fake.schedules["join-link-7"]
    assert (request["ScheduleExpression"], request["GroupName"]) == (
        "at(2030-01-02T03:04:05)",
        "jlg",
    )
    assert json.loads(request["Target"]["Input"])["data"]["programSessionId"] == 7


def test_delete_says_whether_there_was_a_schedule() -> None:
    fake = FakeScheduler()
    service = JoinLinkScheduler(fake, enabled=True, target=TARGET)
    service.create_link_schedule(7, AT, None)
    assert service.delete_link_schedule(7) is ScheduleAction.DELETED
    assert service.delete_link_schedule(7) is ScheduleAction.ABSENT


@pytest.mark.parametrize(
    ("enabled", "target", "action"),
    [(False, TARGET, ScheduleAction.DISABLED), (True, None, ScheduleAction.UNCONFIGURED)],
)
def test_nothing_is_called_when_off_or_unconfigured(
    enabled: bool, target: ScheduleTarget | None, action: ScheduleAction
) -> None:
    fake = FakeScheduler()
    service = JoinLinkScheduler(fake, enabled=enabled, target=target)
    assert service.create_link_schedule(7, AT, None) is action
    assert service.delete_link_schedule(7) is action
    assert fake.calls == []


def test_aws_failures_are_logged_and_swallowed(caplog: pytest.LogCaptureFixture) -> None:
    fake = FakeScheduler(error=ConnectionError("AWS unreachable"))
    service = JoinLinkScheduler(fake, enabled=True, target=TARGET)
    with caplog.at_level(logging.INFO):
        assert service.create_link_schedule(7, AT, None) is ScheduleAction.FAILED
        assert service.delete_link_schedule(7) is ScheduleAction.FAILED
    assert [f["operation"] for f in fields_of(caplog, "scheduler.failed")] == ["upsert", "delete"]
