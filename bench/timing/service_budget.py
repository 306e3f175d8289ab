"""The online-session service's shared view under load (docs/design.md "The online-session service:
one shared view"): a cohort of N sessions sharing one time (or with ``--spread``, times spread
over that many seconds), each event on SQS at its time, through the real dagster-daemon (SQS
sensor, shared runs, the watchdog) and the HTTP registrar, against the local stand-in keeping a
limit of its own: a call arriving when R were taken in the last second is answered 429 with
``Retry-After: 1``. Each case gets fresh databases, a fresh moto server (SQS whose receive costs
the same at any depth) and a fresh daemon; the rest is the default configuration.

    .venv/bin/python -m bench.timing.service_budget [--sessions 2000] [--rate 25] [--fault 180]
        [--spread 0] [--cases budget,budget-burst-1,defaults,hung,failing,unlimited]
        [--keep DIR] [--strict]

Cases: ``budget`` (``JLG_ONLINE_SESSION_RATE=R``, the burst its default, one second's
worth), ``budget-burst-N`` (the same, ``JLG_ONLINE_SESSION_BURST=N``), ``defaults`` (no
budget: the service's 429s are the only brake), ``hung`` and ``failing`` (the budget on; from
FAULT_AT_S after the time, for ``--fault`` seconds, the service accepts calls and answers none
until it heals / answers 503), ``unlimited`` (no budget and no limit at the service: the
CPU baseline), and ``nginx-budget`` / ``nginx-defaults`` (the same as ``budget`` /
``defaults``, the stand-in's limit off and nginx's ``limit_req`` at R, burst R - 1, in front of
it: bench/limiter.py; needs Debian's ``nginx-light``), and the one queue's order (docs/design.md
"One queue"; the budget on): ``fairness`` (the cohort is programme A's; 5 sessions of
programme B are due FAIRNESS_AFTER_S after it) and ``on-time-first`` (the cohort, programme A's,
fell due ten minutes before the time while an outage paused every call; at the time the pause is
cleared, as ``jlg service resume`` does, and 20 sessions of programme B are due ON_TIME_AFTER_S
after it).
Targets (the issue's): each B session COMPLETED ≤ 10 s after its time, and, in ``fairness``,
A within N/R + 30 s with no 429, in ``on-time-first`` the recovery drained at ≥ 0.9 R from its
first claim to its last (the order's cost) and made its first claim ≤ RECOVERY_START_S after
the pause was cleared (the watchdog's tick and a run's start; its rate from the action is
printed too); with the
budget, no 429, an achieved rate ≥ 0.95 R while the cohort
drains, all COMPLETED within N/R + 30 s of the time and no session called more than 5 s after
a later-timed one; by default, all COMPLETED within 2N/R + 60 s, no call inside a
``Retry-After`` window and none FAILED; after a fault, all COMPLETED within 30 s of the heal
plus what the budget needs for the sessions left then; the budget's CPU per session within
1.1x the unlimited cohort's; in every case, no cycle with two jobs.
"""

import argparse
import json
import math
import re
import tempfile
import threading
import time
from contextlib import ExitStack, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, text

from bench.common import (
    Targets,
    all_met,
    bench_database,
    cycles_with_two_jobs,
    group_cpu_seconds,
    machine,
    moto_process,
    status_counts,
    strict_option,
    table,
)
from bench.limiter import calls_seen, nginx_limit
from devstack.online_session import Answer, OnlineSessionService, online_session_service
from devstack.system import Children, start_daemon, system_env
from jlg_pipeline.adapters.database import create_engine
from jlg_pipeline.adapters.service_view import ServiceView
from jlg_pipeline.domain.constants import WATCHDOG_INTERVAL_S
from jlg_pipeline.domain.messages import build_message
from jlg_pipeline.domain.service_view import Health
from testkit.factories import add_registrations, arm_cohort

