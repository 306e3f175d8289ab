"""Who asked for a run, from what Dagster itself records, never from what its tags claim
(docs/design.md "A guest"). The Dagster UI has no login and its Launchpad sets any tag, Dagster's
own included, so a run's trigger tag is believed only when the instance's records back it:

- a sensor's or schedule's tick (``dagster/tick``) whose stored record lists the run among the
  runs it asked for (a sensor reserves their ids before it creates them);
- a backfill (``dagster/backfill``) that exists, covers the run's partition, and whose first
  run for that partition is this one (``dagster job backfill`` writes the backfill's record
  only after it submitted its runs, so a run that names a backfill not on record yet gives it
  a few seconds);
- an automatic run retry: its parent names it (``dagster/auto_retry_run_id``, written by
  Dagster's retry daemon), and it is then whatever its parent was.

Anything else, a re-execution a person launched included, is ``manual``."""

from dagster import DagsterInstance, DagsterInvariantViolationError, DagsterRun, RunsFilter

from jlg_pipeline.domain.attempts import Trigger
from jlg_pipeline.orchestration.tags import (
    AUTO_RETRY_TAG,
    BACKFILL_TAG,
    PARENT_RUN_TAG,
    PARTITION_TAG,
    TICK_TAG,
    TRIGGER_TAG,
)
from jlg_pipeline.services.retrying import tries

AUTOMATIC = frozenset(Trigger) - {Trigger.MANUAL, Trigger.BACKFILL}
"""Triggers only a sensor or a schedule asks for."""
BACKFILL_RECORD_WAIT_S = 10.0
BACKFILL_RECORD_POLL_S = 0.5
MAX_RETRY_DEPTH = 20
"""Automatic retries followed back to their first run, at most (Dagster's own bound is a
handful of retries)."""


def trigger_of(instance: DagsterInstance, run: DagsterRun, depth: int = 0) -> Trigger:
    """The trigger Dagster's records show for ``run``."""
    parent_id = run.parent_run_id or run.tags.get(PARENT_RUN_TAG)
    if parent_id:
        parent = instance.get_run_by_id(parent_id)
        retried = parent is not None and parent.tags.get(AUTO_RETRY_TAG) == run.run_id
        if retried and parent is not None and depth < MAX_RETRY_DEPTH:
            return trigger_of(instance, parent, depth + 1)
        return Trigger.MANUAL
    try:
        claimed = Trigger(run.tags.get(TRIGGER_TAG, Trigger.MANUAL.value))
    except ValueError:
        return Trigger.MANUAL
    if claimed in AUTOMATIC and _asked_by_tick(instance, run):
        return claimed
    if claimed is Trigger.BACKFILL and _asked_by_backfill(instance, run):
        return claimed
    return Trigger.MANUAL


def _asked_by_tick(instance: DagsterInstance, run: DagsterRun) -> bool:
    tick_id = run.tags.get(TICK_TAG, "")
    storage = instance.schedule_storage
    if not tick_id.isascii() or not tick_id.isdigit() or storage is None:
        return False
    try:
        tick = storage.get_tick(int(tick_id))
    except DagsterInvariantViolationError:  # no such tick
        return False
    asked = {*tick.tick_data.run_ids, *(tick.tick_data.reserved_run_ids or ())}
    return run.run_id in asked


def _asked_by_backfill(instance: DagsterInstance, run: DagsterRun) -> bool:
    backfill_id, partition = run.tags.get(BACKFILL_TAG), run.tags.get(PARTITION_TAG)
    if backfill_id is None or partition is None:
        return False
    backfill = None
    polls = tries(BACKFILL_RECORD_POLL_S, BACKFILL_RECORD_POLL_S, within_s=BACKFILL_RECORD_WAIT_S)
    for _ in polls:
        if (backfill := instance.get_backfill(backfill_id)) is not None:
            break
    if backfill is None or partition not in (backfill.partition_names or ()):
        return False
    first = instance.get_run_records(
        RunsFilter(tags={BACKFILL_TAG: backfill_id, PARTITION_TAG: partition}),
        limit=1,
        ascending=True,
    )
    return bool(first) and first[0].dagster_run.run_id == run.run_id
