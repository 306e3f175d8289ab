"""The jobs: one generation per run, shared runs of several sessions (the watchdog), the
fallback sweep, and the partitioned backfill. Every job carries its lane and its runtime
bound (``dagster/max_runtime``) in its tags, so every run of it does.

Every one calls ``generate_for_session`` and nothing else generates (TRD dec-09).
"""

import statistics
import time
from datetime import UTC, date, datetime, timedelta
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
from jlg_pipeline.domain.models import GenerationOutcome, GenerationResult, SweepReport, Trigger
from jlg_pipeline.orchestration.resources import DatabaseResource
from jlg_pipeline.orchestration.run_requests import (
    GENERATE_OP,
    GENERATION_JOB,
    SHARED_GENERATE_OP,
    SHARED_GENERATION_JOB,
)
from jlg_pipeline.orchestration.tags import (
    CYCLE_TAG,
    GENERATION_MAX_RUNTIME_S,
    LONG_MAX_RUNTIME_S,
    NO_CYCLE,
    OUTCOME_TAG,
    RUNNING_OUTCOME,
    SESSION_TAG,
    TRIGGER_TAG,
    Lane,
    cycle_id,
    run_tags,
    trigger_of,
)
from jlg_pipeline.services.generation import generate_for_session
from jlg_pipeline.services.sweep import (
    BACKFILL_LIMIT,
    FAILED,
    backfill_window,
    generate_each,
    summarize,
    sweep_overdue_sessions,
)

RETRY_DELAY_SECONDS = 10.0
# The longest Retry-After honoured: the run waits in its process, holding a run slot.
MAX_RETRY_AFTER_SECONDS = 300.0
BACKFILL_DAYS = 30


def backfill_partitions_from(today: date) -> DailyPartitionsDefinition:
    """The last BACKFILL_DAYS days through today (UTC): end_offset=1 makes today's partition
    exist, so a session due this morning can be backfilled. The window starts when the code
    location loads, as Dagster's run retention does (JLG_DAGSTER_RETENTION_DAYS, 30): the
    partitions page shows days that can still have work, not every day since the project
    began as "missing"."""
    start = today - timedelta(days=BACKFILL_DAYS)
    return DailyPartitionsDefinition(start_date=start.isoformat(), timezone="UTC", end_offset=1)


backfill_partitions = backfill_partitions_from(datetime.now(UTC).date())


class GenerateJoinLinksConfig(Config):
    programSessionId: int
    role: str | None = None
    batchSize: int | None = None
    actorUserId: int | None = None


class SharedGenerationConfig(Config):
    sessions: list[GenerateJoinLinksConfig]


class SweepConfig(Config):
    batchLimit: int = FALLBACK_BATCH_LIMIT


class BackfillConfig(Config):
    limit: int = BACKFILL_LIMIT
    """Sessions one partition's run takes at most; its metadata's left_behind counts the rest."""


FAILED_OUTCOME = FAILED


def _tag_start(
    context: OpExecutionContext, session_id: int | None, default: Trigger = Trigger.MANUAL
) -> Trigger:
    """Name the run's own story before it generates: its session (hand launches too) and
    trigger (``manual`` for a person's re-execution), and no outcome copied from a parent."""
    trigger = trigger_of(context.run.tags, default)
    tags = {TRIGGER_TAG: trigger.value}
    if session_id is not None:
        tags[SESSION_TAG] = str(session_id)
    if OUTCOME_TAG in context.run.tags:
        tags[OUTCOME_TAG] = RUNNING_OUTCOME
    context.instance.add_run_tags(context.run_id, tags)
    return trigger


