"""Programme-action benchmark: move every session of a 10,000-session programme by one day with
one request (a dry run, then the real run with its expectedCount) against the real app (auth,
validation, chunks of 500 through the outbox, schedules synced to a local moto server), while
an open-loop load of other admin requests (one session's PATCH and GET, other programmes) runs
beside it. Rounds alternate with the same load on an idle API, so a noisy moment of the
machine falls on both. Only requests sent while the operation runs (its dry run's start to the
move's answer) count as busy; they are pooled over the rounds (a p99 of one round's few dozen
requests would be its slowest one): 40 rounds at 40 requests/s give some 800, so the p99 is
not decided by the one or two slowest (at 15 rounds of 25 it was, and its ratio swung from
1.6x to 2.4x between two runs of the same code).

    .venv/bin/python -m bench.timing.programme_move [--sessions 10000] [--rate 40]
        [--rounds 40] [--strict]

Targets (issue 41): the move within 10 s on 2 cores; the other requests' p99 while it runs
within 2x of the idle API's.
"""

import argparse
import asyncio
import threading
import time
import uuid
from collections.abc import Awaitable
from datetime import UTC, datetime, timedelta

import httpx
from sqlalchemy import text

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
from testkit.served import start_web

PROGRAMME = 7
OTHERS = 2_000
"""Sessions of other programmes the background load reads and arms."""
DAY = 86_400


async def background(
    url: str, rate: int, stop: threading.Event, headers: dict[str, str], first_other: int
) -> tuple[list[tuple[float, float]], int]:
    """Open loop: one request every 1/rate s (PATCH and GET of other programmes' sessions, in
    turn) until ``stop``; when each was sent and its latency, and the errors."""
    at = (datetime.now(UTC) + timedelta(days=2)).isoformat()

    def send(client: httpx.AsyncClient, i: int) -> Awaitable[httpx.Response]:
        path = f"/program-session/{first_other + i % OTHERS}/link-generation"
        if i % 2:
            return client.get(path)
        return client.patch(path, json={"linkGenerationAt": at})

    return await open_loop(url, headers, rate, send, until=lambda _: stop.is_set(), connections=100)


def move(url: str, headers: dict[str, str], shift_s: int) -> tuple[float, float, float, int, int]:
    """The dry run, then the real move; (when the dry run was sent, when the move ended, seconds
    the real one took, matched, changed)."""
    path = f"/program/{PROGRAMME}/link-generation"
    with httpx.Client(base_url=url, headers=headers, timeout=120) as client:
        began = time.perf_counter()
        dry = client.patch(path, json={"shiftBy": shift_s, "dryRun": True}).json()["data"]
        started = time.perf_counter()
        answer = client.patch(
            path,
            json={"shiftBy": shift_s, "expectedCount": dry["matched"]},
            headers={"Idempotency-Key": f"bench-move-{uuid.uuid4()}"},
        )
        ended = time.perf_counter()
    data = answer.json()["data"]
    return began, ended, ended - started, data["matched"], data["changed"]


def idle_load(
    url: str, rate: int, headers: dict[str, str], first_other: int, seconds: float
) -> tuple[list[float], int]:
    """The background load alone, on the idle API, for ``seconds``: latencies, errors."""
    stop = threading.Event()
    threading.Timer(seconds, stop.set).start()
    sent, errors = asyncio.run(background(url, rate, stop, headers, first_other))
    return [latency for _, latency in sent], errors


def loaded_move(
    url: str, rate: int, headers: dict[str, str], first_other: int, shift_s: int
) -> tuple[float, int, int, list[float], int]:
    """A dry run and a move with the load beside them; the latencies are those of the requests
    sent while the operation ran (from its dry run's start to the move's answer)."""
    stop = threading.Event()
    result: list[tuple[float, float, float, int, int]] = []

    def mover() -> None:
        time.sleep(0.5)  # the load is under way first
        result.append(move(url, headers, shift_s))
        stop.set()

    thread = threading.Thread(target=mover)
    thread.start()
    sent, errors = asyncio.run(background(url, rate, stop, headers, first_other))
    thread.join()
    began, ended, taken, matched, changed = result[0]
    during = [latency for at, latency in sent if began <= at <= ended]
    return taken, matched, changed, during, errors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--rate", type=int, default=40, help="other requests a second")
    parser.add_argument("--rounds", type=int, default=40)
    strict_option(parser)
    args = parser.parse_args()
    headers = admin_headers()
    with bench_database("jlg_bench_programme") as url:
        engine = create_engine(url)
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO hdb_program_session (program_id, link_generation_at,"
                    " link_generation_status) SELECT :p, now() + interval '3 days',"
                    " 'SCHEDULED' FROM generate_series(1, :n)"
                ),
                {"p": PROGRAMME, "n": args.sessions},
            )
            first_other = conn.execute(
                text(
                    "INSERT INTO hdb_program_session (program_id) SELECT 100 + g % 50"
                    " FROM generate_series(1, :n) g RETURNING id"
                ),
                {"n": OTHERS},
            ).scalars()
            first_other_id = min(first_other)
        engine.dispose()
        with moto_process() as aws:
            process, base = start_web(
                app_env(url, **aws_env(aws), **JWT_ENV, ENABLE_JOIN_LINK_SCHEDULER="true")
            )
            try:
                idle_load(base, 10, headers, first_other_id, 2)  # warm up
                moves: list[tuple[float, int, int]] = []
                idle: list[float] = []
                busy: list[float] = []
                errors = 0
                for round_ in range(args.rounds):
                    taken_idle, idle_errors = idle_load(base, args.rate, headers, first_other_id, 3)
                    shift = DAY if round_ % 2 == 0 else -DAY
                    taken, matched, changed, taken_busy, busy_errors = loaded_move(
                        base, args.rate, headers, first_other_id, shift
                    )
                    moves.append((taken, matched, changed))
                    idle += taken_idle
                    busy += taken_busy
                    errors += idle_errors + busy_errors
            finally:
                process.terminate()
                process.wait(timeout=10)
    targets = Targets()
    slowest = max(taken for taken, _, _ in moves)
    left = sum(matched - changed for _, matched, changed in moves)
    idle_p99, busy_p99 = percentile(idle, 0.99), percentile(busy, 0.99)
    report: list[tuple[str, ...]] = [
        (
            " / ".join(f"{taken:.2f}" for taken, _, _ in moves),
            f"{moves[0][1]} / {moves[0][2]}",
            f"{idle_p99 * 1000:.1f} ({len(idle)})",
            f"{busy_p99 * 1000:.1f} ({len(busy)})",
            f"{busy_p99 / idle_p99:.2f}x",
            str(errors),
            targets.at_most("the slowest move (s)", slowest, 10.0),
            targets.at_most(
                "p99 of the other requests while moves run / idle", busy_p99 / idle_p99, 2.0
            ),
            targets.at_most("sessions not moved", left, 0),
        )
    ]
    table(
        f"Programme action: {args.sessions} sessions moved by one day with one request, "
        f"{args.rounds} rounds, {args.rate} other admin requests/s beside it, idle rounds "
        f"between ({machine()})",
        report,
        (
            "move s, each round (target ≤ 10)",
            "matched / changed",
            "idle p99 ms (requests)",
            "busy p99 ms (requests)",
            "ratio (≤ 2x)",
            "errors",
            "",
            "",
            "",
        ),
    )
    targets.finish(args.strict)


if __name__ == "__main__":
    main()
