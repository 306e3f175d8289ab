"""The figures ``/metrics`` shows from the database, read in one go. The web app reads them in
the background at most every few seconds and scrapes render the last reading, so a scrape
costs the same whatever the tables' size; the reading itself does too: the closed attempts come
from ``metric_counts`` (kept by the statements that close them), the rest from partial indexes
that hold only the sessions that hold a time, what is due or what is open (docs/design.md
"Attempt history", "Scale"). Nothing of ours sits on the host's table to keep them."""

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from sqlalchemy import CompoundSelect, Engine, Interval, func, literal, select, union_all

from jlg_pipeline.adapters.candidates import overdue
from jlg_pipeline.adapters.database import small_reads, translate_errors
from jlg_pipeline.adapters.metric_counts import read_counts
from jlg_pipeline.adapters.schedule_outbox import ScheduleOutbox
from jlg_pipeline.adapters.service_view import NO_BUDGET, Look, ServiceView
from jlg_pipeline.adapters.session_statements import in_fresh_index, waiting_rows
from jlg_pipeline.adapters.tables import generation_attempt as attempts
from jlg_pipeline.adapters.tables import program_session as ps
from jlg_pipeline.domain.attempts import AttemptOutcome
from jlg_pipeline.domain.constants import TimingWindows
from jlg_pipeline.domain.service_view import Budget
from jlg_pipeline.domain.status import ARMED_STATUSES
from jlg_pipeline.domain.status import LinkGenerationStatus as S


def armed_by_status() -> CompoundSelect[Any]:
    """(status, count) of the sessions not deleted armed with a time (``ARMED_STATUSES``), each
    tier counted through its own partial index (ix_psession_link_gen_fresh,
    ix_psession_link_gen_failed), so the cost follows the sessions that hold a time, never the
    host table's size."""
    live = ps.c.deleted_at.is_(None)
    status = ps.c.link_generation_status
    fresh = select(status, func.count()).where(live, in_fresh_index()).group_by(status)
    failed = select(literal(S.FAILED.value), func.count()).where(live, status == S.FAILED.value)
    return union_all(fresh, failed)


OVERDUE_AFTER = timedelta(minutes=5)


@dataclass(frozen=True, slots=True)
class MetricsSnapshot:
    by_status: dict[str, int] = field(default_factory=dict)
    """Sessions not deleted that hold a time, by status: SCHEDULED, IN_PROGRESS and FAILED."""
    overdue: int = 0
    """Not deleted, SCHEDULED, FAILED or IN_PROGRESS, due more than 5 minutes ago."""
    attempts: dict[tuple[str, str], int] = field(default_factory=dict)
    """Closed attempts by (trigger, outcome): a closed outcome never changes, so these only
    grow."""
    open_attempts: dict[str, int] = field(default_factory=dict)
    """Attempts still IN_PROGRESS, by trigger."""
    lag_buckets: tuple[tuple[float, int], ...] = ()
    """(bound in seconds, closed attempts whose lag is at most that), cumulative."""
    lag_sum: float = 0.0
    lag_count: int = 0
    set_aside: dict[str, int] = field(default_factory=dict)
    """Rows each periodic path set aside because acting on them failed (services/set_aside.py)."""
    sync_pending: int = 0
    sync_oldest_seconds: float = 0.0
    service: Look | None = None
    """The online-session service's shared view: its budget, pause and breaker."""
    service_backlog: int = 0
    """Sessions waiting for a worker (``session_statements.waiting``, the one queue's
    predicate): what the service has yet to be asked for."""

    @property
    def service_backlog_seconds(self) -> float | None:
        """How long the budget takes to drain the backlog (None without a budget)."""
        if self.service is None or self.service.budget.rate is None:
            return None
        return self.service_backlog / self.service.budget.rate


def read_metrics_snapshot(
    engine: Engine, budget: Budget = NO_BUDGET, windows: TimingWindows | None = None
) -> MetricsSnapshot:
    with translate_errors("reading metrics"), engine.begin() as conn:
        small_reads(conn)
        counts = read_counts(conn)
        by_status = {str(s): int(n) for s, n in conn.execute(armed_by_status()).all() if n}
        overdue_count = conn.execute(
            select(func.count()).where(
                overdue(literal(OVERDUE_AFTER, Interval())),
                ps.c.link_generation_status.in_([s.value for s in ARMED_STATUSES]),
            )
        ).scalar_one()
        stale_ms = (windows or TimingWindows()).stale_ms
        # The queue's own predicate: what waits for a worker is what the service has yet to
        # be asked for.
        waiting = waiting_rows(stale_ms, ps.c.id).subquery()
        backlog = conn.execute(select(func.count()).select_from(waiting)).scalar_one()
        # The open ones, read from the partial index of open attempts.
        open_by_trigger = conn.execute(
            select(attempts.c.trigger, func.count())
            .where(attempts.c.outcome == AttemptOutcome.IN_PROGRESS.value)
            .group_by(attempts.c.trigger)
        ).all()
    pending, oldest = ScheduleOutbox(engine).backlog()
    service = ServiceView(engine, budget).look()
    return MetricsSnapshot(
        by_status=by_status,
        overdue=int(overdue_count),
        attempts=counts.attempts,
        open_attempts={str(t): int(n) for t, n in open_by_trigger},
        lag_buckets=counts.lag_le,
        lag_sum=counts.lag_ms_sum / 1000,
        lag_count=counts.lag_count,
        set_aside=counts.set_aside,
        sync_pending=pending,
        sync_oldest_seconds=oldest,
        service=service,
        service_backlog=int(backlog),
    )
