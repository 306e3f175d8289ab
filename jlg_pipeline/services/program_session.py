"""ProgramSessionService: set or clear a session's link-generation time, then schedule.

One transaction for the direct UPDATE (the repository's single statement), then the
best-effort scheduler call after commit, so an AWS failure never undoes the admin's intent.
"""

from collections.abc import Callable
from datetime import datetime
from typing import Any

from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.domain.errors import GenerationInProgress, SessionNotFound
from jlg_pipeline.domain.models import LinkGenerationState, SetOutcome
from jlg_pipeline.services.join_link_scheduler import JoinLinkScheduler

Defer = Callable[[Callable[..., Any]], None]
"""Runs the scheduler call: now by default; the web app runs it after the response is sent."""


def run_now(call: Callable[..., Any]) -> None:
    call()


class ProgramSessionService:
    def __init__(self, repository: ProgramSessionRepository, scheduler: JoinLinkScheduler) -> None:
        self._repository = repository
        self._scheduler = scheduler

    def count_by_status(self) -> dict[str, int]:
        """Sessions that are not soft-deleted, by link-generation status (for metrics)."""
        return self._repository.count_by_status()

    def get_link_generation(self, session_id: int) -> LinkGenerationState:
        state = self._repository.get_state(session_id)
        if state is None or state.deleted:
            raise SessionNotFound(f"program session {session_id} not found")
        return state

    def set_link_generation(
        self,
        session_id: int,
        link_generation_at: datetime | None,
        actor_user_id: int,
        defer: Defer = run_now,
    ) -> LinkGenerationState:
        """Arm (a time) or clear (None). Raises SessionNotFound, or GenerationInProgress
        while a generation holds the claim and is not stale.

        The schedule upsert/delete is handed to ``defer`` after the commit. Running it late
        is safe: it is best effort, a stale or out-of-order schedule cannot generate early
        (the claim's due guard), and the sweep covers a schedule that never arrives.
        """
        result = self._repository.set_link_generation(session_id, link_generation_at, actor_user_id)
        if result.outcome is SetOutcome.NOT_FOUND:
            raise SessionNotFound(f"program session {session_id} not found")
        if result.outcome is SetOutcome.IN_PROGRESS or result.state is None:
            raise GenerationInProgress(
                f"program session {session_id} is generating join links now; try again when it ends"
            )
        if link_generation_at is None:
            defer(lambda: self._scheduler.delete_link_schedule(session_id))
        else:
            defer(
                lambda: self._scheduler.create_link_schedule(
                    session_id, link_generation_at, actor_user_id
                )
            )
        return result.state
