"""The record tells the truth (docs/design.md "Operators", "Attempt history"), on real PostgreSQL
and real Dagster instances: runs' tags tell their own story (re-executions, hand launches,
failures), a closed attempt never changes and a zombie's late job stays visible, counters
only grow, the backfill says what it left, and every admin change is on record."""

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from dagster import DagsterInstance
from sqlalchemy import Engine, text
from starlette.testclient import TestClient

from jlg_pipeline.adapters.candidates import Candidates
from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.domain.attempts import Trigger
from jlg_pipeline.domain.constants import TimingWindows
from jlg_pipeline.domain.errors import RegistrarRejected
from jlg_pipeline.domain.generation import BulkRegisterRequest, BulkRegisterResult
from jlg_pipeline.domain.status import LinkGenerationStatus
from jlg_pipeline.orchestration.fallback import BACKFILL_DAYS, backfill_partitions_from
from jlg_pipeline.orchestration.generation import build_generation_job
from jlg_pipeline.services.generation import bind_gate
from jlg_pipeline.services.sweep import backfill_window
from testkit.factories import create_session, force_state
from tests.support.fakes import RecordingRegistrar
from tests.support.resources import database
from tests.support.web import Aws, admin_headers, client_for, settings_for, token

S = LinkGenerationStatus
GENERATION = build_generation_job(retry_delay_seconds=0)
MENTOR = {
    "Authorization": f"Bearer {token(3, ('mentor',))}",
    "X-Active-Role": "mentor",
}


class TagWatcher(RecordingRegistrar):
    """Records the run's tags as they are while bulkRegister runs."""

    def __init__(self, instance: DagsterInstance, **options: Any) -> None:
        super().__init__(**options)
        self.instance = instance
        self.seen: list[dict[str, str]] = []

    def bulk_register(self, request: BulkRegisterRequest) -> BulkRegisterResult:
        [run] = [r for r in self.instance.get_runs() if r.status.value == "STARTED"]
        self.seen.append(dict(run.tags))
        return super().bulk_register(request)


def _generate(
    db_url: str, instance: DagsterInstance, registrar: RecordingRegistrar, sid: int, **tags: str
) -> Any:
    return GENERATION.execute_in_process(
        run_config={"ops": {"generate_join_links": {"config": {"programSessionId": sid}}}},
        resources={"database": database(db_url), "registrar": registrar},
        instance=instance,
        tags=tags,
        raise_on_error=False,
    )


# What Dagster gives a re-execution launched from the UI: the parent's non-system tags, and
# its parent and root run ids (an automatic retry adds dagster/retry_number too).
PARENT = {
    "jlg/trigger": "direct",
    "jlg/outcome": "failed",
    "jlg/cycle": "join-link-1@2026-01-01T09:00:00Z",
    "jlg/session": "1",
    "jlg/correlation_id": "join-link-1",
    "dagster/parent_run_id": "0f6a3c1e-parent",
    "dagster/root_run_id": "0f6a3c1e-parent",
}


def test_a_rerun_from_the_ui_tells_its_own_story(engine: Engine, db_url: str) -> None:
    sid = create_session(engine)
    force_state(engine, sid, S.SCHEDULED, at_offset=timedelta(minutes=-1))
    instance = DagsterInstance.ephemeral()
    watcher = TagWatcher(instance)
    result = _generate(db_url, instance, watcher, sid, **{**PARENT, "jlg/session": str(sid)})
    assert result.success
    [during] = watcher.seen
    assert during["jlg/outcome"] == "running", "no stale outcome while it runs"
    assert during["jlg/trigger"] == "manual"
    tags = instance.get_run_by_id(result.run_id).tags  # type: ignore[union-attr]
    assert (tags["jlg/trigger"], tags["jlg/outcome"]) == ("manual", "completed")
    assert tags["jlg/cycle"].startswith(f"join-link-{sid}@")
    assert tags["jlg/cycle"] != PARENT["jlg/cycle"], "its own cycle, not its parent's"
    [attempt] = ProgramSessionRepository(engine).attempts(sid)
    assert (attempt.trigger, attempt.run_id) == ("manual", result.run_id)

    skipped = _generate(db_url, instance, RecordingRegistrar(), sid, **PARENT)
    tags = instance.get_run_by_id(skipped.run_id).tags  # type: ignore[union-attr]
    assert (tags["jlg/outcome"], tags["jlg/cycle"]) == ("skipped", "-"), "no parent's cycle"


