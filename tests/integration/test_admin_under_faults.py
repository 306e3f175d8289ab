"""The admin API when its parts fail or lie, on real PostgreSQL and the served app: a silent
EventBridge never holds it, an exhausted pool is 503, no accepted time gives 500 under any
client time zone, the database's clock alone decides "in the future", and /metrics shows
only what it read."""

import socket
import statistics
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, func, select, text, update

import web.app
import web.routes
from jlg_pipeline.adapters.tables import schedule_outbox
from jlg_pipeline.domain.constants import LINK_GENERATION_HORIZON
from jlg_pipeline.domain.status import LinkGenerationStatus
from testkit.factories import create_session, session_row
from tests.integration.test_schedule_sync import _schedule, _sync
from tests.support.served import served_app
from tests.support.web import (
    ROLE_ARN,
    Aws,
    admin_headers,
    client_for,
    settings_for,
)

S = LinkGenerationStatus


class SilentEndpoint:
    """A TCP endpoint that accepts every connection and never answers: a hung AWS."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._held: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        self._listener.settimeout(0.2)
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self._held.append(conn)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        for conn in self._held:
            conn.close()
        self._listener.close()


@pytest.fixture
def silent_aws() -> Iterator[SilentEndpoint]:
    endpoint = SilentEndpoint()
    try:
        yield endpoint
    finally:
        endpoint.close()


def _p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[-1]


def test_a_silent_eventbridge_never_holds_the_admin(
    engine: Engine, db_url: str, aws: Aws, silent_aws: SilentEndpoint, tmp_path: Path
) -> None:
    """4 PATCH/s for 15 s against the app served by uvicorn while EventBridge accepts and
    never answers: every PATCH 200, reads and /readyz stay fast, nothing is 5xx; once AWS
    answers again the sync applies every session's newest change."""
    sessions = [create_session(engine) for _ in range(20)]
    with served_app(
        db_url,
        tmp_path / "web.log",
        ENABLE_JOIN_LINK_SCHEDULER="true",
        AWS_SCHEDULER_TARGET_QUEUE_ARN=aws.queue_arn,
        AWS_SCHEDULER_EXECUTION_ROLE_ARN=ROLE_ARN,
        AWS_ENDPOINT_URL=silent_aws.url,
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_DEFAULT_REGION="us-east-1",
    ) as (url, _, _):
        patches: list[int] = []
        reads: list[tuple[str, int, float]] = []
        newest: dict[int, datetime] = {}
        stop = threading.Event()

        def read_all() -> None:
            with httpx.Client(base_url=url, headers=admin_headers(), timeout=30) as http:
                while not stop.is_set():
                    for path in (f"/program-session/{sessions[0]}/link-generation", "/readyz"):
                        started = time.monotonic()
                        status = http.get(path).status_code
                        reads.append((path, status, time.monotonic() - started))
                    stop.wait(0.1)

        def patch(i: int, client: httpx.Client) -> None:
            sid = sessions[i % len(sessions)]
            at = datetime.now(UTC).replace(microsecond=0) + timedelta(days=1, minutes=i)
            newest[sid] = at
            response = client.patch(
                f"/program-session/{sid}/link-generation", json={"linkGenerationAt": at.isoformat()}
            )
            patches.append(response.status_code)

        reader = threading.Thread(target=read_all)
        reader.start()
        try:
            with httpx.Client(base_url=url, headers=admin_headers(), timeout=60) as client:
                threads = []
                for i in range(60):
                    thread = threading.Thread(target=patch, args=(i, client))
                    thread.start()
                    threads.append(thread)
                    time.sleep(0.25)
                for thread in threads:
                    thread.join(timeout=60)
        finally:
            stop.set()
            reader.join(timeout=60)

    assert patches == [200] * 60
    assert all(status < 500 for _, status, _ in reads), sorted({s for _, s, _ in reads})
    for path in (f"/program-session/{sessions[0]}/link-generation", "/readyz"):
        latencies = [seconds for p, _, seconds in reads if p == path]
        assert len(latencies) > 50
        assert _p95(latencies) <= 1.0, f"{path}: p95 {_p95(latencies):.2f} s"
    with engine.connect() as conn:
        pending = conn.execute(select(func.count()).select_from(schedule_outbox)).scalar_one()
    assert pending == len(sessions), "every change is still pending, none lost"
    # The app stopped with calls still hanging: their leases end APPLY_LEASE later (what an
    # applier that dies holding a change costs, tested on its own); let that time pass.
    with engine.begin() as conn:
        conn.execute(update(schedule_outbox).values(leased_until=text("now() - interval '1 s'")))

    _sync(engine, aws).sync()

    for sid, at in newest.items():
        schedule = _schedule(aws, sid)
        assert schedule is not None
        assert schedule["ScheduleExpression"] == f"at({at:%Y-%m-%dT%H:%M:%S})"


