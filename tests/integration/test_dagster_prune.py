"""join_link_dagster_prune_job on a PostgreSQL-backed instance: only finished runs older than
the retention go, with their event logs; queued and running ones stay; and a message
redelivered after its run was pruned still generates nothing twice."""

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dagster import DagsterInstance, DagsterRunStatus
from sqlalchemy import Engine as SqlEngine
from sqlalchemy import create_engine, text

from jlg_pipeline.config import Settings
from jlg_pipeline.domain.errors import ConfigError
from jlg_pipeline.domain.status import LinkGenerationStatus
from jlg_pipeline.orchestration.generation import build_generation_job
from jlg_pipeline.orchestration.prune import join_link_dagster_prune_job
from testkit.factories import create_session, force_state, session_row
from tests.support import ROOT
from tests.support.fakes import RecordingRegistrar
from tests.support.resources import database, placeholder_job


@pytest.fixture
def instance(
    dagster_storage_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[DagsterInstance]:
    shutil.copy(ROOT / "dagster.yaml", tmp_path / "dagster.yaml")
    monkeypatch.setenv("DAGSTER_POSTGRES_URL", dagster_storage_url)
    with DagsterInstance.from_config(str(tmp_path)) as built:
        yield built


def _age(dagster_storage_url: str, run_ids: list[str], days: int) -> None:
    engine: SqlEngine = create_engine(dagster_storage_url)
    try:
        with engine.begin() as conn:
            conn.execute(
                text(
                    "UPDATE runs SET update_timestamp = now() - make_interval(days => :d),"
                    " create_timestamp = now() - make_interval(days => :d)"
                    " WHERE run_id = ANY(:ids)"
                ),
                {"d": days, "ids": run_ids},
            )
    finally:
        engine.dispose()


def test_only_old_finished_runs_are_deleted_with_their_logs(
    instance: DagsterInstance, dagster_storage_url: str
) -> None:
    def run(status: DagsterRunStatus) -> str:
        created = instance.create_run_for_job(placeholder_job, status=status)
        instance.report_engine_event("something happened", created)
        return created.run_id

    old_finished = [
        run(s)
        for s in (DagsterRunStatus.SUCCESS, DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED)
    ]
    old_unfinished = [run(DagsterRunStatus.NOT_STARTED), run(DagsterRunStatus.STARTED)]
    recent = run(DagsterRunStatus.SUCCESS)
    _age(dagster_storage_url, old_finished + old_unfinished, days=40)

    result = join_link_dagster_prune_job.execute_in_process(
        instance=instance,
        run_config={"ops": {"prune_dagster_runs": {"config": {"batchSize": 2}}}},
    )

    assert result.success
    left = set(instance.get_run_ids())
    assert left == {*old_unfinished, recent, result.run_id}
    for run_id in old_finished:
        assert instance.all_logs(run_id) == []
    assert instance.all_logs(recent) != []
    [output] = [e for e in result.all_node_events if e.event_type_value == "STEP_OUTPUT"]
    metadata = output.event_specific_data.metadata  # type: ignore[union-attr]
    assert (metadata["deleted"].value, metadata["more_left"].value) == (3, False)


def test_a_message_redelivered_after_pruning_generates_nothing_twice(
    engine: Any, db_url: str, instance: DagsterInstance
) -> None:
    sid = create_session(engine)
    force_state(engine, sid, LinkGenerationStatus.SCHEDULED)
    registrar = RecordingRegistrar()
    generation = build_generation_job()
    request = {
        "run_config": {"ops": {"generate_join_links": {"config": {"programSessionId": sid}}}},
        "tags": {"jlg/trigger": "event", "dagster/run_key": "sqs-message-1"},
    }
    resources = {"database": database(db_url), "registrar": registrar}
    first = generation.execute_in_process(instance=instance, resources=resources, **request)  # type: ignore[arg-type]
    assert first.success
    pruned = join_link_dagster_prune_job.execute_in_process(
        instance=instance,
        run_config={"ops": {"prune_dagster_runs": {"config": {"olderThanDays": 0}}}},
    )
    assert first.run_id not in instance.get_run_ids()
    assert pruned.success

    again = generation.execute_in_process(instance=instance, resources=resources, **request)  # type: ignore[arg-type]

    assert again.success
    assert len(registrar.calls) == 1
    stored = instance.get_run_by_id(again.run_id)
    assert stored is not None
    assert stored.tags["jlg/outcome"] == "skipped"
    assert session_row(engine, sid)["link_generation_attempt"] == 1


def test_the_retention_comes_from_the_environment() -> None:
    local = {"JLG_ENVIRONMENT": "local"}
    assert Settings.from_env(local).dagster_retention_days == 30
    days = Settings.from_env({**local, "JLG_DAGSTER_RETENTION_DAYS": "7"}).dagster_retention_days
    assert days == 7
    for bad in ("0", "x", "-3"):
        with pytest.raises(ConfigError, match="JLG_DAGSTER_RETENTION_DAYS"):
            Settings.from_env({**local, "JLG_DAGSTER_RETENTION_DAYS": bad})
