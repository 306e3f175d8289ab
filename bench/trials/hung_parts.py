"""Hung parts and crashed hosts, through the real daemon and the served app: admins arm
sessions through the API for several minutes while one fault at a time hits the system, and
we count, per fault, the sessions generated within 2 minutes of their time.

    .venv/bin/python -m bench.trials.hung_parts [--sessions 200] [--arm-seconds 660] [--keep DIR]
        [--strict]

The whole system runs as deployed on one machine: the web app under uvicorn, dagster-daemon
(with its code server and run workers) on the repository's dagster.yaml, the application
database on a private PostgreSQL (so it can be restarted), Dagster's storage on the local
server, and a moto server for AWS behind a TCP fault box that both the app and the daemon
go through (EventBridge's own delivery, the stand-in, talks to moto directly). Each session
is armed 150-180 s ahead, so it goes through EventBridge Scheduler, SQS and the sensor.

Timeline (seconds from the first PATCH), one fault at a time:
- 60-240: AWS silent: the fault box accepts connections and never answers (scheduler and SQS);
- 390: the daemon's whole process group (daemon, code server, run workers) SIGKILLed, restarted
  30 s later;
- 570: the application's PostgreSQL restarted (fast: every connection cut);
- 660: the first run worker to start after this is SIGKILLed before its op runs.

Reported per fault (sessions armed or due while it lasted, up to a minute after): share
COMPLETED within 2 minutes of the time (the completed attempt's end), worst lateness,
sessions generated twice, admin GET p99 against the healthy phase, and 5xx answers (503, the
database unavailable, counted apart; a refused PATCH is tried again as an admin would, and
only an accepted one arms its session); each fault's target: all of them on time, none
twice, p99 at most twice the healthy phase's, no 5xx but 503.
"""

import argparse
import contextlib
import os
import random
import shutil
import signal
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
from sqlalchemy import text

from bench.common import (
    JWT_ENV,
    ROOT,
    Targets,
    admin_headers,
    all_met,
    bench_database,
    machine,
    moto_process,
    strict_option,
    table,
)
from devstack.eventbridge import EventBridgeStandIn
from devstack.system import Children, aws_env, start_daemon, system_env
from jlg_pipeline.adapters.database import create_engine
from jlg_pipeline.migrate import migrate
from testkit.factories import NOT_SCHEDULED, add_registrations, create_sessions
from testkit.fault_proxy import FaultProxy, Mode
from testkit.postgres import own_server
from testkit.processes import run_worker_pids
from testkit.served import start_web

ON_TIME = timedelta(minutes=2)
# Each fault starts once the one before has been recovered from (the watchdog's 75 s grace
# and a run's start after it), so each row counts one fault.
SILENT = (60.0, 240.0)
DAEMON_KILL, DAEMON_DOWN_S = 390.0, 30.0
PG_RESTART = 570.0
WORKER_KILL = 660.0
AFTER_S = 60.0


@dataclass
class Record:
    armed: dict[int, tuple[float, datetime]] = field(default_factory=dict)
    """session -> (seconds into the trial when armed, its time)."""
    reads: list[tuple[float, float, int]] = field(default_factory=list)
    """(seconds into the trial, latency, status) of the admin's reads."""
    patches: list[tuple[float, float, int]] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    triggers: dict[int, str] = field(default_factory=dict)
    """session -> the trigger of its COMPLETED attempt."""