def test_a_hand_launch_names_its_session_and_a_failed_claim_its_cycle(
    engine: Engine, db_url: str
) -> None:
    sid = create_session(engine)
    force_state(engine, sid, S.SCHEDULED, at_offset=timedelta(minutes=-1))
    instance = DagsterInstance.ephemeral()
    rejecting = RecordingRegistrar(error=RegistrarRejected("bulkRegister answered 422"))
    result = _generate(db_url, instance, rejecting, sid)
    assert not result.success
    tags = instance.get_run_by_id(result.run_id).tags  # type: ignore[union-attr]
    assert tags["jlg/session"] == str(sid), "the Launchpad's run names its session"
    assert tags["jlg/trigger"] == "manual"
    assert tags["jlg/outcome"] == "failed"
    assert tags["jlg/cycle"].startswith(f"join-link-{sid}@"), "it claimed: its cycle is named"


def test_a_zombies_late_job_is_on_record_and_the_proof_catches_it(
    engine: Engine, db_url: str, aws: Aws
) -> None:
    """A bulkRegister that outlives the stale window, a reclaim, then the zombie's answer: the
    reclaimed attempt stays RECLAIMED with the zombie's job id, the history route shows both
    jobs, the runbook's proof finds the double call, and no counter falls."""
    repository = ProgramSessionRepository(engine, TimingWindows(stale_ms=1000))
    sid = create_session(engine)
    force_state(engine, sid, S.SCHEDULED)
    zombie = repository.claim(sid, Trigger.EVENT, "run-zombie")
    assert zombie is not None
    with engine.begin() as conn:  # its bulkRegister outlives the stale window
        conn.execute(
            text(
                "UPDATE hdb_program_session SET updated_at = now() - interval '5 s' WHERE id = :s"
            ),
            {"s": sid},
        )
    successor = repository.claim(sid, Trigger.CRON, "run-sweep")
    assert successor is not None
    with client_for(settings_for(db_url, aws.queue_arn)) as http:
        figures = http.app.state.figures  # type: ignore[attr-defined]
        figures.refresh()
        before = _counters(http)
        assert repository.mark_completed(successor, "job-new", 10)
        assert not repository.mark_completed(zombie, "zombie-job", 10)
        figures.refresh()
        after = _counters(http)
        history = http.get(
            f"/program-session/{sid}/link-generation/attempts", headers=admin_headers()
        ).json()["data"]
        gauge = _lines(http.get("/metrics").text)
    assert [(a["attempt"], a["outcome"], a["jobId"]) for a in history] == [
        (2, "COMPLETED", "job-new"),
        (1, "RECLAIMED", "zombie-job"),
    ]
    assert all(after.get(k, 0) >= v for k, v in before.items()), (before, after)
    assert after[("event", "RECLAIMED")] == 1
    assert not any(outcome == "IN_PROGRESS" for _, outcome in after), "open ones are a gauge"
    assert not any(k.startswith("jlg_generation_attempts_open{") for k in gauge)
    with engine.connect() as conn:
        doubles = conn.execute(
            text(
                "SELECT program_session_id, link_generation_at, count(DISTINCT job_id) AS jobs"
                " FROM jlg_generation_attempt GROUP BY 1, 2 HAVING count(DISTINCT job_id) > 1"
            )
        ).all()
    assert [(d.program_session_id, d.jobs) for d in doubles] == [(sid, 2)]


def test_open_attempts_are_a_gauge(engine: Engine, db_url: str, aws: Aws) -> None:
    sid = create_session(engine)
    force_state(engine, sid, S.SCHEDULED)
    assert ProgramSessionRepository(engine).claim(sid, Trigger.WATCHDOG) is not None
    with client_for(settings_for(db_url, aws.queue_arn)) as http:
        http.app.state.figures.refresh()  # type: ignore[attr-defined]
        lines = _lines(http.get("/metrics").text)
    assert lines['jlg_generation_attempts_open{trigger="watchdog"}'] == "1.0"
    assert not any(
        k.startswith("jlg_generation_attempts_total") and "IN_PROGRESS" in k for k in lines
    )


def _lines(body: str) -> dict[str, str]:
    return dict(
        line.rsplit(" ", 1) for line in body.splitlines() if line and not line.startswith("#")
    )


