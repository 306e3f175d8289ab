"""Run requests for the generation jobs, shared by every sensor that asks for them, and the
lookup the sensors use to acknowledge what they asked for.

A sensor asks for runs per unit of work (an SQS message, a direct launch), each named by a
run key. While few units wait each gets its own one-session run under that run key; once more
wait, one tick's units share runs of up to ``JLG_MAX_SESSIONS_PER_RUN`` sessions
(``domain/run_sharing.py``). Every run carries a ``jlg/covers.<run key>`` tag per unit it
covers, so a redelivered message (or a launch seen again) finds its run whatever run it went
into, with one lookup for a whole batch (docs/design.md "Bursts")."""

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from dagster import Config, DagsterInstance, DagsterRunStatus, RunRequest, RunsFilter

from jlg_pipeline.domain.attempts import Trigger
from jlg_pipeline.domain.generation import BulkRegisterRequest
from jlg_pipeline.domain.lanes import LANE_TAG, Lane
from jlg_pipeline.domain.run_sharing import RunSharing
from jlg_pipeline.orchestration.tags import CORRELATION_TAG, RUN_KEY_TAG, SESSION_TAG, TRIGGER_TAG

GENERATE_OP = "generate_join_links"
GENERATION_JOB = "join_link_generation_job"
SHARED_GENERATE_OP = "generate_join_links_shared"
SHARED_GENERATION_JOB = "join_link_shared_generation_job"
COVERS_TAG_PREFIX = "jlg/covers."
COVERED = "1"
LOOKUP_CHUNK = 500
"""Run keys one lookup names at most (an IN list on Dagster's run-tags index)."""
T = TypeVar("T")
NOT_STARTED = [DagsterRunStatus.QUEUED, DagsterRunStatus.NOT_STARTED, DagsterRunStatus.STARTING]

Covering = Callable[[Sequence[str]], set[str]]
"""Of these run keys, those a run exists for."""


class GenerateJoinLinksConfig(Config):
    """A session's entry in a generation run's config: TRD event-01's data, as a sensor writes
    it and an operator types it in the launchpad. Its values are checked where the run turns
    them into a request (InvalidInput fails the run without retries), not here: a check here
    would fail the step before the op could say so, and the op's RetryPolicy would retry it."""

    programSessionId: int
    role: str | None = None
    batchSize: int | None = None
    actorUserId: int | None = None

    @classmethod
    def of(cls, request: BulkRegisterRequest) -> "GenerateJoinLinksConfig":
        return cls(
            programSessionId=request.session_id,
            role=request.role,
            batchSize=request.batch_size,
            actorUserId=request.actor_user_id,
        )

    def request(self) -> BulkRegisterRequest:
        """The request this entry asks for, checked by the domain's rules (InvalidInput)."""
        return BulkRegisterRequest.parse(
            self.programSessionId, self.role, self.batchSize, self.actorUserId
        )

    def run_config(self) -> dict[str, str | int]:
        """As the run config holds it: absent options left out."""
        return self.model_dump(exclude_none=True)


class SharedGenerationConfig(Config):
    sessions: list[GenerateJoinLinksConfig]


@dataclass(frozen=True, slots=True)
class Work:
    """One unit a sensor asks a run for: a message or a direct launch, named by its run key."""

    key: str
    request: BulkRegisterRequest
    correlation_id: str | None = None


def covers_tag(key: str) -> str:
    """The tag a shared run carries for each unit it covers (a valid Dagster tag key: one
    namespace, then letters, digits, ``-`` and ``.``)."""
    return f"{COVERS_TAG_PREFIX}{key}"


def generation_run_request(
    request: BulkRegisterRequest, trigger: Trigger, run_key: str, correlation_id: str | None
) -> RunRequest:
    """A ``join_link_generation_job`` run for one session, tagged with it, its trigger and
    the unit it covers."""
    tags = {
        SESSION_TAG: str(request.session_id),
        TRIGGER_TAG: trigger.value,
        covers_tag(run_key): COVERED,
    }
    if correlation_id:
        tags[CORRELATION_TAG] = correlation_id[:200]
    return RunRequest(
        run_key=run_key,
        job_name=GENERATION_JOB,
        run_config={
            "ops": {GENERATE_OP: {"config": GenerateJoinLinksConfig.of(request).run_config()}}
        },
        tags=tags,
    )


