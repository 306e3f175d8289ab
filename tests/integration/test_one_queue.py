"""The one queue (docs/design.md "One queue"): the claim of the next waiting session decides,
on the database, who is called next: on-time sessions before recovery ones (recovery every
fifth claim), programmes in turn within a class, then time, then id; each waiting cycle once."""

import threading
import time
from datetime import timedelta
from typing import Any

from sqlalchemy import Engine, text

from jlg_pipeline.adapters.metrics_snapshot import read_metrics_snapshot
from jlg_pipeline.adapters.queue import SessionQueue
from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.adapters.service_view import ONLINE_SESSION, ServiceView
from jlg_pipeline.domain.attempts import Trigger
from jlg_pipeline.domain.errors import RegistrarUnavailable
from jlg_pipeline.domain.generation import BulkRegisterRequest, BulkRegisterResult
from jlg_pipeline.domain.service_view import Budget, Turn
from jlg_pipeline.domain.status import LinkGenerationStatus
from jlg_pipeline.domain.validation import SessionId
from jlg_pipeline.services.batch import generate_each
from jlg_pipeline.services.drain import Drain
from jlg_pipeline.services.generation import bind_gate, generate_next
from testkit.factories import create_session, create_sessions, force_state
from tests.support.fakes import RecordingRegistrar

S = LinkGenerationStatus
W = Trigger.WATCHDOG


def _waiting(engine: Engine, program_id: int, *seconds_ago: float) -> list[SessionId]:
    """SCHEDULED sessions of ``program_id`` due that many seconds ago, in that order."""
    ids = []
    for ago in seconds_ago:
        sid = create_session(engine, program_id=program_id)
        force_state(engine, sid, S.SCHEDULED, at_offset=timedelta(seconds=-ago))
        ids.append(sid)
    return ids


def _prefer(engine: Engine, recovery: bool) -> None:
    """The next claim prefers recovery (or on time), the four after it the other way."""
    with engine.begin() as conn:
        conn.execute(text("SELECT setval('jlg_queue_class_seq', :v)"), {"v": 4 if recovery else 5})


def _drain(repository: ProgramSessionRepository) -> list[int]:
    taken: list[int] = []
    while (claim := repository.claim_next(Trigger.WATCHDOG, "run-q")) is not None:
        taken.append(claim.session_id)
    return taken


def test_on_time_sessions_come_before_recovery_and_recovery_gets_every_fifth_claim(
    engine: Engine, repository: ProgramSessionRepository
) -> None:
    recovery = _waiting(engine, 7, *[900 - i for i in range(6)])
    on_time = _waiting(engine, 7, *[60 - i for i in range(6)])
    SessionQueue(engine).refresh()
    _prefer(engine, recovery=False)

    taken = _drain(repository)

    assert sorted(taken) == sorted(recovery + on_time), "each waiting cycle claimed once"
    assert taken[:4] == on_time[:4], "on time first, in time order"
    assert taken[4] == recovery[0], "the fifth claim prefers recovery"
    assert taken[5:9] == on_time[4:] + recovery[1:3], "then on time again until none waits"


def _probes_run(engine: Engine, repository: ProgramSessionRepository) -> int:
    """How many times the claim of the next ran its per-programme probes (EXPLAIN ANALYZE,
    rolled back)."""
    parameters = {**repository.next_claim_parameters, "session_id": None}
    parameters |= {"trigger": "watchdog", "run_id": "plan"}
    with engine.connect() as conn:
        plan = conn.exec_driver_sql(
            f"EXPLAIN (ANALYZE, FORMAT JSON) {repository.next_claim_sql}", parameters
        ).scalar_one()
        conn.rollback()

    def appends(node: dict[str, Any]) -> list[int]:
        own = [node["Actual Loops"]] if node["Node Type"] == "Append" else []
        return own + [n for child in node.get("Plans", []) for n in appends(child)]

    return max(appends(plan[0]["Plan"]))


