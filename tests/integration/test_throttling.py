"""A throttling online-session service costs lateness, never the sweep: its Retry-After
pauses every caller (one gate in the database, seen by every run and process), one caller
probes when the pause ends, and no run waits in its slot."""

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from sqlalchemy import Engine

from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.adapters.service_gate import ServiceGate
from jlg_pipeline.domain.errors import RegistrarUnavailable, RetryableGenerationFailed
from jlg_pipeline.domain.models import (
    BulkRegisterRequest,
    BulkRegisterResult,
    GenerationResult,
    Trigger,
)
from jlg_pipeline.domain.retries import ONLINE_SESSION_GATE, GateState, retry_wait_s
from jlg_pipeline.domain.status import LinkGenerationStatus
from jlg_pipeline.services.generation import generate_for_session
from tests.support.factories import create_session, end_retry_wait, force_state, session_row
from tests.support.fakes import RecordingRegistrar

GATE = ONLINE_SESSION_GATE


def test_an_open_gate_a_pause_and_exactly_one_probe_among_concurrent_callers(
    engine: Engine,
) -> None:
    gate = ServiceGate(engine)
    assert gate.check(GATE, 30).state is GateState.OPEN
    gate.pause(GATE, 30, "429")
    closed = gate.check(GATE, 30)
    assert closed.state is GateState.CLOSED
    assert closed.until is not None
    assert gate.paused_until(GATE) == closed.until
    gate.pause(GATE, 1, "a shorter pause never shortens a longer one")
    assert gate.paused_until(GATE) == closed.until

    gate.pause(GATE, 0, "over")
    with engine.begin() as conn:  # the 30 s pause ends
        conn.exec_driver_sql("UPDATE jlg_service_gate SET paused_until = now()")
    barrier = threading.Barrier(8)

    def check() -> GateState:
        barrier.wait()
        return gate.check(GATE, 30).state

    with ThreadPoolExecutor(8) as pool:
        states = list(pool.map(lambda _: check(), range(8)))
    assert states.count(GateState.PROBE) == 1, states
    assert states.count(GateState.CLOSED) == 7
    gate.reopen(GATE)
    assert gate.check(GATE, 30).state is GateState.OPEN


class Throttled(RecordingRegistrar):
    """Answers 429 with Retry-After while ``throttling`` is set."""

    throttling = True

    def bulk_register(self, request: BulkRegisterRequest) -> BulkRegisterResult:
        if self.throttling:
            with self._lock:
                self.calls.append(request)
            raise RegistrarUnavailable("bulkRegister answered 429", retry_after_s=30)
        return super().bulk_register(request)


def test_a_429_pauses_the_service_and_no_session_calls_until_it_is_over(
    engine: Engine, repository: ProgramSessionRepository
) -> None:
    sids = [create_session(engine) for _ in range(5)]
    for sid in sids:
        force_state(engine, sid, LinkGenerationStatus.SCHEDULED)
    registrar = Throttled()

    def generate(sid: int) -> GenerationResult | float | None:
        """The result, or for a failure the wait it was left with."""
        try:
            return generate_for_session(
                sid, repository=repository, registrar=registrar, trigger=Trigger.WATCHDOG
            ).result
        except RetryableGenerationFailed as exc:
            return exc.retry_in_s

    first = generate(sids[0])
    rest = [generate(sid) for sid in sids[1:]]
    assert first == 30, "left for the watchdog after the service's Retry-After"
    assert rest == [GenerationResult.SKIPPED] * 4, "paused: nothing claimed, nothing called"
    assert len(registrar.calls) == 1
    assert [session_row(engine, s)["link_generation_status"] for s in sids[1:]] == ["SCHEDULED"] * 4
    assert repository.attempts(sids[1]) == [], "a paused session costs no attempt"

    # The pause ends and the service is back: one probe, then everyone.
    registrar.throttling = False
    with engine.begin() as conn:
        conn.exec_driver_sql("UPDATE jlg_service_gate SET paused_until = now()")
    assert [generate(sid) for sid in sids[1:]] == [GenerationResult.COMPLETED] * 4
    assert ServiceGate(engine).paused_until(GATE) is None, "the probe's success reopened it"


def test_the_wait_is_retry_after_else_a_backoff_in_time() -> None:
    assert retry_wait_s(30, 1) == 30
    assert retry_wait_s(30, 9) == 30, "Retry-After wins over the attempt count"
    assert retry_wait_s(None, 1) == 10
    assert retry_wait_s(None, 3) == 40
    assert retry_wait_s(None, 40) == 600, "bounded"
    assert retry_wait_s(10_000, 1) == 600


def test_a_session_the_service_throttled_is_retried_by_the_watchdog_after_its_wait(
    engine: Engine, repository: ProgramSessionRepository
) -> None:
    sid = create_session(engine)
    force_state(engine, sid, LinkGenerationStatus.SCHEDULED, at_offset=timedelta(minutes=-5))
    registrar = Throttled()
    with pytest.raises(RetryableGenerationFailed):
        generate_for_session(sid, repository=repository, registrar=registrar, trigger=Trigger.EVENT)
    assert sid not in {s.id for s in repository.find_unattended(10)}
    end_retry_wait(engine, sid)
    assert [s.id for s in repository.find_unattended(10)] == [sid]
    assert session_row(engine, sid)["link_generation_status"] == "FAILED"
