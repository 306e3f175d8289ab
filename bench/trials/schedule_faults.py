"""On time under faults: admins arm sessions through the served API while AWS's scheduler API
fails, and we count the sessions COMPLETED within 2 minutes of their time.

    .venv/bin/python -m bench.trials.schedule_faults [--sessions 200] [--phase-seconds 120]
        [--strict]

Two worlds run side by side, each with its own database, moto server and web app (the real
app under uvicorn): **outbox** (schedule sync as built: the fast path, then
``join_link_schedule_sync_job`` retries and near times go direct) and **one-shot** (the same app
with only the call after the response: today's behaviour before the outbox). The app's calls to
EventBridge Scheduler go through a fault proxy in front of moto; the timeline is the same for
both worlds (testkit's fault proxy, as in the chaos trial): AWS down (connections reset) for a
phase, then throttling (each connection's first call refused), then slow (every chunk held back
1.5 s), then healthy. One session in four gets a
second PATCH a few seconds after the first, so two calls of one session race.

The Dagster side is emulated in-process, every 5 s, by what its sensors do: the EventBridge
delivery stand-in fires due schedules onto SQS (moto, not through the proxy: delivery is AWS's
own), queue messages are generated through the gate (trigger event), and, in the outbox world,
the sync sensor's check launches due direct generations and runs the sync job's ``sync``. The
fallback sweep (every 4 h, after a 30 min grace) is what the one-shot world would otherwise wait
for; it is not run here, so a session it never generates counts as late. Target, for the
outbox world (one-shot is the baseline, expected to miss): every session COMPLETED within 2
minutes of its time, none early, none twice.
"""

import argparse
import os
import random
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import Engine, text

from bench.common import (
    JWT_ENV,
    Targets,
    admin_headers,
    all_met,
    bench_database,
    machine,
    moto_process,
    strict_option,
    table,
)
from devstack.aws import EXECUTION_ROLE_ARN, LocalAws
from devstack.eventbridge import EventBridgeStandIn
from devstack.system import app_env, aws_env
from jlg_pipeline.adapters.aws_scheduler import AwsScheduler, scheduler_client
from jlg_pipeline.adapters.database import create_engine
from jlg_pipeline.adapters.registrars.embedded import EmbeddedRegistrar
from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.adapters.schedule_outbox import ScheduleOutbox
from jlg_pipeline.domain.attempts import Trigger
from jlg_pipeline.domain.eventbridge_schedule import ScheduleTarget
from jlg_pipeline.domain.generation import BulkRegisterRequest
from jlg_pipeline.domain.messages import parse_message
from jlg_pipeline.domain.validation import SessionId
from jlg_pipeline.services.generation import generate_for_session
from jlg_pipeline.services.schedule_sync import ScheduleSync
from testkit.factories import NOT_SCHEDULED, add_registrations, create_sessions
from testkit.fault_proxy import FaultProxy, Mode
from testkit.served import start_web

ON_TIME = timedelta(minutes=2)
TICK_SECONDS = 5.0


