"""All SQL on the attempt history (``jlg_generation_attempt``): one row per claim, opened by
the claim's statement and closed by the mark's, a reclaim's or a takeover's, in the same
statement as the session's state change (``repository.py`` composes these); and its read."""

from sqlalchemy import CTE, Engine, func, select, update

from jlg_pipeline.adapters.database import translate_errors
from jlg_pipeline.adapters.tables import generation_attempt as attempts
from jlg_pipeline.domain.attempts import AttemptOutcome, AttemptRecord
from jlg_pipeline.domain.validation import SessionId


def close_open_attempt(changed: CTE, name: str) -> CTE:
    """A CTE closing, as RECLAIMED, the open attempt of the session ``changed`` (an UPDATE …
    RETURNING id of that session) took over: a stale reclaim, or a PATCH over a stale run."""
    closed: CTE = (
        update(attempts)
        .where(
            attempts.c.program_session_id == changed.c.id,
            attempts.c.outcome == AttemptOutcome.IN_PROGRESS.value,
        )
        .values(outcome=AttemptOutcome.RECLAIMED.value, finished_at=func.now())
        .cte(name)
    )
    return closed


def read_attempts(engine: Engine, session_id: SessionId, limit: int) -> list[AttemptRecord]:
    """The session's attempts, newest first, at most ``limit``."""
    statement = (
        select(attempts)
        .where(attempts.c.program_session_id == session_id)
        .order_by(attempts.c.attempt.desc())
        .limit(limit)
    )
    with translate_errors("reading attempts"), engine.connect() as conn:
        rows = conn.execute(statement).all()
    return [
        AttemptRecord(
            session_id=r.program_session_id,
            attempt=r.attempt,
            trigger=r.trigger,
            run_id=r.run_id,
            link_generation_at=r.link_generation_at,
            claimed_at=r.claimed_at,
            finished_at=r.finished_at,
            outcome=AttemptOutcome(r.outcome),
            job_id=r.job_id,
            total=r.total,
            error=r.error,
        )
        for r in rows
    ]
