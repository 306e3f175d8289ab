"""A run's callers draining the one queue (docs/design.md "One queue"): the gate for whatever
session the queue gives next, until none waits or the run's time is up, the run's heartbeat
told meanwhile, and a session it fails on unexpectedly set aside."""

import logging
import threading
import time
from collections.abc import Callable

from jlg_pipeline.adapters.registrars import BulkRegistrar
from jlg_pipeline.adapters.service_view import PROBE_MARGIN_S
from jlg_pipeline.domain.attempts import Trigger
from jlg_pipeline.domain.errors import GenerationFailed, RetryableGenerationFailed
from jlg_pipeline.domain.generation import BulkRegisterRequest, GenerationOutcome
from jlg_pipeline.domain.service_view import MAX_SLOT_WAIT_S
from jlg_pipeline.log import describe, log_event
from jlg_pipeline.services.gate_ports import ServiceTurns, SessionClaims
from jlg_pipeline.services.generation import generate_next
from jlg_pipeline.services.set_aside import Path, set_aside

logger = logging.getLogger(__name__)

DRAIN_FOR_S = 30 * 60.0
"""How long after it began a run still takes from the queue (far inside a shared run's
three-hour bound: ``dagster/max_runtime`` never ends it mid-call)."""
HEARTBEAT_S = 5.0
"""How often a draining run says it is alive (``SessionQueue.beat``), at most."""


def liveness_s(call_bound_s: float) -> float:
    """How long a live worker may go without a beat: every caller of it inside one call at its
    bound (``call_bound_s``), after waiting for its turn."""
    return call_bound_s + PROBE_MARGIN_S + MAX_SLOT_WAIT_S + HEARTBEAT_S


class Drain:
    """:func:`generate_next` bound as :func:`bind_gate` binds the gate, until ``until``
    (monotonic seconds), saying the run is alive through ``beat`` at most every HEARTBEAT_S;
    it keeps the request of each session it took, for the run's own retries
    (:meth:`request_for`), and how each ended (:meth:`ended_for`). A caller given nothing
    waits for a sibling's call in flight before it ends: a probe's answer may free everyone,
    and the run then goes on at full width rather than with its prober alone."""

    def __init__(
        self,
        repository: SessionClaims,
        registrar: BulkRegistrar,
        trigger: Trigger,
        run_id: str | None,
        view: ServiceTurns,
        beat: Callable[[], None] = lambda: None,
        count_set_aside: Callable[[], None] = lambda: None,
        until: float | None = None,
    ) -> None:
        self._bound = (repository, registrar, trigger, run_id, view)
        self._beat = beat
        self._count_set_aside = count_set_aside
        self._current = threading.local()
        self._until = time.monotonic() + DRAIN_FOR_S if until is None else until
        self._lock = threading.Lock()
        self._calling = 0
        self._calls_ended = threading.Condition()
        self._taken: dict[int, BulkRegisterRequest] = {}
        self._ended: dict[int, GenerationOutcome | GenerationFailed] = {}
        self._beat_at = -HEARTBEAT_S

    def __call__(self) -> GenerationOutcome | None:
        """The next session the queue gives this caller, generated; None once it is given
        nothing (none waits, or the service says wait) while no sibling is in a call."""
        while time.monotonic() < self._until:
            with self._calls_ended:
                self._calling += 1
            try:
                outcome = self._next()
            except BaseException:
                self._call_ended()
                raise
            if outcome is not None:
                self._call_ended()
                return outcome
            with self._calls_ended:
                self._calling -= 1
                if self._calling == 0:
                    self._calls_ended.notify_all()
                    return None
                # Woken by a sibling's call ending (or the last sibling leaving), not by
                # another caller given nothing: those would wake each other without end.
                self._calls_ended.wait(max(self._until - time.monotonic(), 0.0))
        return None

    def _call_ended(self) -> None:
        with self._calls_ended:
            self._calling -= 1
            self._calls_ended.notify_all()

    def _next(self) -> GenerationOutcome | None:
        self._heartbeat()
        repository, registrar, trigger, run_id, view = self._bound
        self._current.session_id = None
        try:
            outcome = generate_next(
                repository=repository,
                registrar=registrar,
                trigger=trigger,
                run_id=run_id,
                view=view,
                took=self._took,
            )
        except GenerationFailed as exc:
            self._ended[exc.session_id] = exc
            raise
        except Exception as exc:
            session_id = self._current.session_id
            if session_id is None:
                raise
            # One session the gate failed on unexpectedly after its claim: set aside (its
            # claim goes stale and it waits again), and the drain goes on with the rest.
            set_aside(Path.WORKER, session_id, exc, self._count_set_aside)
            failed = RetryableGenerationFailed(
                f"session {session_id} set aside: {describe(exc)}",
                session_id=session_id,
                attempt=0,
                retryable=True,
                retry_in_s=repository.windows.stale_ms / 1000,
            )
            self._ended[session_id] = failed
            raise failed from exc
        if outcome is not None:
            self._ended[outcome.session_id] = outcome
        return outcome

    def _heartbeat(self) -> None:
        with self._lock:
            now = time.monotonic()
            if now - self._beat_at < HEARTBEAT_S:
                return
            self._beat_at = now
        try:
            self._beat()
        except Exception as exc:  # noqa: BLE001 - a missed beat costs the watchdog a launch
            log_event(logger, logging.WARNING, "generation.heartbeat_lost", error=describe(exc))

    def _took(self, request: BulkRegisterRequest) -> None:
        self._current.session_id = request.session_id
        with self._lock:
            self._taken[request.session_id] = request

    def ended_for(self, session_id: int) -> GenerationOutcome | GenerationFailed | None:
        """How this drain's last call for a session ended, if it called for it."""
        return self._ended.get(session_id)

    def request_for(self, session_id: int) -> BulkRegisterRequest | None:
        """The request of a session this drain took, if it took it."""
        with self._lock:
            return self._taken.get(session_id)