def _tag_outcome(
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
        name=GENERATE_OP,
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
        session_id = config.programSessionId
        trigger = _tag_start(context, session_id)
        try:
            outcome = generate_for_session(
                session_id,
                repository=database.repository(),
                registrar=registrar,
                trigger=trigger,
                role=config.role,
                batch_size=config.batchSize,
                actor_user_id=config.actorUserId,
                run_id=context.run_id,
            )
        except InvalidInput as exc:
            _tag_outcome(context, FAILED_OUTCOME, session_id, None)
            raise Failure(f"invalid run config: {exc}", allow_retries=False) from exc
        except GenerationFailed as exc:
            # A retry that then succeeds replaces it: the tag says how the run ended.
            _tag_outcome(context, FAILED_OUTCOME, session_id, exc.cycle)
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
        _tag_outcome(context, outcome.result.value, session_id, outcome.cycle)
        return Output(None, metadata=_outcome_metadata(outcome))

    @job(
        name=GENERATION_JOB,
        executor_def=in_process_executor,
        description="Generate join links for one program session through the single gate.",
        tags=run_tags(
            Lane.REALTIME, GENERATION_MAX_RUNTIME_S, **{TRIGGER_TAG: Trigger.MANUAL.value}
        ),
    )
    def join_link_generation_job() -> None:
        generate_join_links()

    return join_link_generation_job


def build_shared_generation_job(retry_delay_seconds: float = RETRY_DELAY_SECONDS) -> JobDefinition:
    """Several sessions in one run (a burst's shared runs, the watchdog's), each through its
    own claim, the database resource's ``concurrency`` (JLG_GENERATION_CONCURRENCY) at once.
    A retryable failure is retried for that session alone, in the run, as a one-session run's
    RetryPolicy would (an op retry would re-attempt the non-retryable ones too); one
    session's failure never fails or delays the others, and the run fails at the end if any
    session is left failed."""

    @op(name=SHARED_GENERATE_OP)
    def generate_join_links_shared(
        context: OpExecutionContext,
        config: SharedGenerationConfig,
        database: DatabaseResource,
        registrar: ResourceParam[BulkRegistrar],
    ) -> Output[None]:
        repository = database.repository()
        trigger = _tag_start(context, None, Trigger.WATCHDOG)
        options = {s.programSessionId: s for s in config.sessions}

        def generate(session_id: int) -> GenerationOutcome:
            given = options[session_id]
            return generate_for_session(
                session_id,
                repository=repository,
                registrar=registrar,
                trigger=trigger,
                role=given.role,
                batch_size=given.batchSize,
                actor_user_id=given.actorUserId,
                run_id=context.run_id,
            )

        report = generate_each(
            list(options), generate, left_behind=0, concurrency=database.concurrency
        )
        results = {s.session_id: s for s in report.sessions}
        for retry in range(MAX_RETRY_ATTEMPTS):
            again = [s.session_id for s in results.values() if s.retryable]
            if not again:
                break
            time.sleep(retry_delay_seconds * 2**retry)
            context.log.info(f"retrying {len(again)} session(s): {again}")
            retried = generate_each(
                again, generate, left_behind=0, concurrency=database.concurrency
            )
            results.update({s.session_id: s for s in retried.sessions})
        final = summarize([results[sid] for sid in options], left_behind=0)
        outcome = (
            FAILED_OUTCOME
            if final.failed
            else GenerationResult.COMPLETED.value
            if final.completed
            else GenerationResult.SKIPPED.value
        )
        context.instance.add_run_tags(context.run_id, {OUTCOME_TAG: outcome})
        return _finish(final)

    @job(
        name=SHARED_GENERATION_JOB,
        executor_def=in_process_executor,
        description="Generate join links for several program sessions, each through the gate.",
        tags=run_tags(Lane.RECOVERY, LONG_MAX_RUNTIME_S, **{TRIGGER_TAG: Trigger.MANUAL.value}),
    )
    def join_link_shared_generation_job() -> None:
        generate_join_links_shared()

    return join_link_shared_generation_job


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
            trigger=_tag_start(context, None, Trigger.CRON),
            run_id=context.run_id,
        ),
        config.batchLimit,
        concurrency=database.concurrency,
    )
    return _finish(report)


@job(
    name="join_link_fallback_sweep_job",
    executor_def=in_process_executor,
    description="The fallback sweep: every overdue, not-COMPLETED session through the gate.",
    # A launch from the UI or CLI says so; the schedule's runs carry trigger=cron instead.
    tags=run_tags(Lane.SWEEP, LONG_MAX_RUNTIME_S, **{TRIGGER_TAG: Trigger.MANUAL.value}),
)
def join_link_fallback_sweep_job() -> None:
    sweep_overdue_sessions_op()


@op(name="backfill_partition_sessions")
def backfill_partition_sessions(
    context: OpExecutionContext,
    config: BackfillConfig,
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
            trigger=_tag_start(context, None, Trigger.BACKFILL),
            run_id=context.run_id,
        ),
        window.start,
        window.end,
        config.limit,
        concurrency=database.concurrency,
    )
    return _finish(report)


@job(
    name="join_link_backfill_job",
    executor_def=in_process_executor,
    partitions_def=backfill_partitions,
    description="Backfill: regenerate due, not-COMPLETED sessions by day of link_generation_at.",
    tags=run_tags(Lane.SWEEP, LONG_MAX_RUNTIME_S, **{TRIGGER_TAG: Trigger.BACKFILL.value}),
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
