"""The one queue's claim at scale (docs/design.md "One queue"): 10,000,000 host sessions
(history, a future arming, claims running now), 10,000 waiting in recovery and 1,000 on time
over 5,000 programmes, and 5,000 more programmes that hold only sessions nothing can claim
now (failed for good, or in their backoff), each with a turn that says its work is due, as the
refresh before "Nothing stops the queue" left them. The claim of the next waiting session
(``claim_next``) against the claim of a named one (``claim``, the gate's asked path), each its
own transaction as the gate runs it; the first claim of the next (it moves every programme
with nothing to claim on) apart; the watchdog's per-tick reads (the refresh, the attendance);
and the next claim's ``EXPLAIN ANALYZE`` (rolled back). Then "why is it waiting?"
(``jlg why``: ``services/why.py``) of a waiting session, one failed for good and one in its
backoff, each asked 50 times while the 10,000 wait, with its facts statement's ``EXPLAIN
ANALYZE``.

    .venv/bin/python -m bench.timing.queue_claim [--rows 10000000] [--waiting 10000]
        [--on-time 1000] [--programmes 5000] [--stuck-programmes 5000] [--claims 500] [--strict]

Targets (the issues'): one claim of the next ≤ 5 ms at the median; one why ≤ 20 ms.
"""

import argparse
import statistics
import time
from collections.abc import Callable
from functools import partial

from sqlalchemy import Engine, text

from bench.common import Targets, bench_database, machine, strict_option, table
from jlg_pipeline import bootstrap
from jlg_pipeline.adapters.database import Bounds, create_engine
from jlg_pipeline.adapters.queue import SessionQueue
from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.adapters.service_view import ServiceView
from jlg_pipeline.adapters.why_facts import facts_statement
from jlg_pipeline.domain.attempts import Trigger
from jlg_pipeline.domain.constants import ONLINE_SESSION_TIMEOUT_S, TimingWindows
from jlg_pipeline.domain.validation import SessionId
from jlg_pipeline.services.drain import liveness_s
from testkit.factories import populate

TARGET_MS = 5.0
WHY_TARGET_MS = 20.0
WHY_ASKED = 50


LIVE_FROM = 1_000_000
"""The first programme id of those with waiting work: the stuck ones come first in the pick's
order (never served, lower ids), as a programme that is never served stayed before."""


def add_waiting(engine: Engine, on_time: int, programmes: int, stuck: int) -> None:
    """The populated overdue sessions all wait (a FAILED one with its retry due), and
    ``on_time`` more fell due within the last minute, spread over ``programmes`` programmes;
    ``stuck`` programmes more each hold one session failed for good and one in its backoff,
    and a turn that says their work is due (never served, so first in the pick's order)."""
    with engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE hdb_program_session SET link_generation_retry_at = now() - interval '1 min'"
                " WHERE link_generation_status = 'FAILED'"
            )
        )
        conn.execute(
            text(
                "UPDATE hdb_program_session SET program_id = :first + id % :p"
                " WHERE link_generation_status IN ('SCHEDULED', 'FAILED', 'IN_PROGRESS')"
                " AND link_generation_at <= now()"
            ),
            {"p": programmes, "first": LIVE_FROM},
        )
        conn.execute(
            text(
                "INSERT INTO hdb_program_session"
                " (program_id, link_generation_at, link_generation_status)"
                " SELECT :first + g % :p, now() - make_interval(secs => g % 60), 'SCHEDULED'"
                " FROM generate_series(1, :n) AS g"
            ),
            {"n": on_time, "p": programmes, "first": LIVE_FROM},
        )
        conn.execute(
            text(
                "INSERT INTO hdb_program_session (program_id, link_generation_at,"
                " link_generation_status, link_generation_attempt, link_generation_retry_at)"
                " SELECT 1 + g / 2, now() - interval '3 hours', 'FAILED', 1,"
                " CASE WHEN g % 2 = 0 THEN NULL ELSE now() + interval '10 minutes' END"
                " FROM generate_series(0, 2 * :stuck - 1) AS g"
            ),
            {"stuck": stuck},
        )
        conn.execute(
            text(
                "INSERT INTO jlg_programme_turn (program_id, next_due_at)"
                " SELECT g, now() - interval '3 hours' FROM generate_series(1, :stuck) AS g"
                " ON CONFLICT (program_id) DO UPDATE SET next_due_at = excluded.next_due_at"
            ),
            {"stuck": stuck},
        )
        conn.execute(text("VACUUM ANALYZE hdb_program_session"))
        # The load's dirty pages written out now: a checkpoint's writes during the timed
        # claims stalled one statement in twenty for seconds.
        conn.execute(text("CHECKPOINT"))


