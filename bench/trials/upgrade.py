"""Upgrades under load: the previous release runs as deployed while admins arm sessions, and
the runbook's upgrade (docs/operations.md, "Upgrading") is carried out step by step, its
commands run as printed; the chaos trial's invariants are checked at the end.

    .venv/bin/python -m bench.trials.upgrade --from v0.1.0 [--sessions 150] [--gap 60]
        [--keep DIR] [--strict]

The system runs as the production topology does on one machine: the code location served on
its own (``dagster api grpc``), the daemon on a workspace that only knows its address, the admin
API behind a relay that plays the load balancer (a new replica is ready before the old one
stops), the HTTP registrar against the online-session stand-in, AWS on moto. It starts on the
``--from`` release, its code checked out from git and its migrations applied by its own ``jlg
migrate``. Admins arm sessions throughout through the relay (20 s to 4 minutes ahead, and a
cohort of ten at one time every minute), and read them back. Then, ``--gap`` seconds apart:

1. ``jlg migrate expand`` (this checkout), the old processes running; every lock the migration
   holds on a relation is sampled, and the longest on a table with rows printed;
2. the code server restarted on this release (its runs in flight keep their process);
3. the daemon restarted on this release;
4. the admin API: a replica on this release, ready, takes the relay; the old one stops;
5. ``jlg migrate head`` (the contract steps; none is a no-op).

Invariants, as the chaos trial's (``bench.trials.chaos.judge``): every armed session COMPLETED
within 2 minutes of its time or of the end of the step that overlapped its wait; one
bulkRegister job per cycle; no admin answer a 5xx but 503 (nor none at all); no accepted PATCH
lost.
"""

import argparse
import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
from sqlalchemy import Engine, make_url, text

from bench.common import JWT_ENV, admin_headers, bench_database, machine, moto_process
from bench.locks import sampled, tagged
from bench.trials.chaos import (
    ON_TIME_S,
    Fault,
    Record,
    Timeline,
    arm_once,
    judge,
    reader,
    wait_until_done,
)
from devstack.eventbridge import EventBridgeStandIn
from devstack.online_session import Answer, OnlineSessionService, online_session_service
from devstack.ports import free_port, wait_until_answers
from devstack.system import (
    BIN,
    Children,
    aws_env,
    create_dagster_storage,
    from_tree,
    grpc_workspace,
    start_code_server,
    start_daemon,
    start_web,
    system_env,
)
from jlg_pipeline.adapters.database import create_engine
from testkit.factories import add_registrations
from testkit.fault_proxy import FaultProxy
from testkit.releases import ROOT, export, resolve

COHORT = 10
CALL_S = 4.0
"""How long the online-session stand-in takes to answer a bulkRegister."""
IN_FLIGHT_WAIT_S = 60.0
"""How long a step waits for a generation run in flight before it acts anyway."""
MIN_LEAD_S, MAX_LEAD_S = 20.0, 240.0


@dataclass
class Step:
    name: str
    command: str
    started_s: float = 0.0
    took_s: float = 0.0
    longest_lock: str = ""
    runs: list[str] = field(default_factory=list)
    """Generation runs started and not ended when the step began."""

    @property
    def in_flight(self) -> int:
        return len(self.runs)


