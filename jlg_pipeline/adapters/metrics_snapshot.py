"""The figures ``/metrics`` shows from the database, read in one go. The web app reads them in
the background at most every few seconds and scrapes render the last reading, so a scrape
costs the same whatever the tables' size (docs/design.md "Attempt history")."""

from dataclasses import dataclass, field
from datetime import timedelta

from sqlalchemy import Engine, Interval, func, literal, select

from jlg_pipeline.adapters.database import translate_errors
from jlg_pipeline.adapters.schedule_outbox import ScheduleOutbox
from jlg_pipeline.adapters.tables import generation_attempt as attempts
from jlg_pipeline.adapters.tables import program_session as ps
from jlg_pipeline.domain.models import AttemptOutcome
from jlg_pipeline.domain.status import LinkGenerationStatus

S = LinkGenerationStatus
OVERDUE_AFTER = timedelta(minutes=5)
LAG_BUCKETS_S = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 14400.0, 86400.0)


@dataclass(frozen=True, slots=True)
class MetricsSnapshot:
    by_status: dict[str, int] = field(default_factory=dict)
    overdue: int = 0
    """Not deleted, SCHEDULED, FAILED or IN_PROGRESS, due more than 5 minutes ago."""
    attempts: dict[tuple[str, str], int] = field(default_factory=dict)
    """Closed attempts by (trigger, outcome): a closed outcome never changes, so these only
    grow."""
    open_attempts: dict[str, int] = field(default_factory=dict)
    """Attempts still IN_PROGRESS, by trigger."""
    lag_buckets: tuple[int, ...] = ()
    """Closed attempts whose lag is at most each of LAG_BUCKETS_S (cumulative)."""
    lag_sum: float = 0.0
    lag_count: int = 0
    sync_pending: int = 0
    sync_oldest_seconds: float = 0.0


def read_metrics_snapshot(engine: Engine) -> MetricsSnapshot:
    lag = func.extract("epoch", attempts.c.claimed_at - attempts.c.link_generation_at)
    closed = attempts.c.outcome != AttemptOutcome.IN_PROGRESS.value
    with translate_errors("reading metrics"), engine.connect() as conn:
        by_status: dict[str, int] = dict(
            conn.execute(
                select(ps.c.link_generation_status, func.count())
                .where(ps.c.deleted_at.is_(None))
                .group_by(ps.c.link_generation_status)
            ).all()
        )
        # The sweep's partial index (ix_psession_link_gen_due) serves this range.
        overdue = conn.execute(
            select(func.count()).where(
                ps.c.deleted_at.is_(None),
                ps.c.link_generation_status != S.COMPLETED.value,
                ps.c.link_generation_status.in_(
                    [S.SCHEDULED.value, S.FAILED.value, S.IN_PROGRESS.value]
                ),
                ps.c.link_generation_at < func.now() - literal(OVERDUE_AFTER, Interval()),
            )
        ).scalar_one()
        by_outcome = conn.execute(
            select(attempts.c.trigger, attempts.c.outcome, func.count()).group_by(
                attempts.c.trigger, attempts.c.outcome
            )
        ).all()
        # The open ones, read from the partial index of open attempts.
        open_by_trigger = conn.execute(
            select(attempts.c.trigger, func.count())
            .where(attempts.c.outcome == AttemptOutcome.IN_PROGRESS.value)
            .group_by(attempts.c.trigger)
        ).all()
        lags = conn.execute(
            select(
                *(func.count().filter(lag <= bound) for bound in LAG_BUCKETS_S),
                func.coalesce(func.sum(lag), 0),
                func.count(),
            ).where(closed)
        ).one()
    pending, oldest = ScheduleOutbox(engine).backlog()
    return MetricsSnapshot(
        by_status={str(k): int(v) for k, v in by_status.items()},
        overdue=int(overdue),
        attempts={
            (str(t), str(o)): int(n)
            for t, o, n in by_outcome
            if o != AttemptOutcome.IN_PROGRESS.value
        },
        open_attempts={str(t): int(n) for t, n in open_by_trigger},
        lag_buckets=tuple(int(n) for n in lags[: len(LAG_BUCKETS_S)]),
        lag_sum=float(lags[-2]),
        lag_count=int(lags[-1]),
        sync_pending=pending,
        sync_oldest_seconds=oldest,
    )