class Faults:
    """The timeline both worlds share, played on each world's fault proxy (the one the tests
    and the other trials use): AWS down (every connection reset), throttling (each connection's
    first call refused), slow (every chunk held back), then healthy."""

    PHASES = (Mode.REFUSING, Mode.THROTTLING, Mode.SLOW, Mode.PASSING)

    def __init__(self, phase_seconds: float) -> None:
        self.started = time.monotonic()
        self.phase_seconds = phase_seconds
        self.proxies: list[FaultProxy] = []

    def phase(self) -> Mode:
        index = int((time.monotonic() - self.started) // self.phase_seconds)
        return self.PHASES[min(index, len(self.PHASES) - 1)]

    def play(self, stop: threading.Event) -> None:
        """Set every proxy to the phase's mode until ``stop``."""
        while not stop.is_set():
            mode = self.phase()
            for proxy in self.proxies:
                if proxy.mode is not mode:
                    proxy.mode = mode
            stop.wait(0.2)


@dataclass
class World:
    name: str
    outbox_on: bool
    url: str
    engine: Engine
    aws: LocalAws
    proxy_url: str
    base: str = ""
    sessions: list[SessionId] = field(default_factory=list)
    generated: dict[str, int] = field(default_factory=lambda: {"event": 0, "direct": 0})
    stop: threading.Event = field(default_factory=threading.Event)

    def generate(self, session_id: int, trigger: Trigger) -> None:
        repository = ProgramSessionRepository(self.engine)
        outcome = generate_for_session(
            BulkRegisterRequest.parse(session_id),
            repository=repository,
            registrar=EmbeddedRegistrar(self.engine),
            trigger=trigger,
        )
        if outcome.result.value == "completed":
            self.generated[trigger.value] += 1

    def daemon(self) -> None:
        """What the sensors do, every TICK_SECONDS."""
        sqs = self.aws.client("sqs")
        standin = EventBridgeStandIn(self.aws.client("scheduler"), sqs)
        outbox = ScheduleOutbox(self.engine)
        target = ScheduleTarget(self.aws.queue_arn, EXECUTION_ROLE_ARN)
        credentials = {k: v for k, v in self.aws.env.items() if k != "AWS_ENDPOINT_URL"}
        os.environ.update(credentials)  # moto's fake ones, as the app has them
        sync = ScheduleSync(
            outbox,
            AwsScheduler(scheduler_client(region_name="us-east-1", endpoint_url=self.proxy_url)),
            target,
            enabled=True,
        )
        sync_run: Future[Any] | None = None
        with ThreadPoolExecutor(4) as runs, ThreadPoolExecutor(1) as sync_runs:
            while not self.stop.wait(TICK_SECONDS):
                try:
                    sync_run = self._tick(sqs, standin, outbox, sync, runs, sync_runs, sync_run)
                except Exception as exc:  # noqa: BLE001 - a tick that fails is retried, as Dagster does
                    print(f"{self.name}: tick failed: {exc!r}")

    def _tick(
        self,
        sqs: Any,
        standin: EventBridgeStandIn,
        outbox: ScheduleOutbox,
        sync: ScheduleSync,
        runs: ThreadPoolExecutor,
        sync_runs: ThreadPoolExecutor,
        sync_run: "Future[Any] | None",
    ) -> "Future[Any] | None":
        standin.tick(datetime.now(UTC))
        work = []
        for _ in range(10):
            batch = sqs.receive_message(QueueUrl=self.aws.queue_url, MaxNumberOfMessages=10).get(
                "Messages", []
            )
            for message in batch:
                sid = parse_message(message["Body"]).data.programSessionId
                work.append(runs.submit(self.generate, sid, Trigger.EVENT))
                sqs.delete_message(
                    QueueUrl=self.aws.queue_url, ReceiptHandle=message["ReceiptHandle"]
                )
            if len(batch) < 10:
                break
        if self.outbox_on:
            launches, due = outbox.due_work()
            for launch in launches:
                work.append(runs.submit(self.generate, launch.session_id, Trigger.DIRECT))
                outbox.retire_direct(launch)
            # The sync job runs on its own, one at a time, as the sensor launches it.
            if sync_run is not None and sync_run.done() and sync_run.exception():
                print(f"{self.name}: sync run failed: {sync_run.exception()!r}")
            if due and (sync_run is None or sync_run.done()):
                sync_run = sync_runs.submit(sync.sync)
        for future in work:
            future.result()
        return sync_run


def arm(world: World, plan: list[tuple[float, int, timedelta]], started: float) -> None:
    """PATCH as the plan says: (seconds after start, session index, lead time)."""
    headers = admin_headers()
    with httpx.Client(base_url=world.base, headers=headers, timeout=30) as client:
        for at_second, index, lead in plan:
            delay = started + at_second - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            sid = world.sessions[index]
            fire = datetime.now(UTC) + lead
            response = client.patch(
                f"/program-session/{sid}/link-generation",
                json={"linkGenerationAt": fire.isoformat()},
            )
            assert response.status_code == 200, response.text


def results(world: World) -> dict[str, Any]:
    with world.engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT s.id, s.link_generation_at, s.link_generation_status, "
                "(SELECT min(j.finished_at) FROM jlg_local_bulk_job j "
                " WHERE j.program_session_id = s.id) AS finished, "
                "(SELECT count(*) FROM jlg_local_bulk_job j "
                " WHERE j.program_session_id = s.id) AS jobs "
                "FROM hdb_program_session s WHERE s.id = ANY(:ids)"
            ),
            {"ids": world.sessions},
        ).all()
    lateness = [r.finished - r.link_generation_at for r in rows if r.finished is not None]
    return {
        "on_time": sum(1 for late in lateness if late <= ON_TIME),
        "late": sum(1 for late in lateness if late > ON_TIME),
        "never": sum(1 for r in rows if r.finished is None),
        "early": sum(1 for late in lateness if late < -timedelta(seconds=1)),
        "twice": sum(1 for r in rows if r.jobs > 1),
        "worst": max(lateness, default=timedelta(0)),
        "total": len(rows),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--phase-seconds", type=float, default=120)
    parser.add_argument("--min-lead", type=float, default=2.5, help="minutes")
    parser.add_argument("--max-lead", type=float, default=6.0, help="minutes")
    strict_option(parser)
    args = parser.parse_args()
    targets = Targets()
    rng = random.Random(11)
    arming = 3 * args.phase_seconds  # PATCHes spread over down, failing and slow
    plan: list[tuple[float, int, timedelta]] = []
    for index in range(args.sessions):
        at = arming * index / args.sessions
        lead = timedelta(minutes=rng.uniform(args.min_lead, args.max_lead))
        plan.append((at, index, lead))
        if index % 4 == 0:
            plan.append((at + rng.uniform(0.2, 3), index, lead + timedelta(minutes=1)))
    plan.sort()
    deadline = arming + 3 + args.max_lead * 60 + ON_TIME.total_seconds() + 30
    faults = Faults(args.phase_seconds)
    worlds: list[World] = []
    with ExitStack() as stack:
        for name, outbox_on in (("outbox", True), ("one-shot", False)):
            url = stack.enter_context(bench_database(f"jlg_bench_faults_{name[:3]}"))
            engine = create_engine(url, pool_size=8, max_overflow=8)
            stack.callback(engine.dispose)
            add_registrations(engine, 1, 25)
            aws = stack.enter_context(moto_process())
            proxy = FaultProxy(int(aws.endpoint_url.rsplit(":", 1)[1]))
            proxy.mode = Mode.REFUSING
            stack.callback(proxy.close)
            faults.proxies.append(proxy)
            proxy_url = f"http://127.0.0.1:{proxy.port}"
            world = World(name, outbox_on, url, engine, aws, proxy_url)
            world.sessions = create_sessions(
                engine, args.sessions, at_offset=None, status=NOT_SCHEDULED
            )
            env = {
                **app_env(url, **aws_env(aws), **JWT_ENV, ENABLE_JOIN_LINK_SCHEDULER="true"),
                "AWS_ENDPOINT_URL": proxy_url,
            }
            log = Path(f"/tmp/jlg_bench_faults_{name}.log")  # noqa: S108 - a local bench log
            process, world.base = start_web(env, log=log)
            stack.callback(process.wait, 10)
            stack.callback(process.terminate)
            worlds.append(world)
        faults.started = time.monotonic()
        playing = threading.Event()
        stack.callback(playing.set)
        threads = [threading.Thread(target=faults.play, args=(playing,), daemon=True)]
        threads += [threading.Thread(target=w.daemon, daemon=True) for w in worlds]
        threads += [threading.Thread(target=arm, args=(w, plan, faults.started)) for w in worlds]
        for thread in threads:
            thread.start()
        while time.monotonic() - faults.started < deadline:
            time.sleep(5)
            if all(results(w)["never"] == 0 for w in worlds):
                break
        for world in worlds:
            world.stop.set()
        playing.set()
        for thread in threads:
            thread.join(timeout=60)
        report = {w.name: results(w) for w in worlds}
        sources = {w.name: dict(w.generated) for w in worlds}
    rows: list[tuple[str, ...]] = []
    for name, r in report.items():
        rows.append(
            (
                name,
                f"{r['on_time']}/{r['total']} ({100 * r['on_time'] / r['total']:.0f}%)",
                str(r["late"]),
                str(r["never"]),
                f"{r['worst'].total_seconds():.0f}",
                str(r["early"]),
                str(r["twice"]),
                f"{sources[name]['event']} / {sources[name]['direct']}",
                _verdict(name, r, targets),
            )
        )
    table(
        f"On time under AWS faults: {args.sessions} sessions, {len(plan)} PATCHes, phases of "
        f"{args.phase_seconds:.0f} s (down, throttling, slow, healthy) ({machine()})",
        rows,
        (
            "world",
            "COMPLETED within 2 min",
            "late",
            "not generated",
            "worst lateness s",
            "early",
            "generated twice",
            "by event / direct",
            "all on time, 0 early, 0 twice",
        ),
    )
    targets.finish(args.strict)


def _verdict(world: str, figures: dict[str, Any], targets: Targets) -> str:
    if world != "outbox":
        return ""
    return all_met(
        [
            targets.at_least("outbox: on time", figures["on_time"], figures["total"]),
            targets.at_most("outbox: early", figures["early"], 0),
            targets.at_most("outbox: twice", figures["twice"], 0),
        ]
    )


if __name__ == "__main__":
    main()
