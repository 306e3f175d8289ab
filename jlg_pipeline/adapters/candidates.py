"""The candidate sets: which sessions the sweep, the watchdog and a backfill go after, and
the overdue ones the metrics count. Each set is written once, and each is read through the
partial index whose predicates it repeats (migrations 0002, 0003, 0008), so its cost follows
what is due, not the table's history."""

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    CompoundSelect,
    Float,
    Select,
    and_,
    delete,
    exists,
    false,
    func,
    literal,
    or_,
    select,
    true,
    union_all,
)
from sqlalchemy.dialects.postgresql import ARRAY, distinct_on

from jlg_pipeline.adapters.database import translate_errors
from jlg_pipeline.adapters.intent_history import newest_actor
from jlg_pipeline.adapters.metric_counts import count_set_aside
from jlg_pipeline.adapters.session_statements import (
    S,
    SessionStatements,
    due_session,
    in_fresh_index,
    ms,
    never_claimed,
    unattended,
)
from jlg_pipeline.adapters.tables import held_session as hs
from jlg_pipeline.adapters.tables import program_session as ps
from jlg_pipeline.domain import validation
from jlg_pipeline.domain.models import DueSession


def past(after: ColumnElement[timedelta]) -> ColumnElement[bool]:
    """Not deleted, its time more than ``after`` ago."""
    return and_(ps.c.deleted_at.is_(None), ps.c.link_generation_at <= func.now() - after)


def overdue(after: ColumnElement[timedelta]) -> ColumnElement[bool]:
    """Past ``after`` and not COMPLETED: the predicates of ix_psession_link_gen_due, so the
    planner can use it."""
    return and_(past(after), ps.c.link_generation_status != S.COMPLETED.value)


def held_by_status() -> CompoundSelect[Any]:
    """(status, count) of the sessions not deleted that hold a time (``HELD_STATUSES``), each
    tier counted through its own partial index (ix_psession_link_gen_fresh,
    ix_psession_link_gen_failed), so the cost follows the sessions that hold a time, never the
    host table's size."""
    live = ps.c.deleted_at.is_(None)
    status = ps.c.link_generation_status
    fresh = select(status, func.count()).where(live, in_fresh_index()).group_by(status)
    failed = select(literal(S.FAILED.value), func.count()).where(live, status == S.FAILED.value)
    return union_all(fresh, failed)


def waiting_for_the_service(stale_ms: int) -> CompoundSelect[Any]:
    """The due sessions no live attempt holds (SCHEDULED past their time, IN_PROGRESS gone
    stale, FAILED retryably with their wait over), counted through the tier indexes: what the
    online-session service has yet to be asked for."""
    live = ps.c.deleted_at.is_(None)
    status = ps.c.link_generation_status
    fresh = select(func.count()).where(
        live, unattended(stale_ms), ps.c.link_generation_at <= func.now()
    )
    retrying = select(func.count()).where(
        live,
        status == S.FAILED.value,
        ps.c.link_generation_retry_at.is_not(None),
        ps.c.link_generation_retry_at <= func.now(),
    )
    return union_all(fresh, retrying)