def timed_ms(action: Callable[[], object], times: int) -> list[float]:
    spent = []
    for _ in range(times):
        started = time.perf_counter()
        action()
        spent.append((time.perf_counter() - started) * 1000)
    return spent


def explain_next(engine: Engine, repository: ProgramSessionRepository) -> str:
    """The next claim's plan as it ran, rolled back."""
    sql, parameters = repository.next_claim_sql, repository.next_claim_parameters
    parameters = {**parameters, "session_id": None, "trigger": "watchdog", "run_id": "bench"}
    with engine.connect() as conn:
        plan = conn.exec_driver_sql(f"EXPLAIN (ANALYZE, BUFFERS) {sql}", parameters).scalars()
        lines = "\n".join(plan)
        conn.rollback()
    return lines


def asked_why(engine: Engine) -> tuple[list[tuple[str, list[float]]], str]:
    """Why each kind of session waits, timed as ``jlg why`` asks (the facts, the attempts, the
    service's view), and the facts statement's plan for the waiting one."""
    why = bootstrap.build_why(
        engine,
        TimingWindows(),
        ServiceView(engine),
        call_bound_s=ONLINE_SESSION_TIMEOUT_S,
        scheduler_enabled=True,
        sweep_enabled=True,
    )
    kinds = {
        "waiting": "link_generation_status = 'SCHEDULED' AND link_generation_at <= now()",
        "failed for good": "link_generation_status = 'FAILED'"
        " AND link_generation_retry_at IS NULL AND link_generation_at IS NOT NULL",
        "in its backoff": "link_generation_status = 'FAILED' AND link_generation_retry_at > now()",
    }
    timed = []
    with engine.connect() as conn:
        ids = {
            kind: SessionId(
                conn.execute(
                    text(f"SELECT id FROM hdb_program_session WHERE {where} LIMIT 1")
                ).scalar_one()
            )
            for kind, where in kinds.items()
        }
    for kind, sid in ids.items():
        timed.append((kind, timed_ms(partial(why, sid), WHY_ASKED)))
    statement = facts_statement(
        ids["waiting"], TimingWindows(), liveness_s(ONLINE_SESSION_TIMEOUT_S)
    )
    sql = str(statement.compile(engine, compile_kwargs={"literal_binds": True}))
    with engine.connect() as conn:
        plan = "\n".join(conn.exec_driver_sql(f"EXPLAIN (ANALYZE, BUFFERS) {sql}").scalars())
    return timed, plan


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--waiting", type=int, default=10_000)
    parser.add_argument("--on-time", type=int, default=1_000)
    parser.add_argument("--programmes", type=int, default=5_000)
    parser.add_argument("--stuck-programmes", type=int, default=5_000)
    parser.add_argument("--claims", type=int, default=500)
    strict_option(parser)
    args = parser.parse_args()
    targets = Targets()
    with bench_database("jlg_bench_queue") as url:
        engine = create_engine(url)
        # Filling ten million rows takes minutes: no bound on the filler's statements.
        filler = create_engine(url, bounds=Bounds(hold_s=None))
        autocommit = filler.execution_options(isolation_level="AUTOCOMMIT")
        started = time.monotonic()
        populate(autocommit, args.rows, args.waiting)
        add_waiting(autocommit, args.on_time, args.programmes, args.stuck_programmes)
        loaded_s = time.monotonic() - started
        repository = ProgramSessionRepository(engine)
        queue = SessionQueue(engine)
        refresh = timed_ms(queue.refresh, 5)
        whys, why_plan = asked_why(engine)
        attendance = timed_ms(lambda: queue.attendance(60.0), 20)
        # The first claim moves every programme with nothing to claim on (64 a look); then
        # the turns' statistics are what autovacuum keeps after such a change.
        (first,) = timed_ms(lambda: repository.claim_next(Trigger.WATCHDOG, "bench"), 1)
        with autocommit.connect() as conn:
            conn.execute(text("VACUUM ANALYZE jlg_programme_turn"))
        plan = explain_next(engine, repository)
        following = timed_ms(lambda: repository.claim_next(Trigger.WATCHDOG, "bench"), args.claims)
        with engine.connect() as conn:
            still_picked = conn.execute(
                text(
                    "SELECT count(*) FROM jlg_programme_turn"
                    " WHERE program_id < :first AND next_due_at <= now()"
                ),
                {"first": LIVE_FROM},
            ).scalar_one()
        with engine.connect() as conn:
            waiting_ids = list(
                conn.execute(
                    text(
                        "SELECT id FROM hdb_program_session WHERE link_generation_status ="
                        " 'SCHEDULED' AND link_generation_at <= now() ORDER BY id LIMIT :n"
                    ),
                    {"n": args.claims},
                ).scalars()
            )
        ids = iter(waiting_ids)
        asked = timed_ms(
            lambda: repository.claim(next(ids), Trigger.EVENT, "bench"), len(waiting_ids)
        )
        engine.dispose()
        filler.dispose()
    print(f"loaded {args.rows:,} sessions in {loaded_s:.0f} s ({machine()})\n")
    print("The next claim's plan (EXPLAIN ANALYZE, rolled back):\n")
    print(plan + "\n")
    median_next = statistics.median(following)
    median_asked = statistics.median(asked)
    table(
        f"{args.rows:,} sessions, {args.waiting:,} waiting in recovery and {args.on_time:,} on "
        f"time over {args.programmes:,} programmes, {args.stuck_programmes:,} programmes more "
        f"with nothing to claim now; each claim its own transaction. Target: the next ≤ "
        f"{TARGET_MS:g} ms",
        [
            (
                "the first claim of the next (it moves the stuck programmes on)",
                f"{first:.2f}",
                "",
                "",
                "",
            ),
            (
                "claim of the next (claim_next)",
                f"{median_next:.2f}",
                f"{statistics.quantiles(following, n=20)[-1]:.2f}",
                f"{median_next / median_asked:.2f}x",
                targets.at_most("claim of the next (ms)", median_next, TARGET_MS),
            ),
            (
                "claim of a named session (claim)",
                f"{median_asked:.2f}",
                f"{statistics.quantiles(asked, n=20)[-1]:.2f}",
                "1.00x",
                "",
            ),
            (
                "watchdog: the turns refreshed",
                f"{statistics.median(refresh):.2f}",
                f"{max(refresh):.2f}",
                "",
                "",
            ),
            (
                "watchdog: the attendance",
                f"{statistics.median(attendance):.2f}",
                f"{max(attendance):.2f}",
                "",
                "",
            ),
        ],
        ("statement", "median ms", "p95 ms", "vs the named claim", ""),
    )
    print(
        f"\nProgrammes with nothing to claim still in the pick after {args.claims} claims:"
        f" {still_picked:,} of {args.stuck_programmes:,}\n"
    )
    print("Why is it waiting: the facts statement's plan (a waiting session):\n")
    print(why_plan + "\n")
    table(
        f"jlg why, asked {WHY_ASKED} times of each kind while {args.waiting:,} wait (the facts, "
        f"the last attempts, the service's view). Target: ≤ {WHY_TARGET_MS:g} ms",
        [
            (
                kind,
                f"{statistics.median(spent):.2f}",
                f"{statistics.quantiles(spent, n=20)[-1]:.2f}",
                targets.at_most(f"why, {kind} (ms)", statistics.median(spent), WHY_TARGET_MS),
            )
            for kind, spent in whys
        ],
        ("session", "median ms", "p95 ms", ""),
    )
    targets.finish(args.strict)


if __name__ == "__main__":
    main()
