"""All SQL on program sessions' link-generation fields.

Every state change is one conditional ``UPDATE … RETURNING`` decided by the database clock:
no read-then-write, no load-and-save (inv-02), and "nothing happened" is a None/False
result, never an exception. Each method runs in its own short transaction.
"""

import logging
from typing import Any

from sqlalchemy import (
    Engine,
    Float,
    Integer,
    Select,
    Update,
    and_,
    bindparam,
    case,
    cast,
    func,
    select,
    update,
)

from jlg_pipeline.adapters.attempt_history import read_attempts
from jlg_pipeline.adapters.claim import argument, claim_statement, to_claim
from jlg_pipeline.adapters.database import compiled_once, fetch_prepared, translate_errors
from jlg_pipeline.adapters.intent_history import read_changes
from jlg_pipeline.adapters.pick import CANDIDATES_WHEN_CROWDED, bring_forward, pick
from jlg_pipeline.adapters.session_statements import (
    S,
    matching,
    ms,
    state_columns,
    to_state,
)
from jlg_pipeline.adapters.tables import generation_attempt as attempts
from jlg_pipeline.adapters.tables import program_session as ps
from jlg_pipeline.domain.attempts import AttemptOutcome, AttemptRecord, Claim, Trigger
from jlg_pipeline.domain.constants import MAX_LAST_ERROR_CHARS, TimingWindows
from jlg_pipeline.domain.programme_actions import SessionFilter
from jlg_pipeline.domain.retries import RETRY_BUDGET_S
from jlg_pipeline.domain.session_state import IntentChange, LinkGenerationState
from jlg_pipeline.domain.validation import SessionId

logger = logging.getLogger(__name__)


def _claims(windows: TimingWindows, engine: Engine) -> list[tuple[str, dict[str, Any]]]:
    """The claim of a named session, the claim of the next, and its crowded look, compiled."""
    return [
        claim_statement(argument("session_id"), windows, engine.dialect),
        claim_statement(pick(windows.stale_ms), windows, engine.dialect),
        claim_statement(pick(windows.stale_ms, CANDIDATES_WHEN_CROWDED), windows, engine.dialect),
    ]


