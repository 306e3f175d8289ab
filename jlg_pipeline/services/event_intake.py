"""The queue consumer's logic (TRD JoinLinkGenerationProcessor, minus the generation, which
runs in its own Dagster run): drain bounded batches, validate each message, remove every
message it handled, and drop invalid ones with a warning (non-retryable; a poison message
never blocks the queue)."""

import logging
from dataclasses import dataclass, field
from typing import Protocol

from jlg_pipeline.adapters.sqs_queue import QueueMessage
from jlg_pipeline.domain.errors import InvalidMessage
from jlg_pipeline.domain.messages import JoinLinkGenerationMessage, parse_message
from jlg_pipeline.log import log_event

logger = logging.getLogger(__name__)

DEFAULT_MAX_BATCHES = 10


class Queue(Protocol):
    def receive(
        self, *, visibility_timeout: int = ..., wait_seconds: int = ...
    ) -> list[QueueMessage]: ...

    def delete(self, messages: list[QueueMessage]) -> list[str]: ...


@dataclass(frozen=True, slots=True)
class AcceptedEvent:
    message_id: str
    message: JoinLinkGenerationMessage


@dataclass
class Intake:
    accepted: list[AcceptedEvent] = field(default_factory=list)
    dropped: list[tuple[str, str]] = field(default_factory=list)
    """(message id, reason) of every invalid message removed from the queue."""
    undeleted: list[str] = field(default_factory=list)
    """Ids SQS failed to delete; they reappear and their run key dedupes them."""


def drain(queue: Queue, max_batches: int = DEFAULT_MAX_BATCHES) -> Intake:
    intake = Intake()
    seen: set[str] = set()
    for _ in range(max_batches):
        messages = [m for m in queue.receive() if m.message_id not in seen]
        if not messages:
            break
        for m in messages:
            seen.add(m.message_id)
            try:
                intake.accepted.append(AcceptedEvent(m.message_id, parse_message(m.body)))
            except InvalidMessage as exc:
                intake.dropped.append((m.message_id, str(exc)))
                log_event(
                    logger,
                    logging.WARNING,
                    "intake.dropped_invalid",
                    message_id=m.message_id,
                    reason=str(exc),
                    receive_count=m.receive_count,
                    body=m.body[:200],
                )
        intake.undeleted += queue.delete(messages)
    return intake
