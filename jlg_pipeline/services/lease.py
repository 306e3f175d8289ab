"""The lease on a claim: while bulkRegister runs, the attempt renews its claim every third
of the stale window, so however slow the online-session service is, a live attempt is never
taken for a crashed one and reclaimed (inv-01). A killed or stopped process renews nothing,
so its session still goes stale and the sweep takes it over."""

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

from jlg_pipeline.domain.attempts import Claim
from jlg_pipeline.domain.constants import TimingWindows
from jlg_pipeline.log import describe, log_event

logger = logging.getLogger(__name__)

RENEWALS_PER_WINDOW = 3
STOP_WAIT_S = 5.0


class Renewable(Protocol):
    """A store whose claims can be renewed (the repository; the gate's fake in unit tests)."""

    @property
    def windows(self) -> TimingWindows: ...
    def renew(self, claim: Claim) -> bool: ...


@contextmanager
def lease(repository: Renewable, claim: Claim) -> Iterator[None]:
    """Renew ``claim`` in the background for as long as the block runs."""
    interval_s = repository.windows.stale_ms / RENEWALS_PER_WINDOW / 1000
    stop = threading.Event()

    def renew_until_stopped() -> None:
        while not stop.wait(interval_s):
            try:
                if not repository.renew(claim):
                    # A newer attempt holds the session; this one's mark will be fenced out.
                    log_event(
                        logger,
                        logging.WARNING,
                        "lease.lost",
                        session_id=claim.session_id,
                        attempt=claim.attempt,
                    )
                    return
            except Exception as exc:  # noqa: BLE001 - the next renewal may succeed
                log_event(
                    logger,
                    logging.WARNING,
                    "lease.renew_failed",
                    session_id=claim.session_id,
                    attempt=claim.attempt,
                    error=describe(exc),
                )

    renewer = threading.Thread(
        target=renew_until_stopped, name=f"lease-{claim.session_id}", daemon=True
    )
    renewer.start()
    try:
        yield
    finally:
        stop.set()
        # Normally instant (the renewer waits on ``stop``). A renewal still running after the
        # mark changes nothing, being fenced to IN_PROGRESS, so the gate never waits long.
        renewer.join(timeout=min(interval_s, STOP_WAIT_S))
