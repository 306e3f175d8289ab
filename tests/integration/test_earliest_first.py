"""Earliest first across runs (docs/design.md "The one gate, precisely", "Earliest first
across runs"): a caller with a turn of the service claims the earliest due session any
unfinished generation run lists, at or before its own, and calls for it with the request that
run lists it with. Time order then holds across concurrent runs, not only within one, and a
run's sessions taken by others end it early instead of every run ending together."""

import random
import threading
from datetime import timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, text

from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.adapters.service_view import ServiceView
from jlg_pipeline.domain.errors import RegistrarRejected
from jlg_pipeline.domain.models import (
    BulkRegisterRequest,
    BulkRegisterResult,
    GenerationResult,
    SweepReport,
    Trigger,
)
from jlg_pipeline.domain.service_view import Budget
from jlg_pipeline.domain.status import LinkGenerationStatus
from jlg_pipeline.services.generation import bind_gate, bind_next
from jlg_pipeline.services.pull import Pull
from jlg_pipeline.services.sweep import generate_each
from testkit.factories import create_session, force_state, session_row
from tests.support.fakes import RecordingRegistrar

S = LinkGenerationStatus


def _timed(engine: Engine, count: int, first_s_ago: float = 120.0) -> list[int]:
    """``count`` due SCHEDULED sessions a second apart, ids in time order."""
    ids = [create_session(engine) for _ in range(count)]
    for i, sid in enumerate(ids):
        force_state(engine, sid, S.SCHEDULED, at_offset=timedelta(seconds=i - first_s_ago))
    return ids


def test_the_claim_takes_the_earliest_listed_session_at_or_before_its_own(
    engine: Engine, repository: ProgramSessionRepository
) -> None:
    first, second, third, fourth, unlisted = _timed(engine, 5)
    force_state(engine, unlisted, S.SCHEDULED, at_offset=timedelta(minutes=-10))
    listed = [second, third, fourth]

    claim = repository.claim(fourth, Trigger.EVENT, "run-a", pull=listed)
    assert claim is not None
    assert claim.session_id == second, "the earliest listed one"
    claim = repository.claim(second, Trigger.EVENT, "run-a", pull=listed)
    assert claim is None, "its own is taken and nothing listed is earlier"
    claim = repository.claim(third, Trigger.EVENT, "run-a", pull=[fourth])
    assert claim is not None
    assert claim.session_id == third, "never a later one"
    assert repository.claim(first, Trigger.EVENT, "run-a", pull=[]) is not None
    assert session_row(engine, unlisted)["link_generation_status"] == "SCHEDULED", "not listed"
    attempts = repository.attempts(second)
    assert [(a.trigger, a.run_id) for a in attempts] == [(Trigger.EVENT, "run-a")]


def test_a_failed_session_is_pulled_only_once_its_retry_is_due(
    engine: Engine, repository: ProgramSessionRepository
) -> None:
    """A session that failed is pulled again when the watchdog would try it again, never
    before (a 400's session, left to the sweep, would otherwise be called over and over)."""
    waiting, for_the_sweep, due_again, own = _timed(engine, 4)
    for sid in (waiting, for_the_sweep, due_again):
        force_state(engine, sid, S.FAILED, at_offset=timedelta(seconds=-200 + sid % 7))
    with engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE hdb_program_session SET link_generation_retry_at = CASE id"
                " WHEN :w THEN now() + interval '1 minute' WHEN :d THEN now() END"
                " WHERE id IN (:w, :s, :d)"
            ),
            {"w": waiting, "s": for_the_sweep, "d": due_again},
        )
    claim = repository.claim(own, Trigger.EVENT, None, pull=[waiting, for_the_sweep, due_again])
    assert claim is not None
    assert claim.session_id == due_again


class Answering(RecordingRegistrar):
    """Records each call with the session's time order, and refuses ``refused`` (a 400)."""

    refused: frozenset[int] = frozenset()

    def bulk_register(self, request: BulkRegisterRequest) -> BulkRegisterResult:
        if request.session_id in self.refused:
            with self._lock:
                self.calls.append(request)
            raise RegistrarRejected("bulkRegister answered 400")
        return super().bulk_register(request)


def _runs(
    repository: ProgramSessionRepository,
    registrar: RecordingRegistrar,
    runs: list[list[BulkRegisterRequest]],
    budget: Budget,
    start_gap_s: float = 0.0,
) -> list[SweepReport]:
    """Each list a run of its own (a thread), every run's sessions listed for every run to
    pull, on one shared view; the runs' reports in the order given."""
    listed = [r for run in runs for r in run]
    reports: list[SweepReport | None] = [None] * len(runs)

    def run(i: int) -> None:
        view = ServiceView(repository.engine, budget)
        pull = Pull(lambda: listed)
        gate = bind_gate(repository, registrar, Trigger.EVENT, f"run-{i}", view, pull)
        reports[i] = generate_each(runs[i], gate, left_behind=0)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(runs))]
    for thread in threads:
        thread.start()
        threading.Event().wait(start_gap_s)
    for thread in threads:
        thread.join(timeout=60)
    assert all(r is not None for r in reports)
    return [r for r in reports if r is not None]


