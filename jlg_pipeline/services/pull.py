"""Earliest first across runs (docs/design.md "The one gate, precisely", "Earliest first
across runs"): what a caller with a turn of the service may claim instead of its own session.
Every unfinished generation run lists its sessions, each with a request (role, batch size,
actor); a caller claims the earliest waiting one of them at or before its own
(``ProgramSessionRepository.claim`` with ``pull``), or any once its run's own are done
(``claim_earliest``), and calls for it with the request its run lists it with. So concurrent
runs drain one queue in time order, and runs queued behind a cohort find their sessions done
instead of the cohort waiting for their launch."""

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping

from jlg_pipeline.domain.models import BulkRegisterRequest
from jlg_pipeline.log import describe, log_event

logger = logging.getLogger(__name__)

PULL_ON_FOR_S = 30 * 60.0
"""How long after it began a run whose own sessions are done still takes others' (far inside a
shared run's three-hour bound: ``dagster/max_runtime`` never ends it mid-call)."""
PULL_REFRESH_S = 5.0
"""How old the list of listed sessions may grow before it is read again: a run launched since
lists sessions that became due since, later than those listed before it, in the common case."""


def agreed(listings: Iterable[BulkRegisterRequest]) -> dict[int, BulkRegisterRequest]:
    """Each listed session with the one request its runs list it with; a session two runs list
    with different requests is left out (its own runs race for it, as without pulling)."""
    found: dict[int, BulkRegisterRequest] = {}
    differing: set[int] = set()
    for request in listings:
        seen = found.setdefault(request.session_id, request)
        if seen != request:
            differing.add(request.session_id)
    return {sid: request for sid, request in found.items() if sid not in differing}


class Pull:
    """The listed sessions, read through ``read`` (the orchestrator's unfinished runs) at most
    every ``refresh_s``, shared by the threads of one run; and the requests of the sessions this
    run took, for its own retries."""

    def __init__(
        self,
        read: Callable[[], Iterable[BulkRegisterRequest]],
        refresh_s: float = PULL_REFRESH_S,
        clock: Callable[[], float] = time.monotonic,
        on_for_s: float = PULL_ON_FOR_S,
    ) -> None:
        self._read = read
        self._until = clock() + on_for_s
        self._refresh_s = refresh_s
        self._clock = clock
        self._lock = threading.Lock()
        self._claiming = threading.Lock()
        self._listed: Mapping[int, BulkRegisterRequest] = {}
        self._read_at: float | None = None
        self._taken: dict[int, BulkRegisterRequest] = {}

    def listed(self) -> Mapping[int, BulkRegisterRequest]:
        """The listed sessions now (read again when older than ``refresh_s``). A read that
        fails keeps the last list: a caller then claims what it asked for, or what was listed
        a moment ago, which is what the watchdog would give it too."""
        with self._lock:
            now = self._clock()
            if self._read_at is None or now - self._read_at >= self._refresh_s:
                self._read_at = now
                try:
                    self._listed = agreed(self._read())
                except Exception as exc:  # noqa: BLE001 - pulling only speeds things up
                    log_event(logger, logging.WARNING, "pull.unread", error=describe(exc))
            return self._listed

    def open(self) -> bool:
        """Whether a caller with no session of its own still takes others' (``on_for_s``)."""
        return self._clock() < self._until

    def claiming(self) -> threading.Lock:
        """Held around a claim and its record here (:meth:`took`): a caller that then finds
        its own session taken by this run (:meth:`request_for`) knows it was, and does not
        claim it a second time in the same pass (a non-retryable failure is final for a
        run's pass, whoever of its callers met it)."""
        return self._claiming

    def took(self, request: BulkRegisterRequest) -> BulkRegisterRequest:
        """A session this run's caller claimed in another's place: its request, kept."""
        with self._lock:
            self._taken[request.session_id] = request
        return request

    def request_for(self, session_id: int) -> BulkRegisterRequest | None:
        """The request of a session this run took, if it took it."""
        with self._lock:
            return self._taken.get(session_id)
