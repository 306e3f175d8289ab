"""LOCAL ONLY: a stand-in for EventBridge Scheduler's delivery.

moto stores schedules but never fires them. This thread watches the emulated schedules and,
at each one's ``at(...)`` time, puts the target's input on the target queue and honours
ActionAfterCompletion (DELETE removes the schedule). It uses GetSchedule/ListSchedules,
which the production code never calls.
"""

import logging
import re
import threading
from datetime import UTC, datetime
from typing import Any

from jlg_pipeline.log import log_event

logger = logging.getLogger(__name__)
_AT = re.compile(r"at\((\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})\)")


def fire_time(expression: str) -> datetime | None:
    match = _AT.fullmatch(expression.strip())
    if match is None:
        return None
    return datetime.fromisoformat(match.group(1)).replace(tzinfo=UTC)


class EventBridgeStandIn:
    def __init__(self, scheduler: Any, sqs: Any, *, interval_seconds: float = 1.0) -> None:
        self._scheduler = scheduler
        self._sqs = sqs
        self._interval = interval_seconds
        self._stop = threading.Event()
        self._fired: set[tuple[str, str, str]] = set()
        self._thread = threading.Thread(target=self._loop, name="eventbridge-standin", daemon=True)
        self.delivered = 0

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.tick(datetime.now(UTC))
            except Exception as exc:  # noqa: BLE001 - keep delivering; say what went wrong
                log_event(logger, logging.WARNING, "standin.tick_failed", error=repr(exc))

    def tick(self, now: datetime) -> int:
        """Deliver every schedule due at ``now``; returns how many were delivered."""
        delivered = 0
        for group in self._groups():
            for summary in self._schedules(group):
                schedule = self._scheduler.get_schedule(Name=summary["Name"], GroupName=group)
                key = (group, schedule["Name"], schedule["ScheduleExpression"])
                at = fire_time(schedule["ScheduleExpression"])
                if (
                    at is None
                    or at > now
                    or key in self._fired
                    or schedule.get("State") == "DISABLED"
                ):
                    continue
                target = schedule["Target"]
                queue_name = target["Arn"].rsplit(":", 1)[-1]
                queue_url = self._sqs.get_queue_url(QueueName=queue_name)["QueueUrl"]
                self._sqs.send_message(QueueUrl=queue_url, MessageBody=target.get("Input", "{}"))
                self._fired.add(key)
                delivered += 1
                if schedule.get("ActionAfterCompletion") == "DELETE":
                    self._scheduler.delete_schedule(Name=schedule["Name"], GroupName=group)
                log_event(
                    logger,
                    logging.INFO,
                    "standin.delivered",
                    schedule=schedule["Name"],
                    group=group,
                    queue=queue_name,
                )
        self.delivered += delivered
        return delivered

    def _groups(self) -> list[str]:
        groups = self._scheduler.list_schedule_groups().get("ScheduleGroups", [])
        return [g["Name"] for g in groups] or ["default"]

    def _schedules(self, group: str) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"GroupName": group}
            if token:
                kwargs["NextToken"] = token
            page = self._scheduler.list_schedules(**kwargs)
            found += page.get("Schedules", [])
            token = page.get("NextToken")
            if not token:
                return found