def test_the_claim_of_the_next_probes_each_programme_once_whatever_the_statistics(
    engine: Engine, repository: ProgramSessionRepository
) -> None:
    """A cohort's rows are new to the planner's statistics (ANALYZE saw the table without
    them). It drove the claim from the sessions and ran the probes once per due session:
    150 ms a claim at 1,000 due, and a cohort of 1,000 drained at half the budget
    (bench.timing.service_budget, budget --sessions 1000)."""
    with engine.begin() as conn:
        conn.execute(text("ANALYZE hdb_program_session"))
    create_sessions(engine, 300, program_id=24, at_offset=timedelta(seconds=-5))
    SessionQueue(engine).refresh()

    assert _probes_run(engine, repository) == 1


def test_a_session_waiting_behind_claims_in_flight_is_claimed_not_reported_gone(
    engine: Engine, repository: ProgramSessionRepository
) -> None:
    """The claim of the next skips the rows other claims are locking. When every candidate it
    looked at in a programme was locked, it answered "none waits" while the rest of the cohort
    waited: a run's callers ended, and a cohort of 1,000 drained at half the budget while runs
    started and ended (bench.timing.service_budget, budget --sessions 1000: 12.3 calls/s)."""
    cohort = _waiting(engine, 23, *[30 - i for i in range(12)])
    SessionQueue(engine).refresh()
    _prefer(engine, recovery=False)
    in_flight = engine.connect()
    try:
        # Claims in flight on the earliest sessions, as concurrent callers' are.
        with in_flight.begin():
            in_flight.execute(
                text("SELECT id FROM hdb_program_session WHERE id = ANY(:ids) FOR UPDATE"),
                {"ids": cohort[:8]},
            )
            claim = repository.claim_next(W, "run-q")
            assert claim is not None, "sessions wait unlocked: the claim takes one"
            assert claim.session_id == cohort[8], "the next in order of those not in flight"
    finally:
        in_flight.close()


def test_programmes_take_turns_within_a_class(
    engine: Engine, repository: ProgramSessionRepository
) -> None:
    cohort = _waiting(engine, 21, *[50 - i for i in range(8)])
    small = _waiting(engine, 22, 10, 5)
    SessionQueue(engine).refresh()
    _prefer(engine, recovery=False)

    taken = _drain(repository)

    assert taken[:4] == [cohort[0], small[0], cohort[1], small[1]], "the later programme waits one"
    assert taken[4:] == cohort[2:]


def test_a_claim_of_its_own_session_sends_its_programme_back_too(
    engine: Engine, repository: ProgramSessionRepository
) -> None:
    first = _waiting(engine, 31, 30, 29)
    other = _waiting(engine, 32, 20)
    SessionQueue(engine).refresh()
    _prefer(engine, recovery=False)
    assert repository.claim(SessionId(first[0]), Trigger.EVENT, "run-own") is not None

    assert _drain(repository) == [other[0], first[1]]


def test_only_sessions_that_wait_and_are_due_are_claimed(
    engine: Engine, repository: ProgramSessionRepository
) -> None:
    program = 41
    scheduled, backing_off, for_the_sweep, retry_due, live, stale, early, gone = _waiting(
        engine, program, 80, 70, 60, 50, 40, 30, 20, 10
    )
    force_state(engine, early, S.SCHEDULED, at_offset=timedelta(seconds=20))
    force_state(engine, gone, S.SCHEDULED, at_offset=timedelta(seconds=-10), deleted=True)
    for sid in (backing_off, for_the_sweep, retry_due):
        force_state(engine, sid, S.FAILED, at_offset=timedelta(seconds=-60))
    force_state(engine, live, S.IN_PROGRESS, at_offset=timedelta(seconds=-40))
    force_state(
        engine,
        stale,
        S.IN_PROGRESS,
        at_offset=timedelta(seconds=-30),
        updated_offset=-timedelta(hours=1),
    )
    with engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE hdb_program_session SET link_generation_retry_at = CASE id"
                " WHEN :b THEN now() + interval '1 minute' WHEN :r THEN now() END"
                " WHERE id IN (:b, :r)"
            ),
            {"b": backing_off, "r": retry_due},
        )
    SessionQueue(engine).refresh()
    backlog = read_metrics_snapshot(engine, windows=repository.windows).service_backlog

    assert sorted(_drain(repository)) == sorted([scheduled, retry_due, stale])
    assert backlog == 3, "the backlog gauge counts what the queue gives, by the same predicate"