CASES = (
    "budget",
    "fairness",
    "on-time-first",
    "budget-burst-1",
    "defaults",
    "hung",
    "failing",
    "unlimited",
    "nginx-budget",
    "nginx-defaults",
)
NGINX_CASE = "nginx-"
"""Cases whose service is behind nginx's ``limit_req`` (bench/limiter.py) instead of the
stand-in's own limit: a limiter no one here wrote."""
BURST_CASE = re.compile(r"budget-burst-[1-9][0-9]*")
"""``budget`` with ``JLG_ONLINE_SESSION_BURST`` set to the case's number."""
LEAD_S = 40
"""The time lies this far ahead when the cohort is armed: the daemon is up by then."""
IDLE_SAMPLE_S = 15.0
"""The daemon's CPU over this long before the time, with nothing to do: its ticking, which
costs the same every second whatever the cohort, taken out of the net figure."""
FAULT_AT_S = 20
"""A fault begins this long after the time, while the cohort drains."""
CASE_LIMIT_S = 20 * 60
IN_FLIGHT_S = 0.25
"""A call that arrives this soon after a 429 took its turn before the pause was recorded: in
flight, not a call made inside the window."""
TOKEN = "bench-service-token"  # noqa: S105 - the local stand-in's
FAIRNESS_AFTER_S = 10
SMALL_PROGRAMME = 5
ON_TIME_AFTER_S = 5
ON_TIME_SESSIONS = 20
OVERDUE_S = 600
RECOVERY_START_S = WATCHDOG_INTERVAL_S + 5
"""on-time-first: a worker the watchdog launches claims this soon after the pause is cleared: its
next tick, then a run's start (about 3 s on two cores)."""
B = 2
"""The other programme of ``fairness`` and ``on-time-first`` (the cohort is programme 1's)."""


@dataclass
class Case:
    name: str
    sessions: int
    rate: float
    completed: int = 0
    failed: int = 0
    all_completed_s: float = float("nan")
    throttled: int = 0
    calls: int = 0
    achieved_rate: float = float("nan")
    time_order_s: float = float("nan")
    inside_retry_after: int = 0
    heal_s: float = float("nan")
    left_at_heal: int = 0
    after_heal_s: float = float("nan")
    cpu_per_session: float = float("nan")
    cpu_net_per_session: float = float("nan")
    """Net of the daemon's idle ticking over the case's length (IDLE_SAMPLE_S)."""
    twice: int = 0
    b_lag_s: float = float("nan")
    """fairness, on-time-first: the most a B session was COMPLETED after its time."""
    a_rate: float = float("nan")
    """on-time-first: the recovery's sessions over the time from its first claim to its last."""
    a_start_s: float = float("nan")
    """on-time-first: the recovery's first claim after the action (the pause cleared)."""
    a_overall: float = float("nan")
    """on-time-first: the recovery's sessions over the time from the action to its last."""
    verdicts: list[str] = field(default_factory=list)


def _settings(case: str, rate: float) -> dict[str, str]:
    case = case.removeprefix(NGINX_CASE)
    if case in ("fairness", "on-time-first"):
        return {"JLG_ONLINE_SESSION_RATE": f"{rate:g}"}
    if case in ("defaults", "unlimited"):
        return {}
    _, _, burst = case.partition("budget-burst-")
    chosen = {"JLG_ONLINE_SESSION_BURST": burst} if burst else {}
    return {"JLG_ONLINE_SESSION_RATE": f"{rate:g}", **chosen}


def _send(aws_sqs: object, queue_url: str, ids: list[int], fire_at: float, spread_s: float) -> None:
    """Each session's event on the queue at its time, as EventBridge puts it there: in batches
    of ten, each sent once its last session's time has come."""
    bodies = [json.dumps(build_message(sid, None)) for sid in ids]
    step = spread_s / len(ids)
    for first in range(0, len(bodies), 10):
        last = min(first + 10, len(bodies)) - 1
        time.sleep(max(fire_at + last * step - time.time(), 0))
        aws_sqs.send_message_batch(  # type: ignore[attr-defined]
            QueueUrl=queue_url,
            Entries=[
                {"Id": str(i), "MessageBody": body}
                for i, body in enumerate(bodies[first : first + 10])
            ],
        )


def _arm_b(engine: Engine, count: int, at: float) -> list[int]:
    """``count`` sessions of programme B SCHEDULED for ``at`` (Unix seconds)."""
    with engine.begin() as conn:
        ids = conn.execute(
            text(
                "INSERT INTO hdb_program_session"
                " (program_id, link_generation_at, link_generation_status)"
                " SELECT :b, to_timestamp(:at), 'SCHEDULED' FROM generate_series(1, :n)"
                " RETURNING id"
            ),
            {"b": B, "at": at, "n": count},
        ).scalars()
        return sorted(ids)


