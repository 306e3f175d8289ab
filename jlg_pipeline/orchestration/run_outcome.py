"""What a run says about itself, so the Runs list and a run's page tell its story: its
trigger and session tagged when its op starts, its outcome and cycle when it ends, and its
metadata (one session's outcome, or a table of every session a run of several handled)."""

import statistics
from datetime import UTC, datetime
from typing import Any

from dagster import Failure, MetadataValue, OpExecutionContext, Output

from jlg_pipeline.domain.attempts import Trigger
from jlg_pipeline.domain.generation import GenerationOutcome, GenerationResult, SweepReport
from jlg_pipeline.domain.messages import cycle_id
from jlg_pipeline.orchestration.launched_by import trigger_of
from jlg_pipeline.orchestration.sweep_time import sweep_runs_at
from jlg_pipeline.orchestration.tags import (
    CYCLE_TAG,
    NEXT_TAG,
    NO_CYCLE,
    OUTCOME_TAG,
    RUNNING_OUTCOME,
    SESSION_TAG,
    TRIGGER_TAG,
)
from jlg_pipeline.services.after_failure import run_headline

FAILED_OUTCOME = GenerationResult.FAILED.value


def tag_start(context: OpExecutionContext, session_id: int | None) -> Trigger:
    """Name the run's own story before it generates: its session (hand launches too) and
    trigger as Dagster's records show it (``manual`` for anything a person launched, whatever
    its tags say), and no outcome copied from a parent."""
    trigger = trigger_of(context.instance, context.run)
    tags = {TRIGGER_TAG: trigger.value}
    if session_id is not None:
        tags[SESSION_TAG] = str(session_id)
    if OUTCOME_TAG in context.run.tags:
        tags[OUTCOME_TAG] = RUNNING_OUTCOME
    context.instance.add_run_tags(context.run_id, tags)
    return trigger


def tag_outcome(
    context: OpExecutionContext, outcome: str, session_id: int, cycle: datetime | None
) -> None:
    """Show in the Runs list what the run did (a skipped run also says Success) and which
    cycle it claimed, failed runs included: every cycle of a session shares its correlation
    id. A run that claimed nothing drops a cycle its parent's tags gave it."""
    tags = {OUTCOME_TAG: outcome}
    if cycle is not None:
        tags[CYCLE_TAG] = cycle_id(session_id, cycle)
    elif CYCLE_TAG in context.run.tags:
        tags[CYCLE_TAG] = NO_CYCLE
    context.instance.add_run_tags(context.run_id, tags)


def outcome_metadata(outcome: GenerationOutcome) -> dict[str, str | int | float | None]:
    return {
        "session_id": outcome.session_id,
        "outcome": outcome.result.value,
        "attempt": outcome.attempt,
        "jobId": outcome.job_id,
        "total": outcome.total,
        "created": outcome.created,
        "cycle": None if outcome.cycle is None else outcome.cycle.isoformat(),
        "lag_seconds": outcome.lag_seconds,
        "reason": outcome.reason,
        # The session's whole history (this attempt included, with its run id).
        "attempt_history": f"GET /program-session/{outcome.session_id}/link-generation/attempts",
    }


def _report_metadata(report: SweepReport) -> dict[str, Any]:
    lags = [s.lag_seconds for s in report.sessions if s.lag_seconds is not None]
    rows = "\n".join(
        f"| {s.session_id} | {s.outcome} | {'' if s.lag_seconds is None else s.lag_seconds} |"
        for s in report.sessions
    )
    return {
        "found": report.found,
        "completed": report.completed,
        "skipped": report.skipped,
        "failed": report.failed,
        "left_behind": report.left_behind,
        "failed_session_ids": ",".join(map(str, report.failed_session_ids)),
        "lag_max_seconds": max(lags, default=None),
        "lag_median_seconds": statistics.median(lags) if lags else None,
        # Every session the run handled, so the UI answers "did this run touch session 7".
        "sessions": MetadataValue.md(
            "| session | outcome | lag s |\n|---|---|---|\n" + rows if rows else "none"
        ),
    }


def queue_metadata(report: SweepReport) -> dict[str, Any]:
    """The sessions a run of one took from the queue after its own, beside its own story."""
    if not report.sessions:
        return {}
    return {"from_queue": report.found, "from_queue_sessions": _report_metadata(report)["sessions"]}


COUNT_TAGS = ("found", "completed", "skipped", "failed", "left_behind")
"""A run of many sessions (sweep, backfill, shared) is tagged ``jlg/<count>`` with each, so the
Runs list tells its story without opening it."""


def finish(context: OpExecutionContext, report: SweepReport, sweep_enabled: bool) -> Output[None]:
    metadata = _report_metadata(report)
    context.instance.add_run_tags(
        context.run_id, {f"jlg/{name}": str(metadata[name]) for name in COUNT_TAGS}
    )
    if report.failed:
        # After every other session had its turn: the UI shows the run failed, which sessions,
        # and when the first of them is tried again (its jlg/next tag too).
        failed = [r for r in report.sessions if r.outcome == GenerationResult.FAILED]
        now = datetime.now(UTC)
        headline = run_headline(failed, now, sweep_runs_at(now, sweep_enabled))
        context.instance.add_run_tags(context.run_id, {NEXT_TAG: headline.tag})
        raise Failure(headline.text, metadata=metadata, allow_retries=False)
    return Output(None, metadata=metadata)
