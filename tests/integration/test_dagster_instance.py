"""The project's dagster.yaml builds the instance it promises: PostgreSQL storage, a queued
run coordinator limited per session, run monitoring on, telemetry off, the package's log
lines in each run's event log. (The real daemon is
driven end to end in tests/e2e.)"""

import shutil
from pathlib import Path

import pytest
from dagster import DagsterInstance, QueuedRunCoordinator
from dagster_postgres import PostgresRunStorage
from sqlalchemy import Engine

from jlg_pipeline.domain.status import LinkGenerationStatus
from jlg_pipeline.orchestration.generation import build_generation_job
from testkit.factories import create_session, force_state
from tests.support import ROOT
from tests.support.fakes import RecordingRegistrar
from tests.support.resources import database


def test_instance_config_is_postgres_queued_and_limited_per_session(
    dagster_storage_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copy(ROOT / "dagster.yaml", tmp_path / "dagster.yaml")
    monkeypatch.setenv("DAGSTER_POSTGRES_URL", dagster_storage_url)
    with DagsterInstance.from_config(str(tmp_path)) as instance:
        assert isinstance(instance.run_storage, PostgresRunStorage)
        coordinator = instance.run_coordinator
        assert isinstance(coordinator, QueuedRunCoordinator)
        limits = coordinator.get_run_queue_config().tag_concurrency_limits
        assert {
            "key": "jlg/session",
            "limit": 1,
            "value": {"applyLimitPerUniqueValue": True},
        } in limits
        # Each lane its own slots, adding up to the instance's bound: a path whose runs died
        # (holding their slots until their runtime bound) never blocks another.
        lanes = {limit["value"]: limit["limit"] for limit in limits if limit["key"] == "jlg/lane"}
        assert lanes == {"realtime": 4, "recovery": 2, "sweep": 1, "sync": 1, "maintenance": 1}
        assert coordinator.get_run_queue_config().max_concurrent_runs == sum(lanes.values())
        assert instance.run_monitoring_enabled
        assert 0 < instance.run_monitoring_max_runtime_seconds <= 3 * 3600
        assert not instance.telemetry_enabled
        assert not instance.nux_enabled, "no pop-up on the UI's first page"
        # Only the daemons the jobs use: asset automation and freshness poll the storage for
        # assets there are none of (~3 CPU-s a minute of the daemon's and PostgreSQL's).
        assert set(instance.get_required_daemon_types()) == {
            "SENSOR",
            "BACKFILL",
            "SCHEDULER",
            "QUEUED_RUN_COORDINATOR",
            "MONITORING",
        }


def test_the_package_log_lines_reach_the_run_event_log(
    engine: Engine,
    db_url: str,
    dagster_storage_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    shutil.copy(ROOT / "dagster.yaml", tmp_path / "dagster.yaml")
    monkeypatch.setenv("DAGSTER_POSTGRES_URL", dagster_storage_url)
    sid = create_session(engine)
    force_state(engine, sid, LinkGenerationStatus.SCHEDULED)
    with DagsterInstance.from_config(str(tmp_path)) as instance:
        assert instance.get_settings("python_logs")["managed_python_loggers"] == ["jlg_pipeline"]
        result = build_generation_job(retry_delay_seconds=0).execute_in_process(
            run_config={"ops": {"generate_join_links": {"config": {"programSessionId": sid}}}},
            resources={"database": database(db_url), "registrar": RecordingRegistrar()},
            instance=instance,
        )
        messages = [
            entry.user_message for entry in instance.all_logs(result.run_id) if entry.user_message
        ]
    assert any(m.startswith("generation.dispatched") for m in messages), messages
    assert any(f"generation.completed session_id={sid}" in m for m in messages), messages