@dataclass
class Deployment:
    """The processes of one machine's deployment and which tree each runs."""

    home: Path
    env: dict[str, str]
    children: Children = field(default_factory=Children)
    front: FaultProxy | None = None
    """The admin API's load balancer."""
    code_front: FaultProxy | None = None
    """The code location's Service: the daemon's workspace names its port."""
    starts: int = 0

    def log(self, name: str) -> Path:
        self.starts += 1
        return self.home / f"{self.starts:02d}-{name}.log"

    def start_code_server(self, tree: Path) -> tuple[str, int]:
        """A code server from ``tree`` on a port of its own, serving; its name and port."""
        name, port = f"code-{self.starts + 1}", free_port()
        start_code_server(self.children, self.env, port, self.log("code"), tree, name)
        wait_until_answers_grpc(self, port)
        return name, port

    def start_daemon(self, tree: Path) -> None:
        assert self.code_front is not None
        workspace = grpc_workspace(self.home / "workspace.yaml", self.code_front.port)
        start_daemon(self.children, self.env, self.log("daemon"), workspace, tree)

    def start_web(self, tree: Path) -> str:
        name = f"web-{self.starts + 1}"
        url = start_web(self.children, self.env, free_port(), self.log("web"), name, tree)
        wait_until_answers(f"{url}/readyz", 60, self.children.running)
        return url

    def stop(self, name: str) -> None:
        """SIGTERM to the process alone, as a pod's container is stopped: what it launched
        (a code server's run workers) keeps running in its group, as runs do in their pods."""
        process = self.children.processes.pop(name)
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def jlg(command: str, url: str, step: Step, record: Record) -> None:
    """``jlg <command>`` from this checkout, as the runbook prints it, while the locks its
    connections hold are sampled."""
    env = {**os.environ, "JLG_DATABASE_URL": tagged(url), "JLG_ENVIRONMENT": "local"}
    with sampled(url) as seen:
        started = time.monotonic()
        step.started_s = record.now()
        done = subprocess.run(  # noqa: S603 - our own executable
            [str(BIN / "jlg"), *command.split()],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        step.took_s = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"jlg {command} failed: {done.stderr[-2000:]}")
    locks = seen.locks()
    step.longest_lock = str(locks[0]) if locks else "none on a table with rows"
    record.note(f"jlg {command}: {step.took_s:.1f} s; longest lock {step.longest_lock}")


