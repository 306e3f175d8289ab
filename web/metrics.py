"""Prometheus metrics: requests by route and status, latency, and the database's figures
(sessions by status, overdue sessions, attempts and their lateness, the schedule backlog),
read in the background. One registry per app."""

import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from jlg_pipeline.adapters.metrics_snapshot import MetricsSnapshot
from jlg_pipeline.adapters.orchestrator_health import OrchestratorSnapshot
from jlg_pipeline.domain.lanes import Lane
from jlg_pipeline.domain.status import ARMED_STATUSES
from jlg_pipeline.log import log_event

logger = logging.getLogger(__name__)
T = TypeVar("T")
REFRESH_S = 15.0
"""How old the database's figures on /metrics may be (docs/design.md: at most 15 s)."""

# A label takes only these values: a method as sent would let any client mint new series.
STANDARD_METHODS = frozenset(
    {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "CONNECT"}
)


class Reading(Generic[T]):
    """One source's figures, read by :class:`BackgroundReadings` and rendered by ``render``
    from the last successful reading. Nothing is shown before the first (no figure the
    source never gave); a failed reading keeps the previous one, and the source's
    ``..._reading_timestamp_seconds`` says how old it is, so an alert can tell a stale reading
    from a calm one."""

    def __init__(
        self, name: str, read: Callable[[], T], render: Callable[[T, float], Iterator[Metric]]
    ) -> None:
        self.name = name
        self._read = read
        self._render = render
        self._last: tuple[T, float] | None = None

    def refresh(self) -> None:
        try:
            self._last = (self._read(), time.time())
        except Exception as exc:  # noqa: BLE001 - keep serving the last reading
            log_event(
                logger,
                logging.WARNING,
                "metrics.refresh_failed",
                source=self.name,
                error=type(exc).__name__,
            )

    def collect(self) -> Iterator[Metric]:
        if self._last is not None:
            yield from self._render(*self._last)


