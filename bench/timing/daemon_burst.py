"""Burst benchmark (docs/design.md "Bursts"): a cohort of N sessions sharing one fire time, its
events delivered to SQS at that time, through the real dagster-daemon (SQS sensor,
QueuedRunCoordinator, the watchdog) until every session is COMPLETED and every run has
ended. Each size runs in the modes asked for, side by side: the defaults (a run each while
few wait, shared runs once more do) and one run per message (``JLG_MAX_SESSIONS_PER_RUN=1``,
the design card's shape whatever the count). Each case gets fresh databases, a fresh moto
server and a fresh daemon. SQS is moto whose receive costs the same at any queue depth, as
SQS's does (``--sqs depth-free``, ``testkit.moto_sqs``), and the targets are judged there;
``--sqs stock`` adds stock moto, whose receive walks the queue 30 times a call (0.4 s a call
at 2,000 in flight), for comparison.

    .venv/bin/python -m bench.timing.daemon_burst [--sizes 500,2000] [--modes defaults,one-each]
        [--sqs depth-free,stock] [--strict]

Reported per case: time from the fire time until all COMPLETED, the share COMPLETED within 2
minutes of it (from the attempt history), CPU per session (the daemon's process tree: the
daemon, its code server and every run worker) until all COMPLETED and until every run
ended, runs created, which trigger completed the sessions, peak memory of the process tree,
sessions generated more than once (bulk jobs at the local registrar), and how long after the
first delivery the queue was empty (every message deleted, its run existing; the sensor's own
rate is ``bench.timing.sqs_intake``'s).
"""

import argparse
import json
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Engine, text

from bench.common import (
    Targets,
    all_met,
    bench_database,
    generated_twice,
    generation_runs,
    group_cpu_seconds,
    group_rss_kib,
    machine,
    moto_process,
    queue_empty,
    sqs_option,
    status_counts,
    strict_option,
    table,
)
from devstack.system import Children, start_daemon, system_env
from jlg_pipeline.adapters.database import create_engine
from jlg_pipeline.domain.messages import build_message
from testkit.factories import add_registrations, arm_cohort

LEAD_S = 20
"""The fire time lies this far ahead when the sessions are armed: the daemon is up by then."""
DUPLICATES = 5
"""Deliveries sent twice, as SQS and EventBridge may."""
CASE_LIMIT_S = 40 * 60


MODES = {"defaults": {}, "one-each": {"JLG_MAX_SESSIONS_PER_RUN": "1"}}


@dataclass
class Case:
    sessions: int
    mode: str
    sqs: str
    all_completed_s: float = 0.0
    within_2_min: float = 0.0
    cpu_at_completed: float = 0.0
    cpu_at_end: float = 0.0
    runs: int = 0
    by_trigger: str = ""
    peak_mib: float = 0.0
    twice: int = 0
    queue_empty_s: float = 0.0


def _attempt_figures(engine: Engine) -> tuple[float, str]:
    """(share of sessions COMPLETED within 2 minutes of their time, completions by trigger)."""
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT a.trigger, a.finished_at - a.link_generation_at <= interval '2 minutes'"
                " FROM jlg_generation_attempt a WHERE a.outcome = 'COMPLETED'"
            )
        ).all()
        total = conn.execute(text("SELECT count(*) FROM hdb_program_session")).scalar_one()
    triggers: dict[str, int] = {}
    for trigger, _ in rows:
        triggers[trigger] = triggers.get(trigger, 0) + 1
    on_time = sum(1 for _, within in rows if within)
    return on_time / total, ", ".join(f"{t} {n}" for t, n in sorted(triggers.items()))


