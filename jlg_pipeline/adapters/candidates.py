"""The candidate sets: which sessions the sweep, the watchdog and a backfill go after, and
the overdue ones the metrics count. Each set is written once, and each is read through the
partial index whose predicates it repeats (migrations 0002, 0003, 0008), so its cost follows
what is due, not the table's history."""

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, Engine, Select, and_, func, literal, select, union_all

from jlg_pipeline.adapters.database import translate_errors
from jlg_pipeline.adapters.metric_counts import count_set_aside
from jlg_pipeline.adapters.session_statements import S, claimable, due_session, in_fresh_index, ms
from jlg_pipeline.adapters.tables import program_session as ps
from jlg_pipeline.domain.constants import TimingWindows
from jlg_pipeline.domain.session_state import DueSession


def past(after: ColumnElement[timedelta]) -> ColumnElement[bool]:
    """Not deleted, its time more than ``after`` ago."""
    return and_(ps.c.deleted_at.is_(None), ps.c.link_generation_at <= func.now() - after)


def overdue(after: ColumnElement[timedelta]) -> ColumnElement[bool]:
    """Past ``after`` and not COMPLETED: the predicates of ix_psession_link_gen_due, so the
    planner can use it."""
    return and_(past(after), ps.c.link_generation_status != S.COMPLETED.value)


class Candidates:
    """The sets a sweep and a backfill take, and how many are left past their bound."""

    def __init__(self, engine: Engine, windows: TimingWindows | None = None) -> None:
        self._engine = engine
        self.windows = windows or TimingWindows()

    def _fallback_candidates(self) -> ColumnElement[bool]:
        return and_(overdue(ms(self.windows.grace_ms)), claimable(self.windows))

    def fallback_candidates_statement(self, limit: int) -> Select[Any]:
        """The sweep's candidates in two tiers, each served by its own partial index:
        SCHEDULED and stale IN_PROGRESS oldest first, then FAILED fewest attempts first. So
        sessions that always fail are re-attempted, but never keep another from its turn."""
        # Each tier names the statuses it takes, so the COMPLETED predicate is left out.
        past_grace = past(ms(self.windows.grace_ms))

        def tier(
            number: int,
            rank: ColumnElement[Any],
            order: Sequence[ColumnElement[Any]],
            *where: ColumnElement[bool],
        ) -> Select[Any]:
            return (
                select(
                    ps.c.id,
                    ps.c.link_generation_at,
                    ps.c.link_generation_status,
                    literal(number).label("tier"),
                    rank.label("rank"),
                )
                .where(past_grace, *where)
                .order_by(*order, ps.c.link_generation_at, ps.c.id)
                .limit(limit)
            )

        fresh = tier(0, literal(0), (), in_fresh_index(), claimable(self.windows))
        failed = tier(
            1,
            ps.c.link_generation_attempt,
            (ps.c.link_generation_attempt,),
            ps.c.link_generation_status == S.FAILED.value,
            claimable(self.windows),
        )
        both = union_all(fresh, failed).subquery("candidates")
        return (
            select(both.c.id, both.c.link_generation_at, both.c.link_generation_status)
            .order_by(both.c.tier, both.c.rank, both.c.link_generation_at, both.c.id)
            .limit(limit)
        )

    def find_due_for_fallback_generation(self, limit: int) -> Sequence[DueSession]:
        """Overdue past the grace window, not deleted, claimable: SCHEDULED and stale
        IN_PROGRESS oldest first, then FAILED fewest attempts first; at most ``limit``."""
        statement = self.fallback_candidates_statement(limit)
        with translate_errors("finding overdue sessions"), self._engine.connect() as conn:
            rows = conn.execute(statement).all()
        return [due_session(r) for r in rows]

    def count_due_for_fallback_generation(self) -> int:
        """How many sessions :meth:`find_due_for_fallback_generation` would return unlimited."""
        statement = select(func.count()).select_from(ps).where(self._fallback_candidates())
        with translate_errors("counting overdue sessions"), self._engine.connect() as conn:
            return int(conn.execute(statement).scalar_one())

    def count_set_aside(self, path: str) -> None:
        """One more candidate ``path`` could not act on (services/set_aside.py)."""
        with translate_errors("counting a row set aside"), self._engine.begin() as conn:
            count_set_aside(conn, path)

    def _in_window(self, start: datetime, end: datetime) -> ColumnElement[bool]:
        return and_(
            ps.c.deleted_at.is_(None),
            ps.c.link_generation_status != S.COMPLETED.value,
            ps.c.link_generation_at >= start,
            ps.c.link_generation_at < end,
            claimable(self.windows),
        )

    def find_due_in_window(
        self, start: datetime, end: datetime, limit: int
    ) -> Sequence[DueSession]:
        """Backfill candidates: ``link_generation_at`` in [start, end), due, claimable and
        not deleted (so never COMPLETED, inv-03); oldest first, at most ``limit``."""
        statement = (
            select(ps.c.id, ps.c.link_generation_at, ps.c.link_generation_status)
            .where(self._in_window(start, end))
            .order_by(ps.c.link_generation_at, ps.c.id)
            .limit(limit)
        )
        with translate_errors("finding sessions to backfill"), self._engine.connect() as conn:
            rows = conn.execute(statement).all()
        return [due_session(r) for r in rows]

    def count_due_in_window(self, start: datetime, end: datetime) -> int:
        """How many sessions :meth:`find_due_in_window` would return unlimited."""
        statement = select(func.count()).select_from(ps).where(self._in_window(start, end))
        with translate_errors("counting sessions to backfill"), self._engine.connect() as conn:
            return int(conn.execute(statement).scalar_one())
