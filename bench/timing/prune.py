"""join_link_dagster_prune_job on a PostgreSQL-backed Dagster instance holding 10,000 old
finished runs (each with a few event-log rows, like a generation run's) and some recent ones:
how long the prune takes, what it deleted, and the storage before, after, and after VACUUM
FULL (plain deletes leave the space to PostgreSQL's reuse, not to the disk).

    .venv/bin/python -m bench.timing.prune [--runs 10000] [--events 8]
"""

import argparse
import os
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from dagster import DagsterInstance, DagsterRunStatus, job
from sqlalchemy import create_engine, text

from bench.common import ROOT, Targets, bench_database, machine, strict_option, table
from jlg_pipeline.orchestration.prune import join_link_dagster_prune_job

TABLES = ("runs", "event_logs", "run_tags")


@job
def _generation_like() -> None:
    """Stands in for a generation job: the runs only need to exist, with events."""


def storage(url: str) -> dict[str, int]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            sizes = {
                name: int(
                    conn.execute(text(f"SELECT pg_total_relation_size('{name}')")).scalar_one()
                )
                for name in TABLES
            }
            sizes["database"] = int(
                conn.execute(text("SELECT pg_database_size(current_database())")).scalar_one()
            )
            sizes["event rows"] = int(
                conn.execute(text("SELECT count(*) FROM event_logs")).scalar_one()
            )
            sizes["run rows"] = int(conn.execute(text("SELECT count(*) FROM runs")).scalar_one())
    finally:
        engine.dispose()
    return sizes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--recent", type=int, default=500)
    parser.add_argument("--events", type=int, default=8)
    strict_option(parser)
    args = parser.parse_args()
    with (
        bench_database("jlg_bench_prune", migrated=False) as url,
        tempfile.TemporaryDirectory() as home,
    ):
        # dagster-postgres drives psycopg2 (PITFALLS.md).
        dagster_url = url.replace("postgresql+psycopg://", "postgresql+psycopg2://")
        os.environ["DAGSTER_POSTGRES_URL"] = dagster_url
        shutil.copy(ROOT / "dagster.yaml", Path(home) / "dagster.yaml")
        with DagsterInstance.from_config(home) as instance:

            def one(_: int) -> str:
                run = instance.create_run_for_job(_generation_like, status=DagsterRunStatus.SUCCESS)
                for i in range(args.events):
                    instance.report_engine_event(f"event {i} of a finished run", run)
                return run.run_id

            with ThreadPoolExecutor(4) as pool:
                old = list(pool.map(one, range(args.runs)))
                list(pool.map(one, range(args.recent)))
            engine = create_engine(dagster_url)
            with engine.begin() as conn:
                conn.execute(
                    text(
                        "UPDATE runs SET update_timestamp = now() - interval '40 days',"
                        " create_timestamp = now() - interval '40 days' WHERE run_id = ANY(:ids)"
                    ),
                    {"ids": old},
                )
            before = storage(dagster_url)
            started = time.perf_counter()
            result = join_link_dagster_prune_job.execute_in_process(instance=instance)
            took = time.perf_counter() - started
            assert result.success
            [output] = [e for e in result.all_node_events if e.event_type_value == "STEP_OUTPUT"]
            deleted = int(output.event_specific_data.metadata["deleted"].value)  # type: ignore[union-attr, arg-type]
            after = storage(dagster_url)
            with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                conn.execute(text("VACUUM FULL"))
            vacuumed = storage(dagster_url)
            engine.dispose()
    targets = Targets()
    # Every old run goes; the recent ones and the prune's own run stay.
    kept = targets.at_most("run rows left after the prune", after["run rows"], args.recent + 1)
    rows: list[tuple[str, ...]] = [
        (name, f"{before[name]:,}", f"{after[name]:,}", f"{vacuumed[name]:,}", "")
        for name in ("run rows", "event rows", *TABLES, "database")
    ]
    rows[0] = (*rows[0][:4], f"{kept} (target ≤ {args.recent + 1:,})")
    table(
        f"Prune: {args.runs:,} runs 40 days old + {args.recent} recent, {args.events} events "
        f"each; deleted {deleted:,} runs in {took:.1f} s ({deleted / took:,.0f} runs/s) "
        f"({machine()})",
        rows,
        ("what", "before", "after prune", "after VACUUM FULL", ""),
    )
    targets.finish(args.strict)


if __name__ == "__main__":
    main()
