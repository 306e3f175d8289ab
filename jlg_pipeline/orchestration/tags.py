"""Run tags naming the session and the trigger, so runs can be found and limited per session,
and the tags Dagster itself writes that the code location reads (launched_by.py checks each
against the instance's records: a person can type any tag into the Launchpad)."""

from jlg_pipeline.domain.lanes import LANE_TAG, Lane

RUN_KEY_TAG = "dagster/run_key"
"""Dagster's tag holding a run's run key."""
SESSION_TAG = "jlg/session"
TRIGGER_TAG = "jlg/trigger"
CORRELATION_TAG = "jlg/correlation_id"
OUTCOME_TAG = "jlg/outcome"
"""Added when a generation run's op ends: completed, skipped, superseded or failed."""
NEXT_TAG = "jlg/next"
"""Added when a generation run fails: who tries the session again and when (UTC), or that a
person must (services/after_failure.py)."""
CYCLE_TAG = "jlg/cycle"
"""Added when a generation run's claim generated: one value per session and cycle."""
MAX_RUNTIME_TAG = "dagster/max_runtime"
"""Dagster's own bound: run monitoring fails a run still going after this many seconds,
its process alive or not (the default launcher cannot tell a dead worker)."""

SYNC_MAX_RUNTIME_S = 15 * 60
GENERATION_MAX_RUNTIME_S = 60 * 60
"""One session: a bulkRegister call of at most 30 s, the completion write's retries for up to
half the stale window (15 minutes), and slack for a slow start."""
LONG_MAX_RUNTIME_S = 3 * 60 * 60
"""Sweeps, backfills, shared runs and pruning (docs/design.md: at most 3 hours)."""


def run_tags(lane: Lane, max_runtime_s: int, **tags: str) -> dict[str, str]:
    """A job's tags: its lane and its runtime bound (every run of the job carries them)."""
    return {LANE_TAG: lane.value, MAX_RUNTIME_TAG: str(max_runtime_s), **tags}


PARENT_RUN_TAG = "dagster/parent_run_id"
"""Set by Dagster on a re-execution (with the parent's other tags copied)."""
AUTO_RETRY_TAG = "dagster/auto_retry_run_id"
"""Set by Dagster's run-retry daemon on a failed run: the run it launched to retry it."""
TICK_TAG = "dagster/tick"
"""Set by Dagster on a run a sensor or schedule tick asked for: the tick's id."""
BACKFILL_TAG = "dagster/backfill"
PARTITION_TAG = "dagster/partition"
RUNNING_OUTCOME = "running"
"""``jlg/outcome`` while a re-execution runs, replacing the outcome copied from its parent."""
NO_CYCLE = "-"
"""``jlg/cycle`` of a re-execution that claimed nothing, replacing its parent's."""
