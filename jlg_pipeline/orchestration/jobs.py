"""The jobs: one generation per run, the fallback sweep, and the partitioned backfill.

Every one calls ``generate_for_session`` and nothing else generates (TRD dec-09).
"""

import statistics
from functools import partial
from typing import Any

from dagster import (
    Backoff,
    Config,
    DailyPartitionsDefinition,
    Failure,
    Jitter,
    JobDefinition,
    MetadataValue,
    OpExecutionContext,
    Output,
    ResourceParam,
    RetryPolicy,
    RetryRequested,
    in_process_executor,
    job,
    op,
)

from jlg_pipeline.adapters.registrars import BulkRegistrar
from jlg_pipeline.domain.constants import FALLBACK_BATCH_LIMIT, MAX_RETRY_ATTEMPTS
from jlg_pipeline.domain.errors import GenerationFailed, InvalidInput
from jlg_pipeline.domain.models import GenerationOutcome, SweepReport, Trigger
from jlg_pipeline.orchestration.resources import DatabaseResource
from jlg_pipeline.orchestration.tags import (
    CYCLE_TAG,
    OUTCOME_TAG,
    TRIGGER_TAG,
    cycle_id,
    trigger_of,
)
from jlg_pipeline.services.generation import generate_for_session
from jlg_pipeline.services.sweep import backfill_window, sweep_overdue_sessions

RETRY_DELAY_SECONDS = 10.0
# The longest Retry-After honoured: the run waits in its process, holding a run slot.
MAX_RETRY_AFTER_SECONDS = 300.0
BACKFILL_START_DATE = "2026-01-01"
# end_offset=1: today's partition exists too, so a session due this morning can be backfilled.
backfill_partitions = DailyPartitionsDefinition(
    start_date=BACKFILL_START_DATE, timezone="UTC", end_offset=1
)


class GenerateJoinLinksConfig(Config):
    programSessionId: int
    role: str | None = None
    batchSize: int | None = None
    actorUserId: int | None = None


class SweepConfig(Config):
    batchLimit: int = FALLBACK_BATCH_LIMIT


FAILED_OUTCOME = "failed"


def _tag_outcome(
    context: OpExecutionContext, outcome: str, generated: GenerationOutcome | None = None
) -> None:
    """Show in the Runs list what the run did (a skipped run also says Success) and which
    cycle it generated for: every cycle of a session shares its correlation id."""
    tags = {OUTCOME_TAG: outcome}
    if generated is not None and generated.cycle is not None:
        tags[CYCLE_TAG] = cycle_id(generated.session_id, generated.cycle)
    context.instance.add_run_tags(context.run_id, tags)


def _outcome_metadata(outcome: GenerationOutcome) -> dict[str, str | int | float | None]:
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


