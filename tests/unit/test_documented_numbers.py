"""docs/architecture.md's intervals, windows and bounds are the code's: each sentence that
repeats a number is read here against the constant it names, so changing one without the
other fails. A number the docs give that is not listed here is history (the "before" column)
or an example."""

from collections.abc import Callable
from datetime import timedelta

import pytest

from jlg_pipeline.adapters.metrics_snapshot import OVERDUE_AFTER
from jlg_pipeline.adapters.sqs_queue import DEFAULT_VISIBILITY_TIMEOUT_S
from jlg_pipeline.config import DEFAULT_SQS_SENSOR_INTERVAL_S
from jlg_pipeline.domain import constants, schedule_sync
from jlg_pipeline.domain import retries as session_retries
from jlg_pipeline.domain.constants import WATCHDOG_INTERVAL_S
from jlg_pipeline.orchestration.schedule_sync import SYNC_SENSOR_INTERVAL_S
from jlg_pipeline.orchestration.tags import (
    GENERATION_MAX_RUNTIME_S,
    LONG_MAX_RUNTIME_S,
    SYNC_MAX_RUNTIME_S,
)
from tests.support import ROOT
from web.app import POOL_TIMEOUT_S
from web.metrics import REFRESH_S

ARCHITECTURE = ROOT / "docs" / "architecture.md"


def _s(seconds: float) -> str:
    return f"{seconds:g} s"


def _minutes(seconds: float) -> str:
    minutes = seconds / 60
    assert minutes == int(minutes), f"{seconds} s is not a whole number of minutes"
    return f"{int(minutes)} minute" + ("" if minutes == 1 else "s")


def _hours(seconds: float) -> str:
    hours = seconds / 3600
    assert hours == int(hours), f"{seconds} s is not a whole number of hours"
    return f"{int(hours)} h"


def _td(value: timedelta) -> float:
    return value.total_seconds()


SAYS: list[tuple[str, Callable[[], str]]] = [
    (
        "the watchdog's interval",
        lambda: f"`join_link_watchdog_sensor`, every {_s(WATCHDOG_INTERVAL_S)}",
    ),
    (
        "the watchdog's interval",
        lambda: f"`join_link_watchdog_sensor` (every {_s(WATCHDOG_INTERVAL_S)})",
    ),
    ("the watchdog's grace", lambda: f"due {_s(constants.WATCHDOG_GRACE_MS / 1000)} ago"),
    ("the watchdog's grace", lambda: f"`SCHEDULED` {_s(constants.WATCHDOG_GRACE_MS / 1000)} after"),
    ("the sweep's cron", lambda: f"every {constants.FALLBACK_EVERY_HOURS} hours)"),
    ("the sweep's grace", lambda: f"due {_minutes(constants.GRACE_MS / 1000)} ago"),
    ("the stale window", lambda: f"({_minutes(constants.STALE_MS / 1000)}, the TRD's `STALE_MS`)"),
    ("the due guard", lambda: f"no later than now + {_s(constants.DUE_TOLERANCE_MS / 1000)}"),
    ("the direct path", lambda: f"a time under {_minutes(_td(schedule_sync.DIRECT_WITHIN))} away"),
    ("the visibility timeout", lambda: f"visibility timeout\n({_s(DEFAULT_VISIBILITY_TIMEOUT_S)})"),
    ("the SQS sensor", lambda: f"next tick ({_s(DEFAULT_SQS_SENSOR_INTERVAL_S)} later by default)"),
    (
        "the service's bound",
        lambda: f"`JLG_ONLINE_SESSION_TIMEOUT_S`, {_s(constants.ONLINE_SESSION_TIMEOUT_S)}",
    ),
    (
        "the outbox's backoff",
        lambda: (
            f"({_s(_td(schedule_sync.FIRST_TRY_AFTER))}, then doubling to "
            f"{_minutes(_td(schedule_sync.MAX_BACKOFF))}"
        ),
    ),
    ("the applier's lease", lambda: f"by {_s(_td(schedule_sync.APPLY_LEASE))} at most"),
    ("the sync sensor", lambda: f"(running by default, every {_s(SYNC_SENSOR_INTERVAL_S)})"),
    ("the sync batch", lambda: f"({schedule_sync.SYNC_BATCH_LIMIT} per run)"),
    (
        "the outbox's first try",
        lambda: f"first try is due {_s(_td(schedule_sync.FIRST_TRY_AFTER))} after",
    ),
    ("the admin pool's wait", lambda: f"wait at most {_s(POOL_TIMEOUT_S)} for a pooled connection"),
    (
        "the runs' bounds",
        lambda: (
            f"(sync {SYNC_MAX_RUNTIME_S // 60} min, one session\n  "
            f"{_hours(GENERATION_MAX_RUNTIME_S)}, others {_hours(LONG_MAX_RUNTIME_S)})"
        ),
    ),
    ("the metrics refresh", lambda: f"in a background thread every {_s(REFRESH_S)}"),
    ("the retry budget", lambda: f"under {_hours(session_retries.RETRY_BUDGET_S)} old"),
    (
        "a session's backoff",
        lambda: (
            f"backoff of {_s(session_retries.FIRST_WAIT_S)} doubling per attempt up to\n"
            f"{_minutes(session_retries.MAX_WAIT_S)}"
        ),
    ),
    ("the overdue alert", lambda: f"no join links {_minutes(_td(OVERDUE_AFTER))} after the time"),
]


@pytest.mark.parametrize(("what", "sentence"), SAYS, ids=[w for w, _ in SAYS])
def test_the_architecture_says_the_codes_number(what: str, sentence: Callable[[], str]) -> None:
    text = ARCHITECTURE.read_text()
    expected = sentence()
    assert expected in text, f"docs/architecture.md should say {expected!r} ({what})"
