"""Counts of closed attempts kept by the statements that close them, so ``/metrics`` reads the
same few rows at ten thousand attempts and at ten million, expand-only (docs/design.md "Scale").

- ``jlg_metric_count``: signed deltas, one row per (metric, label) a statement changed,
  appended by statement-level triggers on ``jlg_generation_attempt`` (our own table, written
  only by our own role) in the closing statement's own transaction, and folded into one row
  per (metric, label) by the reading (``adapters/metric_counts.py``).
  - ``attempts`` (trigger, outcome): attempts closed, counted when they close (inserted closed
    or updated from IN_PROGRESS), never taken back: a Prometheus counter.
  - ``lag_le`` (bound), ``lag_ms_sum``, ``lag_count``: the closed attempts' lag (claimed -
    the session's time) as a cumulative histogram, its sum in whole milliseconds, its count.
- ``jlg_lag_bucket``: the histogram's bounds in seconds, read by the trigger and the reading
  alike, so they are written down once.

Nothing here touches the host's tables (docs/design.md "A guest"): the sessions by status are
indexed aggregates read from ``hdb_program_session`` itself. An earlier version of this
revision put counting triggers there; ``0010_guest`` removes them where they exist.

The trigger function's ``search_path`` is the migration's, pinned when it is made, so the
counts land in our tables whatever schema the writing role looks in first.

The starting count (the attempts already closed) is taken in batches of sessions, each in its
own transaction under a brief lock on the attempts (a million attempts held our writers 1.8 s
when it was one statement: docs/performance.md). Each closed attempt is counted once: while the
batches run, the triggers count only the sessions up to ``jlg_metric_count_start.counted_to``,
which a batch moves past its sessions in the same transaction, under the lock, that counts
them; no writer runs meanwhile. Once every session is counted the triggers count everything
and the mark is dropped. Run again after a failure, it goes on from the mark.

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
phase: str = "expand"

LAG_BOUNDS_S = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 14400, 86400)


def _closed_counts(closed: str) -> str:
    """The counts closing the attempts ``closed`` selects adds: the trigger's for the rows a
    statement closed, the migration's starting count for the closed rows of a batch."""
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
_START = "jlg_metric_count_start"
_COUNTED = f" AND program_session_id <= (SELECT counted_to FROM {_START})"
_LAST = 9223372036854775807
BATCH = 50_000
"""Attempts per batch of the starting count: about 0.1 s of our writers waiting each."""


def _attempts(create: str, only_counted: bool) -> str:
    """The triggers' function; ``only_counted`` while the starting count runs."""
    added = _COUNTED if only_counted else ""
    return f"""
{create} FUNCTION jlg_count_attempts() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        {_closed_counts(_CLOSED_BY_INSERT + added)};
    ELSE
        {_closed_counts(_CLOSED_BY_UPDATE + added)};
    END IF;
    RETURN NULL;
END $$
"""


_BATCH_COUNT = _closed_counts(
    "SELECT * FROM jlg_generation_attempt WHERE outcome <> 'IN_PROGRESS'"
    " AND program_session_id > lo AND program_session_id <= hi"
)
_STARTING_COUNT = f"""
DO $$
DECLARE
    lo bigint;
    hi bigint;
BEGIN
    LOOP
        SELECT counted_to INTO lo FROM {_START};
        EXIT WHEN lo = {_LAST};
        LOCK TABLE jlg_generation_attempt IN SHARE ROW EXCLUSIVE MODE;
        SELECT program_session_id INTO hi FROM jlg_generation_attempt
        WHERE program_session_id > lo ORDER BY program_session_id OFFSET {BATCH} LIMIT 1;
        hi := coalesce(hi, {_LAST});
        {_BATCH_COUNT};
        UPDATE {_START} SET counted_to = hi;
        COMMIT;
    END LOOP;
END $$
"""


def upgrade() -> None:
    if op.get_context().as_sql or not _resuming():
        _begin()
    # Outside the migration's transaction: each batch commits (and releases its lock) alone.
    with op.get_context().autocommit_block():
        op.execute(_STARTING_COUNT)
    # A writer already in the old function waits to read the mark; dropping the mark under it
    # would fail that writer. The lock waits for those writers and holds the next ones until
    # the new function is in place.
    op.execute("LOCK TABLE jlg_generation_attempt IN SHARE ROW EXCLUSIVE MODE")
    op.execute(_attempts("CREATE OR REPLACE", only_counted=False))
    op.drop_table(_START)


def _begin() -> None:
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
    op.create_table(_START, sa.Column("counted_to", sa.BigInteger, nullable=False))
    op.execute(f"INSERT INTO {_START} (counted_to) VALUES (-{_LAST} - 1)")
    op.execute(_attempts("CREATE", only_counted=True))
    for event, tables in (
        ("INSERT", "NEW TABLE AS new_rows"),
        ("UPDATE", "OLD TABLE AS old_rows NEW TABLE AS new_rows"),
    ):
        op.execute(
            f"CREATE TRIGGER jlg_count_attempts_{event.lower()} AFTER {event} ON "
            f"jlg_generation_attempt REFERENCING {tables} FOR EACH STATEMENT "
            "EXECUTE FUNCTION jlg_count_attempts()"
        )


def _resuming() -> bool:
    """An earlier run stopped during the starting count: its tables, triggers and mark stand."""
    found = op.get_bind().execute(sa.text(f"SELECT to_regclass('{_START}') IS NOT NULL"))
    return bool(found.scalar())


def downgrade() -> None:
    op.execute(f"DROP TABLE IF EXISTS {_START}")
    for event in ("insert", "update"):
        op.execute(f"DROP TRIGGER IF EXISTS jlg_count_attempts_{event} ON jlg_generation_attempt")
    op.execute("DROP FUNCTION jlg_count_attempts()")
    op.drop_table("jlg_lag_bucket")
    op.drop_table("jlg_metric_count")
