"""The TRD's timing and volume constants. Code constants, not environment (TRD §Deployment)."""

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from jlg_pipeline.domain.errors import InvalidInput

FALLBACK_EVERY_HOURS = 4
"""The fallback sweep's cadence (TRD: every 4 hours, on the hour, UTC): the cron below and the
next sweep's time both follow from it."""
FALLBACK_CRON = f"0 */{FALLBACK_EVERY_HOURS} * * *"
FALLBACK_CRON_TIMEZONE = "UTC"


def next_fallback_sweep(now: datetime) -> datetime:
    """The sweep's next start after ``now`` (an aware time), in UTC: the next hour
    FALLBACK_CRON names, on the hour."""
    utc = now.astimezone(UTC)
    hour = utc.hour - utc.hour % FALLBACK_EVERY_HOURS
    return utc.replace(hour=hour, minute=0, second=0, microsecond=0) + timedelta(
        hours=FALLBACK_EVERY_HOURS
    )


GRACE_MS = 30 * 60 * 1000
STALE_MS = 30 * 60 * 1000
FALLBACK_BATCH_LIMIT = 50
MAX_RETRY_ATTEMPTS = 5
MAX_EVENT_AGE_SECONDS = 86_400

# Beyond the TRD (the due guard): EventBridge fires at the minute it was given, and clocks
# differ a little, so a claim may start this much before ``link_generation_at``. An event
# left over from a superseded, later schedule can still not generate early.
DUE_TOLERANCE_MS = 60 * 1000

# Beyond the TRD (the watchdog, docs/design.md "Hung parts and crashed hosts"): a due session no
# live attempt holds is claimed this long after its time, whatever became of its event.
# Longer than the real-time path takes (EventBridge fires within the minute, then the
# sensor and the run's start), short enough to claim within 2 minutes.
LINK_GENERATION_HORIZON = timedelta(days=5 * 365 + 2)
"""How far ahead a session's time may be set (five years): further is a typo, not a schedule,
and a shift of a far time could otherwise store one past year 9999, which no read path can
load. The PATCH and programme actions refuse it with this reason; a shift skips it."""
READABLE_FROM = datetime(1, 1, 2, tzinfo=UTC)
READABLE_UNTIL = datetime(9999, 12, 31, tzinfo=UTC)
"""What a Python read can load, with a day's room for arithmetic: a stored time outside it (the
host's own write, an older release's shift) is read as these bounds and shown as out of range
(``adapters/readable_time.py`` ``ReadableTime``)."""
WATCHDOG_GRACE_MS = 75 * 1000
WATCHDOG_INTERVAL_S = 5
"""How often the watchdog ticks (``orchestration/watchdog.py``); also how often a probe can go
out while the service is down, and how soon after it heals the sessions it held are taken."""
ON_TIME_MS = 2 * 60 * 1000
"""A waiting session is on time while it has been due for at most this long, recovery after
(docs/design.md "One queue"): the TRD's two minutes from a session's time to its links."""
RECOVERY_EVERY = 5
"""Every this many claims of the next waiting session prefer recovery: neither class starves."""

GENERATION_CONCURRENCY = 4
"""Sessions a run of several (a shared run, a sweep, a backfill) generates at once by default
(``JLG_GENERATION_CONCURRENCY``): the bulkRegister calls one run opens at once (the TRD
bounds bulk-job fan-out)."""

ONLINE_SESSION_TIMEOUT_S = 30.0
"""The default bound on one bulkRegister call (``JLG_ONLINE_SESSION_TIMEOUT_S``): the call only
dispatches a job and answers ``{jobId, total}``, and one abandoned at its bound is asked again
under the cycle's ``Idempotency-Key``, so a hung service costs seconds, not minutes."""

DEFAULT_REGISTRAR_BATCH_SIZE = 500
MAX_REGISTRAR_BATCH_SIZE = 10_000
MAX_LAST_ERROR_CHARS = 2_000
BIGINT_MAX = 2**63 - 1
INT_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class TimingWindows:
    """The windows the claim and the sweep use, in milliseconds.

    Production always uses the defaults; tests and the local stack may shorten them
    through configuration so a stale reclaim can be watched in seconds.
    """

    grace_ms: int = GRACE_MS
    stale_ms: int = STALE_MS
    due_tolerance_ms: int = DUE_TOLERANCE_MS
    watchdog_grace_ms: int = WATCHDOG_GRACE_MS

    def __post_init__(self) -> None:
        for name in ("grace_ms", "stale_ms", "due_tolerance_ms", "watchdog_grace_ms"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidInput(f"{name} must be a non-negative integer, got {value!r}")
