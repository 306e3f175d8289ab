"""Generation runs: ``join_link_generation_job`` (one session a run: an event, a direct
launch, a hand launch) and ``join_link_shared_generation_job`` (several: a burst's shared runs,
the watchdog's). Every job carries its lane and its runtime bound (``dagster/max_runtime``) in
its tags, so every run of it does. Both call ``generate_for_session`` (through ``bind_gate``)
and nothing else generates (TRD dec-09)."""

from datetime import UTC, datetime
from typing import Any

from dagster import (
    Backoff,
    Failure,
    Jitter,
    JobDefinition,
    OpExecutionContext,
    Output,
    ResourceParam,
    RetryPolicy,
    in_process_executor,
    job,
    op,
)

from jlg_pipeline.adapters.candidates import Candidates
from jlg_pipeline.adapters.queue import SessionQueue
from jlg_pipeline.adapters.registrars import BulkRegistrar
from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.adapters.service_view import ServiceView
from jlg_pipeline.domain.attempts import Trigger
from jlg_pipeline.domain.constants import MAX_RETRY_ATTEMPTS
from jlg_pipeline.domain.errors import DatabaseUnavailable, GenerationFailed, InvalidInput
from jlg_pipeline.domain.generation import BulkRegisterRequest, GenerationOutcome, GenerationResult
from jlg_pipeline.domain.lanes import Lane
from jlg_pipeline.orchestration.generation_runs import (
    GENERATE_OP,
    GENERATION_JOB,
    SHARED_GENERATE_OP,
    SHARED_GENERATION_JOB,
    GenerateJoinLinksConfig,
    SharedGenerationConfig,
)
from jlg_pipeline.orchestration.resources import RunDatabase
from jlg_pipeline.orchestration.run_outcome import (
    FAILED_OUTCOME,
    finish,
    outcome_metadata,
    queue_metadata,
    tag_outcome,
    tag_start,
)
from jlg_pipeline.orchestration.sweep_time import sweep_runs_at
from jlg_pipeline.orchestration.tags import (
    GENERATION_MAX_RUNTIME_S,
    LONG_MAX_RUNTIME_S,
    NEXT_TAG,
    OUTCOME_TAG,
    TRIGGER_TAG,
    run_tags,
)
from jlg_pipeline.services.after_failure import By, after_failure, why_hint
from jlg_pipeline.services.batch import generate_each, generate_retrying_unrecorded
from jlg_pipeline.services.drain import Drain
from jlg_pipeline.services.generation import bind_gate
from jlg_pipeline.services.set_aside import Path

RETRY_DELAY_SECONDS = 10.0


def build_generation_job(retry_delay_seconds: float = RETRY_DELAY_SECONDS) -> JobDefinition:
    """The job launched for one session (an event, a direct launch, a hand launch). The run
    is a worker of the one queue: it claims its own session first (a result it could not
    record is tried again in the run, at most MAX_RETRY_ATTEMPTS times, backing off), then
    keeps taking what the queue gives next, as a shared run does. Its tags and metadata tell
    its own session's story; the sessions it took from the queue are listed beside."""

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
        database: ResourceParam[RunDatabase],
        registrar: ResourceParam[BulkRegistrar],
    ) -> Output[None]:
        session_id = config.programSessionId
        trigger = tag_start(context, session_id)
        try:
            request = config.request()
        except InvalidInput as exc:
            tag_outcome(context, FAILED_OUTCOME, session_id, None)
            raise Failure(f"invalid run config: {exc}", allow_retries=False) from exc
        queue, run_id = database.queue(), context.run_id
        _join(queue, [request])
        repository, view = database.repository(), database.view()
        generate = bind_gate(repository, registrar, trigger, run_id, view)
        drain = _drain(repository, registrar, trigger, run_id, view, queue, database.candidates())
        try:
            try:
                own: GenerationOutcome | GenerationFailed = generate(request)
            except GenerationFailed as exc:
                own = exc
            # Whatever its own session's end, the run takes what the queue gives next.
            taken = generate_each(
                [], generate, left_behind=0, concurrency=database.concurrency, then=drain
            )
        finally:
            _ended(queue, run_id)
        # The queue may have given it its own session again (a pause waited out): that is
        # how it ended.
        last = drain.ended_for(session_id) or own
        return _own_story(context, database, session_id, last, queue_metadata(taken))

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


