"""ProgramSessionService's orchestration without I/O: what each repository outcome becomes,
whether the schedule change is recorded, and that its fast path is handed to ``defer``
(after the write). What the database and the sync do is proven in the integration tier."""

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from jlg_pipeline.adapters.database import create_engine
from jlg_pipeline.adapters.schedule_outbox import ScheduleOutbox
from jlg_pipeline.domain.errors import GenerationInProgress, InvalidInput, SessionNotFound
from jlg_pipeline.domain.eventbridge_schedule import ScheduleTarget
from jlg_pipeline.domain.session_state import LinkGenerationState, SetOutcome, SetResult
from jlg_pipeline.domain.status import LinkGenerationStatus
from jlg_pipeline.domain.validation import SessionId
from jlg_pipeline.services.program_session import ProgramSessionService
from jlg_pipeline.services.schedule_sync import ScheduleSync
from tests.support.fakes import FakeScheduler

AT = datetime(2030, 1, 1, 9, tzinfo=UTC)
TARGET = ScheduleTarget("arn:aws:sqs:us-east-1:1:q", "arn:aws:iam::1:role/r")


def _state(at: datetime | None) -> LinkGenerationState:
    status = LinkGenerationStatus.SCHEDULED if at else LinkGenerationStatus.NOT_SCHEDULED
    return LinkGenerationState(SessionId(7), at, status, 0, None, None, AT, False, False, False)


class ScriptedRepository:
    def __init__(self, result: SetResult) -> None:
        self.result = result
        self.writes: list[tuple[int, datetime | None, int, bool]] = []

    def set_link_generation(
        self,
        session_id: int,
        at: datetime | None,
        actor: int,
        *,
        record_schedule_change: bool,
        future_only: bool,
    ) -> SetResult:
        assert future_only, "the API's rule: the database clock decides 'in the future'"
        self.writes.append((session_id, at, actor, record_schedule_change))
        return self.result


def _service(
    result: SetResult, *, enabled: bool = True
) -> tuple[ProgramSessionService, ScriptedRepository, FakeScheduler]:
    repository, fake = ScriptedRepository(result), FakeScheduler()
    # Never connects: the deferred call is not run here.
    outbox = ScheduleOutbox(create_engine("postgresql+psycopg://nobody@127.0.0.1:1/none"))
    service = ProgramSessionService(
        repository,  # type: ignore[arg-type]
        repository,  # type: ignore[arg-type]
        ScheduleSync(outbox, fake, TARGET, enabled=enabled),
    )
    return service, repository, fake


def test_arming_records_the_change_and_defers_its_fast_path() -> None:
    service, repository, fake = _service(
        SetResult(SetOutcome.UPDATED, _state(AT), schedule_version=3)
    )
    deferred: list[Callable[..., Any]] = []
    state = service.set_link_generation(SessionId(7), AT, 5, deferred.append)
    assert state.status is LinkGenerationStatus.SCHEDULED
    assert repository.writes == [(7, AT, 5, True)]
    assert len(deferred) == 1
    assert fake.calls == [], "nothing reaches AWS before the deferred call runs"


@pytest.mark.parametrize("target", [None, TARGET])
def test_with_the_scheduler_off_or_unconfigured_nothing_is_recorded(
    target: ScheduleTarget | None,
) -> None:
    repository = ScriptedRepository(SetResult(SetOutcome.UPDATED, _state(AT)))
    outbox = ScheduleOutbox(create_engine("postgresql+psycopg://nobody@127.0.0.1:1/none"))
    service = ProgramSessionService(
        repository,  # type: ignore[arg-type]
        repository,  # type: ignore[arg-type]
        ScheduleSync(outbox, FakeScheduler(), target, enabled=target is None),
    )
    deferred: list[Callable[..., Any]] = []
    service.set_link_generation(SessionId(7), AT, 5, deferred.append)
    assert repository.writes == [(7, AT, 5, False)]
    assert deferred == []


@pytest.mark.parametrize(
    ("outcome", "error"),
    [
        (SetOutcome.NOT_FOUND, SessionNotFound),
        (SetOutcome.IN_PROGRESS, GenerationInProgress),
        (SetOutcome.NOT_IN_FUTURE, InvalidInput),
    ],
)
def test_refusals_raise_and_defer_nothing(outcome: SetOutcome, error: type[Exception]) -> None:
    service, _, fake = _service(SetResult(outcome))
    deferred: list[Callable[..., Any]] = []
    with pytest.raises(error):
        service.set_link_generation(SessionId(7), AT, 5, deferred.append)
    assert deferred == []
    assert fake.calls == []
