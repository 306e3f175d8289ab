"""The production topology on this machine (docs/design.md "Deployment"): the code location served
on its own by ``dagster api grpc -m jlg_pipeline.definitions``, as the Helm chart's user-code
deployment runs it; a daemon and a webserver that know only its address (the shipped
deploy/workspace.yaml) and carry no application setting at all; two admin-API replicas
sharing the database. A near-time PATCH and an event are each generated exactly once."""

import json
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from sqlalchemy import Engine, func, select

from devstack.aws import LocalAws, start_moto
from devstack.ports import free_port, wait_until_answers
from devstack.system import (
    Children,
    aws_env,
    create_dagster_storage,
    dagster_env,
    dagster_home,
    grpc_workspace,
    start_code_server,
    start_daemon,
    start_web,
    start_webserver,
    system_env,
)
from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.adapters.tables import local_bulk_job, worker
from jlg_pipeline.domain.messages import build_message
from jlg_pipeline.domain.status import LinkGenerationStatus
from testkit.factories import add_registrations, create_session, force_state, session_row
from tests.support.web import JWT_ENV, admin_headers

pytestmark = pytest.mark.timeout(300)
BIN = Path(sys.executable).parent
# What a Dagster process needs to reach its instance, and nothing of the application.
DAGSTER_ONLY = ("PATH", "HOME", "LANG")


@dataclass
class Topology:
    engine: Engine
    web_urls: list[str]
    webserver_url: str
    aws: LocalAws
    children: Children
    logs: Path

    def log_tail(self) -> str:
        return "\n".join(
            f"--- {p.name}\n{p.read_text(errors='replace')[-2500:]}"
            for p in sorted(self.logs.glob("*.log"))
        )

    def wait_for(self, session_id: int, status: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if session_row(self.engine, session_id)["link_generation_status"] == status:
                return
            assert not self.children.exited(), self.log_tail()
            time.sleep(0.5)
        pytest.fail(f"session {session_id} not {status} in {timeout}s\n{self.log_tail()}")


@pytest.fixture
def topology(
    engine: Engine, db_url: str, dagster_storage_url: str, tmp_path: Path
) -> Iterator[Topology]:
    aws = start_moto(free_port())
    home = dagster_home(tmp_path / "dagster_home")
    logs = tmp_path / "logs"
    logs.mkdir()
    dagster = dagster_env(home, dagster_storage_url, {k: os.environ[k] for k in DAGSTER_ONLY})
    app = system_env(
        home,
        dagster_storage_url,
        db_url,
        **aws_env(aws),
        **JWT_ENV,
        JLG_ENVIRONMENT="production",
        JLG_REGISTRAR="local",
        ENABLE_JOIN_LINK_SCHEDULER="true",
        ENABLE_JOIN_LINK_FALLBACK_CRON="false",
    )
    children = Children()
    code_port, ui_port = free_port(), free_port()
    create_dagster_storage(dagster)
    try:
        start_code_server(children, app, code_port, logs / "code-location.log")
        workspace = grpc_workspace(tmp_path / "workspace.yaml", code_port)
        start_daemon(children, dagster, logs / "dagster-daemon.log", workspace)
        webserver_url = start_webserver(
            children, dagster, ui_port, logs / "dagster-webserver.log", workspace
        )
        web_urls = [
            start_web(children, app, free_port(), logs / f"{replica}.log", replica)
            for replica in ("web-a", "web-b")
        ]
        for url in web_urls:
            wait_until_answers(f"{url}/readyz", 60, children.running)
        wait_until_answers(f"{webserver_url}/server_info", 120, children.running)
        assert not children.exited(), "\n".join(p.read_text() for p in logs.glob("*.log"))
        yield Topology(engine, web_urls, webserver_url, aws, children, logs)
    finally:
        children.stop()
        aws.stop()


def _wait_until_no_worker_drains(engine: Engine, timeout: float) -> None:
    """Until every run that drained the queue has said it ended (``jlg_worker`` is empty):
    its session COMPLETED, a run goes on taking what the queue gives for a moment."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with engine.connect() as conn:
            if not conn.execute(select(func.count()).select_from(worker)).scalar_one():
                return
        time.sleep(0.2)
    pytest.fail(f"a worker still drained after {timeout} s")


def _bulk_jobs(engine: Engine, session_id: int) -> int:
    with engine.connect() as conn:
        column = local_bulk_job.c.program_session_id
        return int(conn.execute(select(func.count()).where(column == session_id)).scalar_one())


def _location_status(webserver_url: str) -> list[tuple[str, str]]:
    query = "{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus } } } }"
    answer = httpx.post(f"{webserver_url}/graphql", json={"query": query}, timeout=30).json()
    entries = answer["data"]["workspaceOrError"]["locationEntries"]
    return [(e["name"], e["loadStatus"]) for e in entries]


def test_a_near_time_and_an_event_each_generate_once_across_the_topology(
    topology: Topology, engine: Engine
) -> None:
    assert _location_status(topology.webserver_url) == [("jlg_pipeline", "LOADED")]
    near, event = (create_session(engine, program_id=700) for _ in range(2))
    add_registrations(engine, 700, 5)
    web_a, web_b = topology.web_urls

    patched = httpx.patch(
        f"{web_a}/program-session/{near}/link-generation",
        headers=admin_headers(),
        json={"linkGenerationAt": (datetime.now(UTC) + timedelta(seconds=5)).isoformat()},
        timeout=30,
    )
    assert patched.status_code == 200, patched.text
    seen = httpx.get(
        f"{web_b}/program-session/{near}/link-generation", headers=admin_headers(), timeout=30
    )
    assert seen.json()["data"]["linkGenerationStatus"] == "SCHEDULED", "one database"
    # One path at a time: a run is a worker of the queue, and a run of one path still draining
    # when the other's session comes due would take it (under its own trigger).
    topology.wait_for(near, "COMPLETED", timeout=120)
    _wait_until_no_worker_drains(engine, timeout=60)
    force_state(engine, event, LinkGenerationStatus.SCHEDULED, at_offset=timedelta(seconds=-1))
    sqs = topology.aws.client("sqs")
    for _ in range(2):  # delivered twice, as SQS may
        sqs.send_message(
            QueueUrl=topology.aws.queue_url, MessageBody=json.dumps(build_message(event, 9))
        )
    topology.wait_for(event, "COMPLETED", timeout=90)

    repository = ProgramSessionRepository(engine)
    for sid, trigger in ((near, "direct"), (event, "event")):
        assert _bulk_jobs(engine, sid) == 1, "generated exactly once"
        completed = [a for a in repository.attempts(sid) if a.outcome.value == "COMPLETED"]
        assert [a.trigger for a in completed] == [trigger]
        assert completed[0].run_id, "claimed by a run the code server executed"
    final = httpx.get(
        f"{web_b}/program-session/{near}/link-generation", headers=admin_headers(), timeout=30
    )
    assert final.json()["data"]["linkGenerationStatus"] == "COMPLETED"
