"""Outages, counted: the application's PostgreSQL restarted during a sweep, and AWS unreachable
for the scheduler while admins set times. Sweeps are real ``join_link_fallback_sweep_job``
runs (``dagster job execute``); the front door is the real app under uvicorn.

    .venv/bin/python -m bench.trials.outages [--restarts 5] [--patches 100] [--strict]

- PostgreSQL restart: a private server (the pgserver binaries) holds the application
  database; while a sweep is generating its 50 sessions the server is restarted (fast mode:
  every connection is cut). Counted: how the sweep run ended, sessions left IN_PROGRESS, and
  whether the next sweep after the stale window completes every session.
- AWS unreachable: the web app's AWS endpoint is a closed port. Every PATCH must answer 200
  (the schedule upsert is best effort); after the grace window, sweeps complete every session.

Windows are shortened with JLG_TEST_STALE_MS / JLG_TEST_GRACE_MS; the constants keep their
production values. Targets: every PATCH answered 200 and every session COMPLETED, none twice,
with AWS down; after each restart the next sweep succeeds and completes every session, and
only a session whose mark the restart cut off (left IN_PROGRESS) is bulk-registered twice (the
crash window the TRD accepts).
"""

import argparse
import statistics
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

from bench.common import (
    JWT_ENV,
    ROOT,
    Targets,
    admin_headers,
    all_met,
    bench_database,
    execute_job,
    generated_twice,
    machine,
    status_counts,
    strict_option,
    sweep,
    table,
)
from devstack.ports import free_port
from devstack.system import system_env
from jlg_pipeline.adapters.database import create_engine
from jlg_pipeline.domain.constants import FALLBACK_BATCH_LIMIT
from jlg_pipeline.migrate import migrate
from testkit.factories import DUE, NOT_SCHEDULED, add_registrations, create_sessions
from testkit.postgres import own_server
from testkit.served import start_web

STALE_MS = 3000
GRACE_MS = 1000


def restart_during_sweep(
    dagster_url: str, home: Path, trials: int, targets: Targets
) -> list[tuple[str, ...]]:
    with own_server() as postgres:
        url = postgres.url
        migrate(url)
        engine = create_engine(url)
        add_registrations(engine, 1, 3000)  # ~50 ms of local bulkRegister per session
        env = system_env(
            home,
            dagster_url,
            url,
            JLG_REGISTRAR="local",
            JLG_TEST_STALE_MS=str(STALE_MS),
            JLG_TEST_GRACE_MS=str(GRACE_MS),
        )
        first_sweeps: Counter[str] = Counter()
        reasons: list[str] = []
        stuck_after_first: list[int] = []
        completed_after_next: list[int] = []
        next_ok = duplicates = 0
        for _ in range(trials):
            first = create_sessions(engine, FALLBACK_BATCH_LIMIT, at_offset=DUE)[0]
            running = execute_job("join_link_fallback_sweep_job", env)
            deadline = time.monotonic() + 120
            while status_counts(engine, first)["COMPLETED"] < 5:
                if running.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the sweep ended before the restart could hit it")
                time.sleep(0.05)
            postgres.restart()
            _, err = running.communicate(timeout=300)
            if running.returncode == 0:
                first_sweeps["succeeded"] += 1
            else:
                first_sweeps["failed"] += 1
                lines = [ln.strip() for ln in err.decode(errors="replace").splitlines()]
                reasons.extend(ln for ln in lines if "session(s) failed" in ln)
            stuck_after_first.append(status_counts(engine, first)["IN_PROGRESS"])
            time.sleep(STALE_MS / 1000 + 0.5)
            code, _ = sweep(env)
            next_ok += code == 0
            completed_after_next.append(status_counts(engine, first)["COMPLETED"])
            duplicates += generated_twice(engine, first)
        engine.dispose()
    verdicts = [
        targets.at_least("restart: next sweeps succeeded", next_ok, trials),
        targets.at_least(
            "restart: fewest COMPLETED after the next sweep",
            min(completed_after_next),
            FALLBACK_BATCH_LIMIT,
        ),
        targets.at_most(
            "restart: generated twice beyond the marks cut off",
            duplicates - sum(stuck_after_first),
            0,
        ),
    ]
    return [
        (
            f"PostgreSQL restarted (fast) during a sweep of {FALLBACK_BATCH_LIMIT} sessions",
            f"{trials} restarts",
            f"sweep runs: {first_sweeps['failed']} failed with the failed sessions named, "
            f"{first_sweeps['succeeded']} succeeded; IN_PROGRESS left behind per trial: "
            f"{stuck_after_first}; next sweep after the stale window: {next_ok}/{trials} "
            f"succeeded, COMPLETED per trial {completed_after_next}; sessions bulk-registered "
            f"twice (mark lost in the restart, then reclaimed): {duplicates}",
            "next sweep succeeds and completes all; twice ≤ marks cut off",
            all_met(verdicts),
        ),
        *(("  e.g.", "", reason[:200], "", "") for reason in reasons[:1]),
    ]


