"""A throttling online-session service, through the real daemon: a cohort fires while the
service answers 429 with ``Retry-After: 30`` for three minutes, then recovers.

    .venv/bin/python -m bench.trials.throttling [--sessions 100] [--storm 180] [--retry-after 30]

The sessions' events arrive on SQS (moto in its own process) at the storm's start and go
through ``join_link_sqs_sensor`` into shared runs (``JLG_MAX_SESSIONS_PER_RUN=25``, forced on
with ``JLG_SHARE_RUNS_ABOVE=0`` as the documented figures were taken); the
registrar is HTTP, against the testkit's online-session stand-in. Counted, beside the
targets (docs/design.md "Whatever fails"): sessions left FAILED, bulkRegister calls during the
storm and the most in any one Retry-After interval after the first 429 (the calls already
in flight when it came excepted), how long after the recovery the last session was
COMPLETED, and cycles with more than one job at the service.
"""

import argparse
import json
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from bench.common import (
    ROOT,
    bench_database,
    cycles_with_two_jobs,
    machine,
    moto_process,
    status_counts,
    table,
)
from devstack.online_session import Answer, online_session_service
from devstack.system import Children, start_daemon, system_env
from jlg_pipeline.adapters.database import create_engine
from jlg_pipeline.domain.messages import build_message
from testkit.factories import DUE, add_registrations, create_sessions

ON_TIME_AFTER_RECOVERY_S = 120.0


def run(sessions: int, storm_s: float, retry_after: int) -> dict[str, float]:
    with (
        bench_database("jlg_bench_throttle") as url,
        bench_database("jlg_bench_throttle_dagster", migrated=False) as dagster_url,
        moto_process() as aws,
        online_session_service() as service,
        tempfile.TemporaryDirectory(prefix="jlg-throttle-", dir=ROOT / ".data") as home_dir,
    ):
        home = Path(home_dir)
        engine = create_engine(url)
        add_registrations(engine, 1, 10)
        ids = create_sessions(engine, sessions, at_offset=DUE)
        env = system_env(
            home,
            dagster_url,
            url,
            **aws.env,
            JLG_REGISTRAR="http",
            JLG_ONLINE_SESSION_URL=service.url,
            JLG_ONLINE_SESSION_TOKEN="bench-service-token",  # noqa: S106 - local stand-in
            JLG_SQS_QUEUE_URL=aws.queue_url,
            JLG_MAX_SESSIONS_PER_RUN="25",
            JLG_SHARE_RUNS_ABOVE="0",
            ENABLE_JOIN_LINK_SCHEDULER="true",
            ENABLE_JOIN_LINK_FALLBACK_CRON="false",
        )
        children = Children()
        start_daemon(children, env, home / "daemon.log")
        try:
            time.sleep(20)  # the daemon loads the code location
            service.answer = Answer(
                status=429, body=b"{}", headers={"Retry-After": str(retry_after)}
            )
            storm_began = time.monotonic()
            sqs = aws.client("sqs")
            for sid in ids:
                sqs.send_message(
                    QueueUrl=aws.queue_url, MessageBody=json.dumps(build_message(sid, None))
                )
            time.sleep(max(storm_s - (time.monotonic() - storm_began), 0))
            service.answer = Answer()
            recovered = time.monotonic()
            recovered_at = datetime.now(UTC)
            deadline = recovered + ON_TIME_AFTER_RECOVERY_S + 120
            while time.monotonic() < deadline:
                if status_counts(engine, ids[0]).get("COMPLETED", 0) == sessions:
                    break
                time.sleep(2)
        finally:
            children.stop()
        with engine.connect() as conn:
            last_completed = conn.exec_driver_sql(
                "SELECT max(finished_at) FROM jlg_generation_attempt WHERE outcome = 'COMPLETED'"
            ).scalar_one()
        doubled = cycles_with_two_jobs(engine)
        counts = status_counts(engine, ids[0])
        engine.dispose()
        calls = [c["at"] for c in service.received]
        storm_calls = [t - storm_began for t in calls if t < recovered]
        first = min(storm_calls, default=0.0)
        # The calls in flight when the first 429 came are not the gate's to stop.
        settled = [t for t in storm_calls if t > first + 5]
        per_interval = max(
            (sum(1 for u in settled if t <= u < t + retry_after) for t in settled), default=0
        )
        return {
            "failed": counts.get("FAILED", 0),
            "not completed": sessions - counts.get("COMPLETED", 0),
            "storm calls": len(storm_calls),
            "max calls per Retry-After after the first 429": per_interval,
            "last COMPLETED after recovery (s)": (
                (last_completed - recovered_at).total_seconds() if last_completed else -1
            ),
            "cycles with two jobs": doubled,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--storm", type=float, default=180.0)
    parser.add_argument("--retry-after", type=int, default=30)
    parser.add_argument("--strict", action="store_true", help="exit 1 on a MISS")
    args = parser.parse_args()
    figures = run(args.sessions, args.storm, args.retry_after)
    targets = {
        "failed": 0,
        "not completed": 0,
        "max calls per Retry-After after the first 429": 1,
        "last COMPLETED after recovery (s)": ON_TIME_AFTER_RECOVERY_S,
        "cycles with two jobs": 0,
    }
    rows: list[tuple[str, ...]] = []
    missed = False
    for name, value in figures.items():
        target = targets.get(name)
        verdict = "" if target is None else ("PASS" if value <= target else "MISS")
        missed |= verdict == "MISS"
        rows.append((name, f"{value:g}", "" if target is None else f"≤ {target:g}", verdict))
    table(
        f"A {args.storm:g} s 429 storm (Retry-After {args.retry_after}), "
        f"{args.sessions} sessions, {machine()}",
        rows,
        ("figure", "measured", "target", ""),
    )
    if args.strict and missed:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
