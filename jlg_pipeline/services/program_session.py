"""ProgramSessionService: set or clear a session's link-generation time.

One single UPDATE writes the time and, when the schedule is synced, the schedule change
it implies (the outbox); the change is applied after the commit, and whatever that call
fails to do stays pending for the sync job, so AWS never undoes or loses the admin's intent.
"""

from collections.abc import Callable
from datetime import datetime
from typing import Any

from jlg_pipeline.adapters.intent_writes import IntentWrites
from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.domain import validation
from jlg_pipeline.domain.attempts import AttemptRecord
from jlg_pipeline.domain.errors import GenerationInProgress, InvalidInput, SessionNotFound
from jlg_pipeline.domain.programme_actions import SessionFilter
from jlg_pipeline.domain.session_state import IntentChange, LinkGenerationState, SetOutcome
from jlg_pipeline.domain.validation import SessionId
from jlg_pipeline.services.schedule_sync import ScheduleSync

ATTEMPTS_SHOWN = 50
CHANGES_SHOWN = 50

Defer = Callable[[Callable[..., Any]], None]
"""Runs the schedule change's fast path: now by default; the web app runs it after the
response is sent."""


def run_now(call: Callable[..., Any]) -> None:
    call()


class ProgramSessionService:
    def __init__(
        self, repository: ProgramSessionRepository, intents: IntentWrites, sync: ScheduleSync
    ) -> None:
        self._repository = repository
        self._intents = intents
        self._sync = sync

    @property
    def records_schedule_changes(self) -> bool:
        """Whether a change of a session's time is written to the schedule outbox."""
        return self._sync.enabled

    def attempts(self, session_id: SessionId) -> list[AttemptRecord]:
        """The session's attempt history, newest first (at most 50)."""
        self.get_link_generation(session_id)
        return self._repository.attempts(session_id, ATTEMPTS_SHOWN)

    def changes(self, session_id: SessionId) -> list[IntentChange]:
        """Who changed the session's time, newest first (at most 50)."""
        self.get_link_generation(session_id)
        return self._repository.changes(session_id, CHANGES_SHOWN)

    def list_link_generation(
        self, where: SessionFilter, limit: int, after_id: int
    ) -> tuple[list[LinkGenerationState], int | None]:
        """A page of sessions by id (see ``ProgramSessionRepository.list_sessions``)."""
        return self._repository.list_sessions(where, limit, after_id)

    def get_link_generation(self, session_id: SessionId) -> LinkGenerationState:
        state = self._repository.get_state(session_id)
        if state is None or state.deleted:
            raise SessionNotFound(f"program session {session_id} not found")
        return state

    def set_link_generation(
        self,
        session_id: SessionId,
        link_generation_at: datetime | None,
        actor_user_id: int,
        defer: Defer = run_now,
    ) -> LinkGenerationState:
        """Arm (a time) or clear (None). Raises SessionNotFound; InvalidInput when the time
        is not in the future on the database clock (the one that decides "due"); or
        GenerationInProgress while a generation holds the claim and is not stale.

        Applying the schedule change is handed to ``defer`` after the commit. Running it late
        is safe: it applies the session's newest change, whatever it was handed for, and what
        it cannot apply the sync job retries.
        """
        result = self._intents.set_link_generation(
            session_id,
            link_generation_at,
            actor_user_id,
            record_schedule_change=self._sync.enabled,
            future_only=True,
        )
        if result.outcome is SetOutcome.NOT_FOUND:
            raise SessionNotFound(f"program session {session_id} not found")
        if result.outcome is SetOutcome.NOT_IN_FUTURE:
            raise InvalidInput("linkGenerationAt must be in the future")
        if result.outcome is SetOutcome.OUT_OF_RANGE:
            raise InvalidInput(f"linkGenerationAt {validation.HORIZON_REASON}")
        if result.outcome is SetOutcome.IN_PROGRESS or result.state is None:
            raise GenerationInProgress(
                f"program session {session_id} is generating join links now; try again when it ends"
            )
        if result.schedule_version is not None:
            synced = result.state.id
            defer(lambda: self._sync.apply_after_response(synced))
        return result.state
