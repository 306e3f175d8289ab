"""Liveness of the one queue, as a property proven on PostgreSQL (docs/design.md "One queue",
"Nothing stops the queue").

Hypothesis drives 220 programmes through every kind of row: failed for good, in backoff, in
flight, stale, deleted, COMPLETED, host-written times no read can load (``±infinity``, year
10000, 4713 BC), new arms (ours and the host's), programme actions, workers claiming at once,
and time passing (every stored time moved back at once, the turns' included). After every
step, in a transaction rolled back after it, the queue is drained claim by claim and checked
against a model that reads the rows' raw values:

- while any session waits, the claim of the next returns one (and it drains every one);
- each programme with waiting work is served within as many claims as there are programmes
  with waiting work (``RECOVERY_EVERY`` times that while both classes wait: every fifth claim
  prefers recovery);
- a claim takes only a session that waits, so none twice in a cycle.

The host's writes, and time passing, are followed by ``SessionQueue.refresh``, as the
watchdog's next tick would be; ours are not: they bring their programme's turn forward
themselves (tests/integration/test_queue_liveness.py shows each without a refresh)."""

import itertools
import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from sqlalchemy import Connection, Engine, text

from jlg_pipeline.adapters.intent_writes import IntentWrites
from jlg_pipeline.adapters.programme_operations import ProgrammeOperations
from jlg_pipeline.adapters.queue import SessionQueue
from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.domain.attempts import Claim, Trigger
from jlg_pipeline.domain.constants import (
    ON_TIME_MS,
    READABLE_FROM,
    READABLE_UNTIL,
    RECOVERY_EVERY,
    STALE_MS,
)
from jlg_pipeline.domain.programme_actions import ProgrammeAction, ProgrammeRequest, SessionFilter
from jlg_pipeline.domain.validation import SessionId
from jlg_pipeline.services.programme_actions import ProgrammeActions
from testkit.factories import db_now

PROGRAMMES = 220
W = Trigger.WATCHDOG
KINDS = {
    # kind: (weight, status, time, retry, heartbeat, deleted), on the database clock
    "failed for good": (6, "FAILED", "now() - interval '20 minutes'", None, "now()", False),
    "in backoff": (
        5,
        "FAILED",
        "now() - interval '5 minutes'",
        "now() + interval '10 minutes'",
        "now()",
        False,
    ),
    "in flight": (3, "IN_PROGRESS", "now() - interval '1 minute'", None, "now()", False),
    "stale": (
        1,
        "IN_PROGRESS",
        "now() - interval '50 minutes'",
        None,
        "now() - interval '31 minutes'",
        False,
    ),
    "completed": (3, "COMPLETED", "now() - interval '1 hour'", None, "now()", False),
    "deleted": (1, "SCHEDULED", "now() - interval '3 minutes'", None, "now()", True),
    "at -infinity": (1, "SCHEDULED", "'-infinity'", None, "now()", False),
    "at infinity": (1, "FAILED", "'infinity'", "now()", "now()", False),
    "in year 10000": (1, "SCHEDULED", "'10000-01-01T00:00:00Z'", None, "now()", False),
    "in 4713 BC": (1, "SCHEDULED", "'4713-01-01 00:00:00+00 BC'", None, "now()", False),
    "on time": (2, "SCHEDULED", "now() - interval '20 seconds'", None, "now()", False),
    "recovery": (2, "SCHEDULED", "now() - interval '9 minutes'", None, "now()", False),
    "to come": (2, "SCHEDULED", "now() + interval '20 minutes'", None, "now()", False),
}
ABSURD = ["'-infinity'", "'infinity'", "'10000-01-01T00:00:00Z'", "'4713-01-01 00:00:00+00 BC'"]
MOVED_BY = st.sampled_from([40, 3 * 60, 11 * 60, 31 * 60])
"""Seconds time passes in a step: past a class's edge, a backoff, a claim's stale window."""
READABLE = (READABLE_FROM.timestamp(), READABLE_UNTIL.timestamp())
ROWS = text(
    "SELECT id, program_id, link_generation_status, deleted_at IS NOT NULL,"
    " extract(epoch FROM link_generation_at)::float8, "
    " extract(epoch FROM link_generation_retry_at)::float8,"
    " extract(epoch FROM updated_at)::float8, extract(epoch FROM now())::float8"
    " FROM hdb_program_session"
)


@dataclass(frozen=True)
class Row:
    id: int
    program_id: int
    status: str
    deleted: bool
    at: float | None
    retry: float | None
    heartbeat: float

    def waits(self, now: float) -> bool:
        """The model of "waits", from the design's words, not the code's SQL."""
        if self.deleted or self.at is None or not READABLE[0] <= self.at <= READABLE[1]:
            return False
        if self.at > now:
            return False
        if self.status == "SCHEDULED":
            return True
        if self.status == "FAILED":
            return self.retry is not None and self.retry <= now
        if self.status == "IN_PROGRESS":
            return min(self.heartbeat, now) + STALE_MS / 1000 <= now
        return False

    def recovery(self, now: float) -> bool:
        assert self.at is not None
        return self.at <= now - ON_TIME_MS / 1000


