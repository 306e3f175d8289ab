"""Front-door benchmark: PATCH link-generation under an open-loop load generator in a second
process, at fixed rates, against the real app (auth, validation, envelope, metrics, schedule
upsert to a local moto server) and against a bare Starlette endpoint doing the same single
UPDATE, both with the same uvicorn settings and worker count (one unless --workers).

Both servers run side by side and take turns (app, bare, app, bare, …, ``--rounds`` each per
rate), so a noisy moment of the machine falls on both rather than on one.

    .venv/bin/python -m bench.timing.front_door [--rates 25,50,100,150] [--seconds 8]
        [--rounds 3] [--workers 1]
"""

import argparse
import asyncio
import statistics
from collections.abc import Awaitable
from datetime import UTC, datetime, timedelta

import httpx

from bench.common import (
    JWT_ENV,
    Targets,
    admin_headers,
    bench_database,
    machine,
    moto_process,
    strict_option,
    table,
)
from bench.open_loop import open_loop, percentile
from devstack.system import app_env, aws_env
from jlg_pipeline.adapters.database import create_engine
from testkit.factories import NOT_SCHEDULED, create_sessions
from testkit.served import start_web

SESSIONS = 2000


async def load(
    url: str, rate: int, seconds: float, headers: dict[str, str]
) -> tuple[list[float], int]:
    """Open loop: one request every 1/rate s, whatever the answers; returns latencies and errors."""
    at = (datetime.now(UTC) + timedelta(days=1)).isoformat()

    def send(client: httpx.AsyncClient, i: int) -> Awaitable[httpx.Response]:
        path = f"/program-session/{1 + i % SESSIONS}/link-generation"
        return client.patch(path, json={"linkGenerationAt": at})

    total = int(rate * seconds)
    sent, errors = await open_loop(
        url, headers, rate, send, until=lambda i: i >= total, connections=200
    )
    return [latency for _, latency in sent], errors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rates", default="25,50,100,150")
    parser.add_argument("--seconds", type=float, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=1)
    strict_option(parser)
    args = parser.parse_args()
    rates = [int(r) for r in args.rates.split(",")]
    with bench_database("jlg_bench_web") as url:
        engine = create_engine(url)
        create_sessions(engine, SESSIONS, at_offset=None, status=NOT_SCHEDULED)
        engine.dispose()
        # moto in its own process, so neither server shares a GIL with the load generator.
        with moto_process() as aws:
            env = app_env(url, **aws_env(aws), **JWT_ENV, ENABLE_JOIN_LINK_SCHEDULER="true")
            servers = [
                ("web.app:create_app", admin_headers()),
                ("bench.timing.bare_app:create_bare_app", {}),
            ]
            started = [
                start_web(env, factory=factory, workers=args.workers) for factory, _ in servers
            ]
            # (server, rate) -> every latency of its rounds, and its errors.
            latencies: dict[tuple[str, int], list[float]] = {}
            errors: dict[tuple[str, int], int] = {}
            try:
                for (_, headers), (_, base) in zip(servers, started, strict=True):
                    asyncio.run(load(base, 10, 2, headers))  # warm up
                for rate in rates:
                    for _ in range(args.rounds):
                        for (factory, headers), (_, base) in zip(servers, started, strict=True):
                            taken, failed = asyncio.run(load(base, rate, args.seconds, headers))
                            latencies.setdefault((factory, rate), []).extend(taken)
                            errors[factory, rate] = errors.get((factory, rate), 0) + failed
            finally:
                for process, _ in started:
                    process.terminate()
                    process.wait(timeout=10)
    targets = Targets()
    report: list[tuple[str, ...]] = []
    for rate in rates:
        real, bare = ((factory, rate) for factory, _ in servers)
        rp99, bp99 = percentile(latencies[real], 0.99), percentile(latencies[bare], 0.99)
        report.append(
            (
                str(rate),
                f"{statistics.median(latencies[real]) * 1000:.1f} / {rp99 * 1000:.1f}",
                f"{statistics.median(latencies[bare]) * 1000:.1f} / {bp99 * 1000:.1f}",
                f"{rp99 / bp99:.2f}x",
                f"{errors[real]} / {errors[bare]}",
                targets.at_most(f"{rate} req/s: p99 over the bare endpoint's", rp99 / bp99, 2.0),
            )
        )
    table(
        f"Front door: PATCH at fixed rates, {args.rounds} x {args.seconds:.0f} s each, "
        f"{args.workers} uvicorn worker(s) each ({machine()})",
        report,
        (
            "req/s",
            "app p50 / p99 ms",
            "bare p50 / p99 ms",
            "p99 ratio (target ≤ 2x)",
            "errors app / bare",
            "",
        ),
    )
    targets.finish(args.strict)


if __name__ == "__main__":
    main()
