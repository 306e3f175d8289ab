"""Burst benchmark: N events enqueued at once, through the real dagster-daemon (SQS sensor,
QueuedRunCoordinator, one run per event), until every session is COMPLETED. Reports the time,
duplicate generations and the peak memory of the daemon's process tree, against N x the
empty-run time divided by the configured run concurrency.

    .venv/bin/python -m bench.timing.daemon_burst [--events 200] [--concurrency N]

``--concurrency`` overrides dagster.yaml's ``max_concurrent_runs`` in the benchmark's own
instance (the baseline divides by the same number), to compare settings in one place.
"""

import argparse
import json
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path

import yaml
from sqlalchemy import text

from bench.common import (
    ROOT,
    add_registrants,
    add_sessions,
    bench_database,
    dagster_env,
    generated_twice,
    group_cpu_seconds,
    group_rss_kib,
    machine,
    moto_process,
    start_daemon,
    status_counts,
    table,
)
from bench.timing.runs import EMPTY_JOB, measure
from jlg_pipeline.adapters.database import create_engine
from jlg_pipeline.domain.messages import build_message
from jlg_pipeline.local.stack import Children


def machine_busy_seconds() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine so far, from /proc/stat."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    ticks = os.sysconf("SC_CLK_TCK")
    return (sum(fields) - idle) / ticks, sum(fields) / ticks


def _run_phases(dagster_url: str, sent_at: float) -> dict[str, float]:
    """Where the time went, from Dagster's own run records and run events (epoch seconds)."""
    engine = create_engine(dagster_url)
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT r.run_id, extract(epoch FROM r.create_timestamp AT TIME ZONE 'UTC'),"
                " r.start_time, r.end_time,"
                " extract(epoch FROM min(e.timestamp) FILTER"
                "  (WHERE e.dagster_event_type = 'PIPELINE_STARTING') AT TIME ZONE 'UTC')"
                " FROM runs r JOIN event_logs e ON e.run_id = r.run_id"
                " WHERE r.pipeline_name = 'join_link_generation_job'"
                " AND r.start_time IS NOT NULL AND r.end_time IS NOT NULL"
                " GROUP BY r.run_id, r.create_timestamp, r.start_time, r.end_time"
            )
        ).all()
    engine.dispose()
    launching = [float(starting) for _, _, _, _, starting in rows]
    ends = [end for _, _, _, end, _ in rows]
    busy = sum(end - launch for end, launch in zip(ends, launching, strict=True))
    return {
        "runs": len(rows),
        "first_created": min(float(created) for _, created, _, _, _ in rows) - sent_at,
        "launch": statistics.median(
            start - launch for (_, _, start, _, _), launch in zip(rows, launching, strict=True)
        ),
        "running": statistics.median(end - start for _, _, start, end, _ in rows),
        "concurrency": busy / (max(ends) - min(launching)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=None)
    args = parser.parse_args()
    instance_config = yaml.safe_load((ROOT / "dagster.yaml").read_text())
    coordinator = instance_config["run_coordinator"]["config"]
    if args.concurrency:
        coordinator["max_concurrent_runs"] = args.concurrency
    concurrency: int = coordinator["max_concurrent_runs"]
    with (
        bench_database("jlg_bench_burst") as url,
        bench_database("jlg_bench_burst_dagster", migrated=False) as dagster_url,
    ):
        engine = create_engine(url)
        add_registrants(engine, 20)
        ids = add_sessions(engine, args.events, due=True)
        with (
            moto_process() as aws,
            tempfile.TemporaryDirectory(
                prefix="jlg-bench-burst-", ignore_cleanup_errors=True
            ) as home_dir,
        ):
            home = Path(home_dir)
            env = dagster_env(
                home,
                dagster_url,
                url,
                yaml.safe_dump(instance_config),
                **aws.env,
                JLG_SQS_QUEUE_URL=aws.queue_url,
                JLG_REGISTRAR="local",
                ENABLE_JOIN_LINK_SCHEDULER="true",
            )
            empty = statistics.median(measure(EMPTY_JOB, env)[0] for _ in range(3))
            children = Children()
            peak = 0
            stop = threading.Event()
            try:
                pgid = start_daemon(children, env, home / "daemon.log")

                def sample() -> None:
                    nonlocal peak
                    while not stop.wait(0.5):
                        peak = max(peak, group_rss_kib(pgid))

                threading.Thread(target=sample, daemon=True).start()
                time.sleep(10)  # the daemon and its code server are up before the burst
                sqs = aws.client("sqs")
                before = group_cpu_seconds(pgid)
                machine_before = machine_busy_seconds()
                started = time.perf_counter()
                for first in range(0, len(ids), 10):
                    sqs.send_message_batch(
                        QueueUrl=aws.queue_url,
                        Entries=[
                            {"Id": str(sid), "MessageBody": json.dumps(build_message(sid, None))}
                            for sid in ids[first : first + 10]
                        ],
                    )
                # Four duplicates of already-sent events, as SQS may deliver.
                for sid in ids[:4]:
                    sqs.send_message(
                        QueueUrl=aws.queue_url, MessageBody=json.dumps(build_message(sid, None))
                    )
                while status_counts(engine)["COMPLETED"] < args.events:
                    if children.exited():
                        raise RuntimeError((home / "daemon.log").read_text()[-3000:])
                    time.sleep(1)
                elapsed = time.perf_counter() - started
                cpu = {k: v - before[k] for k, v in group_cpu_seconds(pgid).items()}
                machine_after = machine_busy_seconds()
                machine_share = (machine_after[0] - machine_before[0]) / (
                    machine_after[1] - machine_before[1]
                )
                sent_at = time.time() - elapsed
                time.sleep(15)  # let the duplicate runs finish
            finally:
                stop.set()
                children.stop()
        duplicates = generated_twice(engine)
        engine.dispose()
        phases = _run_phases(dagster_url, sent_at)
    baseline = args.events * empty / concurrency
    table(
        f"Burst: {args.events} events at once through the real daemon, "
        f"{concurrency} concurrent runs ({machine()})",
        [
            ("time until all COMPLETED", f"{elapsed:.0f} s"),
            (
                f"baseline: {args.events} x empty run ({empty:.2f} s) / {concurrency}",
                f"{baseline:.0f} s",
            ),
            ("ratio (target ≤ 1.5x)", f"{elapsed / baseline:.2f}x"),
            ("sessions generated more than once", str(duplicates)),
            ("peak RSS of the daemon's process tree", f"{peak / 1024:.0f} MiB"),
            ("runs (events + duplicate deliveries)", str(phases["runs"])),
            ("first run created after the send", f"{phases['first_created']:.1f} s"),
            ("median launch: STARTING -> started", f"{phases['launch']:.2f} s"),
            ("median started -> finished (one run)", f"{phases['running']:.2f} s"),
            ("runs launching or running at once, on average", f"{phases['concurrency']:.2f}"),
            *(
                (f"CPU per run: {name}", f"{seconds / phases['runs']:.2f} s")
                for name, seconds in cpu.items()
            ),
            (
                "CPU the burst used of the machine's",
                f"{sum(cpu.values()) / (elapsed * (os.cpu_count() or 1)):.0%}",
            ),
            ("CPU the whole machine used (PostgreSQL, moto and all)", f"{machine_share:.0%}"),
            (
                "time vs the CPU floor (runs x CPU per run / cores; target ≤ 1.3x)",
                f"{elapsed / (sum(cpu.values()) / (os.cpu_count() or 1)):.2f}x",
            ),
        ],
        ("measure", "value"),
    )


if __name__ == "__main__":
    main()
