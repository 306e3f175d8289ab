"""When a retryable failure is tried again, decided in time, not counts (docs/design.md "Whatever
fails"): a session whose bulkRegister failed retryably is re-attempted by the watchdog once
its wait is over, for as long as its cycle is younger than the real-time path's budget (the
TRD's 24 h event age); the wait is the service's ``Retry-After`` when it sent one, else a
backoff on the attempt number. A ``Retry-After`` also pauses every call to the service (the
gate), so a throttling service sees about one call per interval, not one per session."""

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from jlg_pipeline.domain.constants import MAX_EVENT_AGE_SECONDS

RETRY_BUDGET_S = MAX_EVENT_AGE_SECONDS
"""How long after its time a cycle is still retried by the watchdog; past it, the sweep."""
FIRST_WAIT_S = 10.0
MAX_WAIT_S = 600.0
PROBE_S = 30.0
"""How long one caller has to try the service once a pause is over, before another may."""
ONLINE_SESSION_GATE = "online-session"


def retry_wait_s(retry_after_s: float | None, attempt: int) -> float:
    """The wait before a session is tried again: the service's ``Retry-After`` when it said
    one (bounded by MAX_WAIT_S), else FIRST_WAIT_S doubled per attempt, up to MAX_WAIT_S."""
    if retry_after_s is not None:
        return min(max(retry_after_s, 0.0), MAX_WAIT_S)
    return min(FIRST_WAIT_S * float(2 ** max(attempt - 1, 0)), MAX_WAIT_S)


class GateState(StrEnum):
    OPEN = "open"
    """No pause: call."""
    PROBE = "probe"
    """A pause just ended and this caller tries the service first; the others wait for it."""
    CLOSED = "closed"
    """Paused (``until``): do not call."""


@dataclass(frozen=True, slots=True)
class GateVerdict:
    state: GateState
    until: datetime | None = None
    """For CLOSED: when the pause ends."""
