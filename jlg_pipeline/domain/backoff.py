"""The one backoff: a wait that doubles per failed try, from a first wait up to a cap. Every
retry that backs off asks it here: a session's own failure (``retries.py``), a schedule change
AWS did not take (``schedule_sync.py``), a result the database did not take
(``services/generation.py``), a shared run's session whose result is left to record
(``services/batch.py``). The op's own ``RetryPolicy`` is Dagster's (its ``Backoff``)."""

MAX_DOUBLINGS = 64
"""Past this many, every cap has long been reached (and 2.0 ** n would overflow)."""


def backoff_s(first_s: float, tries: int, cap_s: float) -> float:
    """The wait after ``tries`` failed tries: ``first_s`` for none (or fewer), doubled per try,
    never above ``cap_s``."""
    return min(first_s * 2.0 ** min(max(tries, 0), MAX_DOUBLINGS), cap_s)
