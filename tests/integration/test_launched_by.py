"""Who asked for a run comes from what Dagster records, never from what its tags claim
(orchestration/launched_by.py, docs/design.md "A guest"): a backfill's own runs and their
automatic retries are ``backfill``; a person's run carrying the very same tags, a retry Dagster's
retry daemon did not launch, and any tick, sensor or backfill typed into the Launchpad are
``manual``. (Runs a sensor or schedule tick asked for: tests/e2e, through the real daemon.)"""

import shutil
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from dagster import DagsterInstance, DagsterRun, RunsFilter
from sqlalchemy import Engine

from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.domain.attempts import Trigger
from jlg_pipeline.domain.status import LinkGenerationStatus
from jlg_pipeline.orchestration.fallback import join_link_backfill_job
from jlg_pipeline.orchestration.generation import build_generation_job
from jlg_pipeline.orchestration.launched_by import trigger_of
from jlg_pipeline.orchestration.tags import AUTO_RETRY_TAG, BACKFILL_TAG, PARTITION_TAG
from testkit.factories import create_session, force_state
from tests.support import ROOT
from tests.support.fakes import RecordingRegistrar
from tests.support.resources import database

S = LinkGenerationStatus
GENERATION = build_generation_job(retry_delay_seconds=0.01)


@pytest.fixture
def instance(
    dagster_storage_url: str, db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[DagsterInstance]:
    """The project's instance (its queued coordinator holds runs: no daemon dequeues them)."""
    shutil.copy(ROOT / "dagster.yaml", tmp_path / "dagster.yaml")
    for name, value in {
        "DAGSTER_HOME": str(tmp_path),
        "DAGSTER_POSTGRES_URL": dagster_storage_url,
        "JLG_DATABASE_URL": db_url,
        "JLG_ENVIRONMENT": "local",
    }.items():
        monkeypatch.setenv(name, value)
    with DagsterInstance.from_config(str(tmp_path)) as loaded:
        yield loaded


def backfill_runs(instance: DagsterInstance) -> list[DagsterRun]:
    """What ``dagster job backfill`` (the runbook's command) asks for: today's partition."""
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    subprocess.run(
        [
            str(Path(sys.executable).parent / "dagster"),
            "job",
            "backfill",
            "-j",
            "join_link_backfill_job",
            "-w",
            str(ROOT / "workspace.yaml"),
            "--from",
            today,
            "--to",
            today,
            "--noprompt",
        ],
        cwd=ROOT,
        check=True,
        capture_output=True,
        timeout=180,
    )
    return list(instance.get_runs(RunsFilter(job_name="join_link_backfill_job")))


def test_a_backfills_runs_and_their_automatic_retries_are_backfill_and_nothing_else(
    instance: DagsterInstance,
) -> None:
    [run] = backfill_runs(instance)
    assert trigger_of(instance, run) is Trigger.BACKFILL

    copied = {k: v for k, v in run.tags.items() if k in {BACKFILL_TAG, PARTITION_TAG}}
    copy = instance.create_run_for_job(
        join_link_backfill_job, tags={**copied, "jlg/trigger": "backfill"}
    )
    assert trigger_of(instance, copy) is Trigger.MANUAL, "a person's run with the same tags"

    links = {"dagster/parent_run_id": run.run_id, "dagster/root_run_id": run.run_id}
    retry = instance.create_run_for_job(
        join_link_backfill_job,
        tags={**run.tags, **links, "dagster/retry_number": "1"},
        parent_run_id=run.run_id,
        root_run_id=run.run_id,
    )
    assert trigger_of(instance, retry) is Trigger.MANUAL, "a retry the daemon did not launch"
    instance.add_run_tags(run.run_id, {AUTO_RETRY_TAG: retry.run_id})
    assert trigger_of(instance, retry) is Trigger.BACKFILL, "the retry daemon's: its parent's"


@pytest.mark.parametrize(
    "tags",
    [
        {"jlg/trigger": "event", "dagster/tick": "12345"},
        {"jlg/trigger": "cron", "dagster/tick": "not-a-tick"},
        {"jlg/trigger": "watchdog", "dagster/tick": "٣"},
        {"jlg/trigger": "direct", "dagster/sensor_name": "join_link_schedule_sync_sensor"},
        {"jlg/trigger": "backfill", "dagster/backfill": "abcdefgh", "dagster/partition": "x"},
        {"jlg/trigger": "no-such-trigger"},
        {"jlg/trigger": "event", "dagster/parent_run_id": "0f6a3c1e", "dagster/retry_number": "1"},
    ],
)
def test_a_hand_launch_is_manual_whatever_its_tags_claim(
    engine: Engine, db_url: str, tags: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the Launchpad lets a person type: a tick, sensor, backfill or retry Dagster has
    no record of; the session's attempt and the run's own tag both say ``manual``."""
    monkeypatch.setattr("jlg_pipeline.orchestration.launched_by.BACKFILL_RECORD_WAIT_S", 0.1)
    sid = create_session(engine)
    force_state(engine, sid, S.SCHEDULED, at_offset=timedelta(minutes=-1))
    instance = DagsterInstance.ephemeral()
    result = GENERATION.execute_in_process(
        run_config={"ops": {"generate_join_links": {"config": {"programSessionId": sid}}}},
        resources={"database": database(db_url), "registrar": RecordingRegistrar()},
        instance=instance,
        tags=tags,
    )
    assert result.success
    [attempt] = ProgramSessionRepository(engine).attempts(sid)
    assert attempt.trigger == "manual"
    assert instance.get_run_by_id(result.run_id).tags["jlg/trigger"] == "manual"  # type: ignore[union-attr]
