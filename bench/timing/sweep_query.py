"""Sweep-query benchmark: 1,000,000 sessions, 5,000 due, a realistic status mix. EXPLAIN of
the candidate query, its median latency vs fetching 50 rows by primary key; its worst case,
with many always-failing (poison) FAILED sessions older than every other candidate; and the
same query without the partial indexes, to show what they buy.

    .venv/bin/python -m bench.timing.sweep_query [--rows 1000000] [--due 5000] [--poison 100000]
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
from jlg_pipeline.adapters.candidates import Candidates
from jlg_pipeline.adapters.database import create_engine
from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.adapters.tables import program_session
from testkit.factories import populate

INDEXES = ("ix_psession_link_gen_due", "ix_psession_link_gen_fresh", "ix_psession_link_gen_failed")


def add_poison(engine: Engine, count: int) -> None:
    """``count`` FAILED sessions, each refused many times, older than every other candidate."""
    with engine.begin() as conn:
        conn.execute(
            text(
                """
                INSERT INTO hdb_program_session (program_id, link_generation_at,
                    link_generation_status, link_generation_attempt, updated_at)
                SELECT g % 500, now() - interval '60 days' - make_interval(secs => g), 'FAILED',
                       5 + g % 20, now() - interval '4 hours'
                FROM generate_series(1, :n) AS g
                """
            ),
            {"n": count},
        )
        conn.execute(text("VACUUM ANALYZE hdb_program_session"))


def explain(engine: Engine, repository: ProgramSessionRepository, limit: int) -> str:
    statement = Candidates(engine).fallback_candidates_statement(limit)
    compiled = statement.compile(engine, compile_kwargs={"render_postcompile": True})
    with engine.connect() as conn:
        return "\n".join(r[0] for r in conn.exec_driver_sql(f"EXPLAIN {compiled}", compiled.params))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--due", type=int, default=5_000)
    parser.add_argument("--poison", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=50)
    strict_option(parser)
    args = parser.parse_args()
    targets = Targets()
    with bench_database("jlg_bench_sweep") as url:
        engine = create_engine(url).execution_options(isolation_level="AUTOCOMMIT")
        populate(engine, args.rows, args.due)
        repository = ProgramSessionRepository(engine)
        assert Candidates(engine).count_due_for_fallback_generation() == args.due
        plan = explain(engine, repository, 50)
        ids = [r for r in range(1000, 1050)]

        def by_primary_key() -> None:
            with engine.connect() as conn:
                conn.execute(select(program_session).where(program_session.c.id.in_(ids))).all()

        def candidates() -> None:
            assert len(Candidates(engine).find_due_for_fallback_generation(50)) == 50

        pk = median_seconds(by_primary_key, args.repeat)
        indexed = median_seconds(candidates, args.repeat)
        add_poison(engine, args.poison)

        def fresh_first() -> None:
            found = Candidates(engine).find_due_for_fallback_generation(50)
            assert found[0].status.value != "FAILED", "the poison sessions come last"

        poisoned = median_seconds(fresh_first, args.repeat)
        plan_poisoned = explain(engine, repository, 50)
        with engine.connect() as conn:
            for index in INDEXES:
                conn.execute(text(f"DROP INDEX {index}"))
        unindexed = median_seconds(candidates, max(args.repeat // 5, 5))
        plan_without = explain(engine, repository, 50)
        table(
            f"Sweep query: {args.rows:,} sessions, {args.due:,} due ({machine()})",
            [
                ("50 rows by primary key", f"{pk * 1000:.2f}", "1.00x", "", ""),
                (
                    "candidate query, partial indexes",
                    f"{indexed * 1000:.2f}",
                    f"{indexed / pk:.2f}x",
                    "≤ 3x",
                    targets.at_most("candidate query vs primary key", indexed / pk, 3.0),
                ),
                (
                    f"same, plus {args.poison:,} poison FAILED sessions older than all",
                    f"{poisoned * 1000:.2f}",
                    f"{poisoned / pk:.2f}x",
                    "≤ 3x",
                    targets.at_most("with the poison vs primary key", poisoned / pk, 3.0),
                ),
                (
                    "candidate query, no index (with the poison)",
                    f"{unindexed * 1000:.2f}",
                    f"{unindexed / pk:.2f}x",
                    "",
                    "",
                ),
            ],
            ("query", "median ms", "vs primary key", "target", ""),
        )
        print("\nEXPLAIN with the indexes:\n" + plan)
        print("\nEXPLAIN with the poison sessions:\n" + plan_poisoned)
        print("\nEXPLAIN without them:\n" + plan_without)
        engine.dispose()
    targets.finish(args.strict)


if __name__ == "__main__":
    main()