def _outage(engine: Engine, ids: list[int], fire_at: float) -> None:
    """The cohort fell due OVERDUE_S before the time, while the service had paused every call
    (its events were read, and their runs told to wait)."""
    with engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE hdb_program_session SET link_generation_at = to_timestamp(:at)"
                " WHERE id = ANY(:ids)"
            ),
            {"at": fire_at - OVERDUE_S, "ids": ids},
        )
    view = ServiceView(engine)
    view.report(Health.THROTTLED, float(OVERDUE_S), view.take_turn())


def _heal(engine: Engine, fire_at: float) -> None:
    """At the time an operator clears the pause (``jlg service resume``)."""
    time.sleep(max(fire_at - time.time(), 0))
    ServiceView(engine).resume("bench")


def _lags(engine: Engine) -> dict[int, tuple[float, float, float]]:
    """Per programme: the most a session was COMPLETED after its time, the last COMPLETED and
    the first claim of a session later COMPLETED (Unix seconds)."""
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT s.program_id,"
                " max(extract(epoch FROM a.finished_at - s.link_generation_at)),"
                " max(extract(epoch FROM a.finished_at)), min(extract(epoch FROM a.claimed_at))"
                " FROM jlg_generation_attempt a JOIN hdb_program_session s"
                " ON s.id = a.program_session_id WHERE a.outcome = 'COMPLETED'"
                " GROUP BY s.program_id"
            )
        ).all()
    return {int(p): (float(lag), float(last), float(first)) for p, lag, last, first in rows}


def _fault(service: OnlineSessionService, case: str, fault_s: float, began: list[float]) -> None:
    """From FAULT_AT_S after the time, the service hangs or fails for ``fault_s``; then heals.
    ``began`` gets the heal's monotonic time."""
    healed = threading.Event()
    service.answer = Answer(until=healed) if case == "hung" else Answer(status=503, body=b"{}")
    time.sleep(fault_s)
    service.answer = Answer()
    healed.set()
    began.append(time.monotonic())


def _last_completed(engine: Engine) -> float | None:
    """The last COMPLETED attempt's end, as Unix seconds."""
    with engine.connect() as conn:
        last = conn.execute(
            text(
                "SELECT extract(epoch FROM max(finished_at)) FROM jlg_generation_attempt"
                " WHERE outcome = 'COMPLETED'"
            )
        ).scalar_one()
    return float(last) if last is not None else None


def _times(engine: Engine) -> dict[int, float]:
    with engine.connect() as conn:
        rows = conn.execute(
            text("SELECT id, extract(epoch FROM link_generation_at) FROM hdb_program_session")
        ).all()
    return {int(sid): float(at) for sid, at in rows}


def _time_order_s(first_call: dict[int, float], times: dict[int, float]) -> float:
    """The most any session was first called after a session with a later time was."""
    by_time: dict[float, list[float]] = {}
    for sid, at in first_call.items():
        by_time.setdefault(times[sid], []).append(at)
    worst = 0.0
    earliest_later = float("inf")
    for moment in sorted(by_time, reverse=True):
        worst = max(worst, max(by_time[moment]) - earliest_later)
        earliest_later = min(earliest_later, min(by_time[moment]))
    return worst


def _calls_inside_retry_after(received: list[dict[str, Any]]) -> int:
    """Calls that arrived inside a Retry-After window the service had answered, less those
    already in flight (IN_FLIGHT_S)."""
    arrivals = sorted(float(c["at"]) for c in received)
    windows = [float(c["at"]) for c in received if c.get("status") == 429]
    inside = 0
    for at in arrivals:
        if any(w + IN_FLIGHT_S < at < w + 1.0 for w in windows):
            inside += 1
    return inside


def _keep(folder: Path, name: str, daemon_log: Path, received: list[dict[str, Any]]) -> None:
    """What a case leaves to read after it: the daemon's log, and each call the service
    received (when, its answer, which session) as ``<case>-calls.json``."""
    folder.mkdir(parents=True, exist_ok=True)
    if daemon_log.exists():
        (folder / f"{name}-daemon.log").write_bytes(daemon_log.read_bytes())
    calls = [
        {
            "at": c["at"],
            "status": c.get("status"),
            "session": (c.get("json") or {}).get("sessionId"),
        }
        for c in received
    ]
    (folder / f"{name}-calls.json").write_text(json.dumps(calls))