def _rows(conn: Connection) -> tuple[dict[int, Row], float]:
    rows = conn.execute(ROWS).all()
    now = rows[0][-1] if rows else 0.0
    return {r[0]: Row(*r[:-1]) for r in rows}, now


def _waiting(conn: Connection) -> tuple[dict[int, Row], float]:
    rows, now = _rows(conn)
    return {sid: row for sid, row in rows.items() if row.waits(now)}, now


def build_machine(engine: Engine) -> type[RuleBasedStateMachine]:
    repository = ProgramSessionRepository(engine)
    queue = SessionQueue(engine)
    writes = IntentWrites(engine)
    actions = ProgrammeActions(writes, ProgrammeOperations(engine), record_schedule_changes=False)
    keys = itertools.count()
    weighted = [kind for kind, spec in KINDS.items() for _ in range(spec[0])]

    def insert(conn: Connection, program_id: int, kind: str) -> int:
        _, status, at, retry, heartbeat, deleted = KINDS[kind]
        return int(
            conn.execute(
                text(
                    "INSERT INTO hdb_program_session (program_id, link_generation_status,"
                    " link_generation_at, link_generation_retry_at, updated_at, deleted_at,"
                    f" link_generation_attempt) VALUES (:p, :s, {at}, {retry or 'NULL'},"
                    f" {heartbeat}, {'now()' if deleted else 'NULL'}, 1) RETURNING id"
                ),
                {"p": program_id, "s": status},
            ).scalar_one()
        )

    class Liveness(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.claims: dict[int, Claim] = {}

        @initialize(
            kinds=st.lists(st.sampled_from(weighted), min_size=PROGRAMMES, max_size=PROGRAMMES)
        )
        def populate(self, kinds: list[str]) -> None:
            """One session a programme, of a kind drawn; the host wrote them all."""
            with engine.begin() as conn:
                conn.execute(
                    text(
                        "TRUNCATE hdb_program_session, jlg_generation_attempt,"
                        " jlg_programme_turn, jlg_session_queue, jlg_worker CASCADE"
                    )
                )
                for program_id, kind in enumerate(kinds, start=1):
                    insert(conn, program_id, kind)
            queue.refresh()

        @rule(program_id=st.integers(1, PROGRAMMES + 20), ago_s=st.sampled_from([5, 90, 600]))
        def admin_arms(self, program_id: int, ago_s: int) -> None:
            """Ours: the write brings the programme's turn forward itself."""
            with engine.begin() as conn:
                sid = insert(conn, program_id, "completed")
            at = db_now(engine) - timedelta(seconds=ago_s)
            writes.set_link_generation(SessionId(sid), at, 7)

        @rule(program_id=st.integers(1, PROGRAMMES + 20), kind=st.sampled_from(list(KINDS)))
        def host_inserts(self, program_id: int, kind: str) -> None:
            with engine.begin() as conn:
                insert(conn, program_id, kind)
            queue.refresh()

        @rule(program_id=st.integers(1, PROGRAMMES), shift_s=st.sampled_from([30, 600]))
        def programme_action(self, program_id: int, shift_s: int) -> None:
            """Ours: every session of the programme armed at a time ahead (time passing
            brings it)."""
            where = SessionFilter(program_id=program_id)
            action = ProgrammeAction.setting(db_now(engine) + timedelta(seconds=shift_s))
            forecast = actions.act(ProgrammeRequest(where, action, None, True), 7)
            request = ProgrammeRequest(where, action, forecast.matched, False)
            actions.act(request, 7, f"key-{next(keys)}")

        @rule(data=st.data(), value=st.sampled_from(ABSURD))
        def host_writes_an_absurd_time(self, data: st.DataObject, value: str) -> None:
            with engine.connect() as conn:
                ids = sorted(_rows(conn)[0])
            sid = data.draw(st.sampled_from(ids))
            with engine.begin() as conn:
                conn.execute(
                    text(
                        f"UPDATE hdb_program_session SET link_generation_at = {value}"
                        " WHERE id = :id"
                    ),
                    {"id": sid},
                )
            queue.refresh()

        @precondition(lambda self: bool(self.claims))
        @rule(data=st.data())
        def host_heartbeat_at_infinity(self, data: st.DataObject) -> None:
            sid = data.draw(st.sampled_from(sorted(self.claims)))
            with engine.begin() as conn:
                conn.execute(
                    text("UPDATE hdb_program_session SET updated_at = 'infinity' WHERE id = :id"),
                    {"id": sid},
                )
            queue.refresh()

        @rule(data=st.data())
        def host_deletes(self, data: st.DataObject) -> None:
            with engine.connect() as conn:
                ids = sorted(_rows(conn)[0])
            sid = data.draw(st.sampled_from(ids))
            with engine.begin() as conn:
                conn.execute(
                    text("UPDATE hdb_program_session SET deleted_at = now() WHERE id = :id"),
                    {"id": sid},
                )

        @rule(ending=st.sampled_from(["completed", "for good", "backoff", "retry due", "dies"]))
        def worker_claims(self, ending: str) -> None:
            with engine.connect() as conn:
                waiting, _ = _waiting(conn)
            claim = repository.claim_next(W, "run-w")
            if claim is None:
                assert not waiting, f"{sorted(waiting)} wait; the claim of the next took none"
                return
            assert claim.session_id in waiting, f"{claim.session_id} claimed, not waiting"
            self.claims[claim.session_id] = claim
            if ending == "completed":
                assert repository.mark_completed(claim, "job")
            elif ending != "dies":
                retry_in_s = {"for good": None, "backoff": 600.0, "retry due": 0.0}[ending]
                assert repository.mark_failed(claim, "503", retry_in_s=retry_in_s)

        @rule(workers=st.integers(2, 4))
        def workers_claim_together(self, workers: int) -> None:
            with engine.connect() as conn:
                waiting, _ = _waiting(conn)
            claims: list[Claim | None] = []
            start = threading.Barrier(workers)
            lock = threading.Lock()

            def worker() -> None:
                start.wait()
                claim = repository.claim_next(W, "run-t")
                with lock:
                    claims.append(claim)

            threads = [threading.Thread(target=worker) for _ in range(workers)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            taken = [c.session_id for c in claims if c is not None]
            assert len(taken) == len(set(taken)), f"a session claimed twice: {taken}"
            assert set(taken) <= set(waiting), (taken, sorted(waiting))
            assert len(taken) == min(workers, len(waiting)), (taken, sorted(waiting))
            self.claims.update({c.session_id: c for c in claims if c is not None})

        @rule(seconds=MOVED_BY)
        def time_passes(self, seconds: int) -> None:
            """Every stored time readable moves back at once: the same as ``seconds`` passing,
            the watchdog's refresh ticking meanwhile (a session the host armed ahead joins its
            programme's turn at the first tick after its time)."""
            with engine.begin() as conn:
                for table, columns in {
                    "hdb_program_session": (
                        "link_generation_at",
                        "link_generation_retry_at",
                        "updated_at",
                        "deleted_at",
                    ),
                    "jlg_programme_turn": ("next_due_at",),
                    "jlg_worker": ("beat_at",),
                    "jlg_generation_attempt": ("claimed_at",),
                }.items():
                    for column in columns:
                        conn.execute(
                            text(
                                f"UPDATE {table} SET {column} = {column}"
                                f" - make_interval(secs => :s) WHERE {column} BETWEEN"
                                " '0002-01-01' AND '9999-01-01'"
                            ),
                            {"s": seconds},
                        )
            queue.refresh()

        @invariant()
        def the_queue_serves_every_waiting_session_in_turn(self) -> None:
            with _rolled_back(engine) as conn:
                waiting, now = _waiting(conn)
                programmes = {row.program_id for row in waiting.values()}
                classes = {row.recovery(now) for row in waiting.values()}
                bound = len(programmes) * (1 if len(classes) <= 1 else RECOVERY_EVERY)
                served_at: dict[int, int] = {}
                taken: list[int] = []
                while (sid := _claim_next(conn, repository)) is not None:
                    assert sid in waiting, f"{sid} claimed, not waiting"
                    assert sid not in taken, f"{sid} claimed twice"
                    taken.append(sid)
                    served_at.setdefault(waiting[sid].program_id, len(taken))
                assert set(taken) == set(waiting), (
                    f"left waiting: {sorted(set(waiting) - set(taken))}"
                )
                late = {p: n for p, n in served_at.items() if n > bound}
                assert not late, f"served after the bound {bound}: {late}"

    return Liveness


def _claim_next(conn: Connection, repository: ProgramSessionRepository) -> int | None:
    """``claim_next`` on ``conn``, in its transaction: looks again after moving programmes
    with nothing to claim, as the repository does."""
    parameters = {**repository.next_claim_parameters, "session_id": None}
    parameters |= {"trigger": W.value, "run_id": "check"}
    while True:
        row = conn.exec_driver_sql(repository.next_claim_sql, parameters).one()
        if row.id is not None:
            return int(row.id)
        if not row.moved:
            return None


@contextmanager
def _rolled_back(engine: Engine) -> Iterator[Connection]:
    with engine.connect() as conn:
        transaction = conn.begin()
        try:
            yield conn
        finally:
            transaction.rollback()


@pytest.mark.timeout(600)
def test_the_queue_claims_every_waiting_session_in_bounded_turns_whatever_the_rows(
    engine: Engine,
) -> None:
    machine = build_machine(engine)
    machine.TestCase.settings = settings(
        max_examples=6,
        stateful_step_count=18,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    machine.TestCase().runTest()


def test_the_model_reads_what_the_host_may_write(engine: Engine) -> None:
    """The model's own reading: an absurd time reads as a number it can compare."""
    with engine.connect() as conn:
        values = [
            conn.execute(text(f"SELECT extract(epoch FROM {v}::timestamptz)::float8")).scalar_one()
            for v in ABSURD
        ]
    assert values[:2] == [-math.inf, math.inf]
    assert values[2] > READABLE[1]
    assert values[3] < READABLE[0]
