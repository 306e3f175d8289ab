"""Counts kept by the statements that change them (migration 0009): the closed attempts by
trigger and outcome, with their lag histogram. Database triggers on our own
``jlg_generation_attempt`` append signed deltas in the closing statement's own transaction; a
reading folds them into one row per (metric, label) and sums what is there, so it reads a few
dozen rows whatever the history's length (docs/design.md "Scale"). Nothing here sits on the
host's tables."""

from dataclasses import dataclass, field

from sqlalchemy import Connection, delete, func, insert, select

from jlg_pipeline.adapters.tables import lag_bucket, metric_count


@dataclass(frozen=True, slots=True)
class Counts:
    attempts: dict[tuple[str, str], int] = field(default_factory=dict)
    """Attempts closed, by (trigger, outcome): counted as they close, never taken back."""
    lag_le: tuple[tuple[float, int], ...] = ()
    """(bound in seconds, closed attempts at most that late), by bound."""
    lag_ms_sum: int = 0
    lag_count: int = 0
    set_aside: dict[str, int] = field(default_factory=dict)
    """Rows a periodic path set aside because acting on them failed, by path."""


def fold(conn: Connection) -> None:
    """Replace the deltas committed so far by their sums, one row per (metric, label). Two
    folds at once each move only rows the other has not: a row deleted under one is skipped
    by the other, and neither sees the other's new sums."""
    gone = (
        delete(metric_count)
        .returning(metric_count.c.metric, metric_count.c.label, metric_count.c.delta)
        .cte("gone")
    )
    conn.execute(
        insert(metric_count).from_select(
            ["metric", "label", "delta"],
            select(gone.c.metric, gone.c.label, func.sum(gone.c.delta)).group_by(
                gone.c.metric, gone.c.label
            ),
        )
    )


def read_counts(conn: Connection) -> Counts:
    """Fold, then sum: the counts as of this transaction, exact."""
    fold(conn)
    total = func.sum(metric_count.c.delta)
    rows = conn.execute(
        select(metric_count.c.metric, metric_count.c.label, total).group_by(
            metric_count.c.metric, metric_count.c.label
        )
    ).all()
    by_metric: dict[str, dict[str, int]] = {}
    for metric, label, value in rows:
        by_metric.setdefault(metric, {})[label] = int(value)
    bounds = conn.execute(select(lag_bucket.c.bound_s).order_by(lag_bucket.c.bound_s)).scalars()
    lag_le = by_metric.get("lag_le", {})
    return Counts(
        attempts={
            (trigger, outcome): v
            for label, v in by_metric.get("attempts", {}).items()
            for trigger, _, outcome in [label.partition("/")]
            if v
        },
        lag_le=tuple((float(b), lag_le.get(str(b), 0)) for b in bounds),
        lag_ms_sum=by_metric.get("lag_ms_sum", {}).get("", 0),
        lag_count=by_metric.get("lag_count", {}).get("", 0),
        set_aside=by_metric.get("set_aside", {}),
    )


def count_set_aside(conn: Connection, path: str, rows: int = 1) -> None:
    """``rows`` more rows ``path`` set aside (services/set_aside.py), appended as a delta in
    the caller's transaction."""
    conn.execute(insert(metric_count).values(metric="set_aside", label=path, delta=rows))
