"""Gate benchmark: claims/s through the repository vs raw psycopg running the same statement
(the conditional UPDATE, closing a reclaimed attempt and opening this one's record, as one
statement) on the same pool; then 8 processes contending for one session, many rounds.

    .venv/bin/python -m bench.timing.gate [--sessions 5000] [--rounds 1000]
"""

import argparse
from typing import Any

from sqlalchemy import Engine, text

from bench.common import (
    Targets,
    bench_database,
    contended,
    machine,
    reset_due_sessions,
    strict_option,
    table,
    timed,
)
from jlg_pipeline.adapters.database import create_engine
from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.domain.attempts import Trigger
from jlg_pipeline.domain.validation import SessionId


def repository_claims(engine: Engine, count: int) -> float:
    repository = ProgramSessionRepository(engine)

    def run() -> None:
        for sid in range(1, count + 1):
            assert repository.claim(SessionId(sid), Trigger.CRON) is not None

    return timed(run)


def raw_claims(engine: Engine, count: int) -> float:
    """The repository's own SQL text (the claim, the reclaimed attempt closed, this attempt's
    record opened: one statement), sent by psycopg directly: what SQLAlchemy adds is the
    difference."""
    repository = ProgramSessionRepository(engine)
    statement = repository.claim_sql
    parameters = {**repository.claim_parameters, "trigger": "cron", "run_id": None}

    def run() -> None:
        for sid in range(1, count + 1):
            raw = engine.raw_connection()
            try:
                driver: Any = raw.driver_connection
                with driver.cursor() as cursor:
                    cursor.execute(statement, {**parameters, "session_id": sid})
                    assert cursor.fetchone() is not None
                raw.commit()
            finally:
                raw.close()

    return timed(run)


def counting(engine: Engine, *, on: bool) -> None:
    """Switch the attempt counts' triggers (migration 0009, on our own attempt history) on or
    off; nothing of ours is on the host's table to switch."""
    switch = "ENABLE" if on else "DISABLE"
    with engine.begin() as conn:
        conn.execute(text(f"ALTER TABLE jlg_generation_attempt {switch} TRIGGER USER"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sessions", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=1000)
    strict_option(parser)
    args = parser.parse_args()
    targets = Targets()
    with bench_database("jlg_bench_gate") as url:
        engine = create_engine(url, pool_size=2, max_overflow=0)
        results = []
        for _ in range(3):  # alternate, take the best of each, to damp noise
            reset_due_sessions(engine, args.sessions)
            repo_s = repository_claims(engine, args.sessions)
            reset_due_sessions(engine, args.sessions)
            raw_s = raw_claims(engine, args.sessions)
            counting(engine, on=False)
            reset_due_sessions(engine, args.sessions)
            uncounted_s = repository_claims(engine, args.sessions)
            counting(engine, on=True)
            results.append((repo_s, raw_s, uncounted_s))
        repo_best = min(r[0] for r in results)
        raw_best = min(r[1] for r in results)
        uncounted_best = min(r[2] for r in results)
        repo_rate, raw_rate = args.sessions / repo_best, args.sessions / raw_best
        uncounted_rate = args.sessions / uncounted_best
        table(
            f"Gate: {args.sessions} claims on distinct sessions, one connection pool ({machine()})",
            [
                (
                    "repository.claim (SQLAlchemy Core)",
                    f"{repo_rate:,.0f}",
                    f"{repo_rate / raw_rate:.2f}x",
                    "≥ 0.80x",
                    targets.at_least("claims/s vs raw", repo_rate / raw_rate, 0.80),
                ),
                ("raw psycopg, the same statement", f"{raw_rate:,.0f}", "1.00x", "", ""),
            ],
            ("path", "claims/s", "vs raw", "target", ""),
        )
        table(
            "What the attempt counts cost the gate (migration 0009's triggers on the attempt "
            "history, switched off for the baseline)",
            [
                (
                    "repository.claim, counts kept",
                    f"{repo_rate:,.0f}",
                    f"{repo_rate / uncounted_rate:.2f}x",
                    "≥ 0.85x",
                    targets.at_least(
                        "claims/s with the counts kept vs without", repo_rate / uncounted_rate, 0.85
                    ),
                ),
                ("repository.claim, no counts", f"{uncounted_rate:,.0f}", "1.00x", "", ""),
            ],
            ("path", "claims/s", "vs no counts", "target", ""),
        )
        reset_due_sessions(engine, 1)
        rounds, exactly_one, total = contended(url, engine, args.rounds)
        table(
            "Gate: 8 processes claiming one session at once",
            [
                (
                    str(rounds),
                    str(exactly_one),
                    str(total),
                    "0" if total == rounds else str(total - rounds),
                    targets.at_least("rounds with exactly one winner", exactly_one, rounds),
                )
            ],
            ("rounds", "rounds with exactly one winner", "total wins", "duplicate wins", ""),
        )
        engine.dispose()
    targets.finish(args.strict)


if __name__ == "__main__":
    main()
