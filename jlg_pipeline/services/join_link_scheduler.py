"""JoinLinkSchedulerService: best-effort registration of the per-session AWS schedule.

The database is the source of truth (TRD dec-01): every failure here is logged and
swallowed, and the fallback sweep generates whatever a missing schedule would have.
"""

import logging
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal, Protocol

from jlg_pipeline.domain.schedule import ScheduleTarget, schedule_name, schedule_request
from jlg_pipeline.log import log_event

logger = logging.getLogger(__name__)


class Scheduler(Protocol):
    def upsert(self, request: dict[str, Any]) -> Literal["updated", "created"]: ...

    def delete(self, name: str, group_name: str) -> bool: ...


class ScheduleAction(StrEnum):
    CREATED = "created"
    UPDATED = "updated"
    DELETED = "deleted"
    ABSENT = "absent"
    DISABLED = "disabled"
    UNCONFIGURED = "unconfigured"
    FAILED = "failed"


class JoinLinkScheduler:
    def __init__(
        self, scheduler: Scheduler | None, *, enabled: bool, target: ScheduleTarget | None
    ) -> None:
        self._scheduler = scheduler
        self._enabled = enabled
        self._target = target

    def _ready(
        self, session_id: int, operation: str
    ) -> tuple[Scheduler, ScheduleTarget] | ScheduleAction:
        """The adapter and target to call, or why nothing is called (logged)."""
        if not self._enabled:
            log_event(
                logger,
                logging.INFO,
                "scheduler.skipped",
                session_id=session_id,
                operation=operation,
                reason="ENABLE_JOIN_LINK_SCHEDULER is off",
            )
            return ScheduleAction.DISABLED
        if self._scheduler is None or self._target is None:
            log_event(
                logger,
                logging.WARNING,
                "scheduler.skipped",
                session_id=session_id,
                operation=operation,
                reason="AWS_SCHEDULER_TARGET_QUEUE_ARN or AWS_SCHEDULER_EXECUTION_ROLE_ARN unset",
            )
            return ScheduleAction.UNCONFIGURED
        return self._scheduler, self._target

    def create_link_schedule(
        self, session_id: int, fire_at: datetime, actor_user_id: int | None
    ) -> ScheduleAction:
        ready = self._ready(session_id, "upsert")
        if isinstance(ready, ScheduleAction):
            return ready
        scheduler, target = ready
        request = schedule_request(session_id, fire_at, actor_user_id, target)
        try:
            action = ScheduleAction(scheduler.upsert(request))
        except Exception as exc:  # noqa: BLE001 - best effort: the sweep is the net
            return self._failed(session_id, "upsert", exc)
        log_event(
            logger,
            logging.INFO,
            f"scheduler.{action.value}",
            session_id=session_id,
            schedule=request["Name"],
            expression=request["ScheduleExpression"],
        )
        return action

    def delete_link_schedule(self, session_id: int) -> ScheduleAction:
        ready = self._ready(session_id, "delete")
        if isinstance(ready, ScheduleAction):
            return ready
        scheduler, target = ready
        name = schedule_name(session_id)
        try:
            existed = scheduler.delete(name, target.group_name)
        except Exception as exc:  # noqa: BLE001 - best effort: a stray event loses its claim
            return self._failed(session_id, "delete", exc)
        action = ScheduleAction.DELETED if existed else ScheduleAction.ABSENT
        log_event(
            logger, logging.INFO, f"scheduler.{action.value}", session_id=session_id, schedule=name
        )
        return action

    @staticmethod
    def _failed(session_id: int, operation: str, exc: Exception) -> ScheduleAction:
        log_event(
            logger,
            logging.ERROR,
            "scheduler.failed",
            session_id=session_id,
            operation=operation,
            error=f"{type(exc).__name__}: {exc}",
            note="the database stays the truth; the fallback sweep will generate",
        )
        return ScheduleAction.FAILED
