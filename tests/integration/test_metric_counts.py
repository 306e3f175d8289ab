"""The figures /metrics reads stay exact: the closed attempts' counts (migration 0009,
adapters/metric_counts.py) and the sessions that hold a time (indexed aggregates over the
host's table) equal a full count of the tables after any sequence of the operations that
change sessions and attempts, several of them at once from threads and folds racing them."""

import random
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test
from sqlalchemy import Engine, text

from jlg_pipeline.adapters.intent_writes import IntentWrites
from jlg_pipeline.adapters.metric_counts import Counts, fold, read_counts
from jlg_pipeline.adapters.metrics_snapshot import armed_by_status
from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.domain.attempts import Trigger
from jlg_pipeline.domain.status import ARMED_STATUSES, WRITTEN_STATUSES
from jlg_pipeline.domain.validation import SessionId
from testkit.factories import create_session

STATUSES = [s.value for s in WRITTEN_STATUSES]
ARMED = {s.value for s in ARMED_STATUSES}
THREADS = 4


def armed_full_count(engine: Engine) -> dict[str, int]:
    """The sessions that hold a time, by status, by reading every row."""
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT link_generation_status, count(*) FROM hdb_program_session"
                " WHERE deleted_at IS NULL GROUP BY 1"
            )
        ).all()
    return {status: n for status, n in rows if status in ARMED}


def full_count(engine: Engine) -> Counts:
    """The same figures by reading every row."""
    with engine.connect() as conn:
        attempts = {
            (t, o): n
            for t, o, n in conn.execute(
                text(
                    "SELECT trigger, outcome, count(*) FROM jlg_generation_attempt"
                    " WHERE outcome <> 'IN_PROGRESS' GROUP BY 1, 2"
                )
            ).all()
        }
        lags = list(
            conn.execute(
                text(
                    "SELECT extract(epoch FROM claimed_at - link_generation_at)"
                    " FROM jlg_generation_attempt WHERE outcome <> 'IN_PROGRESS'"
                )
            ).scalars()
        )
        bounds = conn.execute(text("SELECT bound_s FROM jlg_lag_bucket ORDER BY 1")).scalars()
        return Counts(
            attempts=attempts,
            lag_le=tuple((float(b), sum(1 for lag in lags if lag <= b)) for b in bounds),
            lag_ms_sum=sum(
                int((lag * 1000).quantize(Decimal(1), rounding=ROUND_HALF_UP)) for lag in lags
            ),
            lag_count=len(lags),
        )


