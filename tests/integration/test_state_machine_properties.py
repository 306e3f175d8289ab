"""Random sequences of every write, against real PostgreSQL and a model of the TRD's
state machine: the database never leaves the model, whatever the order."""

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from sqlalchemy import Engine, text

from jlg_pipeline.adapters.intent_writes import IntentWrites
from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.domain.attempts import Claim
from jlg_pipeline.domain.session_state import SetOutcome
from jlg_pipeline.domain.status import LinkGenerationStatus
from jlg_pipeline.domain.validation import SessionId
from testkit.factories import create_session, online_snapshot, session_row

S = LinkGenerationStatus


@dataclass
class Model:
    status: S = S.NOT_SCHEDULED
    attempt: int = 0
    due: bool = False
    stale: bool = False


def build_machine(engine: Engine) -> type[RuleBasedStateMachine]:
    repo = ProgramSessionRepository(engine)

    class LinkGeneration(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.model = Model()
            self.claims: list[Claim] = []
            self.sid = 0
            self.online: tuple[object, ...] = ()

        @initialize()
        def new_session(self) -> None:
            self.sid = create_session(engine)
            self.online = online_snapshot(engine, self.sid)

        @rule(due=st.booleans())
        def arm(self, due: bool) -> None:
            at = datetime.now(UTC) + (timedelta(minutes=-1) if due else timedelta(hours=1))
            result = IntentWrites(engine).set_link_generation(SessionId(self.sid), at, 1)
            blocked = self.model.status is S.IN_PROGRESS and not self.model.stale
            assert result.outcome is (SetOutcome.IN_PROGRESS if blocked else SetOutcome.UPDATED)
            if not blocked:
                self.model = Model(S.SCHEDULED, self.model.attempt, due, False)

        @rule()
        def clear(self) -> None:
            result = IntentWrites(engine).set_link_generation(SessionId(self.sid), None, 1)
            blocked = self.model.status is S.IN_PROGRESS and not self.model.stale
            assert result.outcome is (SetOutcome.IN_PROGRESS if blocked else SetOutcome.UPDATED)
            if not blocked:
                self.model = Model(S.NOT_SCHEDULED, self.model.attempt, False, False)

        @rule()
        def claim(self) -> None:
            m = self.model
            claimable = m.due and (
                m.status in (S.SCHEDULED, S.FAILED) or (m.status is S.IN_PROGRESS and m.stale)
            )
            claim = repo.claim(SessionId(self.sid))
            assert (claim is not None) is claimable
            if claim is not None:
                assert claim.attempt == m.attempt + 1
                self.claims.append(claim)
                self.model = Model(S.IN_PROGRESS, claim.attempt, m.due, False)

        @rule(index=st.integers(min_value=0, max_value=5), complete=st.booleans())
        def mark(self, index: int, complete: bool) -> None:
            if not self.claims:
                return
            claim = self.claims[min(index, len(self.claims) - 1)]
            holds = self.model.status is S.IN_PROGRESS and claim.attempt == self.model.attempt
            landed = (
                repo.mark_completed(claim, "job") if complete else repo.mark_failed(claim, "error")
            )
            assert landed is holds
            if landed:
                self.model.status = S.COMPLETED if complete else S.FAILED
                self.model.stale = False

        @rule()
        def age_past_stale_window(self) -> None:
            with engine.begin() as conn:
                conn.execute(
                    text(
                        "UPDATE hdb_program_session SET updated_at = now() - interval '31 minutes'"
                        " WHERE id = :id"
                    ),
                    {"id": self.sid},
                )
            self.model.stale = self.model.status is S.IN_PROGRESS

        @invariant()
        def database_matches_model(self) -> None:
            if not self.sid:
                return
            row = session_row(engine, self.sid)
            assert row["link_generation_status"] == self.model.status.value
            assert row["link_generation_attempt"] == self.model.attempt
            assert online_snapshot(engine, self.sid) == self.online

    return LinkGeneration


@pytest.mark.timeout(240)
def test_random_write_sequences_follow_the_state_machine(engine: Engine) -> None:
    machine = build_machine(engine)
    machine.TestCase.settings = settings(
        max_examples=40,
        stateful_step_count=25,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    machine.TestCase().runTest()
