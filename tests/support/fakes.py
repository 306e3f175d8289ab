"""Fakes of the external seams, each on the same protocol as the real adapter and recording
what it was asked: bulkRegister (the online-session service), the SQS queue and EventBridge
Scheduler; and, for the gate's unit tests only, its store and its view of the service (the
real ones are proven against PostgreSQL in the integration tier)."""

import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Literal

from jlg_pipeline.adapters.sqs_queue import QueueMessage
from jlg_pipeline.domain.attempts import Claim, Trigger
from jlg_pipeline.domain.constants import TimingWindows
from jlg_pipeline.domain.generation import BulkRegisterRequest, BulkRegisterResult
from jlg_pipeline.domain.service_view import Health, Turn, Verdict, ViewState
from jlg_pipeline.domain.session_state import LinkGenerationState
from jlg_pipeline.domain.status import LinkGenerationStatus
from jlg_pipeline.domain.validation import SessionId


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


@dataclass
class FakeSessions:
    """The gate's store (``services/gate_ports.SessionClaims``) in memory, recording what it
    was asked: one session per id, claimed as the repository's statement does (SCHEDULED or
    FAILED, or IN_PROGRESS gone ``stale``; not deleted; due), each claim a new attempt, the
    marks fenced to the attempt holding it. ``lose_claim``: the next claim goes to another
    caller first; ``fence_marks``: a newer attempt took the claim before the mark."""

    states: dict[int, LinkGenerationState] = field(default_factory=dict)
    windows: TimingWindows = field(default_factory=TimingWindows)
    asked: list[str] = field(default_factory=list)
    lose_claim: bool = False
    fence_marks: bool = False
    run_of: dict[int, str | None] = field(default_factory=dict)

    def arm(self, session_id: int, status: LinkGenerationStatus, **changes: Any) -> None:
        at = datetime(2026, 12, 5, 9, 0, tzinfo=UTC)
        values: dict[str, Any] = {
            "id": session_id,
            "link_generation_at": at,
            "status": status,
            "attempt": 0,
            "last_error": None,
            "job_id": None,
            "updated_at": at,
            "deleted": False,
            "stale": False,
            "due": True,
        }
        self.states[session_id] = LinkGenerationState(**{**values, **changes})

    def get_state(self, session_id: int) -> LinkGenerationState | None:
        self.asked.append(f"get_state {session_id}")
        return self.states.get(session_id)

    def claim(self, session_id: int, trigger: Trigger, run_id: str | None) -> Claim | None:
        self.asked.append(f"claim {session_id}")
        state = self.states.get(session_id)
        if self.lose_claim and state is not None:
            self.lose_claim = False
            self._set(state, status=LinkGenerationStatus.IN_PROGRESS, attempt=state.attempt + 1)
            return None
        claimable = state is not None and (
            state.status in (LinkGenerationStatus.SCHEDULED, LinkGenerationStatus.FAILED)
            or (state.status is LinkGenerationStatus.IN_PROGRESS and state.stale)
        )
        if state is None or not claimable or state.deleted or not state.due:
            return None
        attempt = state.attempt + 1
        self._set(state, status=LinkGenerationStatus.IN_PROGRESS, attempt=attempt, stale=False)
        self.run_of[session_id] = run_id
        assert state.link_generation_at is not None
        return Claim(SessionId(session_id), 1, attempt, state.link_generation_at)

    def claim_next(self, trigger: Trigger, run_id: str | None) -> Claim | None:
        raise AssertionError("the queue's choice is PostgreSQL's (test_one_queue.py)")

    def resume(self, session_id: int, run_id: str) -> Claim | None:
        self.asked.append(f"resume {session_id}")
        state = self.states.get(session_id)
        if state is None or state.status is not LinkGenerationStatus.IN_PROGRESS:
            return None
        if self.run_of.get(session_id) != run_id:
            return None
        assert state.link_generation_at is not None
        return Claim(SessionId(session_id), 1, state.attempt, state.link_generation_at)

    def renew(self, claim: Claim) -> bool:
        self.asked.append(f"renew {claim.session_id}")
        return True

    def mark_completed(self, claim: Claim, job_id: str, total: int | None = None) -> bool:
        self.asked.append(f"mark_completed {claim.session_id}")
        return self._mark(claim, LinkGenerationStatus.COMPLETED, job_id=job_id)

    def mark_failed(self, claim: Claim, error: str, retry_in_s: float | None = None) -> bool:
        self.asked.append(f"mark_failed {claim.session_id} retry_in_s={retry_in_s}")
        return self._mark(claim, LinkGenerationStatus.FAILED, last_error=error)

    def _mark(self, claim: Claim, status: LinkGenerationStatus, **values: Any) -> bool:
        state = self.states[claim.session_id]
        if self.fence_marks or state.attempt != claim.attempt:
            return False
        self._set(state, status=status, **values)
        return True

    def _set(self, state: LinkGenerationState, **values: Any) -> None:
        self.states[state.id] = replace(state, **values)


@dataclass
class FakeTurns:
    """The online-session service's shared view as the gate sees it
    (``services/gate_ports.ServiceTurns``): hands out ``turns`` in order (a CALL now when none
    is left), pauses once before the call when ``paused_until`` is set, and records the rest."""

    turns: list[Turn] = field(default_factory=list)
    paused_until: datetime | None = None
    taken: list[Turn] = field(default_factory=list)
    unused: list[Turn] = field(default_factory=list)
    given_back: list[Turn] = field(default_factory=list)
    reports: list[tuple[Health, float | None]] = field(default_factory=list)
    report_error: Exception | None = None
    """Raised by every report (a fault of the view's, after it was asked)."""

    def wait_for_turn(self) -> Turn:
        now = datetime(2026, 12, 5, 9, 0, tzinfo=UTC)
        turn = self.turns.pop(0) if self.turns else Turn(Verdict.CALL, now)
        self.taken.append(turn)
        return turn

    def not_used(self, turn: Turn) -> None:
        self.unused.append(turn)

    def give_back(self, turn: Turn) -> None:
        self.given_back.append(turn)

    def pause_before_the_call(self) -> datetime | None:
        return self.paused_until

    def report(self, health: Health, retry_after_s: float | None, turn: Turn) -> ViewState:
        self.reports.append((health, retry_after_s))
        if self.report_error is not None:
            raise self.report_error
        return ViewState()