def shared_run_request(
    sessions: Sequence[BulkRegisterRequest],
    trigger: Trigger,
    lane: Lane,
    run_key: str | None = None,
    covers: Sequence[str] = (),
) -> RunRequest:
    """A ``join_link_shared_generation_job`` run for several sessions. It names no single
    session in its tags (so a stuck run of one session cannot hold it in the queue); its
    metadata and the attempt history list them. ``covers`` are the run keys of the units it
    stands for."""
    return RunRequest(
        run_key=run_key,
        job_name=SHARED_GENERATION_JOB,
        run_config={
            "ops": {
                SHARED_GENERATE_OP: {
                    "config": {
                        "sessions": [GenerateJoinLinksConfig.of(s).run_config() for s in sessions]
                    }
                }
            }
        },
        tags={
            TRIGGER_TAG: trigger.value,
            LANE_TAG: lane.value,
            **{covers_tag(key): COVERED for key in covers},
        },
    )


def run_requests_for(
    work: Sequence[Work], trigger: Trigger, max_sessions_per_run: int
) -> list[RunRequest]:
    """One ``join_link_generation_job`` run per unit when ``max_sessions_per_run`` is 1 (its
    run key the unit's); otherwise shared runs on the real-time lane of up to that many
    sessions, in the order given. Units for the same session (a duplicate delivery) share
    its place in one run, with the first unit's request."""
    if max_sessions_per_run <= 1:
        return [generation_run_request(w.request, trigger, w.key, w.correlation_id) for w in work]
    by_session: dict[int, list[Work]] = {}
    for unit in work:
        by_session.setdefault(unit.request.session_id, []).append(unit)
    requests = []
    for chunk in chunks(list(by_session.values()), max_sessions_per_run):
        keys = sorted(unit.key for group in chunk for unit in group)
        requests.append(
            shared_run_request(
                [group[0].request for group in chunk],
                trigger,
                Lane.REALTIME,
                run_key=_shared_run_key(keys),
                covers=keys,
            )
        )
    return requests


def chunks(items: Sequence[T], size: int) -> list[Sequence[T]]:
    """``items`` in consecutive slices of at most ``size``."""
    return [items[i : i + size] for i in range(0, len(items), size)]


def _shared_run_key(keys: Sequence[str]) -> str:
    """The same units always ask under the same run key, so Dagster drops a repeat."""
    return "shared-" + hashlib.sha256("\n".join(keys).encode()).hexdigest()[:32]


def requests_for(
    instance: DagsterInstance, work: Sequence[Work], trigger: Trigger, sharing: RunSharing
) -> list[RunRequest]:
    """The runs for a tick's units: a run each while few wait, shared runs once more do. No
    units, no question to the instance (the sync sensor asks every 10 s, mostly with none)."""
    if not work:
        return []
    per_run = sharing.sessions_per_run(len(work), lambda: runs_not_started(instance))
    return run_requests_for(work, trigger, per_run)


def runs_not_started(instance: DagsterInstance) -> int:
    """Runs of any job queued or starting: the line a new single run would join."""
    return instance.get_runs_count(filters=RunsFilter(statuses=NOT_STARTED))


def covering(instance: DagsterInstance) -> Covering:
    """Which of these units a run exists for: by the ``jlg/covers.<key>`` tags every run the
    sensors ask for carries, then, for the rest, by run key (a one-session run asked for
    before runs carried the tag). Two indexed queries a chunk of keys, however many."""

    def covered(keys: Sequence[str]) -> set[str]:
        found: set[str] = set()
        for chunk in chunks(keys, LOOKUP_CHUNK):
            tagged = instance.get_run_tags(tag_keys=[covers_tag(k) for k in chunk])
            found |= {tag.removeprefix(COVERS_TAG_PREFIX) for tag, _ in tagged}
            rest = [k for k in chunk if k not in found]
            if rest:
                runs = instance.get_runs(filters=RunsFilter(tags={RUN_KEY_TAG: rest}))
                found |= {run.tags[RUN_KEY_TAG] for run in runs} & set(rest)
        return found

    return covered