def run_case(sessions: int, mode: str, stand_in: str) -> Case:
    case = Case(sessions, mode, stand_in)
    with (
        bench_database("jlg_bench_burst") as url,
        bench_database("jlg_bench_burst_dagster", migrated=False) as dagster_url,
    ):
        engine = create_engine(url)
        add_registrations(engine, 1, 20)
        with (
            moto_process(stand_in) as aws,
            tempfile.TemporaryDirectory(
                prefix="jlg-bench-burst-", ignore_cleanup_errors=True
            ) as home_dir,
        ):
            home = Path(home_dir)
            env = system_env(
                home,
                dagster_url,
                url,
                **aws.env,
                JLG_SQS_QUEUE_URL=aws.queue_url,
                JLG_REGISTRAR="local",
                ENABLE_JOIN_LINK_SCHEDULER="true",
                **MODES[mode],
            )
            ids, fire_at = arm_cohort(engine, sessions, LEAD_S)
            children = Children()
            stop = threading.Event()
            peak = 0
            try:
                pgid = start_daemon(children, env, home / "daemon.log")

                def sample() -> None:
                    nonlocal peak
                    while not stop.wait(0.5):
                        peak = max(peak, group_rss_kib(pgid))

                threading.Thread(target=sample, daemon=True).start()
                time.sleep(max(fire_at - time.time(), 0))
                before = sum(group_cpu_seconds(pgid).values())
                sent_at = time.time()
                sqs = aws.client("sqs")
                bodies = [json.dumps(build_message(sid, None)) for sid in ids]
                bodies += bodies[:DUPLICATES]
                for first in range(0, len(bodies), 10):
                    sqs.send_message_batch(
                        QueueUrl=aws.queue_url,
                        Entries=[
                            {"Id": str(i), "MessageBody": body}
                            for i, body in enumerate(bodies[first : first + 10])
                        ],
                    )
                deadline = sent_at + CASE_LIMIT_S
                emptied_at = 0.0
                while status_counts(engine)["COMPLETED"] < sessions:
                    if children.exited() or time.time() > deadline:
                        raise RuntimeError((home / "daemon.log").read_text()[-3000:])
                    if not emptied_at and queue_empty(sqs, aws.queue_url):
                        emptied_at = time.time()
                    time.sleep(0.5)
                case.all_completed_s = time.time() - fire_at
                while not emptied_at and time.time() < deadline:
                    emptied_at = time.time() if queue_empty(sqs, aws.queue_url) else 0.0
                    time.sleep(0.5)
                case.queue_empty_s = emptied_at - sent_at
                case.cpu_at_completed = sum(group_cpu_seconds(pgid).values()) - before
                while generation_runs(dagster_url)[1] and time.time() < deadline:
                    time.sleep(2)
                case.cpu_at_end = sum(group_cpu_seconds(pgid).values()) - before
            finally:
                stop.set()
                children.stop()
        case.peak_mib = peak / 1024
        case.twice = generated_twice(engine)
        case.within_2_min, case.by_trigger = _attempt_figures(engine)
        engine.dispose()
        case.runs = generation_runs(dagster_url)[0]
    return case


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="500,2000", help="cohort sizes, comma-separated")
    parser.add_argument(
        "--modes", default="defaults", help=f"comma-separated, of {', '.join(MODES)}"
    )
    sqs_option(parser)
    strict_option(parser)
    args = parser.parse_args()
    targets = Targets()
    cases = [
        run_case(size, mode, sqs)
        for size in (int(s) for s in args.sizes.split(","))
        for mode in args.modes.split(",")
        for sqs in args.sqs.split(",")
    ]
    table(
        f"A cohort sharing one fire time, through the real daemon ({machine()}); "
        f"{DUPLICATES} deliveries sent twice; targets with the defaults on depth-free SQS: all "
        "COMPLETED within 2 min, ≤ 0.05 CPU-s per session, 0 twice",
        [
            (
                str(c.sessions),
                c.mode,
                c.sqs,
                f"{c.all_completed_s:.0f} s",
                f"{c.within_2_min:.0%}",
                f"{c.cpu_at_completed / c.sessions:.3f}",
                f"{c.cpu_at_end / c.sessions:.3f}",
                str(c.runs),
                c.by_trigger,
                f"{c.peak_mib:.0f} MiB",
                str(c.twice),
                f"{c.queue_empty_s:.0f} s",
                _verdict(c, targets),
            )
            for c in cases
        ],
        (
            "sessions",
            "mode",
            "SQS",
            "all COMPLETED after",
            "COMPLETED ≤ 2 min",
            "CPU-s/session (all COMPLETED)",
            "CPU-s/session (all runs ended)",
            "runs",
            "completed by",
            "peak RSS",
            "twice",
            "queue empty after",
            "",
        ),
    )
    _ratios(cases, "mode", "defaults", "one-each", "One run per message over the defaults")
    _ratios(cases, "sqs", "depth-free", "stock", "Stock moto over depth-free SQS")
    targets.finish(args.strict)


def _ratios(cases: list[Case], axis: str, base: str, other: str, title: str) -> None:
    """``other`` over ``base`` along ``axis`` (mode or sqs), per case the two share otherwise."""
    pairs: dict[tuple[object, ...], dict[str, Case]] = {}
    for c in cases:
        rest = tuple(getattr(c, k) for k in ("sessions", "mode", "sqs") if k != axis)
        pairs.setdefault(rest, {})[getattr(c, axis)] = c
    rows: list[tuple[str, ...]] = [
        (
            " · ".join(map(str, rest)),
            f"{p[other].all_completed_s / p[base].all_completed_s:.1f}x",
            f"{p[other].cpu_at_end / p[base].cpu_at_end:.1f}x",
        )
        for rest, p in pairs.items()
        if base in p and other in p
    ]
    if rows:
        table(title, rows, ("case", "time to all COMPLETED", "CPU until every run ended"))


def _verdict(case: Case, targets: Targets) -> str:
    """The targets are the defaults' on an SQS whose receive does not walk the queue (one run
    per message is the baseline, and stock moto the reference; both expected to miss)."""
    if case.mode != "defaults" or case.sqs != "depth-free":
        return ""
    name = f"{case.sessions}, defaults"
    verdicts = [
        targets.at_most(f"{name}: all COMPLETED after (s)", case.all_completed_s, 120),
        targets.at_most(f"{name}: CPU-s per session", case.cpu_at_end / case.sessions, 0.05),
        targets.at_most(f"{name}: generated twice", case.twice, 0),
    ]
    return all_met(verdicts)


if __name__ == "__main__":
    main()
