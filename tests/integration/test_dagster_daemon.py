"""Smoke test through the real daemon: `dagster-daemon` with the project's dagster.yaml on a
real PostgreSQL instance storage picks a message off the queue (a moto server) and the
session reaches COMPLETED through the local registrar."""

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from moto.server import ThreadedMotoServer
from sqlalchemy import Engine, func, select

from jlg_pipeline.adapters.tables import local_bulk_job
from jlg_pipeline.domain.messages import build_message
from jlg_pipeline.domain.status import LinkGenerationStatus
from tests.support.factories import add_registrations, create_session, force_state, session_row

ROOT = Path(__file__).resolve().parents[2]
S = LinkGenerationStatus


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@pytest.fixture
def moto_server() -> Iterator[str]:
    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


def _stop(process: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
    except ProcessLookupError:
        pass


@pytest.mark.timeout(240)
def test_daemon_runs_a_queued_event_to_completed(
    engine: Engine,
    db_url: str,
    dagster_storage_url: str,
    moto_server: str,
    tmp_path: Path,
) -> None:
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": moto_server,
    }
    sqs = boto3.client(
        "sqs",
        region_name="us-east-1",
        endpoint_url=moto_server,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    queue_url = sqs.create_queue(QueueName="jlg-daemon")["QueueUrl"]
    sid = create_session(engine, program_id=77)
    add_registrations(engine, 77, 12)
    force_state(engine, sid, S.SCHEDULED)
    sqs.send_message(QueueUrl=queue_url, MessageBody=json.dumps(build_message(sid, None)))

    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(ROOT / "dagster.yaml", home / "dagster.yaml")
    env.update(
        {
            "DAGSTER_HOME": str(home),
            "DAGSTER_POSTGRES_URL": dagster_storage_url,
            "JLG_DATABASE_URL": db_url,
            "JLG_SQS_QUEUE_URL": queue_url,
            "JLG_REGISTRAR": "local",
            "ENABLE_JOIN_LINK_SCHEDULER": "true",
            "ENABLE_JOIN_LINK_FALLBACK_CRON": "false",
            "TMPDIR": str(tmp_path),
        }
    )
    log = (tmp_path / "daemon.log").open("wb")
    daemon = subprocess.Popen(
        [str(ROOT / ".venv" / "bin" / "dagster-daemon"), "run", "-w", str(ROOT / "workspace.yaml")],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        # Dagster maps SIGTERM onto its SIGINT handler: make both the defaults again.
        preexec_fn=lambda: (
            signal.signal(signal.SIGINT, signal.SIG_DFL),
            signal.signal(signal.SIGTERM, signal.SIG_DFL),
        ),
    )
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            if session_row(engine, sid)["link_generation_status"] == S.COMPLETED.value:
                break
            assert daemon.poll() is None, (tmp_path / "daemon.log").read_text()[-3000:]
            time.sleep(1)
        else:
            pytest.fail("not COMPLETED in time:\n" + (tmp_path / "daemon.log").read_text()[-3000:])
    finally:
        _stop(daemon)
        log.close()

    with engine.connect() as conn:
        jobs = conn.execute(
            select(func.count()).where(local_bulk_job.c.program_session_id == sid)
        ).scalar_one()
    assert jobs == 1
    assert (
        sqs.get_queue_attributes(
            QueueUrl=queue_url, AttributeNames=["ApproximateNumberOfMessages"]
        )["Attributes"]["ApproximateNumberOfMessages"]
        == "0"
    )


def test_instance_config_is_postgres_queued_and_limited_per_session(
    dagster_storage_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dagster import DagsterInstance
    from dagster._core.run_coordinator import QueuedRunCoordinator
    from dagster_postgres import PostgresRunStorage

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