def run_case(
    name: str,
    sessions: int,
    rate: float,
    fault_s: float,
    keep: Path | None = None,
    spread_s: float = 0.0,
) -> Case:
    case = Case(name, sessions, rate)
    with (
        bench_database("jlg_bench_budget") as url,
        bench_database("jlg_bench_budget_dagster", migrated=False) as dagster_url,
        moto_process("depth-free") as aws,
        online_session_service() as service,
        tempfile.TemporaryDirectory(prefix="jlg-bench-budget-", ignore_cleanup_errors=True) as d,
        ExitStack() as stack,
    ):
        home = Path(d)
        engine = create_engine(url)
        add_registrations(engine, 1, 20)
        behind_nginx = name.startswith(NGINX_CASE)
        service.limit_per_s = None if name == "unlimited" or behind_nginx else rate
        limiter = (
            nginx_limit(service.url, rate, home)
            if behind_nginx
            else nullcontext((service.url, None))
        )
        service_url, nginx_log = stack.enter_context(limiter)
        env = system_env(
            home,
            dagster_url,
            url,
            **aws.env,
            JLG_SQS_QUEUE_URL=aws.queue_url,
            JLG_REGISTRAR="http",
            JLG_ONLINE_SESSION_URL=service_url,
            JLG_ONLINE_SESSION_TOKEN=TOKEN,
            ENABLE_JOIN_LINK_SCHEDULER="true",
            **_settings(name, rate),
        )
        ids, fire_at = arm_cohort(engine, sessions, LEAD_S, spread_s)
        others: list[int] = []
        if name == "fairness":
            others = _arm_b(engine, SMALL_PROGRAMME, fire_at + FAIRNESS_AFTER_S)
        elif name == "on-time-first":
            _outage(engine, ids, fire_at)
            others = _arm_b(engine, ON_TIME_SESSIONS, fire_at + ON_TIME_AFTER_S)
        total = sessions + len(others)
        children = Children()
        healed: list[float] = []
        try:
            pgid = start_daemon(children, env, home / "daemon.log")
            time.sleep(max(fire_at - IDLE_SAMPLE_S - time.time(), 0))
            idle_from = sum(group_cpu_seconds(pgid).values())
            time.sleep(max(fire_at - time.time(), 0))
            cpu_before = sum(group_cpu_seconds(pgid).values())
            idle_per_s = (cpu_before - idle_from) / IDLE_SAMPLE_S
            clock_offset = time.time() - time.monotonic()
            sqs = aws.client("sqs")
            if name == "on-time-first":
                threading.Thread(target=_heal, args=(engine, fire_at), daemon=True).start()
            else:
                threading.Thread(
                    target=_send, args=(sqs, aws.queue_url, ids, fire_at, spread_s), daemon=True
                ).start()
            if others:
                b_at = fire_at + (FAIRNESS_AFTER_S if name == "fairness" else ON_TIME_AFTER_S)
                threading.Thread(
                    target=_send, args=(sqs, aws.queue_url, others, b_at, 0.0), daemon=True
                ).start()
            if name in ("hung", "failing"):
                time.sleep(max(fire_at + FAULT_AT_S - time.time(), 0))
                threading.Thread(
                    target=_fault, args=(service, name, fault_s, healed), daemon=True
                ).start()
            deadline = fire_at + CASE_LIMIT_S + fault_s
            while time.time() < deadline and not children.exited():
                completed = status_counts(engine)["COMPLETED"]
                if healed and math.isnan(case.heal_s):
                    case.heal_s = healed[0] + clock_offset - fire_at
                    case.left_at_heal = sessions - completed
                if completed >= total:
                    break
                time.sleep(0.5)
            spent = sum(group_cpu_seconds(pgid).values()) - cpu_before
            case.cpu_per_session = spent / sessions
            ticking = idle_per_s * (time.time() - fire_at)
            case.cpu_net_per_session = max(spent - ticking, 0.0) / sessions
        finally:
            children.stop()
        counts = status_counts(engine)
        case.completed, case.failed = counts["COMPLETED"], counts["FAILED"]
        last, case.twice = _last_completed(engine), cycles_with_two_jobs(engine)
        lags = _lags(engine)
        if others and B in lags:
            case.b_lag_s = lags[B][0]
        if name == "on-time-first" and 1 in lags:
            _, last_a, first_a = lags[1]
            case.a_rate = sessions / (last_a - first_a)
            case.a_start_s = first_a - fire_at
            case.a_overall = sessions / (last_a - fire_at)
        case.completed -= len(others)
        if last is not None and case.completed == sessions:
            case.all_completed_s = last - fire_at
            if not math.isnan(case.heal_s):
                case.after_heal_s = case.all_completed_s - case.heal_s
        received = calls_seen(nginx_log) if nginx_log is not None else list(service.received)
        if keep is not None:
            _keep(keep, name, home / "daemon.log", received)
        case.calls = len(received)
        case.throttled = sum(1 for c in received if c.get("status") == 429)
        arrivals = sorted(float(c["at"]) for c in received)
        if len(arrivals) > 1:
            case.achieved_rate = (len(arrivals) - 1) / (arrivals[-1] - arrivals[0])
        first_call: dict[int, float] = {}
        for c in received:
            sid = (c.get("json") or {}).get("sessionId")
            if isinstance(sid, int):
                first_call.setdefault(sid, float(c["at"]))
        case.time_order_s = _time_order_s(first_call, _times(engine))
        case.inside_retry_after = _calls_inside_retry_after(received)
        engine.dispose()
    return case


