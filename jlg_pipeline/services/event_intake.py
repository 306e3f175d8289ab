"""The queue consumer's logic (TRD JoinLinkGenerationProcessor, minus the generation, which
runs in its own Dagster run), acknowledging after the run exists (docs/design.md "Delivery
guarantees").

A tick first acknowledges the messages the previous tick asked runs for, deleting each one
whose run now exists; then it drains bounded batches: an invalid message is deleted at once
(non-retryable; a poison message never blocks the queue), a valid one whose run already
exists (a redelivery) is deleted, and any other valid one is kept on the queue, invisible,
and handed back to ask for its run. Nothing valid is deleted before its run exists, so a
tick that fails or whose result is lost loses nothing: its messages come back after their
visibility timeout and ask again, under the same run key.
"""

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from jlg_pipeline.adapters.sqs_queue import QueueMessage
from jlg_pipeline.domain.errors import DatabaseRefused, DatabaseUnavailable, InvalidMessage
from jlg_pipeline.domain.generation import BulkRegisterRequest
from jlg_pipeline.domain.messages import JoinLinkGenerationMessage, parse_message
from jlg_pipeline.log import log_event

logger = logging.getLogger(__name__)

INTAKE_BUDGET_S = 5.0
"""How long a tick drains, about the sensor's own interval: a burst's first runs are asked for
within seconds of its time and start while the next tick takes the rest (a 20 s budget held a
2,000-session cohort's first run back 21 s, docs/performance.md). Far inside Dagster's 60 s
sensor timeout and the 120 s the messages stay invisible."""

RunsExist = Callable[[Sequence[str]], set[str]]
"""Of these message ids, those whose run exists in the orchestrator (one lookup for many)."""
RecordOptions = Callable[[Sequence[BulkRegisterRequest]], None]
"""Keep these requests' options in the one queue (``SessionQueue.record``)."""


class Queue(Protocol):
    def receive(self, *, wait_seconds: int = ...) -> list[QueueMessage]: ...

    def delete(self, messages: Sequence[QueueMessage]) -> list[str]: ...


@dataclass(frozen=True, slots=True)
class AcceptedEvent:
    message: QueueMessage
    event: JoinLinkGenerationMessage

    @property
    def message_id(self) -> str:
        return self.message.message_id

    @property
    def request(self) -> BulkRegisterRequest:
        return self.event.data.request()


@dataclass
class Intake:
    accepted: list[AcceptedEvent] = field(default_factory=list)
    """Valid messages with no run yet: still on the queue; a run is to be asked for each."""
    acknowledged: list[str] = field(default_factory=list)
    """Ids of valid messages deleted because their run exists."""
    dropped: list[tuple[str, str]] = field(default_factory=list)
    """(message id, reason) of every invalid message removed from the queue."""
    undeleted: list[str] = field(default_factory=list)
    """Ids SQS failed to delete; they reappear and are acknowledged then."""


def acknowledge(queue: Queue, pending: Sequence[QueueMessage], runs_exist: RunsExist) -> Intake:
    """Delete the pending messages whose run exists. The others are left to reappear after
    their visibility timeout and ask again (their run key keeps that to one run)."""
    intake = Intake()
    existing = runs_exist([m.message_id for m in pending]) if pending else set()
    done = [m for m in pending if m.message_id in existing]
    intake.acknowledged += [m.message_id for m in done]
    intake.undeleted += queue.delete(done)
    return intake


def drain(
    queue: Queue,
    runs_exist: RunsExist,
    budget_s: float = INTAKE_BUDGET_S,
    wait_seconds: int = 0,
    clock: Callable[[], float] = time.monotonic,
) -> Intake:
    """Receive batches until one brings nothing new or ``budget_s`` is spent. The first
    receive waits up to ``wait_seconds`` for a message to arrive (SQS long polling), so a tick
    on an empty queue picks a new message up the moment it lands instead of at the next tick."""
    intake = Intake()
    seen: set[str] = set()
    started = clock()
    first = True
    while first or clock() - started < budget_s:
        received = queue.receive(wait_seconds=wait_seconds if first else 0)
        first = False
        messages = [m for m in received if m.message_id not in seen]
        if not messages:
            break
        removable: list[QueueMessage] = []
        valid: list[tuple[QueueMessage, JoinLinkGenerationMessage]] = []
        for m in messages:
            seen.add(m.message_id)
            try:
                event = parse_message(m.body)
            except InvalidMessage as exc:
                intake.dropped.append((m.message_id, str(exc)))
                removable.append(m)
                log_event(
                    logger,
                    logging.WARNING,
                    "intake.dropped_invalid",
                    message_id=m.message_id,
                    reason=str(exc),
                    receive_count=m.receive_count,
                    body=m.body[:200],
                )
                continue
            valid.append((m, event))
        existing = runs_exist([m.message_id for m, _ in valid]) if valid else set()
        for m, event in valid:
            if m.message_id in existing:
                intake.acknowledged.append(m.message_id)
                removable.append(m)
            else:
                intake.accepted.append(AcceptedEvent(m, event))
        intake.undeleted += queue.delete(removable)
    return intake


def record_options(accepted: Sequence[AcceptedEvent], record: RecordOptions) -> None:
    """The accepted messages' options kept in the one queue for their cycles, and their
    programmes told that work falls due (docs/design.md "One queue"). When the database cannot
    take them, the runs carry them in their config: worth a warning, not the tick."""
    try:
        record([a.request for a in accepted])
    except (DatabaseUnavailable, DatabaseRefused) as exc:
        log_event(logger, logging.WARNING, "intake.unrecorded", messages=len(accepted), error=exc)
