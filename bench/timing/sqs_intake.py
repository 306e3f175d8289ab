"""How many messages a second ``join_link_sqs_sensor`` takes off the queue: N messages waiting
on SQS (a moto server in its own process), the real sensor evaluated tick after tick against a
Dagster instance on PostgreSQL, each tick's run requests turned into runs as the daemon turns
them (``create_run_for_job``, config checked, tags written), until the queue is empty — every
message deleted, so the acknowledgement is counted. Printed: ticks, runs, messages a second
overall, the time spent waiting on the queue's calls, and messages a second of our own work
(all but that wait), judged against the target. SQS is moto whose receive costs the same
at any depth, as SQS's does (``--sqs depth-free``, ``testkit.moto_sqs``); ``--sqs stock`` adds
stock moto, whose receive walks the queue 30 times a call (about 0.4 s a call with 2,000 in
flight), so its overall figure measures moto, not the sensor.

    .venv/bin/python -m bench.timing.sqs_intake [--messages 2000] [--sqs depth-free,stock]
        [--strict]
"""

import argparse
import json
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dagster import DagsterInstance, SensorResult, build_sensor_context

from bench.common import (
    ROOT,
    Targets,
    bench_database,
    machine,
    moto_process,
    queue_empty,
    sqs_option,
    strict_option,
    table,
)
from jlg_pipeline.adapters.database import instance_storage_url
from jlg_pipeline.adapters.sqs_queue import SqsQueue
from jlg_pipeline.config import Settings
from jlg_pipeline.domain.messages import build_message
from jlg_pipeline.orchestration.resources import database_resource, sqs_queue_resource
from jlg_pipeline.orchestration.tags import RUN_KEY_TAG

TARGET_PER_S = 200


@contextmanager
def queue_time() -> Iterator[list[float]]:
    """Seconds spent in SqsQueue's calls while inside, summed into the list's one item."""
    spent = [0.0]
    originals = {name: getattr(SqsQueue, name) for name in ("receive", "delete")}

    def timed(call: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return call(*args, **kwargs)
            finally:
                spent[0] += time.perf_counter() - started

        return wrapper

    for name, call in originals.items():
        setattr(SqsQueue, name, timed(call))
    try:
        yield spent
    finally:
        for name, call in originals.items():
            setattr(SqsQueue, name, call)


def measure(messages: int, stand_in: str) -> dict[str, float]:
    with (
        bench_database("jlg_bench_intake_dagster", migrated=False) as dagster_url,
        bench_database("jlg_bench_intake") as app_url,
        moto_process(stand_in) as aws,
        tempfile.TemporaryDirectory(prefix="jlg-bench-intake-") as home,
    ):
        (Path(home) / "dagster.yaml").write_text((ROOT / "dagster.yaml").read_text())
        os.environ["DAGSTER_POSTGRES_URL"] = instance_storage_url(dagster_url)
        os.environ["ENABLE_JOIN_LINK_SCHEDULER"] = "true"
        os.environ["JLG_ENVIRONMENT"] = "local"
        # Imported here: the module builds the code location from the environment just set.
        from jlg_pipeline.definitions import build_definitions

        os.environ.update(aws.env)  # the queue's client reads its credentials from here
        environ = {
            **aws.env,
            "JLG_SQS_QUEUE_URL": aws.queue_url,
            "JLG_SQS_WAIT_S": "0",
            "JLG_REGISTRAR": "local",
            "JLG_DATABASE_URL": app_url,
            "JLG_ENVIRONMENT": "local",
            "ENABLE_JOIN_LINK_SCHEDULER": "true",
        }
        defs = build_definitions(environ)
        sensor = defs.resolve_sensor_def("join_link_sqs_sensor")
        jobs = {j.name: defs.resolve_job_def(j.name) for j in sensor.jobs}
        settings = Settings.from_env(environ)
        resources = {
            "sqs_queue": sqs_queue_resource(settings),
            "database": database_resource(settings),
        }
        sqs = aws.client("sqs")
        bodies = [json.dumps(build_message(sid, None)) for sid in range(1, messages + 1)]
        for first in range(0, len(bodies), 10):
            sqs.send_message_batch(
                QueueUrl=aws.queue_url,
                Entries=[
                    {"Id": str(i), "MessageBody": b}
                    for i, b in enumerate(bodies[first : first + 10])
                ],
            )
        with DagsterInstance.from_config(home) as instance, queue_time() as in_queue:
            cursor: str | None = None
            ticks = runs = 0
            sensor_s = creating_s = 0.0
            started = time.perf_counter()
            while True:
                ticks += 1
                tick_started = time.perf_counter()
                with build_sensor_context(
                    instance=instance, cursor=cursor, resources=resources
                ) as context:
                    result = sensor(context)
                sensor_s += time.perf_counter() - tick_started
                if not isinstance(result, SensorResult) or not result.run_requests:
                    if queue_empty(sqs, aws.queue_url):
                        break
                    continue
                cursor = result.cursor
                creating = time.perf_counter()
                for request in result.run_requests:
                    instance.create_run_for_job(
                        jobs[request.job_name or ""],
                        run_config=request.run_config,
                        tags={**request.tags, RUN_KEY_TAG: request.run_key or ""},
                    )
                    runs += 1
                creating_s += time.perf_counter() - creating
            total_s = time.perf_counter() - started
    return {
        "ticks": ticks,
        "runs": runs,
        "sensor_s": sensor_s,
        "total_s": total_s,
        "creating_s": creating_s,
        "queue_s": in_queue[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=2000)
    sqs_option(parser)
    strict_option(parser)
    args = parser.parse_args()
    targets = Targets()
    rows: list[tuple[str, ...]] = []
    for stand_in in args.sqs.split(","):
        figures = measure(args.messages, stand_in)
        overall = args.messages / figures["total_s"]
        ours = args.messages / (figures["total_s"] - figures["queue_s"])
        rows.append(
            (
                stand_in,
                str(int(figures["ticks"])),
                str(int(figures["runs"])),
                f"{figures['total_s']:.1f} s",
                f"{figures['queue_s']:.1f} s",
                f"{overall:.0f}",
                f"{ours:.0f}",
                targets.at_least(f"{stand_in}: messages/s of our own work", ours, TARGET_PER_S),
            )
        )
    table(
        f"join_link_sqs_sensor's intake, {args.messages} messages waiting ({machine()}), "
        "the defaults; until the queue is empty (acknowledged)",
        rows,
        (
            "SQS",
            "ticks",
            "runs",
            "until empty",
            "of which waiting on the queue",
            "messages/s overall",
            f"messages/s of our own work, runs created (target ≥ {TARGET_PER_S})",
            "",
        ),
    )
    targets.finish(args.strict)


if __name__ == "__main__":
    main()