def run(
    sessions: int, arm_seconds: float, home: Path
) -> tuple[Record, dict[int, tuple[datetime, int]]]:
    record = Record()
    with (
        own_server() as postgres,
        bench_database("jlg_bench_hung_dagster", migrated=False) as dagster_url,
        moto_process() as aws,
    ):
        url = postgres.url
        migrate(url)
        engine = create_engine(url)
        add_registrations(engine, 1, 25)
        ids = create_sessions(engine, sessions, at_offset=None, status=NOT_SCHEDULED)
        box = FaultProxy(int(aws.endpoint_url.rsplit(":", 1)[1]))
        box_url = f"http://127.0.0.1:{box.port}"
        env = system_env(
            home,
            dagster_url,
            url,
            **aws_env(aws, box_url),
            ENABLE_JOIN_LINK_SCHEDULER="true",
            ENABLE_JOIN_LINK_FALLBACK_CRON="true",
            JLG_REGISTRAR="local",
            **JWT_ENV,
        )
        standin = EventBridgeStandIn(aws.client("scheduler"), aws.client("sqs"))
        standin.start()
        children = Children()
        web, base = start_web(env, log=home / "web.log")
        pgid = start_daemon(children, env, home / "daemon.log")
        time.sleep(20)  # the daemon loads the code location
        started = time.monotonic()
        record.started_at = datetime.now(UTC)
        stop = threading.Event()

        def now() -> float:
            return time.monotonic() - started

        def read() -> None:
            rng = random.Random(3)
            with httpx.Client(base_url=base, headers=admin_headers(), timeout=60) as http:
                while not stop.is_set():
                    path = f"/program-session/{rng.choice(ids)}/link-generation"
                    at = time.monotonic()
                    status = http.get(path).status_code
                    record.reads.append((now(), time.monotonic() - at, status))
                    stop.wait(0.2)

        def faults() -> None:
            nonlocal pgid
            stop.wait(SILENT[0])
            box.mode = Mode.SILENT
            record.events.append(f"{now():.0f} s: AWS silent")
            stop.wait(SILENT[1] - now())
            box.mode = Mode.PASSING
            record.events.append(f"{now():.0f} s: AWS answers again")
            stop.wait(DAEMON_KILL - now())
            in_flight = len(run_worker_pids(pgid))
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)
            record.events.append(f"{now():.0f} s: daemon group SIGKILLed ({in_flight} workers)")
            stop.wait(DAEMON_DOWN_S)
            children.processes.pop("dagster-daemon", None)
            pgid = start_daemon(children, env, home / "daemon-2.log")
            record.events.append(f"{now():.0f} s: daemon restarted")
            stop.wait(PG_RESTART - now())
            postgres.restart()
            record.events.append(f"{now():.0f} s: PostgreSQL restarted")
            stop.wait(WORKER_KILL - now())
            before = run_worker_pids(pgid)
            deadline = time.monotonic() + 120
            while not stop.is_set() and time.monotonic() < deadline:
                fresh = run_worker_pids(pgid) - before
                if fresh:
                    os.kill(min(fresh), signal.SIGKILL)
                    record.events.append(f"{now():.0f} s: a starting run worker SIGKILLed")
                    return
                time.sleep(0.02)

        threads = [threading.Thread(target=read), threading.Thread(target=faults)]
        for thread in threads:
            thread.start()
        try:
            with httpx.Client(base_url=base, headers=admin_headers(), timeout=60) as http:
                rng = random.Random(11)
                for i, sid in enumerate(ids):
                    stop.wait(max(i * arm_seconds / sessions - now(), 0))
                    at = datetime.now(UTC) + timedelta(seconds=150 + rng.random() * 30)
                    for _ in range(PATCH_TRIES):
                        began = time.monotonic()
                        status = http.patch(
                            f"/program-session/{sid}/link-generation",
                            json={"linkGenerationAt": at.isoformat()},
                        ).status_code
                        record.patches.append((now(), time.monotonic() - began, status))
                        if status == 200:
                            record.armed[sid] = (now(), at)
                            break
                        if stop.wait(PATCH_RETRY_S):
                            break
            last = max(at for _, at in record.armed.values())
            while datetime.now(UTC) < last + ON_TIME + timedelta(seconds=30):
                time.sleep(5)
        finally:
            stop.set()
            for thread in threads:
                thread.join(timeout=180)
            web.terminate()
            web.wait(timeout=30)
            children.stop()
            standin.stop()
        with engine.connect() as conn:
            # When each session was COMPLETED (its completed attempt's end), and how many
            # bulkRegister jobs it had.
            jobs = {
                sid: (finished, count)
                for sid, finished, count in conn.execute(
                    text(
                        "SELECT a.program_session_id, a.finished_at,"
                        " (SELECT count(*) FROM jlg_local_bulk_job j"
                        "  WHERE j.program_session_id = a.program_session_id)"
                        " FROM jlg_generation_attempt a WHERE a.outcome = 'COMPLETED'"
                    )
                ).all()
            }
            record.triggers = dict(
                conn.execute(
                    text(
                        "SELECT program_session_id, trigger FROM jlg_generation_attempt"
                        " WHERE outcome = 'COMPLETED'"
                    )
                ).all()
            )
        engine.dispose()
    return record, jobs


PATCH_TRIES = 30
PATCH_RETRY_S = 2.0
"""An admin whose PATCH was refused (a 503 while the database restarts) tries again this long
after, up to PATCH_TRIES times; only an accepted PATCH arms its session."""
P99_TARGET = 2.0
"""Admin GET p99 during a fault, at most this many times the healthy phase's."""


