"""Random sequences of arms, claims, marks, retries, stale claims, re-arms and clears against
real PostgreSQL and a model of the one queue (docs/design.md "One queue"): each claim of the
next waiting session takes exactly the one the model says (on time before recovery, every fifth
claim recovery first, programmes in turn, then time and id), and no waiting cycle is claimed
twice (a claimed one waits no more until it fails with its retry due, goes stale or is
re-armed) or left behind (no claim comes back empty while one waits). Workers also claim
together (each a different waiting session, as many as wait), and through the gate with the
budget on (``generate_next``), where a service pause holds every worker until it is resumed."""

import threading
from dataclasses import dataclass
from datetime import datetime, timedelta

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from sqlalchemy import Engine, text

from jlg_pipeline.adapters.intent_writes import IntentWrites
from jlg_pipeline.adapters.queue import SessionQueue
from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.adapters.service_view import ServiceView
from jlg_pipeline.domain.attempts import Claim, Trigger
from jlg_pipeline.domain.constants import ON_TIME_MS, RECOVERY_EVERY
from jlg_pipeline.domain.generation import GenerationResult
from jlg_pipeline.domain.service_view import Budget, Health
from jlg_pipeline.domain.status import LinkGenerationStatus
from jlg_pipeline.domain.validation import SessionId
from jlg_pipeline.services.generation import generate_next
from testkit.factories import create_session, force_state, session_row
from tests.support.fakes import RecordingRegistrar

