"""LOCAL ONLY: AWS for the dev stack — the configured endpoint, or an in-process moto server."""

import logging
import os
from dataclasses import dataclass, field
from typing import Any

import boto3

from devstack.ports import LOOPBACK
from jlg_pipeline.domain.eventbridge_schedule import DEFAULT_GROUP

QUEUE_NAME = "jlg-join-link-generation"
EXECUTION_ROLE_ARN = "arn:aws:iam::123456789012:role/jlg-local-scheduler-execution"
FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "local",
    "AWS_SECRET_ACCESS_KEY": "local",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@dataclass
class LocalAws:
    endpoint_url: str
    queue_url: str
    queue_arn: str
    env: dict[str, str]
    server: Any = None

    clients: dict[str, Any] = field(default_factory=dict, repr=False)

    def client(self, service: str) -> Any:
        """This endpoint's client for ``service``, made once (boto3's clients are thread-safe;
        making one reads its service model, ~10 ms of CPU)."""
        if service not in self.clients:
            make: Any = boto3.client
            self.clients[service] = make(
                service,
                endpoint_url=self.endpoint_url,
                region_name=self.env["AWS_DEFAULT_REGION"],
                aws_access_key_id=self.env["AWS_ACCESS_KEY_ID"],
                aws_secret_access_key=self.env["AWS_SECRET_ACCESS_KEY"],
            )
        return self.clients[service]

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None


def start_moto(port: int) -> LocalAws:
    """An in-process moto server on 127.0.0.1 with the event queue created."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one access line per poll otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    aws = emptied_moto(port)
    aws.server = server
    return aws


def emptied_moto(port: int) -> LocalAws:
    """The moto server on 127.0.0.1:``port`` holding nothing but the event queue. moto keeps
    its state per process, not per server: without this a new server (or the next test on the
    same one) would start with the messages and schedules an earlier one left behind."""
    LOOPBACK.post(f"http://127.0.0.1:{port}/moto-api/reset").raise_for_status()
    return connect_moto(port)


def connect_moto(port: int) -> LocalAws:
    """The moto server on 127.0.0.1:``port``, with the event queue (and a non-default
    schedule group, if one is configured) created."""
    endpoint = f"http://127.0.0.1:{port}"
    aws = LocalAws(endpoint, "", "", {**FAKE_CREDENTIALS, "AWS_ENDPOINT_URL": endpoint})
    sqs = aws.client("sqs")
    aws.queue_url = sqs.create_queue(QueueName=QUEUE_NAME)["QueueUrl"]
    aws.queue_arn = sqs.get_queue_attributes(QueueUrl=aws.queue_url, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    # In AWS devops provisions the group; moto knows only "default" until asked.
    group = os.environ.get("AWS_SCHEDULER_GROUP_NAME") or DEFAULT_GROUP
    if group != DEFAULT_GROUP:
        aws.client("scheduler").create_schedule_group(Name=group)
    return aws
