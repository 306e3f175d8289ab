"""The local stack for end-to-end tests: real dagster-daemon and web app processes on a
real PostgreSQL, a moto server, and the EventBridge delivery stand-in. Windows are shortened
through JLG_TEST_* configuration only; the constants keep their production values."""

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from unittest import mock

import httpx
import pytest
from dagster import DagsterInstance, DagsterRun
from sqlalchemy import Engine

from devstack.aws import LocalAws, emptied_moto
from devstack.eventbridge import EventBridgeStandIn
from devstack.ports import free_port, wait_until_answers
from devstack.system import Children, aws_env, start_daemon, start_web, system_env
from testkit.factories import session_row
from tests.support import ROOT
from tests.support.secrets import find_secrets
from tests.support.web import JWT_ENV, SECRET, admin_headers

BIN = Path(sys.executable).parent


@dataclass
class Stack:
    engine: Engine
    env: dict[str, str]
    web_url: str
    aws: LocalAws
    logs: Path
    children: Children
    standin: EventBridgeStandIn

    @property
    def daemon_group(self) -> int:
        """The process group of the daemon, its code servers and their run workers."""
        return self.children.processes["dagster-daemon"].pid

    def patch(self, session_id: int, at: datetime | None) -> httpx.Response:
        return httpx.patch(
            f"{self.web_url}/program-session/{session_id}/link-generation",
            headers=admin_headers(),
            json={"linkGenerationAt": None if at is None else at.isoformat()},
            timeout=30,
        )

    def send(self, body: dict[str, Any]) -> str:
        """Put a message on the queue; its SQS message id."""
        answer = self.aws.client("sqs").send_message(
            QueueUrl=self.aws.queue_url, MessageBody=json.dumps(body)
        )
        return str(answer["MessageId"])

    def send_together(self, bodies: list[dict[str, Any]]) -> None:
        """Up to ten messages in one call, so one sensor tick finds them all."""
        entries = [{"Id": str(i), "MessageBody": json.dumps(b)} for i, b in enumerate(bodies)]
        answer = self.aws.client("sqs").send_message_batch(
            QueueUrl=self.aws.queue_url, Entries=entries
        )
        assert not answer.get("Failed"), answer

    def queue_depth(self) -> int:
        """Messages on the queue, visible or in flight."""
        attributes = self.aws.client("sqs").get_queue_attributes(
            QueueUrl=self.aws.queue_url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return int(attributes["ApproximateNumberOfMessages"]) + int(
            attributes["ApproximateNumberOfMessagesNotVisible"]
        )

    def runs(self) -> list[DagsterRun]:
        """Every run the stack's Dagster instance holds."""
        # dagster.yaml reads the storage URL from the environment, as the daemon does.
        storage = {"DAGSTER_POSTGRES_URL": self.env["DAGSTER_POSTGRES_URL"]}
        with (
            mock.patch.dict(os.environ, storage),
            DagsterInstance.from_config(self.env["DAGSTER_HOME"]) as instance,
        ):
            return list(instance.get_runs())

    def launch_sweep(self) -> None:
        """What the 4-hourly schedule does, now: submit the sweep job to the instance's queue."""
        self.launch("join_link_fallback_sweep_job")

    def launch(
        self, job: str, *, tags: dict[str, str] | None = None, config: dict[str, Any] | None = None
    ) -> None:
        """A run launched by hand, as the Launchpad does: any tags, any run config."""
        options = ["--tags", json.dumps(tags)] if tags else []
        options += ["--config-json", json.dumps(config)] if config else []
        subprocess.run(
            [
                str(BIN / "dagster"),
                "job",
                "launch",
                "-j",
                job,
                "-w",
                str(ROOT / "workspace.yaml"),
                *options,
            ],
            cwd=ROOT,
            env=self.env,
            check=True,
            capture_output=True,
            timeout=120,
        )

    def wait_for(self, session_id: int, status: str, timeout: float = 90) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            row = session_row(self.engine, session_id)
            if row["link_generation_status"] == status:
                return row
            dead = self.children.exited()
            assert not dead, f"{dead} exited:\n{self.log_tail()}"
            time.sleep(0.5)
        pytest.fail(f"session {session_id} not {status} in {timeout}s: {row}\n{self.log_tail()}")

    def log_tail(self) -> str:
        return "\n".join(
            f"--- {p.name}\n{p.read_text(errors='replace')[-2500:]}"
            for p in sorted(self.logs.glob("*.log"))
        )


@pytest.fixture
def start_stack(
    engine: Engine, db_url: str, dagster_storage_url: str, moto_port: int, tmp_path: Path
) -> Iterator[Callable[..., Stack]]:
    """Starts the test's one stack, with ``overrides`` in its processes' environment."""
    started: list[tuple[Children, EventBridgeStandIn]] = []

    def start(**overrides: str) -> Stack:
        assert not started, "one stack per test: they would share the worker's moto server"
        aws = emptied_moto(moto_port)
        standin = EventBridgeStandIn(
            aws.client("scheduler"), aws.client("sqs"), interval_seconds=0.5
        )
        standin.start()
        logs = tmp_path / "logs"
        logs.mkdir(exist_ok=True)
        settings = {
            **aws_env(aws),
            **JWT_ENV,
            "JLG_REGISTRAR": "local",
            "ENABLE_JOIN_LINK_SCHEDULER": "true",
            "ENABLE_JOIN_LINK_FALLBACK_CRON": "false",
            "TMPDIR": str(tmp_path),
        }
        env = system_env(
            tmp_path / "dagster_home", dagster_storage_url, db_url, **{**settings, **overrides}
        )
        children = Children()
        started.append((children, standin))
        web_url = start_web(children, env, free_port(), logs / "web.log")
        start_daemon(children, env, logs / "dagster-daemon.log")
        wait_until_answers(f"{web_url}/readyz", 60, children.running)
        assert not children.exited(), (logs / "web.log").read_text()
        return Stack(engine, env, web_url, aws, logs, children, standin)

    try:
        yield start
    finally:
        for children, standin in started:
            children.stop()
            standin.stop()
    leaked = {}
    for log in (tmp_path / "logs").glob("*.log"):
        text = log.read_text(errors="replace")
        hits = find_secrets(text) + (["the JWT secret"] if SECRET in text else [])
        if hits:
            leaked[log.name] = hits
    assert leaked == {}, "credentials in the logs the stack wrote"