def test_a_session_armed_by_the_host_alone_is_found_once_the_turns_are_refreshed(
    engine: Engine, repository: ProgramSessionRepository
) -> None:
    (sid,) = _waiting(engine, 51, 5)
    assert repository.claim_next(Trigger.WATCHDOG, None) is None, "no programme known yet"
    queue = SessionQueue(engine)
    queue.refresh()
    claim = repository.claim_next(Trigger.WATCHDOG, None)
    assert claim is not None
    assert claim.session_id == sid
    assert repository.mark_completed(claim, "job-1", 1)
    queue.refresh()
    assert repository.claim_next(Trigger.WATCHDOG, None) is None
    with engine.connect() as conn:
        next_due = conn.execute(
            text("SELECT next_due_at FROM jlg_programme_turn WHERE program_id = 51")
        ).scalar_one()
    assert next_due is None, "nothing of the programme waits or is to come: the pick moved it out"


def test_the_options_recorded_for_a_cycle_travel_with_its_claim_and_not_past_a_re_arm(
    engine: Engine, repository: ProgramSessionRepository
) -> None:
    asked, re_armed = _waiting(engine, 61, 20, 10)
    queue = SessionQueue(engine)
    queue.record(
        [
            BulkRegisterRequest.parse(asked, role="host", batch_size=7, actor_user_id=9),
            BulkRegisterRequest.parse(re_armed, role="host", actor_user_id=9),
        ]
    )
    force_state(engine, re_armed, S.SCHEDULED, at_offset=timedelta(seconds=-5))

    first = repository.claim_next(Trigger.EVENT, "run-o")
    second = repository.claim_next(Trigger.EVENT, "run-o")

    assert first is not None
    assert first.request == BulkRegisterRequest.parse(asked, "host", 7, 9)
    assert second is not None
    assert second.request == BulkRegisterRequest.parse(re_armed)


def test_concurrent_workers_claim_each_waiting_cycle_exactly_once(
    engine: Engine, repository: ProgramSessionRepository
) -> None:
    ids = _waiting(engine, 71, *[100 - i for i in range(40)]) + _waiting(engine, 72, 3, 2, 1)
    SessionQueue(engine).refresh()
    taken: list[int] = []
    lock = threading.Lock()

    def worker() -> None:
        while (claim := repository.claim_next(Trigger.WATCHDOG, "run-c")) is not None:
            with lock:
                taken.append(claim.session_id)

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(taken) == sorted(ids)
    with engine.connect() as conn:
        drawn = conn.execute(text("SELECT last_value FROM jlg_queue_served_seq")).scalar_one()
    assert drawn >= len(ids)


def test_each_claim_draws_the_class_once(
    engine: Engine, repository: ProgramSessionRepository
) -> None:
    _waiting(engine, 81, *[30 - i for i in range(10)])
    SessionQueue(engine).refresh()
    _prefer(engine, recovery=False)
    for _ in range(3):
        assert repository.claim_next(Trigger.WATCHDOG, None) is not None
    with engine.connect() as conn:
        assert conn.execute(text("SELECT last_value FROM jlg_queue_class_seq")).scalar_one() == 8


