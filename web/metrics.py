"""Prometheus metrics: requests by route and status, latency, and sessions by status
(so a growing FAILED count can alert; TRD OQ-JLG-103). One registry per app."""

import time
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from jlg_pipeline.domain.status import LinkGenerationStatus

# A label takes only these values: a method as sent would let any client mint new series.
STANDARD_METHODS = frozenset(
    {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "CONNECT"}
)


class SessionStatusCollector(Collector):
    """Reads the counts at scrape time, so the gauge is never stale."""

    def __init__(self, count_by_status: Callable[[], dict[str, int]]) -> None:
        self._count = count_by_status

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "jlg_program_sessions",
            "Program sessions (not soft-deleted) by link-generation status",
            labels=["status"],
        )
        counts = self._count()
        for status in LinkGenerationStatus:
            family.add_metric([status.value], counts.get(status.value, 0))
        yield family


class ScheduleSyncCollector(Collector):
    """The schedule outbox's backlog at scrape time: changes EventBridge has not heard of yet.
    The outbox holds only pending rows, so this reads a small table."""

    def __init__(self, backlog: Callable[[], tuple[int, float]]) -> None:
        self._backlog = backlog

    def collect(self) -> Iterator[GaugeMetricFamily]:
        pending, oldest = self._backlog()
        yield GaugeMetricFamily(
            "jlg_schedule_sync_pending",
            "Schedule changes written but not yet applied to EventBridge (or turned direct)",
            value=pending,
        )
        yield GaugeMetricFamily(
            "jlg_schedule_sync_oldest_pending_seconds",
            "Age of the oldest pending schedule change; alert as it nears a fire time",
            value=oldest,
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

    def watch_sessions(self, count_by_status: Callable[[], dict[str, int]]) -> None:
        self.registry.register(SessionStatusCollector(count_by_status))

    def watch_schedule_sync(self, backlog: Callable[[], tuple[int, float]]) -> None:
        self.registry.register(ScheduleSyncCollector(backlog))


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
