"""Every reading that runs on a timer, at 10,000 and at 10,000,000 sessions (docs/design.md
"Scale"): the /metrics background reading (every 15 s on every web replica), the watchdog's
check (every 15 s), the schedule sync sensor's (every 10 s) and, beside them, a /metrics
scrape through the served app. The history grows (COMPLETED sessions with an attempt record
each, never-scheduled and deleted ones); the backlog (the sessions that hold a time: due,
running and armed for the future) and the pending schedule changes stay the same at both
sizes, as they do in a deployment whose history grows.

    .venv/bin/python -m bench.timing.readings [--small 10000] [--large 10000000] [--strict]
"""

import argparse
import os
import statistics
import time
from collections.abc import Callable

import httpx
from sqlalchemy import Engine, text

from bench.common import (
    JWT_ENV,
    Targets,
    all_met,
    bench_database,
    machine,
    strict_option,
    table,
)
from jlg_pipeline.adapters.database import Bounds, create_engine
from jlg_pipeline.adapters.metrics_snapshot import read_metrics_snapshot
from jlg_pipeline.adapters.queue import SessionQueue
from jlg_pipeline.adapters.schedule_outbox import ScheduleOutbox
from testkit.factories import RUNNING, add_attempts, populate
from testkit.served import start_web, stop_web

DUE = 1000
"""Overdue, claimable sessions at either size: a backlog, not history."""
BACKLOG = 10_000
"""Sessions that hold a time at either size (docs/design.md "Scale"): the due ones, the running
ones and the rest armed for the future."""
PENDING = 200
"""Schedule changes pending at either size."""
RATIO_TARGET = 1.5
LARGE_TARGET_MS = 50.0


def add_pending_changes(engine: Engine, count: int) -> None:
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO jlg_schedule_outbox (program_session_id, version, fire_at,"
                " next_try_at) SELECT id, nextval('jlg_schedule_outbox_version_seq'),"
                " now() + interval '1 day', now() + interval '1 hour'"
                " FROM hdb_program_session WHERE link_generation_status = 'SCHEDULED'"
                " ORDER BY id DESC LIMIT :n ON CONFLICT DO NOTHING"
            ),
            {"n": count},
        )


def readings(engine: Engine) -> dict[str, Callable[[], object]]:
    outbox = ScheduleOutbox(engine)
    queue = SessionQueue(engine)
    return {
        "/metrics background reading": lambda: read_metrics_snapshot(engine),
        "watchdog check": lambda: queue.attendance(60.0),
        "sync sensor check": lambda: (outbox.direct_near(), outbox.due_work()),
    }


def median_ms(read: Callable[[], object], repeat: int) -> float:
    read()
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        read()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def scrape_ms(url: str, count: int) -> float:
    process, base = start_web({**os.environ, "JLG_DATABASE_URL": url, **JWT_ENV})
    try:
        with httpx.Client(base_url=base) as client:
            for _ in range(20):
                client.get("/metrics")
            times = []
            for _ in range(count):
                started = time.perf_counter()
                assert client.get("/metrics").status_code == 200
                times.append(time.perf_counter() - started)
    finally:
        stop_web(process)
    return statistics.median(times) * 1000


def measure(
    url: str, engine: Engine, filler: Engine, repeat: int, scrapes: int
) -> dict[str, float]:
    with filler.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("VACUUM ANALYZE"))
    figures = {name: median_ms(read, repeat) for name, read in readings(engine).items()}
    figures["/metrics scrape (served)"] = scrape_ms(url, scrapes)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--large", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--scrapes", type=int, default=200)
    strict_option(parser)
    args = parser.parse_args()
    targets = Targets()
    with bench_database("jlg_bench_readings") as url:
        engine = create_engine(url)
        # Filling ten million rows takes minutes: no bound on the filler's statements.
        filler = create_engine(url, bounds=Bounds(hold_s=None))
        autocommit = filler.execution_options(isolation_level="AUTOCOMMIT")
        populate(autocommit, args.small, DUE, armed=BACKLOG - DUE - RUNNING)
        add_attempts(filler)
        add_pending_changes(engine, PENDING)
        small = measure(url, engine, filler, args.repeat, args.scrapes)
        started = time.perf_counter()
        populate(autocommit, args.large - args.small, 0, armed=0, running=0)
        add_attempts(filler)
        filled_s = time.perf_counter() - started
        large = measure(url, engine, filler, args.repeat, args.scrapes)
        engine.dispose()
        filler.dispose()
    rows: list[tuple[str, ...]] = []
    for name, small_ms in small.items():
        ratio = large[name] / small_ms
        verdicts = [targets.at_most(f"{name}: large over small", ratio, RATIO_TARGET)]
        if name != "/metrics scrape (served)":
            verdicts.append(
                targets.at_most(f"{name}: ms at {args.large:,}", large[name], LARGE_TARGET_MS)
            )
        rows.append(
            (
                name,
                f"{small_ms:.2f}",
                f"{large[name]:.2f}",
                f"{ratio:.2f}x",
                all_met(verdicts),
            )
        )
    sizes = f"{args.small:,} and {args.large:,} sessions"
    backlog = f"a backlog of {BACKLOG:,} ({DUE:,} due), {PENDING} schedule changes pending"
    fill = f"{machine()}; the large table filled in {filled_s:.0f} s"
    goal = f"targets ≤ {RATIO_TARGET}x and under {LARGE_TARGET_MS:.0f} ms at the large size"
    table(
        f"Timed readings at {sizes}, {backlog} at both ({fill}); {goal}",
        rows,
        (
            "reading",
            f"median ms at {args.small:,}",
            f"median ms at {args.large:,}",
            "large over small",
            "",
        ),
    )
    targets.finish(args.strict)


if __name__ == "__main__":
    main()
