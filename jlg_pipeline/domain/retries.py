"""When a retryable failure is tried again, decided in time, not counts (docs/design.md "Whatever
fails"): a session whose bulkRegister failed retryably is re-attempted by the watchdog once
its wait is over, for as long as its cycle is younger than the real-time path's budget (the
TRD's 24 h event age); the wait is a backoff on the attempt number for a failure of its own,
and none for one the service as a whole caused (a pause, the service down: the shared view,
``service_view.py``, holds every caller until it is back)."""

from jlg_pipeline.domain.backoff import backoff_s
from jlg_pipeline.domain.constants import MAX_EVENT_AGE_SECONDS

RETRY_BUDGET_S = MAX_EVENT_AGE_SECONDS
"""How long after its time a cycle is still retried by the watchdog; past it, the sweep."""
FIRST_WAIT_S = 10.0
MAX_WAIT_S = 600.0


def retry_wait_s(attempt: int) -> float:
    """The wait before a session whose own call failed is tried again: FIRST_WAIT_S doubled per
    attempt, up to MAX_WAIT_S (a ``Retry-After`` holds every caller through the shared view
    instead: ``service_view.py``)."""
    return backoff_s(FIRST_WAIT_S, attempt - 1, MAX_WAIT_S)