def admin(
    front: str, sessions: list[int], record: Record, stop: threading.Event, until_s: float
) -> None:
    """Arms sessions through the relay until ``until_s``: one every few seconds 20 s to 4
    minutes ahead, and every minute a cohort of ten at one time; a PATCH that fails is tried
    again 10 s later with a fresh time."""
    rng = random.Random(11)
    fresh = iter(sessions)
    interval = until_s / max(len(sessions) - len(sessions) // 3, 1)
    retry: list[tuple[float, int]] = []
    next_cohort = 60.0
    with httpx.Client(base_url=front, headers=admin_headers(), timeout=60) as http:

        def arm(session: int, at: datetime) -> None:
            if arm_once(http, record, session, at) != 200:
                retry.append((record.now() + 10, session))

        def lead() -> datetime:
            return datetime.now(UTC) + timedelta(seconds=rng.uniform(MIN_LEAD_S, MAX_LEAD_S))

        while not stop.is_set() and record.now() < until_s:
            for item in [r for r in retry if r[0] <= record.now()]:
                retry.remove(item)
                arm(item[1], lead())
            if record.now() >= next_cohort:
                next_cohort += 60
                at = datetime.now(UTC) + timedelta(seconds=90)
                for _ in range(COHORT):
                    session = next(fresh, None)
                    if session is not None:
                        arm(session, at)
            session = next(fresh, None)
            if session is None:
                break
            arm(session, lead())
            stop.wait(interval)
        for _, session in retry:
            arm(session, lead())


@contextlib.contextmanager
def deployment_of(
    tree: Path, home: Path, sessions: int
) -> Iterator[tuple[Deployment, str, list[int], Engine, OnlineSessionService]]:
    """The ``tree`` release deployed: its migrations by its own ``jlg migrate``, its processes."""
    with (
        bench_database("jlg_bench_upgrade_app", migrated=False) as url,
        bench_database("jlg_bench_upgrade_dagster", migrated=False) as dagster_url,
        moto_process() as aws,
        online_session_service() as service,
    ):
        settings = {
            **aws_env(aws),
            "ENABLE_JOIN_LINK_SCHEDULER": "true",
            "ENABLE_JOIN_LINK_FALLBACK_CRON": "true",
            **JWT_ENV,
            "JLG_REGISTRAR": "http",
            "JLG_ONLINE_SESSION_URL": service.url,
            "JLG_ONLINE_SESSION_TOKEN": "upgrade-service-token",
            "JLG_MAX_SESSIONS_PER_RUN": "25",
        }
        # Each call takes a few seconds, as a bulkRegister over a cohort does: runs stay in
        # flight long enough for every step to find some.
        service.answer = Answer(delay=CALL_S)
        env = system_env(home, dagster_url, url, **settings)
        migrated = subprocess.run(  # noqa: S603 - the release's own jlg, from its tree
            [str(BIN / "python"), "-m", "jlg_pipeline.cli", "migrate"],
            cwd=tree,
            env=from_tree(env, tree),
            capture_output=True,
            text=True,
            check=False,
        )
        if migrated.returncode != 0:
            raise SystemExit(f"the previous release's migrate failed: {migrated.stderr[-2000:]}")
        engine = create_engine(url)
        add_registrations(engine, 1, 10)
        with engine.begin() as conn:
            ids = sorted(
                conn.execute(
                    text(
                        "INSERT INTO hdb_program_session (program_id)"
                        " SELECT 1 + g % 5 FROM generate_series(1, :n) AS g RETURNING id"
                    ),
                    {"n": sessions},
                ).scalars()
            )
        create_dagster_storage(env)
        standin = EventBridgeStandIn(aws.client("scheduler"), aws.client("sqs"))
        standin.start()
        deployment = Deployment(home, env)
        try:
            _, port = deployment.start_code_server(tree)
            deployment.code_front = FaultProxy(port)
            deployment.start_daemon(tree)
            web = deployment.start_web(tree)
            deployment.front = FaultProxy(int(web.rsplit(":", 1)[1]))
            yield deployment, f"http://127.0.0.1:{deployment.front.port}", ids, engine, service
        finally:
            deployment.children.stop()
            for front in (deployment.front, deployment.code_front):
                if front is not None:
                    front.close()
            standin.stop()
            engine.dispose()


def wait_until_answers_grpc(deployment: Deployment, port: int, timeout: float = 90) -> None:
    """Until the code server on ``port`` accepts connections (it loads the definitions
    first)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with (
            contextlib.suppress(OSError),
            socket.create_connection(("127.0.0.1", port), timeout=1),
        ):
            return
        if not deployment.children.running():
            raise SystemExit(f"a process exited: {deployment.children.exited()}")
        time.sleep(0.5)
    raise SystemExit("the code server did not start")


def _dagster(dagster_url: str) -> Engine:
    """Dagster's storage (``dagster_url``, psycopg2's), read with our driver."""
    url = make_url(dagster_url).set(drivername="postgresql+psycopg")
    return create_engine(url.render_as_string(hide_password=False), pool_size=1, max_overflow=0)


def _runs_in_flight(dagster_url: str) -> list[str]:
    """The runs started and not ended."""
    engine = _dagster(dagster_url)
    try:
        with engine.connect() as conn:
            return list(
                conn.execute(
                    text("SELECT run_id FROM runs WHERE status IN ('STARTING', 'STARTED')")
                ).scalars()
            )
    finally:
        engine.dispose()


def fates(dagster_url: str, engine: Engine, steps: list[Step]) -> str:
    """How the runs in flight at the steps ended (Dagster's status) and what became of the
    attempts they held: COMPLETED by the run itself, or RECLAIMED (taken over by a worker)."""
    ids = sorted({run for s in steps for run in s.runs})
    if not ids:
        return "no run was in flight at a step"
    dagster = _dagster(dagster_url)
    try:
        with dagster.connect() as conn:
            ended = conn.execute(
                text("SELECT status, count(*) FROM runs WHERE run_id = ANY(:ids) GROUP BY 1"),
                {"ids": ids},
            ).all()
    finally:
        dagster.dispose()
    with engine.connect() as conn:
        attempts = conn.execute(
            text(
                "SELECT outcome, count(*) FROM jlg_generation_attempt"
                " WHERE run_id = ANY(:ids) GROUP BY 1"
            ),
            {"ids": ids},
        ).all()
    runs = ", ".join(f"{n} {status}" for status, n in sorted(ended))
    held = ", ".join(f"{n} {outcome}" for outcome, n in sorted(attempts)) or "none"
    return f"{len(ids)} run(s) in flight at a step ended: {runs}; their attempts: {held}"


def upgrade(
    deployment: Deployment, url: str, record: Record, gap_s: float, steps: list[Step]
) -> None:
    """The runbook's steps, ``gap_s`` apart, each recorded."""

    def step(name: str, command: str, act: Callable[[Step], None]) -> None:
        time.sleep(gap_s)
        current = Step(name, command)
        steps.append(current)
        deadline = time.monotonic() + IN_FLIGHT_WAIT_S
        while True:
            current.runs = _runs_in_flight(deployment.env["DAGSTER_POSTGRES_URL"])
            if current.runs or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        current.started_s = record.now()
        started = time.monotonic()
        record.note(f"{name} begins, {current.in_flight} run(s) in flight")
        act(current)
        current.took_s = current.took_s or time.monotonic() - started
        record.note(f"{name} done in {current.took_s:.1f} s")

    def code_server(step: Step) -> None:
        """As a rolling update of the user-code deployment: the new server serves, the
        Service moves to it, then the old one stops (its runs in flight go on)."""
        started = time.monotonic()
        old = [name for name in deployment.children.processes if name.startswith("code-")]
        _, port = deployment.start_code_server(ROOT)
        assert deployment.code_front is not None
        deployment.code_front.retarget(port)
        step.took_s = time.monotonic() - started
        for name in old:
            deployment.stop(name)

    def daemon(_: Step) -> None:
        deployment.stop("dagster-daemon")
        deployment.start_daemon(ROOT)

    def web(_: Step) -> None:
        old = [name for name in deployment.children.processes if name.startswith("web-")]
        new = deployment.start_web(ROOT)
        assert deployment.front is not None
        deployment.front.retarget(int(new.rsplit(":", 1)[1]))
        for name in old:
            deployment.stop(name)

    step("1. expand", "jlg migrate expand", lambda s: jlg("migrate expand", url, s, record))
    step("2. code server", "the code location's new image", code_server)
    step("3. daemon", "helm upgrade (daemon, webserver)", daemon)
    step("4. admin API", "kubectl apply admin-api.yaml (rolling)", web)
    step("5. contract", "jlg migrate head", lambda s: jlg("migrate head", url, s, record))


def run(
    ref: str, sessions: int, gap_s: float, home: Path
) -> tuple[list[Step], list[str], dict[str, float]]:
    commit = resolve(ref)
    tree = export(commit, home / "release")
    with deployment_of(tree, home, sessions) as (deployment, front, ids, engine, service):
        time.sleep(20)  # the daemon loads the code location
        record = Record()
        stop = threading.Event()
        steps: list[Step] = []
        arm_until = 6 * gap_s + 60
        threads = [
            threading.Thread(target=admin, args=(front, ids, record, stop, arm_until)),
            threading.Thread(target=reader, args=(front, ids, record, stop)),
        ]
        for thread in threads:
            thread.start()
        try:
            upgrade(deployment, deployment.env["JLG_DATABASE_URL"], record, gap_s, steps)
            threads[0].join()
            wait_until_done(engine, record, datetime.now(UTC) + timedelta(seconds=ON_TIME_S + 30))
        finally:
            stop.set()
            for thread in threads:
                thread.join(timeout=120)
        timeline = Timeline(
            0,
            record.now(),
            [Fault(s.name, s.started_s, s.took_s) for s in steps],
            [],
            [],
        )
        violations, figures = judge(timeline, record, engine, service)
        record.note(fates(deployment.env["DAGSTER_POSTGRES_URL"], engine, steps))
        print("\n## what happened\n")
        print("\n".join(record.events))
    return steps, violations, figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--from", dest="ref", required=True, help="a release's tag or a git rev")
    parser.add_argument("--sessions", type=int, default=150)
    parser.add_argument("--gap", type=float, default=60.0, help="seconds between steps")
    parser.add_argument("--keep", type=Path, help="copy the processes' logs here")
    parser.add_argument("--strict", action="store_true", help="exit 1 on any violation")
    args = parser.parse_args()
    print(f"# upgrade from {args.ref} to this checkout, {args.sessions} sessions, {machine()}")
    (ROOT / ".data").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="jlg-upgrade-", dir=ROOT / ".data") as home:
        steps, violations, figures = run(args.ref, args.sessions, args.gap, Path(home))
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
            for log in Path(home).glob("*.log"):
                shutil.copy(log, args.keep / log.name)
    print("\n## steps\n")
    print(
        "| step | as the runbook prints it | began (s) | runs in flight | took (s) | longest lock |"
    )
    print("|---|---|---|---|---|---|")
    for s in steps:
        lock = s.longest_lock or "-"
        print(
            f"| {s.name} | `{s.command}` | {s.started_s:.0f} | {s.in_flight} | {s.took_s:.1f}"
            f" | {lock} |"
        )
    print("\n## figures\n")
    for name, value in figures.items():
        print(f"- {name}: {value:g}")
    print(f"\n## violations ({len(violations)})\n")
    print("\n".join(violations) or "none")
    if args.strict and violations:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