def _judge(case: Case, targets: Targets) -> str:
    n, r, name = case.sessions, case.rate, case.name
    verdicts = [
        targets.at_most(f"{name}: not COMPLETED", n - case.completed, 0),
        targets.at_most(f"{name}: cycles with two jobs", case.twice, 0),
    ]
    if name in ("fairness", "on-time-first"):
        verdicts.append(
            targets.at_most(f"{name}: B COMPLETED after its time (s)", case.b_lag_s, 10)
        )
    if name == "fairness":
        verdicts += [
            targets.at_most(f"{name}: 429 answers", case.throttled, 0),
            targets.at_most(f"{name}: A all COMPLETED after (s)", case.all_completed_s, n / r + 30),
        ]
    elif name == "on-time-first":
        verdicts += [
            targets.at_least(f"{name}: recovery's rate", case.a_rate, 0.9 * r),
            targets.at_most(
                f"{name}: recovery's first claim after the action (s)",
                case.a_start_s,
                RECOVERY_START_S,
            ),
        ]
    if name.removeprefix(NGINX_CASE).startswith("budget"):
        verdicts += [
            targets.at_most(f"{name}: 429 answers", case.throttled, 0),
            targets.at_least(f"{name}: achieved rate", case.achieved_rate, 0.95 * r),
            targets.at_most(f"{name}: all COMPLETED after (s)", case.all_completed_s, n / r + 30),
            targets.at_most(f"{name}: called after a later-timed one (s)", case.time_order_s, 5),
        ]
    elif name == "nginx-defaults":
        verdicts += [targets.at_most(f"{name}: FAILED", case.failed, 0)]
    elif name == "defaults":
        verdicts += [
            targets.at_most(
                f"{name}: all COMPLETED after (s)", case.all_completed_s, 2 * n / r + 60
            ),
            targets.at_most(f"{name}: calls inside Retry-After", case.inside_retry_after, 0),
            targets.at_most(f"{name}: FAILED", case.failed, 0),
        ]
    elif name in ("hung", "failing"):
        verdicts += [
            targets.at_most(
                f"{name}: all COMPLETED after the heal (s)",
                case.after_heal_s,
                30 + case.left_at_heal / r,
            ),
            targets.at_most(f"{name}: FAILED", case.failed, 0),
        ]
    return all_met(verdicts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=2000)
    parser.add_argument("--rate", type=float, default=25.0, help="R: the service's limit")
    parser.add_argument("--fault", type=float, default=180.0, help="seconds hung or failing")
    parser.add_argument(
        "--spread",
        type=float,
        default=0.0,
        help="the sessions' times spread evenly over this many seconds (0: one shared time)",
    )
    parser.add_argument("--cases", default=",".join(CASES), help=f"of {', '.join(CASES)}")
    parser.add_argument(
        "--keep", type=Path, help="a folder for each case's daemon log and calls (JSON)"
    )
    strict_option(parser)
    args = parser.parse_args()
    names = args.cases.split(",")
    unknown = {n for n in names if n not in CASES and not BURST_CASE.fullmatch(n)}
    if unknown:
        parser.error(f"unknown case(s): {', '.join(sorted(unknown))}")
    targets = Targets()
    if not 0 <= args.spread <= 3600:
        parser.error("--spread is between 0 and 3600 seconds")
    cases = [
        run_case(name, args.sessions, args.rate, args.fault, args.keep, args.spread)
        for name in names
    ]
    n, r = args.sessions, args.rate
    table(
        f"{n} sessions "
        + (f"with times over {args.spread:g} s" if args.spread else "sharing a time")
        + f", the service limited to {r:g} calls/s, through the "
        f"real daemon ({machine()}); faults of {args.fault:g} s from {FAULT_AT_S} s after "
        f"the time. Targets: budget ≤ {n / r + 30:g} s, no 429, ≥ {0.95 * r:g} calls/s, "
        f"order ≤ 5 s; defaults ≤ {2 * n / r + 60:g} s, 0 inside Retry-After, 0 FAILED; "
        "faults ≤ 30 s after the heal + left/R",
        [
            (
                c.name,
                f"{c.completed}/{c.sessions}",
                f"{c.all_completed_s:.0f} s",
                str(c.calls),
                str(c.throttled),
                f"{c.achieved_rate:.1f}",
                f"{c.time_order_s:.1f} s",
                str(c.inside_retry_after),
                str(c.failed),
                "" if math.isnan(c.heal_s) else f"{c.heal_s:.0f} s / {c.left_at_heal}",
                "" if math.isnan(c.after_heal_s) else f"{c.after_heal_s:.0f} s",
                "" if math.isnan(c.b_lag_s) else f"{c.b_lag_s:.1f} s",
                ""
                if math.isnan(c.a_rate)
                else f"{c.a_rate:.1f} ({c.a_overall:.1f} from the action)",
                "" if math.isnan(c.a_start_s) else f"{c.a_start_s:.1f} s",
                f"{c.cpu_per_session:.3f} ({c.cpu_net_per_session:.3f} net)",
                str(c.twice),
                _judge(c, targets),
            )
            for c in cases
        ],
        (
            "case",
            "COMPLETED",
            "all COMPLETED after the time",
            "calls",
            "429s",
            "calls/s",
            "called after a later-timed one",
            "inside Retry-After",
            "FAILED",
            "healed at / left then",
            "all COMPLETED after the heal",
            "B COMPLETED after its time (max)",
            "recovery calls/s, first claim to last",
            "recovery's first claim after the action",
            "CPU-s/session (net of idle ticking)",
            "two jobs",
            "",
        ),
    )
    unlimited = next((c for c in cases if c.name == "unlimited"), None)
    budgets = [c for c in cases if c.name.startswith("budget")]
    if unlimited is not None and budgets:
        table(
            "The budget's cost: CPU-s per session, each budget case over unlimited (the "
            "budgeted cohort lasts longer, and the daemon ticks meanwhile: the target is on the "
            "net figure)",
            [
                (
                    c.name,
                    f"{c.cpu_per_session:.3f} / {unlimited.cpu_per_session:.3f}",
                    f"{c.cpu_per_session / unlimited.cpu_per_session:.2f}x",
                    f"{c.cpu_net_per_session:.3f} / {unlimited.cpu_net_per_session:.3f}",
                    f"{c.cpu_net_per_session / unlimited.cpu_net_per_session:.2f}x",
                    "≤ 1.1x",
                    targets.at_most(
                        f"{c.name}: CPU ratio (net)",
                        c.cpu_net_per_session / unlimited.cpu_net_per_session,
                        1.1,
                    ),
                )
                for c in budgets
            ],
            ("case", "whole group", "ratio", "net of idle ticking", "ratio", "target", ""),
        )
    targets.finish(args.strict)


if __name__ == "__main__":
    main()