def test_two_runs_draining_the_queue_call_each_session_once_with_its_recorded_options(
    engine: Engine, repository: ProgramSessionRepository
) -> None:
    """Runs are workers: whichever run a session was listed in, the queue gives it to one of
    them, and the call carries the options its cycle was recorded with."""
    cohort = _waiting(engine, 91, *[40 - i for i in range(10)])
    small = _waiting(engine, 92, 15, 14)
    SessionQueue(engine).record([BulkRegisterRequest.parse(sid, "host", 7, 42) for sid in small])
    SessionQueue(engine).refresh()
    _prefer(engine, recovery=False)
    registrar = RecordingRegistrar()
    budget = Budget(rate=50, burst=1)

    def run(name: str) -> None:
        view = ServiceView(engine, budget)
        drain = Drain(repository, registrar, Trigger.EVENT, name, view)
        generate_each(
            [],
            bind_gate(repository, registrar, Trigger.EVENT, name, view),
            left_behind=0,
            concurrency=2,
            then=drain,
        )

    threads = [threading.Thread(target=run, args=(f"run-{i}",)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    called = [call.session_id for call in registrar.calls]
    assert sorted(called) == sorted(cohort + small), "every session called exactly once"
    # Claimed among the first four (programmes take turns); four callers at once may call in a
    # slightly different order than they claimed.
    assert set(called[:6]) >= set(small), "the small programme is not left behind the cohort"
    assert {
        (c.role, c.batch_size, c.actor_user_id) for c in registrar.calls if c.session_id in small
    } == {("host", 7, 42)}


def test_a_run_whose_probe_finds_the_service_back_goes_on_with_every_caller(
    engine: Engine, repository: ProgramSessionRepository
) -> None:
    """The service is down and its next probe due: one caller of a run probes, its siblings
    are told to wait. They wait for the probe's answer inside the run, so once it finds the
    service back every caller goes on (a run whose siblings had ended drained the rest with
    its prober alone, one call at a time)."""
    sids = _waiting(engine, 94, *[30 - i for i in range(8)])
    SessionQueue(engine).refresh()
    _down_with_a_probe_due(engine)
    callers: list[int] = []

    class SlowProbe(RecordingRegistrar):
        """Back: the first call (the probe) answers after 0.3 s, the rest after 0.1 s; notes
        which caller made each call."""

        def bulk_register(self, request: BulkRegisterRequest) -> BulkRegisterResult:
            with self._lock:
                first = not callers
                callers.append(threading.get_ident())
            time.sleep(0.3 if first else 0.1)
            return super().bulk_register(request)

    registrar = SlowProbe()
    view = ServiceView(engine)
    generate_each(
        [],
        bind_gate(repository, registrar, Trigger.WATCHDOG, "run-p", view),
        left_behind=0,
        concurrency=3,
        then=Drain(repository, registrar, Trigger.WATCHDOG, "run-p", view),
    )

    assert sorted(c.session_id for c in registrar.calls) == sorted(sids)
    assert not ServiceView(engine).look().state.down
    after_the_probe = set(callers[1:])
    assert len(after_the_probe) >= 2, "only the prober called once the service was back"


def test_a_turn_that_found_the_queue_empty_is_not_kept_for_later(
    engine: Engine, repository: ProgramSessionRepository
) -> None:
    """A caller whose claim of the next found nothing waiting lets its slot of the budget
    pass: kept, it would be spent later than its time (a parked caller's next call), and a
    limiter counting calls per second counts it in the wrong second (the hung bench case:
    17 answers of 429 at R = 25). The caller's next turn is a slot of its own."""
    view = ServiceView(engine, Budget(rate=1, burst=1))
    registrar = RecordingRegistrar()
    assert generate_next(repository=repository, registrar=registrar, trigger=W, view=view) is None
    after_the_empty_claim = view.look().state.next_slot_at
    assert after_the_empty_claim is not None, "a slot was taken"
    view.wait_for_turn()
    assert view.look().state.next_slot_at == after_the_empty_claim + timedelta(seconds=1)
    assert registrar.calls == []


def test_callers_waiting_for_a_siblings_call_do_not_wake_each_other(
    engine: Engine, repository: ProgramSessionRepository
) -> None:
    """Two callers told to wait while a third probes a service that hangs: each asks again
    once the probe answers, not each time the other is told to wait again (they woke each
    other, asking the shared view for a turn hundreds of times a second)."""
    _waiting(engine, 95, *[30 - i for i in range(4)])
    SessionQueue(engine).refresh()
    _down_with_a_probe_due(engine)

    class Hanging(RecordingRegistrar):
        def bulk_register(self, request: BulkRegisterRequest) -> BulkRegisterResult:
            with self._lock:
                self.calls.append(request)
            time.sleep(1.0)
            raise RegistrarUnavailable("bulkRegister timed out")

    class Counting(ServiceView):
        asked = 0

        def take_turn(self) -> Turn:
            Counting.asked += 1
            return super().take_turn()

    registrar, view = Hanging(), Counting(engine)
    generate_each(
        [],
        bind_gate(repository, registrar, W, "run-h", view),
        left_behind=0,
        concurrency=3,
        then=Drain(repository, registrar, W, "run-h", view),
    )
    assert len(registrar.calls) == 1, "only the probe called"
    assert Counting.asked <= 9, Counting.asked


def _down_with_a_probe_due(engine: Engine) -> None:
    """The breaker open, its next probe due now."""
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO jlg_service_view (name, down_since, failures) VALUES (:name, now(), 3)"
            ),
            {"name": ONLINE_SESSION},
        )
