"""The project's dagster.yaml builds the instance it promises: PostgreSQL storage, a queued
run coordinator limited per session, run monitoring on, telemetry off. (The real daemon is
driven end to end in tests/e2e.)"""

import shutil
from pathlib import Path

import pytest
from dagster import DagsterInstance
from dagster._core.run_coordinator import QueuedRunCoordinator
from dagster_postgres import PostgresRunStorage

ROOT = Path(__file__).resolve().parents[2]


def test_instance_config_is_postgres_queued_and_limited_per_session(
    dagster_storage_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copy(ROOT / "dagster.yaml", tmp_path / "dagster.yaml")
    monkeypatch.setenv("DAGSTER_POSTGRES_URL", dagster_storage_url)
    with DagsterInstance.from_config(str(tmp_path)) as instance:
        assert isinstance(instance.run_storage, PostgresRunStorage)
        coordinator = instance.run_coordinator
        assert isinstance(coordinator, QueuedRunCoordinator)
        assert coordinator.get_run_queue_config().max_concurrent_runs == 4
        limits = coordinator.get_run_queue_config().tag_concurrency_limits
        assert {
            "key": "jlg/session",
            "limit": 1,
            "value": {"applyLimitPerUniqueValue": True},
        } in limits
        assert instance.run_monitoring_enabled
        assert not instance.telemetry_enabled
