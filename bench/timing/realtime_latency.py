"""Real-time latency benchmark: a message on the queue → the session COMPLETED, through the
real dagster-daemon, one event at a time at random moments; and the daemon tree's idle CPU.
Two setups side by side in one run: the settings before tuning (sensor every 15 s, no long
polling, runs dequeued one by one every 2 s) and the shipped ones (JLG_SQS_SENSOR_INTERVAL_S,
JLG_SQS_WAIT_S and dagster.yaml).

    .venv/bin/python -m bench.timing.realtime_latency [--events 20] [--idle-seconds 60]
"""

import argparse
import json
import random
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from sqlalchemy import Engine, text

from bench.common import (
    ROOT,
    Targets,
    bench_database,
    group_cpu_seconds,
    machine,
    moto_process,
    strict_option,
    table,
)
from devstack.aws import LocalAws
from devstack.system import Children, start_daemon, system_env
from jlg_pipeline.adapters.database import create_engine
from jlg_pipeline.config import DEFAULT_SQS_SENSOR_INTERVAL_S, DEFAULT_SQS_WAIT_S
from jlg_pipeline.domain.messages import build_message
from testkit.factories import NOT_SCHEDULED, add_registrations, create_sessions


@dataclass(frozen=True)
class Setup:
    name: str
    sensor_interval_s: int
    wait_s: int
    """How long a tick's first receive long-polls (JLG_SQS_WAIT_S)."""
    tuned_instance: bool
    """False: dagster.yaml as it was before tuning (serial dequeue every 2 s, no sensor
    submit threads); True: dagster.yaml as shipped."""


BEFORE = Setup(
    "before: sensor 15 s, no long poll, serial dequeue every 2 s", 15, 0, tuned_instance=False
)


def untuned(instance: dict[str, Any]) -> dict[str, Any]:
    coordinator = instance["run_coordinator"]["config"]
    coordinator["dequeue_interval_seconds"] = 2
    coordinator.pop("dequeue_use_threads", None)
    coordinator.pop("dequeue_num_workers", None)
    instance.pop("sensors", None)
    return instance


def _status(engine: Engine, session_id: int) -> str:
    with engine.connect() as conn:
        return str(
            conn.execute(
                text("SELECT link_generation_status FROM hdb_program_session WHERE id = :id"),
                {"id": session_id},
            ).scalar_one()
        )


def _arm_now(engine: Engine, session_id: int) -> None:
    with engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE hdb_program_session SET link_generation_at = now(),"
                " link_generation_status = 'SCHEDULED' WHERE id = :id"
            ),
            {"id": session_id},
        )


def measure(
    setup: Setup, app_url: str, aws: LocalAws, events: int, idle_s: float
) -> dict[str, float]:
    instance = yaml.safe_load((ROOT / "dagster.yaml").read_text())
    if not setup.tuned_instance:
        instance = untuned(instance)
    engine = create_engine(app_url)
    # Armed only as its message is sent: a session due all along would be claimed by the
    # watchdog while the daemon idles, and its message would find it COMPLETED.
    ids = create_sessions(engine, events, at_offset=None, status=NOT_SCHEDULED)
    with (
        bench_database("jlg_bench_latency_dagster", migrated=False) as dagster_url,
        tempfile.TemporaryDirectory(prefix="jlg-bench-latency-", ignore_cleanup_errors=True) as d,
    ):
        home = Path(d)
        env = system_env(
            home,
            dagster_url,
            app_url,
            yaml.safe_dump(instance),
            **aws.env,
            JLG_SQS_QUEUE_URL=aws.queue_url,
            JLG_REGISTRAR="local",
            ENABLE_JOIN_LINK_SCHEDULER="true",
            JLG_SQS_SENSOR_INTERVAL_S=str(setup.sensor_interval_s),
            JLG_SQS_WAIT_S=str(setup.wait_s),
        )
        children = Children()
        try:
            pgid = start_daemon(children, env, home / "daemon.log")
            time.sleep(20)  # the daemon and its code server are up
            before = sum(group_cpu_seconds(pgid).values())
            time.sleep(idle_s)
            idle_cpu = (sum(group_cpu_seconds(pgid).values()) - before) / idle_s
            sqs = aws.client("sqs")
            latencies = []
            for sid in ids:
                time.sleep(random.uniform(0, 5))
                _arm_now(engine, sid)
                sent = time.monotonic()
                sqs.send_message(
                    QueueUrl=aws.queue_url, MessageBody=json.dumps(build_message(sid, None))
                )
                while _status(engine, sid) != "COMPLETED":
                    if children.exited() or time.monotonic() - sent > 120:
                        raise RuntimeError((home / "daemon.log").read_text()[-3000:])
                    time.sleep(0.1)
                latencies.append(time.monotonic() - sent)
        finally:
            children.stop()
    engine.dispose()
    ordered = sorted(latencies)
    return {
        "median": statistics.median(ordered),
        "p90": ordered[int(0.9 * (len(ordered) - 1))],
        "max": ordered[-1],
        "idle_cpu": idle_cpu,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=20)
    parser.add_argument("--idle-seconds", type=float, default=60)
    strict_option(parser)
    args = parser.parse_args()
    targets = Targets()
    shipped = Setup(
        f"shipped: sensor {DEFAULT_SQS_SENSOR_INTERVAL_S} s, long poll {DEFAULT_SQS_WAIT_S} s,"
        " dagster.yaml",
        DEFAULT_SQS_SENSOR_INTERVAL_S,
        DEFAULT_SQS_WAIT_S,
        tuned_instance=True,
    )
    results = {}
    with bench_database("jlg_bench_latency") as url, moto_process() as aws:
        add_registrations(create_engine(url), 1, 20)
        for setup in (BEFORE, shipped):
            results[setup] = measure(setup, url, aws, args.events, args.idle_seconds)
    base = results[BEFORE]
    table(
        f"Real-time path: queue → COMPLETED, {args.events} events one at a time ({machine()})",
        [
            (
                setup.name,
                f"{r['median']:.1f}",
                f"{r['p90']:.1f}",
                f"{r['max']:.1f}",
                f"{r['idle_cpu'] * 100:.1f} %",
                f"{r['idle_cpu'] / base['idle_cpu']:.2f}x",
                ""
                if setup is BEFORE
                else " ".join(
                    (
                        targets.at_most("median queue → COMPLETED (s)", r["median"], 10),
                        targets.at_most(
                            "idle CPU vs before", r["idle_cpu"] / base["idle_cpu"], 1.2
                        ),
                    )
                ),
            )
            for setup, r in results.items()
        ],
        (
            "setup",
            "median s (target ≤ 10)",
            "p90 s",
            "max s",
            "idle CPU of the daemon tree (one core = 100 %)",
            "idle CPU vs before (target ≤ 1.20x)",
            "",
        ),
    )
    targets.finish(args.strict)


if __name__ == "__main__":
    main()
