"""The one place services and orchestration wait: a bounded retry, on the one backoff
(``domain/backoff.py``), for a dependency to come back within its bound. Every other wait is a
not-before time the queue honours (``link_generation_retry_at``) or the shared view's
(``adapters/service_view.py``)."""

import math
import time
from collections.abc import Callable, Iterator

from jlg_pipeline.domain.backoff import backoff_s


def tries(
    first_s: float,
    cap_s: float = math.inf,
    *,
    at_most: int | None = None,
    within_s: float | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[int]:
    """Try numbers 0, 1, 2, … for a caller's loop, which breaks (or returns) once a try
    succeeds. Between two tries it sleeps the backoff from ``first_s`` up to ``cap_s``; it
    ends after ``at_most`` tries, or once ``within_s`` seconds from the first have passed (a
    sleep never runs past that bound). A loop that runs out has failed every try."""
    deadline = None if within_s is None else time.monotonic() + within_s
    number = 0
    while True:
        yield number
        if at_most is not None and number + 1 >= at_most:
            return
        wait = backoff_s(first_s, number, cap_s)
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            wait = min(wait, remaining)
        sleep(wait)
        number += 1
