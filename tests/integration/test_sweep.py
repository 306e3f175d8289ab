"""The fallback sweep over real PostgreSQL: selection, limit, counts, going past failures."""

from datetime import timedelta

from sqlalchemy import Engine

from jlg_pipeline.adapters.candidates import Candidates
from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.domain.attempts import Trigger
from jlg_pipeline.domain.errors import RegistrarRejected
from jlg_pipeline.domain.generation import (
    BulkRegisterRequest,
    BulkRegisterResult,
    GenerationOutcome,
)
from jlg_pipeline.domain.status import LinkGenerationStatus
from jlg_pipeline.domain.validation import SessionId
from jlg_pipeline.services.generation import bind_gate
from jlg_pipeline.services.sweep import sweep_overdue_sessions
from testkit.factories import create_session, force_state, session_row
from tests.support.fakes import RecordingRegistrar

S = LinkGenerationStatus


class FailingFor(RecordingRegistrar):
    """Refuses the ``failing`` sessions, each for a reason of its own (a 5xx in a row would
    say the service is down: the shared view's breaker, tests/integration/test_service_view.py)."""

    def __init__(self, failing: set[int]) -> None:
        super().__init__()
        self.failing = failing

    def bulk_register(self, request: BulkRegisterRequest) -> BulkRegisterResult:
        if request.session_id in self.failing:
            self.calls.append(request)
            raise RegistrarRejected("bulkRegister answered 422 (MEETING_DELETED)")
        return super().bulk_register(request)


def _overdue(engine: Engine, count: int, status: S = S.SCHEDULED) -> list[SessionId]:
    ids = []
    for i in range(count):
        sid = create_session(engine, online=False)
        force_state(engine, sid, status, at_offset=timedelta(hours=-1, minutes=-i))
        ids.append(sid)
    return ids


def test_sweep_completes_overdue_sessions_and_goes_past_failures(
    engine: Engine, repository: ProgramSessionRepository
) -> None:
    ids = _overdue(engine, 5)
    not_yet = create_session(engine, online=False)
    force_state(engine, not_yet, S.SCHEDULED, at_offset=timedelta(minutes=-5))
    registrar = FailingFor({ids[1], ids[3]})
    generate = bind_gate(repository, registrar, Trigger.CRON)

    report = sweep_overdue_sessions(Candidates(engine), generate, limit=50)

    assert (report.found, report.completed, report.skipped, report.failed, report.left_behind) == (
        5,
        3,
        0,
        2,
        0,
    )
    assert set(report.failed_session_ids) == {ids[1], ids[3]}
    assert sorted(c.session_id for c in registrar.calls) == sorted(ids)
    for sid in ids:
        expected = S.FAILED if sid in report.failed_session_ids else S.COMPLETED
        assert session_row(engine, sid)["link_generation_status"] == expected.value
    assert session_row(engine, not_yet)["link_generation_status"] == S.SCHEDULED.value

    # The next sweep retries only the FAILED ones; COMPLETED never re-enters (inv-03).
    retry = RecordingRegistrar()
    again = sweep_overdue_sessions(
        Candidates(engine),
        bind_gate(repository, retry, Trigger.CRON),
    )
    assert (again.found, again.completed, again.failed) == (2, 2, 0)
    assert sorted(c.session_id for c in retry.calls) == sorted(report.failed_session_ids)


def test_sweep_limit_takes_the_oldest_and_reports_what_is_left(
    engine: Engine, repository: ProgramSessionRepository
) -> None:
    ids = _overdue(engine, 7)  # ids[-1] is the oldest
    registrar = RecordingRegistrar()
    generate = bind_gate(repository, registrar, Trigger.CRON)

    report = sweep_overdue_sessions(Candidates(engine), generate, limit=3)

    assert (report.found, report.completed, report.left_behind) == (3, 3, 4)
    assert [c.session_id for c in registrar.calls] == list(reversed(ids))[:3]


def test_sweep_counts_a_session_claimed_meanwhile_as_skipped(
    engine: Engine, repository: ProgramSessionRepository
) -> None:
    _overdue(engine, 1)
    registrar = RecordingRegistrar()

    def racing_generate(request: BulkRegisterRequest, *, resume: bool = True) -> GenerationOutcome:
        assert repository.claim(request.session_id) is not None  # an event run wins first
        return bind_gate(repository, registrar, Trigger.CRON)(request, resume=resume)

    report = sweep_overdue_sessions(Candidates(engine), racing_generate)
    assert (report.found, report.skipped, report.completed) == (1, 1, 0)
    assert registrar.calls == []


def test_sweep_survives_unexpected_errors(
    engine: Engine, repository: ProgramSessionRepository
) -> None:
    ids = _overdue(engine, 2)

    def broken(request: BulkRegisterRequest, *, resume: bool = True) -> GenerationOutcome:
        raise KeyError(request.session_id)

    report = sweep_overdue_sessions(Candidates(engine), broken)
    assert (report.found, report.failed) == (2, 2)
    assert set(report.failed_session_ids) == set(ids)


def test_always_failing_sessions_never_hold_back_an_overdue_one(
    engine: Engine, repository: ProgramSessionRepository
) -> None:
    """55 poison sessions, older than one overdue SCHEDULED session, fill no sweep."""
    poison = []
    for i in range(55):
        sid = create_session(engine, online=False)
        force_state(engine, sid, S.FAILED, at_offset=timedelta(days=-3, minutes=-i), attempt=4)
        poison.append(sid)
    overdue = create_session(engine, online=False)
    force_state(engine, overdue, S.SCHEDULED, at_offset=timedelta(hours=-2))
    registrar = FailingFor(set(poison))
    generate = bind_gate(repository, registrar, Trigger.CRON)

    report = sweep_overdue_sessions(Candidates(engine), generate, limit=50)

    assert session_row(engine, overdue)["link_generation_status"] == S.COMPLETED.value
    assert (report.found, report.completed, report.failed, report.left_behind) == (50, 1, 49, 6)
    reattempted = {c.session_id for c in registrar.calls} - {overdue}
    assert len(reattempted) == 49
    assert reattempted <= set(poison)

    # The next sweep reaches the six left behind first: each has one attempt fewer.
    second = FailingFor(set(poison))
    sweep_overdue_sessions(
        Candidates(engine),
        bind_gate(repository, second, Trigger.CRON),
        limit=6,
    )
    assert {c.session_id for c in second.calls} == set(poison) - reattempted