class ProgramSessionRepository:
    """The concurrency hotspot: the atomic claim and the fenced marks, and the reads of a
    session's state, its listing and its histories (``attempt_history.py``,
    ``intent_history.py``). The candidate sets (``candidates.py``) and the admin's writes
    (``intent_writes.py``) are stores of their own; ``bootstrap.py`` composes them."""

    @property
    def engine(self) -> Engine:
        """The database the statements run on (the service's view lives there too)."""
        return self._engine

    def __init__(self, engine: Engine, windows: TimingWindows | None = None) -> None:
        self._engine = engine
        self._one_statement = engine.execution_options(isolation_level="AUTOCOMMIT")
        self.windows = windows or TimingWindows()
        # Compiled once a process (a repository is made for every run): the gate is the hot
        # path, and building a statement costs more than running it.
        claims = compiled_once(
            ("claims", self.windows), engine.dialect, lambda: _claims(self.windows, engine)
        )
        self.claim_sql, self.claim_parameters = claims[0]
        """The claim's SQL text (the gate benchmark sends it raw too) and its parameters."""
        self.next_claim_sql, self.next_claim_parameters = claims[1]
        """The claim of the next's SQL text and parameters (its plan is tested and benchmarked)."""
        self._crowded_claim = claims[2]
        self._complete_statement = self._mark_statement(
            S.COMPLETED,
            {"job_id": bindparam("job_id"), "total": bindparam("total", type_=Integer)},
            link_generation_job_id=bindparam("job_id"),
            link_generation_last_error=None,
        )
        retry_in_s = cast(bindparam("retry_in_s"), Float)
        retry_at = func.now() + func.make_interval(0, 0, 0, 0, 0, 0, retry_in_s)
        self._fail_statement = self._mark_statement(
            S.FAILED,
            {"error": bindparam("error")},
            forward=True,
            link_generation_last_error=bindparam("error"),
            # A retryable failure is tried again by the queue after its wait, while its
            # cycle is within the budget; past it (or not retryable), NULL: the sweep's. No
            # arithmetic on the host's time: it may hold any value PostgreSQL takes.
            link_generation_retry_at=case(
                (
                    and_(
                        retry_in_s.is_not(None),
                        retry_at - ms(RETRY_BUDGET_S * 1000) < ps.c.link_generation_at,
                    ),
                    retry_at,
                ),
                else_=None,
            ),
        )
        self._renew_statement = (
            update(ps)
            .where(
                ps.c.id == bindparam("session_id"),
                ps.c.link_generation_status == S.IN_PROGRESS.value,
                ps.c.link_generation_attempt == bindparam("claim_attempt"),
            )
            .values(updated_at=func.now())
            .returning(ps.c.id)
        )

    def get_state(self, session_id: SessionId) -> LinkGenerationState | None:
        """The session's link-generation fields, soft-deleted rows included (``deleted``);
        None when no row has that id."""
        with translate_errors("reading a session"), self._engine.connect() as conn:
            row = conn.execute(
                select(*state_columns(self.windows)).where(ps.c.id == session_id)
            ).one_or_none()
        return None if row is None else to_state(row)

    def claim(
        self, session_id: SessionId, trigger: Trigger = Trigger.MANUAL, run_id: str | None = None
    ) -> Claim | None:
        """The one gate: atomically move a due, claimable session to IN_PROGRESS.

        Claimable means SCHEDULED or FAILED, or IN_PROGRESS older than the stale window;
        not soft-deleted; ``link_generation_at`` set and no later than now plus the due
        tolerance. Each claim takes a new attempt number and opens its record in the attempt
        history (``trigger``, Dagster's ``run_id``); a stale attempt it takes over is closed
        RECLAIMED. Returns None when another caller holds the claim or the session is not
        claimable; exactly one of any number of concurrent callers gets a Claim.
        """
        row = self._run_claim(self.claim_sql, self.claim_parameters, session_id, trigger, run_id)
        return None if row is None else to_claim(row)

    def claim_next(self, trigger: Trigger, run_id: str | None) -> Claim | None:
        """The claim, as :meth:`claim` makes it, of the session that waits and is next
        (``adapters/pick.py``: on time before recovery, programmes in turn, then time and
        id), with the options recorded for its cycle; None when none waits. One that found every
        candidate it looked at locked by claims in flight looks further before it says so."""
        for sql, parameters in (
            (self.next_claim_sql, self.next_claim_parameters),
            self._crowded_claim,
        ):
            # A look that moved programmes with nothing to claim on looks again: the
            # programmes behind them may hold work. Each look moves some or ends the loop.
            while True:
                row = self._run_claim(sql, parameters, None, trigger, run_id)
                assert row is not None, "the claim of the next answers one row"
                if row.id is not None:
                    return to_claim(row)
                if not row.moved:
                    break
        return None

    def _run_claim(
        self,
        sql: str,
        parameters: dict[str, Any],
        session_id: SessionId | None,
        trigger: Trigger,
        run_id: str | None,
    ) -> Any:
        arguments = {
            **parameters,
            "session_id": session_id,
            "trigger": Trigger(trigger).value,
            "run_id": None if run_id is None else str(run_id)[:64],
        }
        # One statement, so its own transaction: no BEGIN and COMMIT round trips.
        with translate_errors("claiming a session"), self._one_statement.connect() as conn:
            return fetch_prepared(conn, sql, arguments)

    def resume(self, session_id: SessionId, run_id: str) -> Claim | None:
        """The claim this run already holds on the session, its lease renewed: the session is
        IN_PROGRESS under an open attempt that ``run_id`` made (a retry of the run's step
        after its completion write was lost). None otherwise, and for any other run, however
        stale: taking over another run's claim is :meth:`claim`'s job."""
        resumed = (
            update(ps)
            .where(
                ps.c.id == session_id,
                ps.c.deleted_at.is_(None),
                ps.c.link_generation_status == S.IN_PROGRESS.value,
                attempts.c.program_session_id == ps.c.id,
                attempts.c.attempt == ps.c.link_generation_attempt,
                attempts.c.outcome == AttemptOutcome.IN_PROGRESS.value,
                attempts.c.run_id == str(run_id)[:64],
            )
            .values(updated_at=func.now())
            .returning(
                ps.c.id,
                ps.c.program_id,
                ps.c.link_generation_attempt,
                ps.c.link_generation_at,
                attempts.c.claimed_at,
            )
        )
        with translate_errors("resuming a claim"), self._engine.begin() as conn:
            row = conn.execute(resumed).one_or_none()
        return None if row is None else to_claim(row)

    def _mark_statement(
        self, status: S, recorded: dict[str, Any], forward: bool = False, **values: Any
    ) -> Select[Any]:
        """The fenced mark, and the attempt's record closed by the same statement: with the
        mark's outcome when it landed, SUPERSEDED when the attempt was fenced out. A record
        already closed (RECLAIMED while this attempt's bulkRegister still ran) keeps its
        outcome and time; the late result (job id, total or error) is kept on it, so two
        bulkRegister jobs in one cycle stay visible and no counter falls."""
        marked = (
            update(ps)
            .where(
                ps.c.id == bindparam("session_id"),
                ps.c.link_generation_status == S.IN_PROGRESS.value,
                ps.c.link_generation_attempt == bindparam("claim_attempt"),
            )
            .values(link_generation_status=status.value, updated_at=func.now(), **values)
            .returning(ps.c.id, ps.c.program_id, ps.c.link_generation_retry_at)
            .cte("marked")
        )
        still_open = attempts.c.outcome == AttemptOutcome.IN_PROGRESS.value
        closed = (
            update(attempts)
            .where(
                attempts.c.program_session_id == bindparam("session_id"),
                attempts.c.attempt == bindparam("claim_attempt"),
            )
            .values(
                outcome=case(
                    (and_(still_open, select(marked.c.id).exists()), status.value),
                    (still_open, AttemptOutcome.SUPERSEDED.value),
                    else_=attempts.c.outcome,
                ),
                finished_at=func.coalesce(attempts.c.finished_at, func.now()),
                **recorded,
            )
            .cte("closed")
        )
        statement = select(marked.c.id).add_cte(closed)
        if forward:
            # A retry due later is a time the session's programme has work again.
            retried = select(marked.c.program_id, marked.c.link_generation_retry_at).where(
                marked.c.link_generation_retry_at.is_not(None)
            )
            statement = statement.add_cte(bring_forward(retried).cte("forward"))
        return statement

    def _mark(
        self, statement: Update | Select[Any], claim: Claim, action: str, **parameters: Any
    ) -> bool:
        # Not "attempt": a parameter named like a column of the table updated joins its SET.
        parameters.update(session_id=claim.session_id, claim_attempt=claim.attempt)
        with translate_errors(action), self._engine.begin() as conn:
            return conn.execute(statement, parameters).one_or_none() is not None

    def renew(self, claim: Claim) -> bool:
        """Extend the claim's lease (``updated_at`` is now) for the attempt holding it, so a
        live attempt never goes stale. False when fenced out (see :meth:`mark_completed`)."""
        return self._mark(self._renew_statement, claim, "renewing a claim")

    def mark_completed(self, claim: Claim, job_id: str, total: int | None = None) -> bool:
        """COMPLETED for the attempt holding the claim. False when fenced out: a stale
        reclaim, a re-arm or a clear took the session since this claim was made (its
        record then says SUPERSEDED)."""
        return self._mark(
            self._complete_statement,
            claim,
            "marking a session COMPLETED",
            job_id=str(job_id)[:255],
            total=total,
        )

    def mark_failed(self, claim: Claim, error: str, retry_in_s: float | None = None) -> bool:
        """FAILED with the error kept, for the attempt holding the claim; with ``retry_in_s``
        (a retryable failure) the watchdog tries it again that many seconds from now, if
        that is within the cycle's budget (``RETRY_BUDGET_S`` after its time). False when
        fenced out (see :meth:`mark_completed`)."""
        return self._mark(
            self._fail_statement,
            claim,
            "marking a session FAILED",
            error=error[:MAX_LAST_ERROR_CHARS],
            retry_in_s=retry_in_s,
        )

    def changes(self, session_id: SessionId, limit: int = 50) -> list[IntentChange]:
        """The session's intent history (every admin set/clear), newest first."""
        return read_changes(self._engine, session_id, limit)

    def attempts(self, session_id: SessionId, limit: int = 50) -> list[AttemptRecord]:
        """The session's attempt history, newest first, at most ``limit``."""
        return read_attempts(self._engine, session_id, limit)

    def list_sessions(
        self, where: SessionFilter, limit: int, after_id: int
    ) -> tuple[list[LinkGenerationState], int | None]:
        """Sessions ``where`` names (never soft-deleted) with id above ``after_id``, by id, at
        most ``limit``; and the id to continue after (None on the last page)."""
        statement = (
            select(*state_columns(self.windows))
            .where(*matching(where), ps.c.id > after_id)
            .order_by(ps.c.id)
            .limit(limit + 1)
        )
        with translate_errors("listing sessions"), self._engine.connect() as conn:
            rows = conn.execute(statement).all()
        states = [to_state(r) for r in rows[:limit]]
        return states, states[-1].id if len(rows) > limit else None
