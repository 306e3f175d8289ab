"""The schedule sync sensor's idle check: 1,000,000 sessions and nothing pending, then the same
with changes waiting that are not due (direct launches later today, failed changes backing
off). EXPLAIN of the check and its median latency next to a one-row primary-key fetch, both
through the same engine as the sensor uses.

    .venv/bin/python -m bench.timing.sync_idle_check [--rows 1000000] [--waiting 20000]
"""

import argparse

from sqlalchemy import Engine, select, text

from bench.common import (
    Targets,
    bench_database,
    machine,
    median_seconds,
    strict_option,
    table,
)
from jlg_pipeline.adapters.database import create_engine
from jlg_pipeline.adapters.schedule_outbox import ScheduleOutbox
from jlg_pipeline.adapters.tables import program_session
from testkit.factories import populate


def add_waiting(engine: Engine, count: int) -> None:
    """``count`` outbox rows, none due: half direct launches in the next hours, half failed
    changes whose next try is minutes away."""
    with engine.begin() as conn:
        conn.execute(
            text(
                """
                INSERT INTO jlg_schedule_outbox
                    (program_session_id, version, fire_at, direct, next_try_at, tries)
                SELECT id, nextval('jlg_schedule_outbox_version_seq'),
                       now() + make_interval(mins => (5 + id % 600)::int), id % 2 = 0,
                       now() + make_interval(mins => (1 + id % 600)::int), (id % 2)::int
                FROM hdb_program_session ORDER BY id LIMIT :n
                """
            ),
            {"n": count},
        )
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("VACUUM ANALYZE jlg_schedule_outbox"))


def explain(engine: Engine, outbox: ScheduleOutbox) -> str:
    statement = outbox.due_work_statement(100)
    compiled = statement.compile(engine, compile_kwargs={"literal_binds": True})
    with engine.connect() as conn:
        return "\n".join(r[0] for r in conn.exec_driver_sql(f"EXPLAIN {compiled}"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--waiting", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=200)
    strict_option(parser)
    args = parser.parse_args()
    targets = Targets()
    with bench_database("jlg_bench_sync_idle") as url:
        engine = create_engine(url)
        populate(engine.execution_options(isolation_level="AUTOCOMMIT"), args.rows, 5_000)
        outbox = ScheduleOutbox(engine)

        def by_primary_key() -> None:
            with engine.connect() as conn:
                conn.execute(select(program_session).where(program_session.c.id == 1000)).one()

        def idle_check() -> None:
            assert outbox.due_work() == ([], False)

        pk = median_seconds(by_primary_key, args.repeat)
        empty = median_seconds(idle_check, args.repeat)
        plan_empty = explain(engine, outbox)
        add_waiting(engine, args.waiting)
        pk_again = median_seconds(by_primary_key, args.repeat)
        waiting = median_seconds(idle_check, args.repeat)
        plan_waiting = explain(engine, outbox)
        engine.dispose()
    table(
        f"Schedule sync idle check: {args.rows:,} sessions ({machine()})",
        [
            ("one session by primary key", f"{pk * 1000:.3f}", "1.00x", "", ""),
            (
                "idle check, nothing pending",
                f"{empty * 1000:.3f}",
                f"{empty / pk:.2f}x",
                "≤ 2x",
                targets.at_most("idle check vs primary key", empty / pk, 2.0),
            ),
            (
                f"idle check, {args.waiting:,} changes waiting, none due",
                f"{waiting * 1000:.3f}",
                f"{waiting / pk_again:.2f}x",
                "≤ 2x",
                targets.at_most("idle check with waiting vs primary key", waiting / pk_again, 2.0),
            ),
        ],
        ("query", "median ms", "vs primary key", "target", ""),
    )
    print("\nEXPLAIN, nothing pending:\n" + plan_empty)
    print(f"\nEXPLAIN, {args.waiting:,} waiting:\n" + plan_waiting)
    targets.finish(args.strict)


if __name__ == "__main__":
    main()
