"""The orchestrator's health on /metrics, read from Dagster's storage as the real daemon wrote
it: its daemons' heartbeats, its sensors' ticks (a failing one shows) and its runs per lane;
when the daemon dies the heartbeat age grows on the next reading."""

import os
import re
import signal
import time
from collections.abc import Callable

import httpx
import pytest

from tests.e2e.conftest import Stack

pytestmark = pytest.mark.timeout(300)
SQS_SENSOR = 'name="join_link_sqs_sensor"'


def _figures(stack: Stack) -> dict[str, float]:
    """The jlg_dagster_* series of one scrape: series text -> value."""
    text = httpx.get(f"{stack.web_url}/metrics", timeout=10).text
    return {
        series: float(value)
        for series, value in re.findall(r"^(jlg_dagster_\S+) (\S+)$", text, re.MULTILINE)
    }


def _wait_for(
    stack: Stack, test: Callable[[dict[str, float]], bool], timeout: float
) -> dict[str, float]:
    deadline = time.monotonic() + timeout
    figures: dict[str, float] = {}
    while time.monotonic() < deadline:
        figures = _figures(stack)
        if test(figures):
            return figures
        time.sleep(1)
    pytest.fail(f"not seen in {timeout} s: {figures}\n{stack.log_tail()}")


def _one(figures: dict[str, float], metric: str, *labels: str) -> float | None:
    for series, value in figures.items():
        if series.startswith(metric + "{") and all(label in series for label in labels):
            return value
    return None


def test_the_daemon_and_its_sensors_health_is_on_metrics(start_stack: Callable[..., Stack]) -> None:
    stack = start_stack()
    healthy = _wait_for(
        stack,
        lambda f: (
            (_one(f, "jlg_dagster_tick_age_seconds", SQS_SENSOR) or 99) < 30
            and _one(f, "jlg_dagster_daemon_heartbeat_age_seconds", 'daemon="SENSOR"') is not None
        ),
        90,
    )
    assert _one(healthy, "jlg_dagster_tick_failures", SQS_SENSOR) == 0
    assert (_one(healthy, "jlg_dagster_daemon_heartbeat_age_seconds", 'daemon="SENSOR"') or 0) < 60
    assert _one(healthy, "jlg_dagster_runs", 'lane="realtime"', 'state="queued"') == 0
    assert "jlg_dagster_oldest_queued_run_age_seconds" in healthy

    # The sensor's queue disappears: its ticks fail, and say so.
    stack.aws.client("sqs").delete_queue(QueueUrl=stack.aws.queue_url)
    _wait_for(stack, lambda f: (_one(f, "jlg_dagster_tick_failures", SQS_SENSOR) or 0) >= 1, 60)

    # The daemon's whole process group dies: nothing heartbeats any more. A live daemon
    # heartbeats every 30 s, so an age past 45 s is one no live daemon shows.
    os.killpg(stack.daemon_group, signal.SIGKILL)
    stack.children.processes.pop("dagster-daemon").wait(timeout=30)
    # A heartbeat can come up to 30 s before the sensor's last tick, so the tick's age passes
    # 30 s up to 15 s after the heartbeat's passes 45 s: each is waited for.
    _wait_for(
        stack,
        lambda f: (
            (_one(f, "jlg_dagster_daemon_heartbeat_age_seconds", 'daemon="SENSOR"') or 0) > 45
            and (_one(f, "jlg_dagster_tick_age_seconds", SQS_SENSOR) or 0) > 30
        ),
        120,
    )
