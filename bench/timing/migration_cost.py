"""What each migration costs on a database at scale: the host's table with 10,000,000 program
sessions and a million rows in our largest table (the attempt history), every revision applied
alone by ``jlg migrate <revision>`` (as the runbook runs it) while its locks are sampled.

    .venv/bin/python -m bench.timing.migration_cost [--sessions 10000000] [--attempts 1000000]
        [--strict]

For each revision: how long it ran, the longest lock it held on a table with rows, the longest
of those a plain INSERT, UPDATE or DELETE waits behind (SHARE or stronger), and the tables it
rewrote (a new file). Target (issue 54): no lock a writer waits behind held over 1 s, no table
rewritten; anything longer is to be done in batches or concurrently.

The host's rows are there before the first revision that touches them, as in a brownfield
install: 0002 (the link-generation columns) runs over sessions that have none yet; the sessions
are then given a history (mostly COMPLETED, some armed, a backlog due) before 0003, and the
attempt history its million rows once 0005 made it.
"""

import argparse
import os
import subprocess
import time

from sqlalchemy import text

from bench.common import (
    BIN,
    ROOT,
    Targets,
    all_met,
    bench_database,
    machine,
    strict_option,
    table,
)
from bench.locks import sampled, tagged
from jlg_pipeline.adapters.database import Bounds, create_engine
from jlg_pipeline.migrate import migrate, phases
from jlg_pipeline.migration_plan import HOST_TABLE_REVISION
from testkit.factories import populate

LOCK_TARGET_S = 1.0
HISTORY_AFTER = "0002_link_generation"
ATTEMPTS_AFTER = "0005_attempt_history"


def apply(url: str, revision: str) -> tuple[float, list[str], str, str, bool]:
    """``jlg migrate <revision>`` with its locks sampled: seconds, the tables it rewrote, the
    longest lock on a table with rows, the longest a writer waits behind, and whether that one
    is within the target."""
    env = {**os.environ, "JLG_DATABASE_URL": tagged(url), "JLG_ENVIRONMENT": "local"}
    with sampled(url) as seen:
        started = time.perf_counter()
        done = subprocess.run(  # noqa: S603 - our own executable
            [str(BIN / "jlg"), "migrate", revision],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        took = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"jlg migrate {revision} failed: {done.stderr[-2000:]}")
    locks = seen.locks()
    blocking = [held for held in locks if held.blocks_writers]
    longest = str(locks[0]) if locks else "-"
    worst = str(blocking[0]) if blocking else "-"
    within = not blocking or blocking[0].seconds <= LOCK_TARGET_S
    return took, seen.rewritten, longest, worst, within


def fill_host(url: str, sessions: int) -> None:
    """The host's sessions as they are before any revision of ours: no link-generation
    column yet."""
    filler = create_engine(url, bounds=Bounds(hold_s=None))
    try:
        with filler.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO hdb_program_session (program_id, updated_at, deleted_at)"
                    " SELECT g % 500, now() - make_interval(mins => g % 500000),"
                    " CASE WHEN g % 100 = 7 THEN now() END"
                    " FROM generate_series(1, :n) AS g"
                ),
                {"n": sessions},
            )
    finally:
        filler.dispose()


def give_history(url: str, sessions: int) -> None:
    """The sessions again, now with a link-generation history (``populate``)."""
    filler = create_engine(url, bounds=Bounds(hold_s=None))
    try:
        with filler.begin() as conn:
            conn.execute(text("TRUNCATE hdb_program_session CASCADE"))
        populate(filler.execution_options(isolation_level="AUTOCOMMIT"), sessions, 1000)
    finally:
        filler.dispose()


def fill_attempts(url: str, attempts: int) -> None:
    filler = create_engine(url, bounds=Bounds(hold_s=None))
    try:
        with filler.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO jlg_generation_attempt (program_session_id, attempt, trigger,"
                    " link_generation_at, claimed_at, finished_at, outcome)"
                    " SELECT id, 1, 'event', link_generation_at, link_generation_at,"
                    " link_generation_at + interval '5 seconds', 'COMPLETED'"
                    " FROM hdb_program_session WHERE link_generation_status = 'COMPLETED'"
                    " ORDER BY id LIMIT :n"
                ),
                {"n": attempts},
            )
        with filler.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text("VACUUM ANALYZE jlg_generation_attempt"))
    finally:
        filler.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=10_000_000)
    parser.add_argument("--attempts", type=int, default=1_000_000)
    strict_option(parser)
    args = parser.parse_args()
    targets = Targets()
    rows: list[tuple[str, ...]] = []
    with bench_database("jlg_bench_migration_cost", migrated=False) as url:
        migrate(url, HOST_TABLE_REVISION)
        started = time.perf_counter()
        fill_host(url, args.sessions)
        filled_s = time.perf_counter() - started
        for revision, phase in phases():
            if revision == HOST_TABLE_REVISION:
                continue
            took, rewritten, longest, worst, within = apply(url, revision)
            verdicts = [
                targets.at_most(f"{revision}: tables rewritten", float(len(rewritten)), 0),
                targets.at_most(
                    f"{revision}: a writer waits over {LOCK_TARGET_S:g} s",
                    0.0 if within else 1.0,
                    0,
                ),
            ]
            rows.append(
                (
                    revision,
                    phase,
                    f"{took:.1f}",
                    longest,
                    worst,
                    ", ".join(rewritten) or "none",
                    all_met(verdicts),
                )
            )
            if revision == HISTORY_AFTER:
                give_history(url, args.sessions)
            if revision == ATTEMPTS_AFTER:
                fill_attempts(url, args.attempts)
    table(
        f"Each migration at {args.sessions:,} host sessions and {args.attempts:,} attempts"
        f" ({machine()}; the host table filled in {filled_s:.0f} s); target: no lock a writer"
        f" waits behind over {LOCK_TARGET_S:g} s, no table rewritten",
        rows,
        (
            "revision",
            "phase",
            "took (s)",
            "longest lock, table with rows",
            "longest a writer waits behind",
            "rewritten",
            "",
        ),
    )
    targets.finish(args.strict)


if __name__ == "__main__":
    main()