def test_concurrent_runs_call_in_time_order_with_each_sessions_own_request(
    engine: Engine, repository: ProgramSessionRepository
) -> None:
    """The later run started first (the bench's 15 s out of order across shared runs): its
    caller goes to the earlier run's sessions first, with their role, batch size and actor."""
    ids = _timed(engine, 12)
    early = [BulkRegisterRequest(sid, "host", 7, 42) for sid in ids[:6]]
    late = [BulkRegisterRequest(sid) for sid in ids[6:]]
    registrar = RecordingRegistrar()
    reports = _runs(repository, registrar, [late, early], Budget(rate=40, burst=1), 0.3)

    called = [r.session_id for r in registrar.calls]
    assert sorted(called) == ids, "every session called exactly once"
    rank = {sid: i for i, sid in enumerate(ids)}
    out_of_order = max(abs(rank[sid] - i) for i, sid in enumerate(called))
    assert out_of_order <= 1, f"called in time order, two callers at a time: {called}"
    for call in registrar.calls:
        own = call.session_id in ids[:6]
        assert (call.role, call.batch_size, call.actor_user_id) == (
            ("host", 7, 42) if own else (None, None, None)
        )
    completed = [
        s.session_id for r in reports for s in r.sessions if s.outcome.value == "completed"
    ]
    assert sorted(completed) == ids, "each completion in exactly one run's report"
    assert all(session_row(engine, sid)["link_generation_status"] == "COMPLETED" for sid in ids)


def test_a_pulled_session_that_fails_is_the_pullers_to_report(
    engine: Engine, repository: ProgramSessionRepository
) -> None:
    ids = _timed(engine, 4)
    registrar = Answering()
    registrar.refused = frozenset({ids[0]})
    (report,) = _runs(
        repository, registrar, [[BulkRegisterRequest(ids[3])]], Budget(rate=100, burst=1)
    )
    # Only its own session is listed: nothing to pull.
    assert [s.session_id for s in report.sessions] == [ids[3]]

    pull = Pull(lambda: [BulkRegisterRequest(sid) for sid in ids[:3]])
    gate = bind_gate(repository, registrar, Trigger.EVENT, "run-x", None, pull)
    report = generate_each([BulkRegisterRequest(ids[2])], gate, left_behind=0)
    outcomes = {s.session_id: s.outcome for s in report.sessions}
    assert outcomes == {
        ids[0]: GenerationResult.FAILED,
        ids[1]: GenerationResult.COMPLETED,
        ids[2]: GenerationResult.COMPLETED,
    }
    assert report.failed_session_ids == (ids[0],)
    assert [c.session_id for c in registrar.calls].count(ids[0]) == 1, "never pulled again"


@settings(
    max_examples=12,
    deadline=None,
    derandomize=True,
    # Each example arms sessions of its own; those of earlier examples are COMPLETED.
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    runs=st.integers(2, 5),
    sessions=st.integers(4, 16),
    seed=st.integers(0, 2**16),
)
def test_every_listed_session_is_called_once_with_a_request_a_run_lists_it_with(
    engine: Engine, repository: ProgramSessionRepository, runs: int, sessions: int, seed: int
) -> None:
    """Runs listing overlapping sessions, some with options, some a session twice with
    different ones: each session is called exactly once, with a request one of its runs
    listed (never another session's options, never a made-up one)."""
    rng = random.Random(seed)
    ids = _timed(engine, sessions)
    options = [None, ("host", 5, 1), ("attendee", 9, 2)]
    lists: list[list[BulkRegisterRequest]] = []
    for _ in range(runs):
        chosen = sorted(rng.sample(ids, rng.randint(1, sessions)))
        lists.append([BulkRegisterRequest(sid, *(rng.choice(options) or ())) for sid in chosen])
    registrar = RecordingRegistrar()
    _runs(repository, registrar, lists, Budget(rate=500, burst=3))

    listed = {sid for run in lists for sid in (r.session_id for r in run)}
    called = [c.session_id for c in registrar.calls]
    assert sorted(called) == sorted(listed)
    allowed = {(r.session_id, r.role, r.batch_size, r.actor_user_id) for run in lists for r in run}
    for call in registrar.calls:
        assert (call.session_id, call.role, call.batch_size, call.actor_user_id) in allowed


def test_a_run_whose_own_sessions_are_done_takes_the_cohort_queued_behind_it(
    engine: Engine, repository: ProgramSessionRepository
) -> None:
    """The bench's gaps: runs of a cohort ended while the runs queued behind them started
    (Dagster launches one in seconds on two busy cores). Callers whose own sessions are done
    take the queued runs' sessions, earliest first, for as long as the run may pull."""
    ids = _timed(engine, 6)
    queued = [BulkRegisterRequest(sid, "host") for sid in ids[1:]]
    registrar = RecordingRegistrar()
    view = ServiceView(engine, Budget(rate=100, burst=1))

    def run(on_for_s: float) -> SweepReport:
        pull = Pull(lambda: [BulkRegisterRequest(ids[0]), *queued], on_for_s=on_for_s)
        return generate_each(
            [BulkRegisterRequest(ids[0])],
            bind_gate(repository, registrar, Trigger.EVENT, "run-a", view, pull),
            left_behind=0,
            concurrency=2,
            then=bind_next(repository, registrar, Trigger.EVENT, "run-a", view, pull),
        )

    report = run(on_for_s=0)
    assert [c.session_id for c in registrar.calls] == ids[:1], "past its time: its own only"
    report = run(on_for_s=60)
    called = [c.session_id for c in registrar.calls]
    assert sorted(called) == ids
    assert abs(called.index(ids[1]) - 1) <= 1, "the earliest first"
    assert all(c.role == "host" for c in registrar.calls[1:])
    assert (report.found, report.completed) == (6, 5), "its own (done before) and five taken"
