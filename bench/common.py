"""Shared by the benchmark scripts: a throwaway migrated database and a result table."""

import argparse
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, text

from devstack.aws import LocalAws, connect_moto
from devstack.ports import free_port, wait_until_answers
from devstack.tokens import mint_token
from jlg_pipeline.adapters.database import create_engine
from testkit.claim_race import claim_race
from testkit.postgres import scratch_database, server_url
from testkit.processes import group_processes

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


@contextmanager
def bench_database(prefix: str, *, migrated: bool = True) -> Iterator[str]:
    """A fresh database, migrated to head unless ``migrated`` is False, on
    ``JLG_BENCH_ADMIN_DATABASE_URL`` (default: the local server); dropped afterwards."""
    with (
        server_url("JLG_BENCH_ADMIN_DATABASE_URL") as admin,
        scratch_database(admin, prefix, migrated=migrated) as url,
    ):
        yield url


def timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def median_seconds(fn: Callable[[], object], repeat: int) -> float:
    return statistics.median(timed(fn) for _ in range(repeat))


def machine() -> str:
    return f"{platform.node()} · {os.cpu_count()} cores · Python {platform.python_version()}"


def table(title: str, rows: list[tuple[str, ...]], header: tuple[str, ...]) -> None:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    print(f"\n## {title}\n")
    print("| " + " | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in rows:
        print("| " + " | ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)) + " |")


SQS_STAND_INS = {
    "depth-free": [sys.executable, "-m", "testkit.moto_sqs"],
    "stock": [str(BIN / "moto_server")],
}
"""The SQS a bench can run against: ``depth-free``, moto whose receive costs what SQS's does
whatever the queue's depth (``testkit.moto_sqs``; the default where a burst is measured), or
``stock`` moto, whose receive walks the queue 30 times a call."""


def sqs_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--sqs",
        default="depth-free",
        help=f"comma-separated, of {', '.join(SQS_STAND_INS)} (see bench/common.py)",
    )


@contextmanager
def moto_process(sqs: str = "stock") -> Iterator[LocalAws]:
    """A moto server in its own process (so it shares no GIL with the benchmark), stopped
    after; ``sqs`` names one of :data:`SQS_STAND_INS`."""
    port = free_port()
    server = subprocess.Popen(  # noqa: S603
        [*SQS_STAND_INS[sqs], "-H", "127.0.0.1", "-p", str(port)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until_answers(
            f"http://127.0.0.1:{port}/moto-api/", 60, alive=lambda: server.poll() is None
        )
        yield connect_moto(port)
    finally:
        server.terminate()
        server.wait(timeout=10)


def execute_job(job: str, env: dict[str, str], *args: str) -> "subprocess.Popen[bytes]":
    """Start ``dagster job execute`` of one of our jobs in its own process group."""
    argv = [str(BIN / "dagster"), "job", "execute", "-m", "jlg_pipeline.definitions"]
    return subprocess.Popen(  # noqa: S603
        [*argv, "-j", job, *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def sweep(env: dict[str, str], timeout: float = 300) -> tuple[int, str]:
    """Run one ``join_link_fallback_sweep_job`` to its end: (exit code, its stderr)."""
    run = execute_job("join_link_fallback_sweep_job", env)
    _, err = run.communicate(timeout=timeout)
    return run.returncode, err.decode(errors="replace")


def generation_runs(dagster_url: str) -> tuple[int, int]:
    """(generation runs created, those not yet ended) in a Dagster instance's storage."""
    engine = create_engine(dagster_url)
    try:
        with engine.connect() as conn:
            created, open_ = conn.execute(
                text(
                    "SELECT count(*), count(*) FILTER (WHERE status IN"
                    " ('QUEUED', 'NOT_STARTED', 'STARTING', 'STARTED', 'CANCELING'))"
                    " FROM runs WHERE pipeline_name LIKE 'join_link_%generation_job'"
                )
            ).one()
    finally:
        engine.dispose()
    return int(created), int(open_)


def status_counts(engine: Engine, first_id: int = 1) -> Counter[str]:
    """Sessions per link-generation status, among ids from ``first_id`` on."""
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT link_generation_status, count(*) FROM hdb_program_session"
                " WHERE id >= :first GROUP BY 1"
            ),
            {"first": first_id},
        ).all()
    return Counter({status: count for status, count in rows})


def cycles_with_two_jobs(engine: Engine) -> int:
    """The runbook's exactly-once proof: cycles with two different jobs in the attempt
    history."""
    with engine.connect() as conn:
        return int(
            conn.execute(
                text(
                    "SELECT count(*) FROM (SELECT 1 FROM jlg_generation_attempt"
                    " GROUP BY program_session_id, link_generation_at"
                    " HAVING count(DISTINCT job_id) > 1) AS d"
                )
            ).scalar_one()
        )


def generated_twice(engine: Engine, first_id: int = 1) -> int:
    """Sessions (ids from ``first_id`` on) with more than one bulk job at the local registrar."""
    with engine.connect() as conn:
        return int(
            conn.execute(
                text(
                    "SELECT count(*) FROM (SELECT program_session_id FROM jlg_local_bulk_job"
                    " WHERE program_session_id >= :first"
                    " GROUP BY program_session_id HAVING count(*) > 1) AS d"
                ),
                {"first": first_id},
            ).scalar_one()
        )


def reset_due_sessions(engine: Engine, count: int) -> None:
    """Only ``count`` sessions, ids 1..count, all SCHEDULED and due a minute ago."""
    with engine.begin() as conn:
        # Our tables name sessions by id with no foreign key to cascade from (a guest's).
        conn.execute(
            text(
                "TRUNCATE hdb_program_session, jlg_generation_attempt,"
                " jlg_link_generation_change, jlg_schedule_outbox RESTART IDENTITY CASCADE"
            )
        )
        conn.execute(
            text(
                "INSERT INTO hdb_program_session"
                " (program_id, link_generation_at, link_generation_status)"
                " SELECT 1, now() - interval '1 minute', 'SCHEDULED' FROM generate_series(1, :n)"
            ),
            {"n": count},
        )
        conn.execute(text("ANALYZE hdb_program_session"))


def contended(url: str, engine: Engine, rounds: int, processes: int = 8) -> tuple[int, int, int]:
    """(rounds, rounds with exactly one winner, total wins)."""
    exactly_one = total = 0
    with claim_race(url, 1, processes) as run_round:
        for _ in range(rounds):
            with engine.begin() as conn:
                conn.execute(
                    text(
                        "UPDATE hdb_program_session SET link_generation_status = 'SCHEDULED',"
                        " link_generation_at = now() - interval '1 minute' WHERE id = 1"
                    )
                )
            wins = sum(attempt is not None for attempt in run_round())
            exactly_one += int(wins == 1)
            total += wins
    return rounds, exactly_one, total


def group_rss_kib(pgid: int) -> int:
    total = 0
    for proc in group_processes(pgid):
        try:
            match = re.search(r"VmRSS:\s+(\d+)", (proc / "status").read_text())
        except OSError:
            continue
        if match:
            total += int(match.group(1))
    return total


def group_cpu_seconds(pgid: int) -> dict[str, float]:
    """CPU seconds so far of the daemon, its code servers, and the run workers (spawned and
    reaped by the code servers, so counted in their children's time)."""
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = {"daemon": 0.0, "code servers": 0.0, "run workers": 0.0}
    for proc in group_processes(pgid):
        try:
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
            cmdline = (proc / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        own = (int(fields[11]) + int(fields[12])) / ticks
        reaped = (int(fields[13]) + int(fields[14])) / ticks
        if "dagster-daemon" in cmdline:
            cpu["daemon"] += own
            cpu["run workers"] += reaped  # code servers that were replaced, with their runs
        elif "grpc" in cmdline:
            cpu["code servers"] += own
            cpu["run workers"] += reaped
        elif "spawn_main" in cmdline:
            cpu["run workers"] += own
    return cpu


class Targets:
    """The targets of one benchmark run: each figure checked against its target prints PASS
    or MISS beside it; :meth:`finish` lists the misses and, with ``--strict``, exits 1."""

    def __init__(self) -> None:
        self.missed: list[str] = []

    def at_most(self, name: str, value: float, target: float) -> str:
        return self._verdict(name, value, target, value <= target, "≤")

    def at_least(self, name: str, value: float, target: float) -> str:
        return self._verdict(name, value, target, value >= target, "≥")

    def _verdict(self, name: str, value: float, target: float, met: bool, sign: str) -> str:
        if not met:
            self.missed.append(f"{name}: {value:.3g}, target {sign} {target:g}")
        return "PASS" if met else "MISS"

    def finish(self, strict: bool) -> None:
        if self.missed:
            print("\nMISS: " + "; ".join(self.missed))
        if strict and self.missed:
            raise SystemExit(1)


def all_met(verdicts: Sequence[str]) -> str:
    """One row's verdict from its figures' verdicts."""
    return "MISS" if "MISS" in verdicts else "PASS"


def strict_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--strict", action="store_true", help="exit 1 when a figure misses its target"
    )


SECRET = "bench-secret-bench-secret-bench-secret-0123"  # noqa: S105 - local only
ISSUER = "https://idp.bench.invalid"
AUDIENCE = "jlg-admin-api"
JWT_ENV = {"JLG_JWT_SECRET": SECRET, "JLG_JWT_ISSUER": ISSUER, "JLG_JWT_AUDIENCE": AUDIENCE}
"""The web app's token settings, as production has them (issuer and audience)."""


def admin_headers() -> dict[str, str]:
    """Credentials of an admin, signed with the benchmarks' ``SECRET``."""
    token = mint_token(SECRET, user_id=1, roles=("admin",), issuer=ISSUER, audience=AUDIENCE)
    return {"Authorization": f"Bearer {token}", "X-Active-Role": "admin"}


def queue_empty(sqs: Any, queue_url: str) -> bool:
    """No message on the queue, visible or in flight: every one deleted."""
    attributes = sqs.get_queue_attributes(
        QueueUrl=queue_url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return not any(int(v) for v in attributes.values())
