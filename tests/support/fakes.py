"""Fakes of the external seams, each on the same protocol as the real adapter and recording
what it was asked: bulkRegister (the online-session service), the SQS queue and EventBridge
Scheduler."""

import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from jlg_pipeline.adapters.sqs_queue import QueueMessage
from jlg_pipeline.domain.models import BulkRegisterRequest, BulkRegisterResult


@dataclass
class RecordingRegistrar:
    """Records every bulkRegister call; can fail with ``error`` or block until ``release``."""

    total: int = 3
    error: Exception | None = None
    block: bool = False
    calls: list[BulkRegisterRequest] = field(default_factory=list)
    entered: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def bulk_register(self, request: BulkRegisterRequest) -> BulkRegisterResult:
        with self._lock:
            self.calls.append(request)
        self.entered.set()
        if self.block and not self.release.wait(timeout=30):
            raise TimeoutError("test never released the fake registrar")
        if self.error is not None:
            raise self.error
        return BulkRegisterResult(job_id=f"job-{uuid.uuid4().hex[:12]}", total=self.total)


@dataclass
class FakeQueue:
    """An in-memory queue on the sensor's Queue protocol, with SQS's visibility: a received
    message is hidden until ``expire_visibility`` (its timeout passing) or deleted. Each
    receive gets a new receipt handle, and only the newest deletes the message. ``fail_on``
    names receive calls (1-based) that raise, like a throttled or dropped call."""

    messages: dict[str, str] = field(default_factory=dict)
    hidden: set[str] = field(default_factory=set)
    handles: dict[str, str] = field(default_factory=dict)
    receives: int = 0
    fail_on: set[int] = field(default_factory=set)
    deleted: list[str] = field(default_factory=list)
    waits: list[int] = field(default_factory=list)
    """The long-poll wait each receive asked for."""
    receive_takes_s: float = 0.0
    now: float = 0.0
    """A clock each receive moves on by ``receive_takes_s``, for a tick's time budget."""

    def send(self, body: str) -> str:
        message_id = uuid.uuid4().hex
        self.messages[message_id] = body
        return message_id

    def receive(self, *, wait_seconds: int = 0) -> list[QueueMessage]:
        self.receives += 1
        self.waits.append(wait_seconds)
        self.now += self.receive_takes_s
        if self.receives in self.fail_on:
            raise ConnectionError(f"receive {self.receives} failed (simulated)")
        batch = [m for m in self.messages if m not in self.hidden][:10]
        received = []
        for message_id in batch:
            self.hidden.add(message_id)
            self.handles[message_id] = uuid.uuid4().hex
            received.append(
                QueueMessage(message_id, self.handles[message_id], self.messages[message_id], 1)
            )
        return received

    def delete(self, messages: Sequence[QueueMessage]) -> list[str]:
        failed = []
        for m in messages:
            if self.handles.get(m.message_id) == m.receipt_handle and m.message_id in self.messages:
                del self.messages[m.message_id]
                self.deleted.append(m.message_id)
            elif m.message_id in self.messages:
                failed.append(m.message_id)
        return failed

    def expire_visibility(self) -> None:
        self.hidden.clear()


@dataclass
class FakeScheduler:
    """EventBridge Scheduler on the Scheduler protocol: keeps schedules by name, records every
    call, and raises ``error`` (a throttle, AWS down) when it is set."""

    schedules: dict[str, dict[str, Any]] = field(default_factory=dict)
    calls: list[tuple[str, str]] = field(default_factory=list)
    error: Exception | None = None

    def upsert(self, request: dict[str, Any]) -> Literal["updated", "created"]:
        self.calls.append(("upsert", request["Name"]))
        if self.error is not None:
            raise self.error
        existed = request["Name"] in self.schedules
        self.schedules[request["Name"]] = request
        return "updated" if existed else "created"

    def delete(self, name: str, group_name: str) -> bool:
        self.calls.append(("delete", name))
        if self.error is not None:
            raise self.error
        return self.schedules.pop(name, None) is not None