class CandidateQueries(SessionStatements):
    def _fallback_candidates(self) -> ColumnElement[bool]:
        return and_(overdue(ms(self.windows.grace_ms)), self._claimable())

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

        fresh = tier(
            0,
            literal(0),
            (),
            unattended(self.windows.stale_ms),
        )
        failed = tier(
            1,
            ps.c.link_generation_attempt,
            (ps.c.link_generation_attempt,),
            ps.c.link_generation_status == S.FAILED.value,
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
        statement = self.fallback_candidates_statement(validation.positive_limit(limit))
        with translate_errors("finding overdue sessions"), self._engine.connect() as conn:
            rows = conn.execute(statement).all()
        return [due_session(r) for r in rows]

    def count_due_for_fallback_generation(self) -> int:
        """How many sessions :meth:`find_due_for_fallback_generation` would return unlimited."""
        statement = select(func.count()).select_from(ps).where(self._fallback_candidates())
        with translate_errors("counting overdue sessions"), self._engine.connect() as conn:
            return int(conn.execute(statement).scalar_one())

    def find_unattended(
        self, limit: int, leave: Mapping[int, float] | None = None
    ) -> Sequence[DueSession]:
        """The watchdog's candidates: due sessions no live attempt holds, whatever became of
        their event. SCHEDULED with a time more than the watchdog's grace ago (never claimed
        this cycle) or held by the online-session service's shared view until now
        (``jlg_held_session``: ``retry_at`` says until when), IN_PROGRESS gone stale, or
        FAILED retryably with its wait over (a non-retryable failure is the sweep's and a
        person's); not deleted; oldest first, at most ``limit``, each once; each with the admin
        of its newest intent change. Each tier is read through its own index.

        ``leave``: sessions launched lately (id → when, Unix seconds), left out unless their
        run has tried them since (failed, or was held by the service, after the launch); a
        never-claimed one is left out whatever its wait says. So a batch reaches past the
        sessions runs are about to take, in every tier."""
        limit = validation.positive_limit(limit)
        # Ids parsed where they entered (the watchdog's cursor, Dagster's run configs) or read
        # from the database.
        leave = leave or {}
        launched = (
            func.unnest(
                literal(list(leave), ARRAY(BigInteger)), literal(list(leave.values()), ARRAY(Float))
            )
            .table_valued("id", "at")
            .render_derived()
        )

        def left(tried_at: ColumnElement[datetime], always: ColumnElement[bool]) -> Any:
            """Launched lately and not tried since: not a candidate yet."""
            return ~exists().where(
                launched.c.id == ps.c.id,
                or_(always, tried_at.is_(None), tried_at <= func.to_timestamp(launched.c.at)),
            )

        columns = [
            ps.c.id,
            ps.c.link_generation_at,
            ps.c.link_generation_status,
            ps.c.link_generation_retry_at,
            newest_actor(ps.c.id).label("actor_user_id"),
        ]
        fresh = (
            select(*columns)
            .where(
                # The predicates of ix_psession_link_gen_fresh, so the planner can use it.
                ps.c.deleted_at.is_(None),
                unattended(self.windows.stale_ms),
                ps.c.link_generation_at <= func.now() - ms(self.windows.watchdog_grace_ms),
                left(ps.c.link_generation_retry_at, never_claimed()) if leave else true(),
            )
            .order_by(ps.c.link_generation_at, ps.c.id)
            .limit(limit)
        )
        retrying = (
            select(*columns)
            .where(
                # ix_psession_link_gen_retry's predicates.
                ps.c.deleted_at.is_(None),
                ps.c.link_generation_status == S.FAILED.value,
                ps.c.link_generation_retry_at.is_not(None),
                ps.c.link_generation_retry_at <= func.now(),
                left(ps.c.link_generation_retry_at, false()) if leave else true(),
            )
            .order_by(ps.c.link_generation_retry_at, ps.c.id)
            .limit(limit)
        )
        held = (
            select(*columns[:3], hs.c.not_before.label("link_generation_retry_at"), columns[4])
            .join(hs, hs.c.program_session_id == ps.c.id)
            .where(
                hs.c.not_before <= func.now(),
                ps.c.deleted_at.is_(None),
                never_claimed(),
                ps.c.link_generation_at <= func.now(),
                left(hs.c.not_before, false()) if leave else true(),
            )
            .order_by(hs.c.not_before)
            .limit(limit)
        )
        tiers = union_all(fresh, retrying, held).subquery()
        # A session in two tiers (held, and past the grace) once, with its latest hold, before
        # the limit: a batch of held sessions past the grace was half a batch.
        latest = func.coalesce(tiers.c.link_generation_retry_at, tiers.c.link_generation_at)
        once = (
            select(tiers)
            .ext(distinct_on(tiers.c.id))
            .order_by(tiers.c.id, latest.desc())
            .subquery()
        )
        statement = select(once).order_by(once.c.link_generation_at, once.c.id).limit(limit)
        with translate_errors("finding unattended sessions"), self._engine.connect() as conn:
            return [due_session(row) for row in conn.execute(statement)]

    def count_set_aside(self, path: str) -> None:
        """One more candidate ``path`` could not act on (services/set_aside.py)."""
        with translate_errors("counting a row set aside"), self._engine.begin() as conn:
            count_set_aside(conn, path)

    def forget_held(self, session_ids: Sequence[int]) -> None:
        """The watchdog launched these: their holds are spent. Holds whose session is no
        longer waiting (generated, cleared, deleted) go too."""
        ids = list(session_ids)  # the watchdog's own candidates, read from the database
        waiting = select(ps.c.id).where(
            ps.c.id == hs.c.program_session_id,
            ps.c.deleted_at.is_(None),
            never_claimed(),
        )
        statement = delete(hs).where(
            hs.c.not_before <= func.now(),
            or_(hs.c.program_session_id.in_(ids), ~waiting.exists()),
        )
        with translate_errors("forgetting held sessions"), self._engine.begin() as conn:
            conn.execute(statement)

    def _in_window(self, start: datetime, end: datetime) -> ColumnElement[bool]:
        start = validation.aware_datetime(start, "start")
        end = validation.aware_datetime(end, "end")
        return and_(
            ps.c.deleted_at.is_(None),
            ps.c.link_generation_status != S.COMPLETED.value,
            ps.c.link_generation_at >= start,
            ps.c.link_generation_at < end,
            self._due(),
            self._claimable(),
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
            .limit(validation.positive_limit(limit))
        )
        with translate_errors("finding sessions to backfill"), self._engine.connect() as conn:
            rows = conn.execute(statement).all()
        return [due_session(r) for r in rows]

    def count_due_in_window(self, start: datetime, end: datetime) -> int:
        """How many sessions :meth:`find_due_in_window` would return unlimited."""
        statement = select(func.count()).select_from(ps).where(self._in_window(start, end))
        with translate_errors("counting sessions to backfill"), self._engine.connect() as conn:
            return int(conn.execute(statement).scalar_one())