def report(
    record: Record, jobs: dict[int, tuple[datetime, int]], targets: Targets
) -> list[tuple[str, ...]]:
    windows = {
        "AWS silent 3 min": SILENT,
        "daemon + code server SIGKILLed, back 30 s later": (
            DAEMON_KILL,
            DAEMON_KILL + DAEMON_DOWN_S,
        ),
        "PostgreSQL restarted": (PG_RESTART, PG_RESTART + 5),
        "a run worker killed before its op": (WORKER_KILL, WORKER_KILL + 30),
    }
    healthy = [lat for t, lat, _ in record.reads if t < SILENT[0]]
    rows: list[tuple[str, ...]] = []
    for name, (start, end) in windows.items():
        hit = [
            sid
            for sid, (armed_s, at) in record.armed.items()
            if start <= armed_s <= end + AFTER_S
            or start <= (at - record.started_at).total_seconds() <= end + AFTER_S
        ]
        late = [
            (jobs[sid][0] - record.armed[sid][1]).total_seconds() if sid in jobs else None
            for sid in hit
        ]
        on_time = sum(1 for lag in late if lag is not None and lag <= ON_TIME.total_seconds())
        never = sum(1 for lag in late if lag is None)
        worst = max((lag for lag in late if lag is not None), default=0.0)
        twice = sum(1 for sid in hit if sid in jobs and jobs[sid][1] > 1)
        during = [lat for t, lat, _ in record.reads if start <= t <= end + AFTER_S]
        errors, unavailable = _server_errors(record, start, end + AFTER_S)
        p99_ratio = _p99(during) / max(_p99(healthy), 1e-9)
        verdicts = [
            targets.at_least(f"{name}: on time", on_time, len(hit)),
            targets.at_most(f"{name}: twice", twice, 0),
            targets.at_most(f"{name}: admin GET p99 vs healthy", p99_ratio, P99_TARGET),
            targets.at_most(f"{name}: 5xx other than 503", errors, 0),
        ]
        rows.append(
            (
                name,
                str(len(hit)),
                f"{on_time}/{len(hit)} ({100 * on_time / max(len(hit), 1):.0f} %)",
                f"{worst:.0f} s" + (f", {never} never" if never else ""),
                str(twice),
                f"{p99_ratio:.2f}x ({_p99(during) * 1000:.0f} vs {_p99(healthy) * 1000:.0f} ms)",
                f"{errors} ({unavailable})",
                all_met(verdicts),
            )
        )
    total_on_time = sum(
        1 for sid, (_, at) in record.armed.items() if sid in jobs and (jobs[sid][0] - at) <= ON_TIME
    )
    rows.append(
        (
            "all sessions",
            str(len(record.armed)),
            f"{total_on_time}/{len(record.armed)}",
            "",
            str(sum(1 for first, count in jobs.values() if count > 1)),
            "",
            "{} ({})".format(*_server_errors(record, 0, float("inf"))),
            "",
        )
    )
    return rows


def _server_errors(record: Record, start: float, end: float) -> tuple[int, int]:
    """(5xx other than 503, 503s) the admin got between ``start`` and ``end`` s: the API says
    503 while the database is unavailable, and anything else would be a defect."""
    statuses = [s for t, _, s in record.reads + record.patches if start <= t <= end]
    return sum(1 for s in statuses if s >= 500 and s != 503), statuses.count(503)


def late_sessions(record: Record, jobs: dict[int, tuple[datetime, int]]) -> list[str]:
    """Each session generated more than 2 minutes late (or never): when it was armed, its
    time, how late and which trigger generated it, to say what made it late."""
    lines = []
    for sid, (armed_s, at) in sorted(record.armed.items()):
        lag = (jobs[sid][0] - at).total_seconds() if sid in jobs else None
        if lag is None or lag > ON_TIME.total_seconds():
            due_s = (at - record.started_at).total_seconds()
            shown = "never" if lag is None else f"{lag:.0f} s late"
            lines.append(
                f"session {sid}: armed at {armed_s:.0f} s, due at {due_s:.0f} s, {shown}, "
                f"by {record.triggers.get(sid, '-')}"
            )
    return lines


def _p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[-1] if len(values) >= 2 else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--arm-seconds", type=float, default=660)
    parser.add_argument("--keep", type=Path, help="copy the processes' logs here")
    strict_option(parser)
    args = parser.parse_args()
    targets = Targets()
    (ROOT / ".data").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="jlg-bench-hung-", dir=ROOT / ".data") as home:
        record, jobs = run(args.sessions, args.arm_seconds, Path(home))
        print("\n".join(record.events))
        print("\n".join(late_sessions(record, jobs)))
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
            for log in Path(home).glob("*.log"):
                shutil.copy(log, args.keep / log.name)
        table(
            f"Hung parts and crashed hosts ({machine()})",
            report(record, jobs, targets),
            (
                "fault",
                "sessions",
                "COMPLETED within 2 min",
                "worst lateness",
                "twice",
                "admin GET p99 vs healthy",
                "5xx but 503 (503)",
                f"all on time, 0 twice, p99 ≤ {P99_TARGET:g}x, 0 5xx but 503",
            ),
        )
        targets.finish(args.strict)


if __name__ == "__main__":
    main()
