"""/metrics at 10,000 and at 1,000,000 sessions (with an attempt record per generated
session): a scrape's latency through the served app, and, beside it, how long the background
reading of the database's figures takes (it runs every 15 s, never inside a scrape).

    .venv/bin/python -m bench.timing.metrics_scrape [--small 10000] [--large 1000000]
"""

import argparse
import os
import statistics
import time

import httpx
from sqlalchemy import Engine, text

from bench.common import bench_database, machine, table
from bench.timing.front_door import JWT_ENV, serve
from bench.timing.sweep_query import populate
from jlg_pipeline.adapters.database import create_engine
from jlg_pipeline.adapters.metrics_snapshot import read_metrics_snapshot


def add_attempts(engine: Engine) -> None:
    """An attempt record per COMPLETED or FAILED session, claimed up to an hour late."""
    with engine.begin() as conn:
        conn.execute(
            text(
                """
                INSERT INTO jlg_generation_attempt (program_session_id, attempt, trigger,
                    link_generation_at, claimed_at, finished_at, outcome)
                SELECT id, 1, (ARRAY['event', 'cron', 'direct'])[1 + id % 3], link_generation_at,
                       link_generation_at + make_interval(secs => (id % 3600)::int),
                       link_generation_at + make_interval(secs => (id % 3600)::int + 5),
                       CASE WHEN link_generation_status = 'FAILED' THEN 'FAILED'
                            ELSE 'COMPLETED' END
                FROM hdb_program_session
                WHERE link_generation_status IN ('COMPLETED', 'FAILED')
                  AND link_generation_at IS NOT NULL
                ON CONFLICT DO NOTHING
                """
            )
        )
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("VACUUM ANALYZE"))


def scrape(base: str, count: int) -> tuple[float, float]:
    latencies = []
    with httpx.Client(base_url=base) as client:
        for _ in range(20):
            client.get("/metrics")
        for _ in range(count):
            started = time.perf_counter()
            assert client.get("/metrics").status_code == 200
            latencies.append(time.perf_counter() - started)
    latencies.sort()
    return statistics.median(latencies), latencies[int(len(latencies) * 0.99)]


def measure(url: str, engine: Engine, scrapes: int) -> tuple[float, float, float]:
    reads = []
    for _ in range(3):
        started = time.perf_counter()
        read_metrics_snapshot(engine)
        reads.append(time.perf_counter() - started)
    env = {**os.environ, "JLG_DATABASE_URL": url, **JWT_ENV}
    process, base = serve("web.app:create_app", env)
    try:
        median, p99 = scrape(base, scrapes)
    finally:
        process.terminate()
        process.wait(timeout=10)
    return median, p99, min(reads)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--large", type=int, default=1_000_000)
    parser.add_argument("--scrapes", type=int, default=300)
    args = parser.parse_args()
    rows: list[tuple[str, ...]] = []
    results = {}
    with bench_database("jlg_bench_metrics") as url:
        engine = create_engine(url)
        autocommit = engine.execution_options(isolation_level="AUTOCOMMIT")
        populate(autocommit, args.small, args.small // 200)
        add_attempts(engine)
        results[args.small] = measure(url, engine, args.scrapes)
        populate(autocommit, args.large - args.small, args.large // 200)
        add_attempts(engine)
        results[args.large] = measure(url, engine, args.scrapes)
        engine.dispose()
    base_median = results[args.small][0]
    for size, (median, p99, read) in results.items():
        rows.append(
            (
                f"{size:,}",
                f"{median * 1000:.2f}",
                f"{p99 * 1000:.2f}",
                f"{median / base_median:.2f}x",
                f"{read * 1000:.0f}",
            )
        )
    table(
        f"/metrics scrape vs table size ({args.scrapes} scrapes each, {machine()})",
        rows,
        (
            "sessions",
            "scrape median ms",
            "scrape p99 ms",
            "median vs smallest (target ≤ 1.5x)",
            "background reading ms (every 15 s)",
        ),
    )


if __name__ == "__main__":
    main()
