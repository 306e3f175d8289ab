"""Counts kept by the statements that change them, so ``/metrics`` reads the same few rows at
ten thousand sessions and at ten million, expand-only (docs/design.md "Scale").

- ``jlg_metric_count``: signed deltas, one row per (metric, labels) a statement changed,
  appended by statement-level triggers in the changing statement's own transaction (so a
  count is exact and never ahead of or behind what committed), and folded into one row per
  (metric, labels) by the reading (``adapters/metric_counts.py``). Appending never waits on
  another writer: claims and marks do not queue behind a hot counter row.
  - ``sessions`` (status): sessions not deleted, by status; inserts, updates, deletes and a
    TRUNCATE (which holds every writer off, so it zeroes the sums exactly).
  - ``attempts`` (trigger, outcome): attempts closed, counted when they close (inserted closed
    or updated from IN_PROGRESS), never taken back: a Prometheus counter.
  - ``lag_le`` (bound), ``lag_ms_sum``, ``lag_count``: the closed attempts' lag (claimed -
    the session's time) as a cumulative histogram, its sum in whole milliseconds, its count.
- ``jlg_lag_bucket``: the histogram's bounds in seconds, read by the trigger and the reading
  alike, so they are written down once.

The counts start from a full count taken while both tables are locked against writes (SHARE
ROW EXCLUSIVE, until this migration commits), so none is missed or counted twice; on a large
brownfield table that holds the host's writes for the length of one full scan.

Revision ID: 0009_metric_counts
Revises: 0008_retries_in_time
Create Date: 2026-12-04
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009_metric_counts"
down_revision: str | None = "0008_retries_in_time"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

LAG_BOUNDS_S = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 14400, 86400)

_SESSIONS = """
CREATE FUNCTION jlg_count_sessions() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        INSERT INTO jlg_metric_count (metric, label, delta)
        SELECT 'sessions', label, -sum(delta) FROM jlg_metric_count WHERE metric = 'sessions'
        GROUP BY label HAVING sum(delta) <> 0;
    ELSIF TG_OP = 'INSERT' THEN
        INSERT INTO jlg_metric_count (metric, label, delta)
        SELECT 'sessions', link_generation_status, count(*) FROM new_rows
        WHERE deleted_at IS NULL GROUP BY link_generation_status;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO jlg_metric_count (metric, label, delta)
        SELECT 'sessions', link_generation_status, -count(*) FROM old_rows
        WHERE deleted_at IS NULL GROUP BY link_generation_status;
    ELSE
        INSERT INTO jlg_metric_count (metric, label, delta)
        SELECT 'sessions', status, sum(change) FROM (
            SELECT link_generation_status AS status, -1 AS change FROM old_rows
            WHERE deleted_at IS NULL
            UNION ALL
            SELECT link_generation_status, 1 FROM new_rows WHERE deleted_at IS NULL
        ) AS changes
        GROUP BY status HAVING sum(change) <> 0;
    END IF;
    RETURN NULL;
END $$;
"""


def _closed_counts(closed: str) -> str:
    """The counts closing the attempts ``closed`` selects adds: the trigger's for the rows a
    statement closed, the migration's starting count for every closed row."""
    return f"""
    INSERT INTO jlg_metric_count (metric, label, delta)
    WITH c AS (
        SELECT a.trigger, a.outcome,
               extract(epoch FROM a.claimed_at - a.link_generation_at) AS lag
        FROM ({closed}) AS a
    )
    SELECT 'attempts', c.trigger || '/' || c.outcome, count(*) FROM c
    GROUP BY c.trigger, c.outcome
    UNION ALL
    SELECT 'lag_le', b.bound_s::text, count(*) FROM c JOIN jlg_lag_bucket b ON c.lag <= b.bound_s
    GROUP BY b.bound_s
    UNION ALL
    SELECT 'lag_ms_sum', '', sum(round(c.lag * 1000))::bigint FROM c HAVING count(*) > 0
    UNION ALL
    SELECT 'lag_count', '', count(*) FROM c HAVING count(*) > 0
    """


_CLOSED_BY_INSERT = "SELECT * FROM new_rows WHERE outcome <> 'IN_PROGRESS'"
_CLOSED_BY_UPDATE = (
    "SELECT n.* FROM new_rows n JOIN old_rows o USING (program_session_id, attempt) "
    "WHERE o.outcome = 'IN_PROGRESS' AND n.outcome <> 'IN_PROGRESS'"
)
_ATTEMPTS = f"""
CREATE FUNCTION jlg_count_attempts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        {_closed_counts(_CLOSED_BY_INSERT)};
    ELSE
        {_closed_counts(_CLOSED_BY_UPDATE)};
    END IF;
    RETURN NULL;
END $$;
"""


def upgrade() -> None:
    op.create_table(
        "jlg_metric_count",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        sa.Column("metric", sa.String(32), nullable=False),
        sa.Column("label", sa.String(64), nullable=False),
        sa.Column("delta", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "jlg_lag_bucket", sa.Column("bound_s", sa.Integer, primary_key=True, autoincrement=False)
    )
    op.bulk_insert(
        sa.table("jlg_lag_bucket", sa.column("bound_s", sa.Integer)),
        [{"bound_s": bound} for bound in LAG_BOUNDS_S],
    )
    op.execute("LOCK TABLE hdb_program_session, jlg_generation_attempt IN SHARE ROW EXCLUSIVE MODE")
    op.execute(_SESSIONS)
    op.execute(_ATTEMPTS)
    for event, tables in (
        ("INSERT", "NEW TABLE AS new_rows"),
        ("UPDATE", "OLD TABLE AS old_rows NEW TABLE AS new_rows"),
        ("DELETE", "OLD TABLE AS old_rows"),
    ):
        op.execute(
            f"CREATE TRIGGER jlg_count_sessions_{event.lower()} AFTER {event} ON "
            f"hdb_program_session REFERENCING {tables} FOR EACH STATEMENT "
            "EXECUTE FUNCTION jlg_count_sessions()"
        )
        if event != "DELETE":
            op.execute(
                f"CREATE TRIGGER jlg_count_attempts_{event.lower()} AFTER {event} ON "
                f"jlg_generation_attempt REFERENCING {tables} FOR EACH STATEMENT "
                "EXECUTE FUNCTION jlg_count_attempts()"
            )
    op.execute(
        "CREATE TRIGGER jlg_count_sessions_truncate AFTER TRUNCATE ON hdb_program_session "
        "FOR EACH STATEMENT EXECUTE FUNCTION jlg_count_sessions()"
    )
    op.execute(
        "INSERT INTO jlg_metric_count (metric, label, delta) "
        "SELECT 'sessions', link_generation_status, count(*) FROM hdb_program_session "
        "WHERE deleted_at IS NULL GROUP BY link_generation_status"
    )
    op.execute(
        _closed_counts("SELECT * FROM jlg_generation_attempt WHERE outcome <> 'IN_PROGRESS'")
    )


def downgrade() -> None:
    for event in ("insert", "update", "delete", "truncate"):
        op.execute(f"DROP TRIGGER IF EXISTS jlg_count_sessions_{event} ON hdb_program_session")
        op.execute(f"DROP TRIGGER IF EXISTS jlg_count_attempts_{event} ON jlg_generation_attempt")
    op.execute("DROP FUNCTION jlg_count_attempts()")
    op.execute("DROP FUNCTION jlg_count_sessions()")
    op.drop_table("jlg_lag_bucket")
    op.drop_table("jlg_metric_count")