def build_generation_job(retry_delay_seconds: float = RETRY_DELAY_SECONDS) -> JobDefinition:
    """The job the sensor launches per event. Retryable failures retry inside the run (at
    most MAX_RETRY_ATTEMPTS times, backing off); others fail the run at once."""

    @op(
        name="generate_join_links",
        retry_policy=RetryPolicy(
            max_retries=MAX_RETRY_ATTEMPTS,
            delay=retry_delay_seconds,
            backoff=Backoff.EXPONENTIAL,
            jitter=Jitter.PLUS_MINUS,
        ),
    )
    def generate_join_links(
        context: OpExecutionContext,
        config: GenerateJoinLinksConfig,
        database: DatabaseResource,
        registrar: ResourceParam[BulkRegistrar],
    ) -> Output[None]:
        try:
            outcome = generate_for_session(
                config.programSessionId,
                repository=database.repository(),
                registrar=registrar,
                trigger=trigger_of(context.run.tags),
                role=config.role,
                batch_size=config.batchSize,
                actor_user_id=config.actorUserId,
                run_id=context.run_id,
            )
        except InvalidInput as exc:
            _tag_outcome(context, FAILED_OUTCOME)
            raise Failure(f"invalid run config: {exc}", allow_retries=False) from exc
        except GenerationFailed as exc:
            # A retry that then succeeds replaces it: the tag says how the run ended.
            _tag_outcome(context, FAILED_OUTCOME)
            if exc.retryable and exc.retry_after_s is not None:
                # The service said when to come back (429/503 Retry-After): wait that long,
                # bounded, within the same retry budget as the RetryPolicy.
                raise RetryRequested(
                    max_retries=MAX_RETRY_ATTEMPTS,
                    seconds_to_wait=min(exc.retry_after_s, MAX_RETRY_AFTER_SECONDS),
                ) from exc
            # Only the retryable ones go round again; the row already says FAILED.
            raise Failure(
                str(exc),
                metadata={
                    "session_id": exc.session_id,
                    "attempt": exc.attempt,
                    "retryable": exc.retryable,
                },
                allow_retries=exc.retryable,
            ) from exc
        _tag_outcome(context, outcome.result.value, outcome)
        return Output(None, metadata=_outcome_metadata(outcome))

    @job(
        name="join_link_generation_job",
        executor_def=in_process_executor,
        description="Generate join links for one program session through the single gate.",
        tags={TRIGGER_TAG: Trigger.MANUAL.value},
    )
    def join_link_generation_job() -> None:
        generate_join_links()

    return join_link_generation_job


@op(name="sweep_overdue_sessions")
def sweep_overdue_sessions_op(
    context: OpExecutionContext,
    config: SweepConfig,
    database: DatabaseResource,
    registrar: ResourceParam[BulkRegistrar],
) -> Output[None]:
    """Regenerates overdue, not-COMPLETED sessions; fails the run if any session failed."""
    repository = database.repository()
    report = sweep_overdue_sessions(
        repository,
        partial(
            generate_for_session,
            repository=repository,
            registrar=registrar,
            trigger=trigger_of(context.run.tags, default=Trigger.CRON),
            run_id=context.run_id,
        ),
        config.batchLimit,
    )
    return _finish(report)


@job(
    name="join_link_fallback_sweep_job",
    executor_def=in_process_executor,
    description="The fallback sweep: every overdue, not-COMPLETED session through the gate.",
    # A launch from the UI or CLI says so; the schedule's runs carry trigger=cron instead.
    tags={TRIGGER_TAG: Trigger.MANUAL.value},
)
def join_link_fallback_sweep_job() -> None:
    sweep_overdue_sessions_op()


@op(name="backfill_partition_sessions")
def backfill_partition_sessions(
    context: OpExecutionContext,
    database: DatabaseResource,
    registrar: ResourceParam[BulkRegistrar],
) -> Output[None]:
    """Regenerates every due, not-COMPLETED session whose time falls in the partition's day."""
    window = context.partition_time_window
    repository = database.repository()
    report = backfill_window(
        repository,
        partial(
            generate_for_session,
            repository=repository,
            registrar=registrar,
            trigger=Trigger.BACKFILL,
            run_id=context.run_id,
        ),
        window.start,
        window.end,
    )
    return _finish(report)


@job(
    name="join_link_backfill_job",
    executor_def=in_process_executor,
    partitions_def=backfill_partitions,
    description="Backfill: regenerate due, not-COMPLETED sessions by day of link_generation_at.",
    tags={TRIGGER_TAG: Trigger.BACKFILL.value},
)
def join_link_backfill_job() -> None:
    backfill_partition_sessions()


def _finish(report: SweepReport) -> Output[None]:
    metadata = _report_metadata(report)
    if report.failed:
        # After every other session had its turn: the UI shows the run failed, and why.
        raise Failure(
            f"{report.failed} session(s) failed: {metadata['failed_session_ids']}",
            metadata=metadata,
            allow_retries=False,
        )
    return Output(None, metadata=metadata)