class Operations(RuleBasedStateMachine):
    """Each rule runs its writes from several threads at once; the invariant folds and reads.
    A test subclasses it with its database as ``engine``."""

    engine: Engine

    def __init__(self) -> None:
        super().__init__()
        self.repository = ProgramSessionRepository(self.engine)
        self.claims: list[Any] = []
        self.random = random.Random(20261204)

    def sessions(self) -> list[int]:
        with self.engine.connect() as conn:
            return list(conn.execute(text("SELECT id FROM hdb_program_session")).scalars())

    def _at_once(self, *calls: Any) -> list[Any]:
        with ThreadPoolExecutor(THREADS) as pool:
            return list(pool.map(lambda call: call(), calls))

    @rule(count=st.integers(1, 6))
    def create(self, count: int) -> None:
        self._at_once(*[lambda: create_session(self.engine)] * count)

    @rule(offsets=st.lists(st.integers(-600, 600), min_size=1, max_size=6))
    def arm(self, offsets: list[int]) -> None:
        ids = self.sessions()
        if not ids:
            return
        now = datetime.now(UTC)

        def arming(sid: int, offset: int) -> Any:
            return lambda: IntentWrites(self.repository.engine).set_link_generation(
                SessionId(sid), now + timedelta(seconds=offset), 7
            )

        self._at_once(*(arming(self.random.choice(ids), s) for s in offsets))

    @rule(racers=st.integers(1, 6), trigger=st.sampled_from(list(Trigger)))
    def claim(self, racers: int, trigger: Trigger) -> None:
        ids = self.sessions()
        if ids:
            sid = self.random.choice(ids)
            won = self._at_once(
                *[lambda: self.repository.claim(SessionId(sid), trigger, "run")] * racers
            )
            self.claims += [c for c in won if c is not None]

    @rule(completed=st.booleans(), also_fold=st.booleans())
    def mark(self, completed: bool, also_fold: bool) -> None:
        held, self.claims = self.claims, []
        marks = [
            (
                (lambda c=c: self.repository.mark_completed(c, "job-1", 3))
                if completed
                else (lambda c=c: self.repository.mark_failed(c, "boom", retry_in_s=30))
            )
            for c in held
        ]
        folds = [lambda: self._fold()] if also_fold else []
        self._at_once(*marks, *folds)

    @rule(deleted=st.booleans())
    def soft_delete_or_restore(self, deleted: bool) -> None:
        ids = self.sessions()
        if ids:
            with self.engine.begin() as conn:
                conn.execute(
                    text(
                        "UPDATE hdb_program_session SET deleted_at = "
                        + ("now()" if deleted else "NULL")
                        + " WHERE id = ANY(:ids)"
                    ),
                    {"ids": self.random.sample(ids, min(3, len(ids)))},
                )

    @rule(status=st.sampled_from(STATUSES))
    def host_rewrites_statuses(self, status: str) -> None:
        """A statement that changes many rows at once, as an operator's SQL would."""
        with self.engine.begin() as conn:
            conn.execute(
                text("UPDATE hdb_program_session SET link_generation_status = :s WHERE id % 3 = 0"),
                {"s": status},
            )

    @rule()
    def hard_delete_one_without_history(self) -> None:
        with self.engine.begin() as conn:
            conn.execute(
                text(
                    "DELETE FROM hdb_program_session WHERE id = (SELECT min(id) FROM"
                    " hdb_program_session s WHERE NOT EXISTS (SELECT 1 FROM"
                    " jlg_generation_attempt a WHERE a.program_session_id = s.id)"
                    " AND NOT EXISTS (SELECT 1 FROM jlg_link_generation_change c"
                    " WHERE c.program_session_id = s.id)"
                    " AND NOT EXISTS (SELECT 1 FROM hdb_online_session o"
                    " WHERE o.program_session_id = s.id))"
                )
            )

    def _fold(self) -> None:
        with self.engine.begin() as conn:
            fold(conn)

    @invariant()
    def counts_are_exact(self) -> None:
        with self.engine.begin() as conn:
            counts = read_counts(conn)
            held = {str(status): n for status, n in conn.execute(armed_by_status()).all() if n}
        expected = full_count(self.engine)
        assert held == armed_full_count(self.engine)
        assert counts.attempts == expected.attempts
        assert counts.lag_le == expected.lag_le
        assert (counts.lag_ms_sum, counts.lag_count) == (expected.lag_ms_sum, expected.lag_count)


def test_the_counts_equal_a_full_count_after_any_operations(engine: Engine) -> None:
    on_this_database = type("OperationsOnTheTestDatabase", (Operations,), {"engine": engine})
    run_state_machine_as_test(
        on_this_database,
        settings=settings(max_examples=25, stateful_step_count=15, deadline=None, derandomize=True),
    )


def test_folds_racing_each_other_and_writers_lose_and_double_nothing(engine: Engine) -> None:
    """Eight folds and a hundred closing attempts at once: every delta moved exactly once."""
    repository = ProgramSessionRepository(engine)
    ids = [create_session(engine) for _ in range(100)]
    now = datetime.now(UTC)
    for sid in ids:
        IntentWrites(engine).set_link_generation(sid, now + timedelta(seconds=1), 7)
    with engine.begin() as conn:
        conn.execute(text("UPDATE hdb_program_session SET link_generation_at = now()"))
        fold(conn)
    before = sum(full_count(engine).attempts.values())

    def close(sid: int) -> None:
        claim = repository.claim(SessionId(sid), Trigger.EVENT, "run")
        assert claim is not None
        repository.mark_completed(claim, "job", 1)

    def folding() -> None:
        with engine.begin() as conn:
            fold(conn)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda f: f(), [lambda s=s: close(s) for s in ids] + [folding] * 8))
    with engine.begin() as conn:
        counts = read_counts(conn)
    expected = before + 100
    assert sum(counts.attempts.values()) == expected == sum(full_count(engine).attempts.values())