S = LinkGenerationStatus
ON_TIME_S = st.integers(min_value=5, max_value=60)
"""Due this long ago: on time, with a minute of room before it turns recovery mid-example."""
SERVED = "SELECT program_id, served FROM jlg_programme_turn WHERE served IS NOT NULL"
RECOVERY_S = st.integers(min_value=ON_TIME_MS // 1000 + 120, max_value=3000)


@dataclass
class Waiting:
    program_id: int
    at: datetime
    recovery: bool
    status: S = S.SCHEDULED
    waits: bool = True
    claim: Claim | None = None


def build_machine(engine: Engine) -> type[RuleBasedStateMachine]:
    repo = ProgramSessionRepository(engine)
    queue = SessionQueue(engine)
    # A budget far above what a step spends: a slot is always free, so a worker waits only
    # when the service holds everyone. Each worker's call gets a view of its own: a turn one
    # call of a run could not use is kept for its next (``not_used``), a matter of seconds
    # this model does not follow.
    budget = Budget(rate=10_000.0, burst=10_000.0)
    view = ServiceView(engine, budget)

    class OneQueue(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            with engine.begin() as conn:
                conn.execute(
                    text(
                        "TRUNCATE hdb_program_session, jlg_generation_attempt,"
                        " jlg_programme_turn, jlg_session_queue CASCADE"
                    )
                )
                conn.execute(text("SELECT setval('jlg_queue_class_seq', 1000)"))
            self.sessions: dict[int, Waiting] = {}
            self.served: dict[int, int] = {}
            view.resume("reset")
            self.paused = False

        def _placed(self, sid: int, program_id: int, ago_s: int, recovery: bool) -> None:
            force_state(engine, sid, S.SCHEDULED, at_offset=timedelta(seconds=-ago_s))
            at = session_row(engine, sid)["link_generation_at"]
            self.sessions[sid] = Waiting(program_id, at, recovery)
            queue.refresh()

        @rule(program_id=st.integers(1, 3), recovery=st.booleans(), data=st.data())
        def arm(self, program_id: int, recovery: bool, data: st.DataObject) -> None:
            ago_s = data.draw(RECOVERY_S if recovery else ON_TIME_S)
            self._placed(create_session(engine, program_id=program_id), program_id, ago_s, recovery)

        @rule(data=st.data(), recovery=st.booleans())
        def re_arm(self, data: st.DataObject, recovery: bool) -> None:
            idle = [s for s, w in self.sessions.items() if w.status is not S.IN_PROGRESS]
            if not idle:
                return
            sid = data.draw(st.sampled_from(sorted(idle)))
            ago_s = data.draw(RECOVERY_S if recovery else ON_TIME_S)
            self._placed(sid, self.sessions[sid].program_id, ago_s, recovery)

        def _expected(self, drawn: int) -> int | None:
            """The session the model says the claim that drew ``drawn`` takes."""
            waiting = {sid: w for sid, w in self.sessions.items() if w.waits}
            if not waiting:
                return None
            prefer_recovery = drawn % RECOVERY_EVERY == 0

            def order(sid: int) -> tuple[bool, bool, int, datetime, int]:
                # Programmes never served tie on their turn: time, then id, decide.
                w = waiting[sid]
                served = self.served.get(w.program_id)
                return (w.recovery != prefer_recovery, served is not None, served or 0, w.at, sid)

            return min(waiting, key=order)

        def _took(self, sid: int, claim: Claim | None) -> None:
            w = self.sessions[sid]
            w.status, w.waits, w.claim = S.IN_PROGRESS, False, claim
            self.served[w.program_id] = max(self.served.values(), default=0) + 1

        @rule()
        def claim_next(self) -> None:
            before = _drawn()
            claim = repo.claim_next(Trigger.WATCHDOG, "run-m")
            after = _drawn()
            expected = self._expected(after)
            if claim is None:
                assert expected is None, f"{expected} waits, none was claimed"
                return
            assert after == before + 1, "the class is drawn once a claim"
            assert claim.session_id == expected, (claim.session_id, expected)
            self._took(claim.session_id, claim)

        @rule(workers=st.integers(2, 4))
        def claim_together(self, workers: int) -> None:
            """Workers claiming at once each take a different waiting session, as many as
            wait; which of them takes which is the database's race, so the model's turns are
            read back after."""
            waiting = {sid for sid, w in self.sessions.items() if w.waits}
            claims: list[Claim | None] = []
            lock = threading.Lock()
            start = threading.Barrier(workers)

            def worker() -> None:
                start.wait()
                claim = repo.claim_next(Trigger.WATCHDOG, "run-together")
                with lock:
                    claims.append(claim)

            threads = [threading.Thread(target=worker) for _ in range(workers)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            taken = [c.session_id for c in claims if c is not None]
            assert len(taken) == len(set(taken)), f"a session claimed twice: {taken}"
            assert set(taken) <= waiting, (taken, waiting)
            assert len(taken) == min(workers, len(waiting)), (taken, waiting)
            for claim in claims:
                if claim is not None:
                    w = self.sessions[claim.session_id]
                    w.status, w.waits, w.claim = S.IN_PROGRESS, False, claim
            with engine.connect() as conn:
                self.served = dict(conn.execute(text(SERVED)).all())

        @rule(data=st.data())
        def clear(self, data: st.DataObject) -> None:
            idle = [s for s, w in self.sessions.items() if w.status is not S.IN_PROGRESS]
            if not idle:
                return
            sid = data.draw(st.sampled_from(sorted(idle)))
            IntentWrites(engine).set_link_generation(SessionId(sid), None, 7)
            w = self.sessions[sid]
            w.status, w.waits = S.NOT_SCHEDULED, False

        @rule()
        def service_pauses(self) -> None:
            """A 429 with a long Retry-After: every caller holds until an operator resumes."""
            view.report(Health.THROTTLED, 600.0, view.take_turn())
            self.paused = True

        @rule()
        def operator_resumes(self) -> None:
            view.resume("operator")
            self.paused = False

        @rule()
        def worker_through_the_gate(self) -> None:
            """A worker's call through the gate: nothing while the service holds everyone;
            else the queue's next session, generated (COMPLETED)."""
            registrar = RecordingRegistrar()
            before = _drawn()
            outcome = generate_next(
                repository=repo,
                registrar=registrar,
                trigger=Trigger.WATCHDOG,
                run_id="run-gate",
                view=ServiceView(engine, budget),
            )
            if self.paused:
                assert outcome is None, "a worker called while the service held everyone"
                assert registrar.calls == []
                assert _drawn() == before, "nothing was claimed"
                return
            expected = self._expected(_drawn())
            if outcome is None:
                assert expected is None, f"{expected} waits, the worker took nothing"
                return
            assert outcome.result is GenerationResult.COMPLETED
            assert outcome.session_id == expected, (outcome.session_id, expected)
            self._took(outcome.session_id, None)
            self.sessions[outcome.session_id].status = S.COMPLETED

        def _claimed(self, data: st.DataObject) -> int | None:
            held = sorted(s for s, w in self.sessions.items() if w.status is S.IN_PROGRESS)
            return data.draw(st.sampled_from(held)) if held else None

        @rule(data=st.data())
        def complete(self, data: st.DataObject) -> None:
            sid = self._claimed(data)
            if sid is None:
                return
            w = self.sessions[sid]
            assert w.claim is not None
            # A claim gone stale but not yet taken over is still its holder's to mark.
            assert repo.mark_completed(w.claim, "job")
            w.status, w.waits = S.COMPLETED, False

        @rule(data=st.data(), retry_due=st.booleans())
        def fail(self, data: st.DataObject, retry_due: bool) -> None:
            sid = self._claimed(data)
            if sid is None:
                return
            w = self.sessions[sid]
            assert w.claim is not None
            assert repo.mark_failed(w.claim, "error", retry_in_s=0.0 if retry_due else 600.0)
            w.status, w.waits = S.FAILED, retry_due
            queue.refresh()

        @rule(data=st.data())
        def go_stale(self, data: st.DataObject) -> None:
            sid = self._claimed(data)
            if sid is None:
                return
            with engine.begin() as conn:
                conn.execute(
                    text(
                        "UPDATE hdb_program_session SET updated_at = now() - interval '31 minutes'"
                        " WHERE id = :id"
                    ),
                    {"id": sid},
                )
            self.sessions[sid].waits = True
            queue.refresh()

        @invariant()
        def database_matches_model(self) -> None:
            with engine.connect() as conn:
                rows: dict[int, str] = dict(
                    conn.execute(
                        text("SELECT id, link_generation_status FROM hdb_program_session")
                    ).all()
                )
            assert rows == {sid: w.status.value for sid, w in self.sessions.items()}

    def _drawn() -> int:
        with engine.connect() as conn:
            return int(
                conn.execute(text("SELECT last_value FROM jlg_queue_class_seq")).scalar_one()
            )

    return OneQueue


@pytest.mark.timeout(300)
def test_random_sequences_claim_in_the_queues_order_each_waiting_cycle_once(
    engine: Engine,
) -> None:
    machine = build_machine(engine)
    machine.TestCase.settings = settings(
        max_examples=25,
        stateful_step_count=30,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow],
    )
    machine.TestCase().runTest()
