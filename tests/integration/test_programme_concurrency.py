"""Programme actions concurrent with everything else, against real PostgreSQL: a hypothesis
state machine runs, in each step, a few writes at once (operations, single PATCHes, claims,
completions) on a programme's sessions, then checks that each session is in a state some
serial order of that step's writes gives it. Since a claim and a completion are among the
writes, no session is ever both generated and moved, and none is generated twice in a cycle
(the model allows a claim only of a due, armed or failed session)."""

import itertools
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule
from sqlalchemy import Engine

from jlg_pipeline.adapters.intent_writes import IntentWrites
from jlg_pipeline.adapters.programme_operations import ProgrammeOperations
from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.domain.attempts import Claim
from jlg_pipeline.domain.errors import CountChanged
from jlg_pipeline.domain.programme_actions import (
    ProgrammeAction,
    ProgrammeRequest,
    SessionFilter,
)
from jlg_pipeline.domain.status import LinkGenerationStatus
from jlg_pipeline.domain.validation import SessionId
from jlg_pipeline.services.programme_actions import ProgrammeActions
from testkit.factories import create_sessions, db_now, session_row

S = LinkGenerationStatus
SESSIONS = 4
HOUR = timedelta(hours=1)


@dataclass(frozen=True)
class State:
    status: S
    at: datetime | None
    attempt: int


Write = Callable[[int, State], State]
"""What one write does to one session, serially (the model)."""


def _refused(state: State, new_at: datetime | None, now: datetime, shifting: bool) -> bool:
    """A PATCH's rule (and so each session of an operation's)."""
    if shifting and new_at is None:
        return True
    if new_at is not None and new_at <= now:
        return True
    return state.status is S.IN_PROGRESS  # never stale here: the test takes seconds


def _set(state: State, new_at: datetime | None) -> State:
    return State(S.SCHEDULED if new_at else S.NOT_SCHEDULED, new_at, state.attempt)


OPERATION = st.tuples(
    st.just("operation"),
    st.sets(st.sampled_from(list(S)), max_size=2).map(tuple),
    st.booleans(),
    st.sampled_from(["shift", "set", "clear"]),
    st.sampled_from([-3, 2, 24]),
)
WRITES = st.one_of(
    OPERATION,
    st.tuples(st.just("patch"), st.integers(0, SESSIONS - 1), st.sampled_from([None, -1, 3])),
    st.tuples(st.just("claim"), st.integers(0, SESSIONS - 1)),
    st.tuples(st.just("complete"), st.integers(0, SESSIONS - 1)),
)