class BackgroundReadings(Collector):
    """The figures read from the database and the orchestrator, by one background thread
    every ``refresh_s`` seconds; a scrape renders the last readings, so its cost does not
    grow with the tables (or with a source that hangs: each reading is bounded by its
    engine's statement deadline)."""

    def __init__(self, readings: list[Reading[Any]], refresh_s: float) -> None:
        self.readings = readings
        self._refresh_s = refresh_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def refresh(self) -> None:
        for reading in self.readings:
            reading.refresh()

    def start(self) -> None:
        self.refresh()
        self._thread = threading.Thread(target=self._loop, name="metrics-refresh", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _loop(self) -> None:
        while not self._stop.wait(self._refresh_s):
            self.refresh()

    def collect(self) -> Iterator[Metric]:
        for reading in self.readings:
            yield from reading.collect()


def database_figures(snapshot: MetricsSnapshot, read_at: float) -> Iterator[Metric]:
    yield GaugeMetricFamily(
        "jlg_database_reading_timestamp_seconds",
        "Unix time of the last successful reading of the database's figures below: alert "
        "when it falls behind (they are then as old as it says)",
        value=read_at,
    )
    sessions = GaugeMetricFamily(
        "jlg_program_sessions",
        "Program sessions (not soft-deleted) that hold a time, by link-generation status "
        "(SCHEDULED, IN_PROGRESS, FAILED)",
        labels=["status"],
    )
    for status in ARMED_STATUSES:
        sessions.add_metric([status.value], snapshot.by_status.get(status.value, 0))
    yield sessions
    yield GaugeMetricFamily(
        "jlg_overdue_sessions",
        "Sessions SCHEDULED, FAILED or IN_PROGRESS whose time passed more than 5 minutes "
        "ago: alert on this",
        value=snapshot.overdue,
    )
    attempts = CounterMetricFamily(
        "jlg_generation_attempts",
        "Closed generation attempts (claims) by trigger and outcome; a closed outcome "
        "never changes, so these only grow",
        labels=["trigger", "outcome"],
    )
    for (trigger, outcome), count in sorted(snapshot.attempts.items()):
        attempts.add_metric([trigger, outcome], count)
    yield attempts
    set_aside = CounterMetricFamily(
        "jlg_rows_set_aside",
        "Rows a periodic path (schedule_sync, outbox, watchdog, sweep) set aside because acting "
        "on them failed; the rest went on, and each is tried again on its own backoff",
        labels=["path"],
    )
    for path, count in sorted(snapshot.set_aside.items()):
        set_aside.add_metric([path], count)
    yield set_aside
    open_attempts = GaugeMetricFamily(
        "jlg_generation_attempts_open",
        "Generation attempts under way (IN_PROGRESS), by trigger",
        labels=["trigger"],
    )
    for trigger, count in sorted(snapshot.open_attempts.items()):
        open_attempts.add_metric([trigger], count)
    yield open_attempts
    lag = HistogramMetricFamily(
        "jlg_generation_lag_seconds",
        "How late each closed attempt was claimed after its session's time",
    )
    buckets = [(str(bound), count) for bound, count in snapshot.lag_buckets]
    lag.add_metric([], [*buckets, ("+Inf", snapshot.lag_count)], snapshot.lag_sum)
    yield lag
    yield GaugeMetricFamily(
        "jlg_schedule_sync_pending",
        "Schedule changes written but not yet applied to EventBridge (or turned direct)",
        value=snapshot.sync_pending,
    )
    yield GaugeMetricFamily(
        "jlg_schedule_sync_oldest_pending_seconds",
        "Age of the oldest pending schedule change; alert as it nears a fire time",
        value=snapshot.sync_oldest_seconds,
    )
    yield from service_figures(snapshot)


def service_figures(snapshot: MetricsSnapshot) -> Iterator[Metric]:
    """The online-session service's shared view (domain/service_view.py)."""
    look = snapshot.service
    if look is None:
        return
    state, budget = look.state, look.budget
    yield GaugeMetricFamily(
        "jlg_online_session_backlog",
        "Due sessions no live attempt holds: what the online-session service has yet to be "
        "asked for",
        value=snapshot.service_backlog,
    )
    if budget.rate is not None:
        yield GaugeMetricFamily(
            "jlg_online_session_budget_rate",
            "bulkRegister calls a second the rate budget allows (JLG_ONLINE_SESSION_RATE)",
            value=budget.rate,
        )
        yield GaugeMetricFamily(
            "jlg_online_session_budget_tokens",
            "Calls that could start now without waiting for the budget",
            value=state.tokens(budget, look.now) or 0.0,
        )
        yield GaugeMetricFamily(
            "jlg_online_session_backlog_seconds",
            "How long the rate budget takes to drain the backlog: alert past 120 s",
            value=snapshot.service_backlog_seconds or 0.0,
        )
    yield GaugeMetricFamily(
        "jlg_online_session_down",
        "1 while the breaker holds the online-session service down (unwell answers in a row), "
        "else 0",
        value=1.0 if state.down else 0.0,
    )
    yield GaugeMetricFamily(
        "jlg_online_session_paused",
        "1 while a Retry-After pause holds every call, else 0",
        value=1.0 if state.paused_until is not None and state.paused_until > look.now else 0.0,
    )
    if state.changed_at is not None:
        yield GaugeMetricFamily(
            "jlg_online_session_breaker_changed_timestamp_seconds",
            "Unix time the breaker last opened or closed",
            value=state.changed_at.timestamp(),
        )
    if state.resumed_at is not None:
        # Who did is in the log line `service.resumed` (a label would be unbounded).
        yield GaugeMetricFamily(
            "jlg_online_session_resumed_timestamp_seconds",
            "Unix time an operator last cleared the service's pause or breaker "
            "(jlg service resume)",
            value=state.resumed_at.timestamp(),
        )


def orchestrator_figures(snapshot: OrchestratorSnapshot, read_at: float) -> Iterator[Metric]:
    yield GaugeMetricFamily(
        "jlg_dagster_reading_timestamp_seconds",
        "Unix time of the last successful reading of Dagster's storage (the jlg_dagster_* "
        "figures below are as old as it says)",
        value=read_at,
    )
    heartbeats = GaugeMetricFamily(
        "jlg_dagster_daemon_heartbeat_age_seconds",
        "Seconds since each Dagster daemon's last heartbeat: it grows when the daemon "
        "process is gone or stuck (Dagster's UI calls a daemon unhealthy past 60 s)",
        labels=["daemon"],
    )
    for daemon, age in sorted(snapshot.heartbeat_age_s.items()):
        heartbeats.add_metric([daemon], age)
    yield heartbeats
    ages = GaugeMetricFamily(
        "jlg_dagster_tick_age_seconds",
        "Seconds since each sensor's or schedule's last completed tick ended (absent before "
        "its first): a sensor ticks every 10-15 s, a schedule at its cron time",
        labels=["name", "kind"],
    )
    failures = GaugeMetricFamily(
        "jlg_dagster_tick_failures",
        "Failed ticks in a row, up to each sensor's or schedule's last completed one (0: it "
        "last succeeded or skipped)",
        labels=["name", "kind"],
    )
    for instigator in snapshot.instigators:
        labels = [instigator.name, instigator.kind]
        if instigator.tick_age_s is not None:
            ages.add_metric(labels, instigator.tick_age_s)
        failures.add_metric(labels, instigator.consecutive_failures)
    yield ages
    yield failures
    runs = GaugeMetricFamily(
        "jlg_dagster_runs",
        "Dagster runs queued or in progress (starting, started, canceling), by lane",
        labels=["lane", "state"],
    )
    for lane in Lane:
        for state in ("queued", "in_progress"):
            runs.add_metric([lane.value, state], snapshot.runs.get((lane, state), 0))
    yield runs
    yield GaugeMetricFamily(
        "jlg_dagster_oldest_queued_run_age_seconds",
        "Age of the oldest queued run (0 when none waits): runs wait when their lane is full",
        value=snapshot.oldest_queued_s,
    )


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "jlg_http_requests",
            "HTTP requests by route template, method and status",
            ["route", "method", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "jlg_http_request_duration_seconds",
            "HTTP request latency by route template and method",
            ["route", "method"],
            registry=self.registry,
        )

    def watch(
        self, readings: list[Reading[Any]], refresh_s: float = REFRESH_S
    ) -> BackgroundReadings:
        """Register ``readings``, read every ``refresh_s`` seconds; started here, stopped by
        the caller (the app's lifespan)."""
        collector = BackgroundReadings(readings, refresh_s)
        self.registry.register(collector)
        collector.start()
        return collector


class MetricsMiddleware:
    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def record_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, record_status)
        finally:
            route = scope.get("route")
            template = route.path if isinstance(route, Route) else "unmatched"
            method = scope["method"] if scope["method"] in STANDARD_METHODS else "OTHER"
            self.metrics.requests.labels(template, method, str(status)).inc()
            self.metrics.latency.labels(template, method).observe(time.perf_counter() - started)