def _own_story(
    context: OpExecutionContext,
    database: RunDatabase,
    session_id: int,
    last: GenerationOutcome | GenerationFailed,
    taken: dict[str, Any],
) -> Output[None]:
    """The run's tags and metadata from how its own session ended; the run fails only when
    that session is left failed (a session taken from the queue waits there again)."""
    if isinstance(last, GenerationOutcome):
        tag_outcome(context, last.result.value, session_id, last.cycle)
        return Output(None, metadata=outcome_metadata(last) | taken)
    tag_outcome(context, FAILED_OUTCOME, session_id, last.cycle)
    now = datetime.now(UTC)
    step = after_failure(last, now, sweep_runs_at(now, database.sweep_enabled))
    context.instance.add_run_tags(context.run_id, {NEXT_TAG: step.tag})
    # The message is the whole story (from None: our own traceback tells an operator nothing,
    # and the error's text is already in it).
    raise Failure(
        f"{last} ({step.text}); {why_hint(last.session_id)}",
        metadata={
            "session_id": last.session_id,
            "attempt": last.attempt,
            "retryable": last.retryable,
            "retry_in_s": last.retry_in_s,
            "next": step.tag,
            **taken,
        },
        # Only a result this run could not record is retried here (the op's RetryPolicy):
        # a session the watchdog comes back for frees the run's slot now.
        allow_retries=step.by is By.THIS_RUN,
    ) from None


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
        database: ResourceParam[RunDatabase],
        registrar: ResourceParam[BulkRegistrar],
    ) -> Output[None]:
        trigger = tag_start(context, None)
        try:
            requests = [entry.request() for entry in config.sessions]
        except InvalidInput as exc:
            context.instance.add_run_tags(context.run_id, {OUTCOME_TAG: FAILED_OUTCOME})
            raise Failure(f"invalid run config: {exc}", allow_retries=False) from None
        queue, run_id = database.queue(), context.run_id
        _join(queue, requests)
        repository, view = database.repository(), database.view()
        try:
            final = generate_retrying_unrecorded(
                requests,
                bind_gate(repository, registrar, trigger, run_id, view),
                concurrency=database.concurrency,
                retries=MAX_RETRY_ATTEMPTS,
                first_delay_s=retry_delay_seconds,
                then=_drain(
                    repository, registrar, trigger, run_id, view, queue, database.candidates()
                ),
            )
        finally:
            _ended(queue, run_id)
        outcome = (
            FAILED_OUTCOME
            if final.failed
            else GenerationResult.COMPLETED.value
            if final.completed
            else GenerationResult.SKIPPED.value
        )
        context.instance.add_run_tags(context.run_id, {OUTCOME_TAG: outcome})
        return finish(context, final, database.sweep_enabled)

    @job(
        name=SHARED_GENERATION_JOB,
        executor_def=in_process_executor,
        description="Generate join links for several program sessions, each through the gate.",
        tags=run_tags(Lane.RECOVERY, LONG_MAX_RUNTIME_S, **{TRIGGER_TAG: Trigger.MANUAL.value}),
    )
    def join_link_shared_generation_job() -> None:
        generate_join_links_shared()

    return join_link_shared_generation_job


def _join(queue: SessionQueue, requests: list[BulkRegisterRequest]) -> None:
    """The run is a worker of the one queue (docs/design.md "One queue"): its sessions wait
    there with their options, and sessions armed by anyone since the watchdog's last tick join
    their programme's turn, before its callers take what the queue gives next."""
    queue.record(requests)
    queue.refresh()


def _drain(
    repository: ProgramSessionRepository,
    registrar: BulkRegistrar,
    trigger: Trigger,
    run_id: str,
    view: ServiceView,
    queue: SessionQueue,
    candidates: Candidates,
) -> Drain:
    """The run's callers taking from the queue with the run's own adapters (a repository
    compiles its statements once), its heartbeat told, its set-asides counted."""
    return Drain(
        repository,
        registrar,
        trigger,
        run_id,
        view,
        beat=lambda: queue.beat(run_id),
        count_set_aside=lambda: candidates.count_set_aside(Path.WORKER),
    )


def _ended(queue: SessionQueue, run_id: str) -> None:
    """The run drains no more; if that cannot be recorded, its heartbeat goes stale instead."""
    try:
        queue.ended(run_id)
    except DatabaseUnavailable:
        return
