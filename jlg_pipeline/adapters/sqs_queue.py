"""Thin boto3 adapter over the JOIN_LINK_GENERATION SQS queue (TRD iface-09)."""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from jlg_pipeline.adapters.aws_clients import aws_client

MAX_BATCH = 10  # SQS's own limit for receive and delete batches
DEFAULT_VISIBILITY_TIMEOUT_S = 120


@dataclass(frozen=True, slots=True)
class QueueMessage:
    message_id: str
    receipt_handle: str
    body: str
    receive_count: int


def sqs_client(*, region_name: str | None = None, endpoint_url: str | None = None) -> Any:
    return aws_client("sqs", region_name=region_name, endpoint_url=endpoint_url)


class SqsQueue:
    def __init__(
        self, client: Any, queue_url: str, visibility_timeout: int = DEFAULT_VISIBILITY_TIMEOUT_S
    ) -> None:
        self._client = client
        self.queue_url = queue_url
        self.visibility_timeout = visibility_timeout

    def receive(self, *, wait_seconds: int = 0) -> list[QueueMessage]:
        """Up to ten messages; they stay invisible to other readers for the visibility timeout."""
        answer = self._client.receive_message(
            QueueUrl=self.queue_url,
            MaxNumberOfMessages=MAX_BATCH,
            WaitTimeSeconds=wait_seconds,
            VisibilityTimeout=self.visibility_timeout,
            MessageSystemAttributeNames=["ApproximateReceiveCount"],
        )
        return [
            QueueMessage(
                message_id=m["MessageId"],
                receipt_handle=m["ReceiptHandle"],
                body=m.get("Body", ""),
                receive_count=int(m.get("Attributes", {}).get("ApproximateReceiveCount", 1)),
            )
            for m in answer.get("Messages", [])
        ]

    def delete(self, messages: Sequence[QueueMessage]) -> list[str]:
        """Delete the messages; returns the ids SQS failed to delete (they will reappear)."""
        failed: list[str] = []
        for start in range(0, len(messages), MAX_BATCH):
            chunk = messages[start : start + MAX_BATCH]
            answer = self._client.delete_message_batch(
                QueueUrl=self.queue_url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": m.receipt_handle} for i, m in enumerate(chunk)
                ],
            )
            failed += [chunk[int(f["Id"])].message_id for f in answer.get("Failed", [])]
        return failed