def aws_unreachable(
    url: str, dagster_url: str, home: Path, patches: int, targets: Targets
) -> tuple[str, ...]:
    engine = create_engine(url)
    add_registrations(engine, 1, 20)
    ids = create_sessions(engine, patches, at_offset=None, status=NOT_SCHEDULED)
    closed = f"http://127.0.0.1:{free_port()}"
    env = system_env(
        home,
        dagster_url,
        url,
        JLG_REGISTRAR="local",
        **JWT_ENV,
        ENABLE_JOIN_LINK_SCHEDULER="true",
        AWS_ENDPOINT_URL=closed,
        AWS_DEFAULT_REGION="us-east-1",
        AWS_ACCESS_KEY_ID="bench",
        AWS_SECRET_ACCESS_KEY="bench",  # noqa: S106 - nothing listens there
        AWS_SCHEDULER_TARGET_QUEUE_ARN="arn:aws:sqs:us-east-1:123456789012:jlg",
        AWS_SCHEDULER_EXECUTION_ROLE_ARN="arn:aws:iam::123456789012:role/bench",
        JLG_TEST_STALE_MS=str(STALE_MS),
        JLG_TEST_GRACE_MS=str(GRACE_MS),
    )
    log = home / "web.log"
    web, base = start_web(env, log=log)
    statuses: Counter[int] = Counter()
    latencies: list[float] = []
    try:
        ready = httpx.get(f"{base}/readyz", timeout=10)
        if ready.status_code != 200:
            raise RuntimeError(f"the web app is not ready: {ready.text}\n{log.read_text()}")
        at = (datetime.now(UTC) + timedelta(seconds=2)).isoformat()
        with httpx.Client(base_url=base, headers=admin_headers(), timeout=30) as client:
            for sid in ids:
                started = time.perf_counter()
                response = client.patch(
                    f"/program-session/{sid}/link-generation", json={"linkGenerationAt": at}
                )
                latencies.append(time.perf_counter() - started)
                statuses[response.status_code] += 1
        time.sleep(15)  # the best-effort upserts run out their bounded retries after the answers
    finally:
        web.terminate()
        web.wait(timeout=30)
    written = log.read_text(errors="replace")
    # A time 2 s ahead goes direct: only the delete of an earlier schedule is tried (and fails).
    upsert_failures = written.count("schedule_sync.failed") + written.count(
        "schedule_sync.stale_schedule_left"
    )
    time.sleep(2 + GRACE_MS / 1000)
    sweeps = 0
    while status_counts(engine, ids[0])["COMPLETED"] < patches and sweeps < 10:
        sweep(env)
        sweeps += 1
    completed = status_counts(engine, ids[0])["COMPLETED"]
    duplicates = generated_twice(engine, ids[0])
    engine.dispose()
    verdicts = [
        targets.at_least("AWS down: PATCHes answered 200", statuses[200], patches),
        targets.at_least("AWS down: sessions COMPLETED", completed, patches),
        targets.at_most("AWS down: generated twice", duplicates, 0),
    ]
    return (
        "AWS unreachable for the scheduler (endpoint is a closed port)",
        f"{patches} PATCHes",
        f"{statuses[200]}/{patches} answered 200 (median "
        f"{statistics.median(latencies) * 1000:.0f} ms, max {max(latencies) * 1000:.0f} ms); "
        f"{upsert_failures} schedule calls logged as failed; {sweeps} sweeps later "
        f"{completed}/{patches} COMPLETED, {duplicates} generated twice",
        "all 200, all COMPLETED, 0 twice",
        all_met(verdicts),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--restarts", type=int, default=5)
    parser.add_argument("--patches", type=int, default=100)
    strict_option(parser)
    args = parser.parse_args()
    targets = Targets()
    (ROOT / ".data").mkdir(exist_ok=True)
    rows: list[tuple[str, ...]] = []
    with (
        bench_database("jlg_bench_outage") as url,
        bench_database("jlg_bench_outage_dagster", migrated=False) as dagster_url,
        tempfile.TemporaryDirectory(prefix="jlg-bench-outage-") as home,
    ):
        rows.append(aws_unreachable(url, dagster_url, Path(home), args.patches, targets))
        rows.extend(restart_during_sweep(dagster_url, Path(home), args.restarts, targets))
    table(f"Outages ({machine()})", rows, ("scenario", "tried", "outcome", "target", ""))
    targets.finish(args.strict)


if __name__ == "__main__":
    main()
