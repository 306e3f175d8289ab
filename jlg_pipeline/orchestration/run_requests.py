"""Run requests for the generation jobs, shared by every sensor that asks for them, and the
run-key lookup the sensors use to acknowledge what they asked for."""

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dagster import DagsterInstance, RunRequest, RunsFilter

from jlg_pipeline.domain.models import Trigger
from jlg_pipeline.orchestration.tags import (
    CORRELATION_TAG,
    LANE_TAG,
    RUN_KEY_TAG,
    SESSION_TAG,
    TRIGGER_TAG,
)

GENERATE_OP = "generate_join_links"
GENERATION_JOB = "join_link_generation_job"
SHARED_GENERATE_OP = "generate_join_links_shared"
SHARED_GENERATION_JOB = "join_link_shared_generation_job"


@dataclass(frozen=True, slots=True)
class SessionOptions:
    """One session of a run and the options its bulkRegister gets (TRD event-01's data)."""

    session_id: int
    role: str | None = None
    batch_size: int | None = None
    actor_user_id: int | None = None

    def config(self) -> dict[str, str | int]:
        values = {
            "programSessionId": self.session_id,
            "role": self.role,
            "batchSize": self.batch_size,
            "actorUserId": self.actor_user_id,
        }
        return {k: v for k, v in values.items() if v is not None}


def generation_run_request(
    options: SessionOptions, trigger: Trigger, run_key: str, correlation_id: str | None
) -> RunRequest:
    """A ``join_link_generation_job`` run for one session, tagged with it and its trigger."""
    tags = {SESSION_TAG: str(options.session_id), TRIGGER_TAG: trigger.value}
    if correlation_id:
        tags[CORRELATION_TAG] = correlation_id[:200]
    return RunRequest(
        run_key=run_key,
        job_name=GENERATION_JOB,
        run_config={"ops": {GENERATE_OP: {"config": options.config()}}},
        tags=tags,
    )


def shared_run_request(
    sessions: Sequence[SessionOptions], trigger: Trigger, lane: str, run_key: str | None = None
) -> RunRequest:
    """A ``join_link_shared_generation_job`` run for several sessions. It names no single
    session in its tags (so a stuck run of one session cannot hold it in the queue); its
    metadata and the attempt history list them."""
    return RunRequest(
        run_key=run_key,
        job_name=SHARED_GENERATION_JOB,
        run_config={
            "ops": {SHARED_GENERATE_OP: {"config": {"sessions": [s.config() for s in sessions]}}}
        },
        tags={TRIGGER_TAG: trigger.value, LANE_TAG: lane},
    )


def run_key_exists_in(instance: DagsterInstance) -> Callable[[str], bool]:
    """Whether a run with this run key exists: one indexed query, as Dagster's own sensor
    daemon does when it dedupes run keys."""

    def exists(run_key: str) -> bool:
        filters = RunsFilter(tags={RUN_KEY_TAG: run_key})
        return bool(instance.get_run_ids(filters=filters, limit=1))

    return exists
