"""The orchestrator's health as ``/metrics`` shows it: each Dagster daemon's last heartbeat,
each sensor's and schedule's last completed ticks, and the runs queued and under way per lane.

Read by SQL from Dagster's own storage (dagster-postgres' tables), because the daemon whose
health this is cannot be the one to report it, and the admin API does not import Dagster
(tests/unit/test_layering.py). The tables and columns are Dagster's:
tests/integration/test_orchestrator_health.py reads what a real instance of the pinned
version wrote, so an upgrade that changes them fails there first. Every statement is served by
one of Dagster's indexes or reads a table with a row per daemon or instigator, so a reading
costs the same whatever the history's length."""

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine, bindparam, make_url, text
from sqlalchemy.exc import ArgumentError

from jlg_pipeline.adapters.database import APP_DRIVER, create_engine, translate_errors
from jlg_pipeline.domain.errors import ConfigError
from jlg_pipeline.domain.lanes import LANE_TAG

TICKS_READ = 10
"""Completed ticks read per instigator: consecutive failures are counted among these."""
QUEUED = ("QUEUED",)
UNDER_WAY = ("STARTING", "STARTED", "CANCELING")

_HEARTBEATS = text(
    "SELECT daemon_type, EXTRACT(EPOCH FROM (now() AT TIME ZONE 'UTC') - timestamp)"
    " FROM daemon_heartbeats"
)
# Dagster writes tick and heartbeat times in UTC; its instigator rows name their sensor or
# schedule in the serialized origin. The lateral read walks idx_tick_selector_timestamp.
_TICKS = text(
    "SELECT j.job_body, j.job_type, t.status, t.tick_body"
    " FROM jobs j LEFT JOIN LATERAL ("
    "  SELECT status, tick_body FROM job_ticks"
    "  WHERE selector_id = j.selector_id AND status IN ('SUCCESS', 'SKIPPED', 'FAILURE')"
    "  ORDER BY timestamp DESC LIMIT :limit) t ON true"
    " WHERE j.job_type IN ('SENSOR', 'SCHEDULE')"
)
# Dagster writes a run's create_timestamp as UTC without a zone (and reads it so);
# idx_run_status serves the filter.
_RUNS = text(
    "SELECT coalesce(t.value, ''), r.status, count(*),"
    " EXTRACT(EPOCH FROM (now() AT TIME ZONE 'UTC') - min(r.create_timestamp))"
    " FROM runs r LEFT JOIN run_tags t ON t.run_id = r.run_id AND t.key = :lane"
    " WHERE r.status IN :statuses GROUP BY 1, 2"
).bindparams(bindparam("statuses", expanding=True))


@dataclass(frozen=True, slots=True)
class Instigator:
    name: str
    kind: str
    """``sensor`` or ``schedule``."""
    tick_age_s: float | None
    """Seconds since its last completed tick ended; None before the first."""
    consecutive_failures: int
    """Failed ticks in a row, up to the last completed one (0: it last succeeded or skipped)."""


@dataclass(frozen=True, slots=True)
class OrchestratorSnapshot:
    heartbeat_age_s: dict[str, float] = field(default_factory=dict)
    """Daemon type -> seconds since its last heartbeat."""
    instigators: tuple[Instigator, ...] = ()
    runs: dict[tuple[str, str], int] = field(default_factory=dict)
    """(lane, ``queued`` or ``in_progress``) -> runs."""
    oldest_queued_s: float = 0.0
    """Age of the oldest queued run (0 when none is queued)."""


READER_VARIABLE = "JLG_DAGSTER_READER_URL"


def storage_engine(url: str, **options: Any) -> Engine:
    """A read-only engine on Dagster's storage (``JLG_DAGSTER_READER_URL``: a SELECT-only
    role, docs/operations.md "Database roles"; a ``postgresql+psycopg2://`` URL as Dagster's
    own is taken too), driven by psycopg 3 as ours are. Every transaction on it is read-only
    (``default_transaction_read_only``), whatever rights the URL's role has: the admin API
    reads Dagster's storage and never writes it."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise ConfigError(f"{READER_VARIABLE} is not a database URL") from None
    if parsed.get_backend_name() != "postgresql":
        raise ConfigError(f"{READER_VARIABLE} must be a PostgreSQL URL, got {parsed.drivername!r}")
    return create_engine(
        parsed.set(drivername=APP_DRIVER).render_as_string(hide_password=False),
        read_only=True,
        **options,
    )


def read_orchestrator_health(engine: Engine) -> OrchestratorSnapshot:
    with translate_errors("reading the orchestrator's health"), engine.connect() as conn:
        heartbeats = {str(kind): float(age) for kind, age in conn.execute(_HEARTBEATS).all()}
        ticks = conn.execute(_TICKS, {"limit": TICKS_READ}).all()
        now = float(conn.execute(text("SELECT EXTRACT(EPOCH FROM now())")).scalar_one())
        run_rows = conn.execute(_RUNS, {"lane": LANE_TAG, "statuses": [*QUEUED, *UNDER_WAY]}).all()
    runs: dict[tuple[str, str], int] = {}
    oldest = 0.0
    for lane, status, count, age in run_rows:
        state = "queued" if status in QUEUED else "in_progress"
        runs[(lane, state)] = runs.get((lane, state), 0) + int(count)
        if state == "queued":
            oldest = max(oldest, float(age))
    return OrchestratorSnapshot(heartbeats, _instigators(ticks, now), runs, oldest)


def _instigators(rows: Sequence[Any], now: float) -> tuple[Instigator, ...]:
    """One Instigator per sensor or schedule from its rows of (instigator body, type, tick
    status, tick body), newest completed tick first."""
    by_name: dict[str, tuple[str, list[tuple[str, float | None]]]] = {}
    for job_body, job_type, status, tick_body in rows:
        name = str(json.loads(job_body)["origin"]["job_name"])
        kind, ticks = by_name.setdefault(name, (str(job_type).lower(), []))
        if status is not None:
            ended = json.loads(tick_body).get("end_timestamp")
            ticks.append((str(status), None if ended is None else float(ended)))
    found = []
    for name, (kind, ticks) in sorted(by_name.items()):
        failures = 0
        for status, _ in ticks:
            if status != "FAILURE":
                break
            failures += 1
        ended = next((end for _, end in ticks if end is not None), None)
        found.append(
            Instigator(name, kind, None if ended is None else max(now - ended, 0.0), failures)
        )
    return tuple(found)