def test_an_exhausted_pool_is_503(
    db_url: str, aws: Aws, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    sid = create_session(engine)
    monkeypatch.setattr(web.app, "POOL_TIMEOUT_S", 0.3)
    with client_for(settings_for(db_url, aws.queue_arn)) as http:
        held = [http.app.state.engine.connect() for _ in range(10)]  # type: ignore[attr-defined]
        try:
            response = http.get(f"/program-session/{sid}/link-generation", headers=admin_headers())
            assert response.status_code == 503, response.text
            assert response.json()["error"]["message"] == (
                "the database is unavailable; try again shortly"
            )
            # Readiness asks the database on a connection of its own: a busy pool is not an
            # unavailable database.
            assert http.get("/readyz").status_code == 200
        finally:
            for conn in held:
                conn.close()
        assert http.get("/readyz").status_code == 200


def test_a_far_future_time_is_200_or_400_whatever_the_client_time_zone(
    db_url: str, aws: Aws, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Within the horizon it is stored and shown; past it (year 9999 once loaded as 10000 in a
    client time zone east of UTC) it is refused with the reason, never a 500."""
    monkeypatch.setenv("PGTZ", "Asia/Tokyo")
    sid = create_session(engine)
    with client_for(settings_for(db_url, aws.queue_arn), aws.scheduler) as http:
        path = f"/program-session/{sid}/link-generation"
        body = {"linkGenerationAt": "9999-12-31T23:59:59Z"}
        response = http.patch(path, headers=admin_headers(), json=body)
        assert response.status_code == 400, response.text
        far = (datetime.now(UTC) + LINK_GENERATION_HORIZON - timedelta(days=1)).replace(
            hour=23, minute=59, second=59, microsecond=0
        )
        body = {"linkGenerationAt": far.isoformat().replace("+00:00", "Z")}
        response = http.patch(path, headers=admin_headers(), json=body)
        assert response.status_code == 200, response.text
        assert response.json()["data"]["linkGenerationAt"] == body["linkGenerationAt"].replace(
            "Z", ".000Z"
        )
        assert http.get(path, headers=admin_headers()).status_code == 200
        listing = http.get("/program-session/link-generation", headers=admin_headers())
        assert listing.status_code == 200


def _skew_every_clock(monkeypatch: pytest.MonkeyPatch, skew: timedelta) -> list[str]:
    """Make every module of the app that reads ``datetime.now`` read a clock ``skew`` off the
    database's (what an app host with a wrong clock reads); the modules so skewed."""

    class Skewed(datetime):
        @classmethod
        def now(cls, tz: Any = None) -> Any:
            return datetime.now(tz) + skew

    skewed = []
    for name, module in list(sys.modules.items()):
        if (
            name.split(".")[0] in ("jlg_pipeline", "web")
            and getattr(module, "datetime", None) is datetime
        ):
            monkeypatch.setattr(module, "datetime", Skewed)
            skewed.append(name)
    return skewed


@pytest.mark.parametrize("skew", [timedelta(hours=-1), timedelta(hours=1)])
def test_the_database_clock_alone_decides_in_the_future(
    db_url: str, aws: Aws, engine: Engine, monkeypatch: pytest.MonkeyPatch, skew: timedelta
) -> None:
    """The app host's clock is an hour off: a time just past is still refused, one just ahead
    is still accepted, as the clock that decides "due" (the database's) says."""
    skewed = _skew_every_clock(monkeypatch, skew)
    assert "jlg_pipeline.services.program_session" in skewed, skewed
    sid = create_session(engine)
    path = f"/program-session/{sid}/link-generation"
    with client_for(settings_for(db_url, aws.queue_arn), aws.scheduler) as http:
        past = datetime.now(UTC) - timedelta(seconds=30)
        refused = http.patch(
            path, headers=admin_headers(), json={"linkGenerationAt": past.isoformat()}
        )
        assert refused.status_code == 400
        assert "in the future" in refused.json()["error"]["message"]
        ahead = datetime.now(UTC) + timedelta(minutes=5)
        accepted = http.patch(
            path, headers=admin_headers(), json={"linkGenerationAt": ahead.isoformat()}
        )
        assert accepted.status_code == 200, accepted.text
    assert session_row(engine, sid)["link_generation_at"] is not None


def test_metrics_show_no_figure_they_did_not_read(db_url: str, aws: Aws, engine: Engine) -> None:
    down = settings_for("postgresql+psycopg://postgres@127.0.0.1:1/none", aws.queue_arn)
    with client_for(down) as http:
        text_down = http.get("/metrics").text
    assert "jlg_program_sessions" not in text_down
    assert "jlg_overdue_sessions" not in text_down
    assert "jlg_database_reading_timestamp_seconds" not in text_down
    assert "jlg_http_requests" in text_down

    with client_for(settings_for(db_url, aws.queue_arn)) as http:
        before = time.time()
        figures = http.app.state.figures  # type: ignore[attr-defined]
        figures.refresh()
        lines = _metric_lines(http.get("/metrics").text)
        read_at = float(lines["jlg_database_reading_timestamp_seconds"])
        assert before <= read_at <= time.time()
        assert "jlg_overdue_sessions" in lines
        [database] = [r for r in figures.readings if r.name == "database"]
        database._read = _raise  # the database goes away
        time.sleep(0.05)
        figures.refresh()
        stale = _metric_lines(http.get("/metrics").text)
    assert float(stale["jlg_database_reading_timestamp_seconds"]) == read_at, "its age shows"


def _raise() -> Any:
    raise ConnectionError("database gone")


def _metric_lines(body: str) -> dict[str, str]:
    return dict(
        line.rsplit(" ", 1) for line in body.splitlines() if line and not line.startswith("#")
    )