def build_machine(engine: Engine) -> type[RuleBasedStateMachine]:
    repository = ProgramSessionRepository(engine)
    operations = ProgrammeOperations(engine)
    actions = ProgrammeActions(IntentWrites(engine), operations, record_schedule_changes=False)
    programmes = itertools.count(1_000)
    keys = itertools.count()

    class Concurrent(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.program_id = 0
            self.ids: list[SessionId] = []
            self.model: dict[int, State] = {}
            self.claims: dict[int, Claim] = {}
            self.now = db_now(engine)

        @initialize()
        def programme(self) -> None:
            self.program_id = next(programmes)
            self.ids = create_sessions(engine, SESSIONS, program_id=self.program_id)
            self.model = {sid: self._read(sid) for sid in self.ids}

        def _read(self, sid: int) -> State:
            row = session_row(engine, sid)
            return State(
                S(row["link_generation_status"]),
                row["link_generation_at"],
                row["link_generation_attempt"],
            )

        # Each write is (what to run against the database, its model); the model gets the
        # session's id and state and returns the state after, as if the write ran alone.

        def _operation(
            self,
            statuses: tuple[S, ...],
            past_only: bool,
            kind: str,
            hours: int,
            begun: Callable[[ProgrammeRequest], None] | None = None,
        ) -> tuple[Callable[[], bool], Write]:
            now = self.now
            where = SessionFilter(
                program_id=self.program_id, statuses=statuses, to_at=now if past_only else None
            )
            if kind == "shift":
                action = ProgrammeAction.shifting(hours * 3600)
            else:
                action = ProgrammeAction.setting(None if kind == "clear" else now + hours * HOUR)

            key = f"op-{next(keys)}"

            def run() -> bool:
                forecast = actions.act(ProgrammeRequest(where, action, None, True), 7)
                request = ProgrammeRequest(where, action, forecast.matched, False)
                try:
                    if begun is not None:
                        # Recorded now, acted on only after the other writes: a request cut
                        # off part-way and repeated with its key.
                        assert operations.begin(request, 7, key) is not None
                        begun(request)
                    actions.act(request, 7, key)
                except CountChanged:
                    return False  # refused whole: it did nothing
                return True

            def model(sid: int, state: State) -> State:
                matches = (not statuses or state.status in statuses) and (
                    not past_only or (state.at is not None and state.at < now)
                )
                if not matches:
                    return state
                shifting = action.shift_s is not None
                if shifting:
                    new_at = None if state.at is None else state.at + hours * HOUR
                else:
                    new_at = action.set_at
                return state if _refused(state, new_at, now, shifting) else _set(state, new_at)

            return run, model

        def _patch(self, target: int, hours: int | None) -> tuple[Callable[[], bool], Write]:
            now = self.now
            new_at = None if hours is None else now + hours * HOUR

            def run() -> bool:
                IntentWrites(engine).set_link_generation(
                    SessionId(target), new_at, 7, future_only=True
                )
                return True

            def model(sid: int, state: State) -> State:
                if sid != target or _refused(state, new_at, now, False):
                    return state
                return _set(state, new_at)

            return run, model

        def _claim(self, target: int) -> tuple[Callable[[], bool], Write]:
            now = self.now

            def run() -> bool:
                claim = repository.claim(SessionId(target))
                if claim is not None:
                    self.claims[target] = claim
                return True

            def model(sid: int, state: State) -> State:
                due = state.at is not None and state.at <= now
                if sid != target or not due or state.status not in (S.SCHEDULED, S.FAILED):
                    return state
                return replace(state, status=S.IN_PROGRESS, attempt=state.attempt + 1)

            return run, model

        def _complete(self, target: int) -> tuple[Callable[[], bool], Write]:
            claim = self.claims.get(target)

            def run() -> bool:
                if claim is not None:
                    repository.mark_completed(claim, f"job-{target}-{claim.attempt}")
                return True

            def model(sid: int, state: State) -> State:
                holds = claim is not None and claim.attempt == state.attempt
                if sid != target or state.status is not S.IN_PROGRESS or not holds:
                    return state
                return replace(state, status=S.COMPLETED)

            return run, model

        @rule(writes=st.lists(WRITES, min_size=2, max_size=3))
        def at_once(self, writes: list[tuple[object, ...]]) -> None:
            self.now = db_now(engine)
            built = [self._build(write) for write in writes]
            start = threading.Barrier(len(built))

            def go(run: Callable[[], bool]) -> bool:
                start.wait()
                return run()

            with ThreadPoolExecutor(len(built)) as pool:
                happened = list(pool.map(go, [run for run, _ in built]))
            self._check(built, happened, writes)

        @rule(operation=OPERATION, writes=st.lists(WRITES, min_size=1, max_size=2))
        def between_begin_and_chunk(
            self, operation: tuple[object, ...], writes: list[tuple[object, ...]]
        ) -> None:
            """Other writes land after an operation has matched its sessions and before it
            acts on them."""
            self.now = db_now(engine)
            others = [self._build(write) for write in writes]
            happened: list[bool] = []

            def between(_: ProgrammeRequest) -> None:
                with ThreadPoolExecutor(len(others)) as pool:
                    happened.extend(pool.map(lambda built: built[0](), others))

            _, statuses, past_only, action, hours = operation
            op = self._operation(statuses, past_only, action, hours, between)  # type: ignore[arg-type]
            ran = op[0]()
            if not happened:  # refused before it began: the others still run
                happened.extend(run() for run, _ in others)
            self._check([op, *others], [ran, *happened], [operation, *writes])

        def _check(
            self,
            built: list[tuple[Callable[[], bool], Write]],
            happened: list[bool],
            writes: list[tuple[object, ...]],
        ) -> None:
            models = [model for (_, model), ran in zip(built, happened, strict=True) if ran]
            for sid in self.ids:
                found = self._read(sid)
                serial = set()
                for order in itertools.permutations(models):
                    state = self.model[sid]
                    for model in order:
                        state = model(sid, state)
                    serial.add(state)
                assert found in serial, (sid, self.model[sid], found, serial, writes)
                self.model[sid] = found

        def _build(self, write: tuple[object, ...]) -> tuple[Callable[[], bool], Write]:
            kind = write[0]
            if kind == "operation":
                _, statuses, past_only, action, hours = write
                return self._operation(statuses, past_only, action, hours)  # type: ignore[arg-type]
            target = self.ids[write[1]]  # type: ignore[call-overload]
            if kind == "patch":
                return self._patch(target, write[2])  # type: ignore[arg-type]
            if kind == "claim":
                return self._claim(target)
            return self._complete(target)

    return Concurrent


@pytest.mark.timeout(300)
def test_operations_concurrent_with_claims_patches_and_each_other(engine: Engine) -> None:
    machine = build_machine(engine)
    machine.TestCase.settings = settings(
        max_examples=30,
        stateful_step_count=8,
        deadline=None,
        # The database's state outlives a replay, so a shrink cannot replay faithfully:
        # the first failing sequence is reported as found (the seed reproduces it).
        phases=[Phase.explicit, Phase.reuse, Phase.generate],
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    machine.TestCase().runTest()
