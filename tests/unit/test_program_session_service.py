"""ProgramSessionService's orchestration without I/O: what each repository outcome becomes,
and which schedule call follows (handed to ``defer``, after the write). The repository here
only scripts outcomes; what the database does is proven in the integration tier."""

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from jlg_pipeline.domain.errors import GenerationInProgress, SessionNotFound
from jlg_pipeline.domain.models import LinkGenerationState, SetOutcome, SetResult
from jlg_pipeline.domain.schedule import ScheduleTarget
from jlg_pipeline.domain.status import LinkGenerationStatus
from jlg_pipeline.services.join_link_scheduler import JoinLinkScheduler
from jlg_pipeline.services.program_session import ProgramSessionService
from tests.support.fakes import FakeScheduler

AT = datetime(2030, 1, 1, 9, tzinfo=UTC)
TARGET = ScheduleTarget("arn:aws:sqs:us-east-1:1:q", "arn:aws:iam::1:role/r")


def _state(at: datetime | None) -> LinkGenerationState:
    status = LinkGenerationStatus.SCHEDULED if at else LinkGenerationStatus.NOT_SCHEDULED
    return LinkGenerationState(7, at, status, 0, None, None, AT, False, False, False)


class ScriptedRepository:
    def __init__(self, result: SetResult) -> None:
        self.result = result
        self.writes: list[tuple[int, datetime | None, int]] = []

    def set_link_generation(self, session_id: int, at: datetime | None, actor: int) -> SetResult:
        self.writes.append((session_id, at, actor))
        return self.result


def _service(result: SetResult) -> tuple[ProgramSessionService, ScriptedRepository, FakeScheduler]:
    repository, fake = ScriptedRepository(result), FakeScheduler()
    service = ProgramSessionService(
        repository,  # type: ignore[arg-type]
        JoinLinkScheduler(fake, enabled=True, target=TARGET),
    )
    return service, repository, fake


def test_arming_writes_then_hands_the_upsert_to_defer() -> None:
    service, repository, fake = _service(SetResult(SetOutcome.UPDATED, _state(AT)))
    deferred: list[Callable[..., Any]] = []
    state = service.set_link_generation(7, AT, 5, deferred.append)
    assert state.status is LinkGenerationStatus.SCHEDULED
    assert repository.writes == [(7, AT, 5)]
    assert fake.calls == [], "nothing reaches AWS before the deferred call runs"
    deferred[0]()
    assert fake.calls == [("upsert", "join-link-7")]


def test_clearing_deletes_the_schedule() -> None:
    service, _, fake = _service(SetResult(SetOutcome.UPDATED, _state(None)))
    service.set_link_generation(7, None, 5)
    assert fake.calls == [("delete", "join-link-7")]


@pytest.mark.parametrize(
    ("outcome", "error"),
    [(SetOutcome.NOT_FOUND, SessionNotFound), (SetOutcome.IN_PROGRESS, GenerationInProgress)],
)
def test_refusals_raise_and_touch_no_schedule(outcome: SetOutcome, error: type[Exception]) -> None:
    service, _, fake = _service(SetResult(outcome))
    with pytest.raises(error):
        service.set_link_generation(7, AT, 5)
    assert fake.calls == []