def _counters(http: TestClient) -> dict[tuple[str, str], float]:
    found = {}
    for key, value in _lines(http.get("/metrics").text).items():
        if key.startswith("jlg_generation_attempts_total{"):
            labels = dict(part.split("=", 1) for part in key[key.index("{") + 1 : -1].split(","))
            found[(labels["trigger"].strip('"'), labels["outcome"].strip('"'))] = float(value)
    return found


def test_a_backfill_over_more_sessions_than_its_limit_says_what_it_left(
    engine: Engine,
) -> None:
    day = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    sids = [create_session(engine) for _ in range(3)]
    for sid in sids:
        force_state(
            engine, sid, S.SCHEDULED, at_offset=day + timedelta(minutes=1) - datetime.now(UTC)
        )
    repository = ProgramSessionRepository(engine)
    registrar = RecordingRegistrar()

    generate = bind_gate(repository, registrar, Trigger.BACKFILL)
    report = backfill_window(Candidates(engine), generate, day, day + timedelta(days=1), limit=2)
    assert (report.found, report.completed, report.left_behind) == (2, 2, 1)
    again = backfill_window(Candidates(engine), generate, day, day + timedelta(days=1), limit=2)
    assert (again.found, again.left_behind) == (1, 0)


def test_the_backfill_partitions_are_the_last_days_through_today() -> None:
    today = datetime(2026, 12, 3, tzinfo=UTC).date()
    keys = backfill_partitions_from(today).get_partition_keys(
        current_time=datetime(2026, 12, 3, 12, tzinfo=UTC)
    )
    assert keys[0] == (today - timedelta(days=BACKFILL_DAYS)).isoformat()
    assert keys[-1] == today.isoformat()
    assert len(keys) == BACKFILL_DAYS + 1


@pytest.fixture
def http(db_url: str, aws: Aws) -> Iterator[TestClient]:
    with client_for(settings_for(db_url, aws.queue_arn), aws.scheduler) as client:
        yield client


def test_every_admin_change_is_on_record(engine: Engine, http: TestClient) -> None:
    sid = create_session(engine)
    path = f"/program-session/{sid}/link-generation"
    first = (datetime.now(UTC) + timedelta(days=1)).replace(microsecond=0)
    second = first + timedelta(hours=2)
    for user, at in ((7, first), (8, second), (9, None)):
        body = {"linkGenerationAt": None if at is None else at.isoformat()}
        assert http.patch(path, headers=admin_headers(user), json=body).status_code == 200
    refused = http.patch(
        path,
        headers=admin_headers(10),
        json={"linkGenerationAt": (datetime.now(UTC) - timedelta(hours=1)).isoformat()},
    )
    assert refused.status_code == 400, "a refused change changes nothing, so is not on record"
    response = http.get(f"{path}/changes", headers=admin_headers())
    assert response.status_code == 200
    changes = response.json()["data"]
    z = "%Y-%m-%dT%H:%M:%S.000Z"
    assert [
        (c["actorUserId"], c["linkGenerationAt"], c["previousLinkGenerationAt"]) for c in changes
    ] == [
        (9, None, f"{second:{z}}"),
        (8, f"{second:{z}}", f"{first:{z}}"),
        (7, f"{first:{z}}", None),
    ]
    stamps = [c["changedAt"] for c in changes]
    assert stamps == sorted(stamps, reverse=True)
    assert all(s.endswith("Z") for s in stamps)


def test_the_changes_route_answers_like_the_others(engine: Engine, http: TestClient) -> None:
    sid = create_session(engine)
    deleted = create_session(engine)
    force_state(engine, deleted, S.SCHEDULED, deleted=True)
    changes = "/program-session/{}/link-generation/changes"
    assert http.get(changes.format(sid), headers=admin_headers()).json()["data"] == []
    assert http.get(changes.format(999_999), headers=admin_headers()).status_code == 404
    assert http.get(changes.format(deleted), headers=admin_headers()).status_code == 404
    assert http.get(changes.format(sid)).status_code == 401
    assert http.get(changes.format(sid), headers=MENTOR).status_code == 403
    document = http.get("/openapi.json").json()
    assert "/program-session/{id}/link-generation/changes" in document["paths"]
    assert "ChangeResponse" in document["components"]["schemas"]
