"""Chaos: a seeded timeline of faults drawn from the whole space, through the whole system,
with admins arming sessions throughout; the invariants are checked at the end.

    .venv/bin/python -m bench.trials.chaos [--seed 1] [--minutes 20] [--kinds A,B] [--keep DIR]
        [--strict]

The system runs as deployed on one machine (``bench.trials.hung_parts`` has the layout): the
web app, ``dagster-daemon`` with its code server and run workers on the repository's
``dagster.yaml``, the application database on a private PostgreSQL behind a fault box, AWS
(moto) behind another, the HTTP registrar against the online-session stand-in behind a third.
Faults come one at a time, each after a healthy gap; poison and duplicate messages arrive
whenever. Sessions are armed through the API every few seconds, 20 s to 4 min ahead (less in
a short trial; near ones go through a direct run, far ones through EventBridge, SQS and the
sensor), some re-armed before their time; a PATCH that fails is retried 10 s later, as an
admin would.

Two faults run through every trial, beside the drawn ones (docs/design.md "One queue", "Nothing
stops the queue"): **refusals accumulate** (``REFUSING_PROGRAMMES`` programmes each hold one
session the service refuses for good, armed through the trial, so the pick meets more
programmes with nothing to claim than it looks at in one claim), and **the host writes absurd
times** (at drawn moments the host's own UPDATE puts ``±infinity``, year 10000 or 4713 BC on a
session of its own). The armed sessions are spread over ``PROGRAMMES`` programmes.

Invariants (each breach printed as a violation):
- every armed session is COMPLETED at its last armed time within 2 minutes of that time, or
  of the end of the last fault that overlapped its wait (for "service absurd", a Retry-After
  of decades among its answers, that end plus the pause's cap, ``MAX_PAUSE_S``);
- one bulkRegister job per cycle at the service, and the runbook's proof (two job ids in one
  cycle of the attempt history) finds none;
- no admin answer is a 5xx other than 503;
- no PATCH answered 200 is lost: the session keeps the time of its last accepted PATCH (or
  of a later one whose answer was lost in a fault);
- a refused session ends FAILED, asked once; a session whose time the host made absurd is set
  aside (FAILED with the reason) and never asked. Neither is left IN_PROGRESS.

Runs are shared as by default once more than 10 wait, in runs of up to 25
(``JLG_MAX_SESSIONS_PER_RUN=25``, the figures in docs/performance.md were taken with sharing
forced on before it became the default); everything else is the default configuration.
"""

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import Engine, select, text

from bench.common import (
    JWT_ENV,
    ROOT,
    admin_headers,
    bench_database,
    machine,
    moto_process,
)
from devstack.eventbridge import EventBridgeStandIn
from devstack.online_session import Answer, OnlineSessionService, online_session_service
from devstack.system import Children, aws_env, start_daemon, system_env
from jlg_pipeline.adapters.database import create_engine
from jlg_pipeline.adapters.tables import program_session as ps
from jlg_pipeline.domain.messages import build_message
from jlg_pipeline.migrate import migrate
from testkit.factories import add_registrations
from testkit.fault_proxy import FaultProxy, Mode, proxied_database
from testkit.postgres import own_server
from testkit.processes import code_server_pids, run_worker_pids
from testkit.served import start_web

ON_TIME_S = 120.0
FULL_LENGTH_S = 1200.0
"""The trial the issue asks for: 20 minutes."""
WARM_UP_S = 45.0
"""Healthy time at the start, after the daemon has loaded the code location."""
QUIET_TAIL_S = 150.0
"""No fault and no arming in the last part of the timeline: the last sessions come due."""
FULL_SHAPE_S = 300.0
"""Trials this long or longer keep the warm-up, the quiet tail and the leads above; a
shorter one (the suite's smoke) shrinks them in proportion."""
RETRY_AFTER_S = 20
"""The service's Retry-After while it answers 429 (shrunk with a short trial's shape)."""
MAX_PAUSE_S = 60
"""The trial's JLG_ONLINE_SESSION_MAX_PAUSE_S: while the service answers absurdly (a
Retry-After of decades) a pause lasts this long at most, then one probe; a session held by the
fault is due this much after it ends (the invariant allows the pause's cap)."""
LIMITED_PER_S = 1.0
"""The service's own limit while it is rate-limited: a call a second."""
PROGRAMMES = 20
"""The programmes the armed sessions belong to."""
REFUSING_PROGRAMMES = 120
"""Programmes holding one session each that the service refuses for good: more than the pick
looks at in one claim (``PROGRAMMES_LOOKED_AT``, 64)."""
REFUSAL = Answer(status=404, body=b'{"error": {"code": "ONLINE_SESSION_NOT_FOUND"}}')
ABSURD_TIMES = ["-infinity", "infinity", "10000-01-01T00:00:00Z", "4713-01-01 00:00:00+00 BC"]
ABSURD_WRITES = 4
POISON = [
    "not json",
    json.dumps({"programSessionId": "seven"}),
    json.dumps({"detail": {"programSessionId": 5, "role": "\u3000"}}),
    json.dumps({"detail": {"programSessionId": -1}}),
    "{" * 5000,
]

# Each kind of fault and how long it lasts (for kills: how long the process stays down).
DURATIONS: dict[str, tuple[float, float]] = {
    "postgres silent": (15, 60),
    "postgres failing over": (5, 30),
    "postgres restarted": (0, 0),
    "AWS silent": (30, 120),
    "AWS refusing": (30, 120),
    "AWS slow": (30, 120),
    "AWS throttling": (30, 120),
    "service silent": (20, 90),
    "service slow": (30, 120),
    "service 429": (30, 180),
    "service 5xx": (30, 120),
    "service garbage": (30, 120),
    "service rate-limited": (30, 180),
    "service hung": (20, 120),
    "service failing for one session": (30, 180),
    "service absurd": (30, 120),
    "daemon group killed": (10, 40),
    "a run worker killed": (0, 0),
    "the code server killed": (0, 0),
}


def _shape(length_s: float) -> float:
    return min(1.0, length_s / FULL_SHAPE_S)


@dataclass(frozen=True)
class Fault:
    kind: str
    start: float
    duration: float

    @property
    def end(self) -> float:
        return self.start + self.duration

    @property
    def holds_until(self) -> float:
        """When the sessions it held are free: its end, or for absurd answers the longest
        pause one of them could have set just before it (then one probe asks again)."""
        return self.end + (MAX_PAUSE_S if self.kind == "service absurd" else 0)


@dataclass(frozen=True)
class Timeline:
    seed: int
    length_s: float
    faults: list[Fault]
    messages: list[tuple[float, str]]
    """(when, "poison" or "duplicate")."""
    absurd: list[tuple[float, str]]
    """(when, the time the host writes on one of its sessions)."""

    @classmethod
    def draw(cls, seed: int, length_s: float, kinds: list[str] | None = None) -> "Timeline":
        rng = random.Random(seed)
        # A short trial draws shorter faults and gaps, so it still sees several.
        scale = min(1.0, length_s / FULL_LENGTH_S)
        shape = _shape(length_s)
        faults: list[Fault] = []
        at = WARM_UP_S * shape
        while True:
            kind = rng.choice(kinds or sorted(DURATIONS))
            low, high = DURATIONS[kind]
            fault = Fault(kind, at, round(rng.uniform(low, high) * scale))
            if fault.end > length_s - QUIET_TAIL_S * shape:
                break
            faults.append(fault)
            at = fault.end + round(rng.uniform(30, 90) * scale)
        messages = sorted(
            (
                float(round(rng.uniform(WARM_UP_S * shape, length_s - QUIET_TAIL_S * shape))),
                rng.choice(["poison", "duplicate"]),
            )
            for _ in range(max(int(length_s // 120), 1))
        )
        absurd = sorted(
            (
                float(round(rng.uniform(WARM_UP_S * shape, length_s - QUIET_TAIL_S * shape))),
                rng.choice(ABSURD_TIMES),
            )
            for _ in range(ABSURD_WRITES)
        )
        return cls(seed, length_s, faults, messages, absurd)

    @property
    def shape(self) -> float:
        return _shape(self.length_s)

    @property
    def refusing_programmes(self) -> int:
        """All of ``REFUSING_PROGRAMMES`` from a five-minute trial up, fewer in the smoke."""
        return max(round(REFUSING_PROGRAMMES * self.shape), 1)

    @property
    def quiet_tail_s(self) -> float:
        return QUIET_TAIL_S * self.shape

    @property
    def min_lead_s(self) -> float:
        """How far ahead admins arm at the least: 20 s, less in the smoke."""
        return 20.0 * self.shape

    @property
    def max_lead_s(self) -> float:
        """How far ahead admins arm: up to 4 minutes, less in a short trial."""
        return max(60.0 * self.shape, min(240.0, self.length_s / 4))

    @property
    def arm_until_s(self) -> float:
        """When admins stop arming: the last one is due before the quiet tail ends."""
        return self.length_s - self.quiet_tail_s - 60 * self.shape

    def lines(self) -> list[str]:
        shown = [(f.start, f"{f.start:5.0f} s  {f.kind} ({f.duration:.0f} s)") for f in self.faults]
        shown += [(t, f"{t:5.0f} s  {kind} messages") for t, kind in self.messages]
        shown += [(t, f"{t:5.0f} s  the host writes {value}") for t, value in self.absurd]
        shown += [(0.0, f"    0 s  refusals accumulate: {self.refusing_programmes} programmes")]
        return [line for _, line in sorted(shown)]


@dataclass
class Arming:
    session: int
    armed_s: float
    at: datetime
    status: int


@dataclass
class Record:
    started: float = field(default_factory=time.monotonic)
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    armings: list[Arming] = field(default_factory=list)
    answers: list[tuple[float, str, int]] = field(default_factory=list)
    """(seconds in, request, status) of every admin request."""
    events: list[str] = field(default_factory=list)
    refused: list[int] = field(default_factory=list)
    """Sessions the service refuses for good (their programmes' only ones), once armed."""
    refused_at: dict[int, tuple[float, datetime]] = field(default_factory=dict)
    """When each was armed (seconds in), and for when."""
    absurd: dict[int, str] = field(default_factory=dict)
    """Sessions whose time the host wrote absurd, and what it wrote."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def now(self) -> float:
        return time.monotonic() - self.started

    def note(self, event: str) -> None:
        with self.lock:
            self.events.append(f"{self.now():6.0f} s  {event}")


@dataclass
class System:
    """The parts a fault acts on."""

    env: dict[str, str]
    home: Path
    children: Children
    database: FaultProxy
    aws: FaultProxy
    service_box: FaultProxy
    service: OnlineSessionService
    restart_postgres: Callable[[], None]
    sqs: Any
    queue_url: str
    daemon_group: int = 0
    daemon_starts: int = 0

    def start_daemon(self) -> None:
        killed = self.children.processes.pop("dagster-daemon", None)
        if killed is not None:
            # Reaped, so the killed daemon leaves no zombie (nor a ResourceWarning) behind.
            with contextlib.suppress(subprocess.TimeoutExpired):
                killed.wait(timeout=10)
        self.daemon_starts += 1
        log = self.home / f"daemon-{self.daemon_starts}.log"
        self.daemon_group = start_daemon(self.children, self.env, log)


SERVICE_ANSWERS: dict[str, list[Answer]] = {
    "service slow": [Answer(delay=8.0)],
    "service 5xx": [Answer(status=500, body=b"{}"), Answer(status=503, body=b"{}")],
    # Garbage on the wire: a proxy's HTML page, a broken status line, a cut-off answer. A 2xx
    # whose body is not an answer is not drawn: the contract marks it FAILED for a person.
    "service garbage": [
        Answer(status=502, body=b"<html><body>Bad gateway</body></html>"),
        Answer(raw=b"HTTP/1.1 2OO OK\r\n\r\n{"),
        Answer(raw=b"\x00\x01garbage"),
    ],
    # The audit's answers: Retry-After of decades, too many digits to parse, a date in year
    # 9999, negative, malformed; bodies of garbage under statuses the contract retries.
    "service absurd": [
        Answer(status=429, body=b"{}", headers={"Retry-After": "999999999"}),
        Answer(status=503, body=b"{}", headers={"Retry-After": "99999999999"}),
        Answer(status=503, body=b"{}", headers={"Retry-After": "9999999999999"}),
        Answer(status=429, body=b"{}", headers={"Retry-After": str(10**23)}),
        Answer(status=429, body=b"{}", headers={"Retry-After": "Fri, 31 Dec 9999 23:59:59 GMT"}),
        Answer(status=429, body=b"{}", headers={"Retry-After": "-5"}),
        Answer(status=503, body=b"\xff\xfe\x00 garbage", headers={"Retry-After": "soon"}),
        Answer(status=500, body=b'{"error": {"code": "' + b"A" * 5000 + b'"}}'),
        Answer(status=429, body=b"[[[[", headers={"Retry-After": "1e9"}),
    ],
}
PROXY_MODES = {
    "silent": Mode.SILENT,
    "refusing": Mode.REFUSING,
    "failing over": Mode.REFUSING,
    "slow": Mode.SLOW,
    "throttling": Mode.THROTTLING,
}


def inflict(
    fault: Fault, system: System, record: Record, stop: threading.Event, shape: float
) -> None:
    """Apply ``fault``, hold it for its duration, then heal (``shape``: the timeline's)."""
    part, _, how = fault.kind.partition(" ")
    box = {"postgres": system.database, "AWS": system.aws, "service": system.service_box}.get(part)
    record.note(f"{fault.kind} begins")
    if fault.kind == "postgres restarted":
        system.restart_postgres()
    elif fault.kind == "daemon group killed":
        workers = len(run_worker_pids(system.daemon_group))
        with contextlib.suppress(ProcessLookupError):
            os.killpg(system.daemon_group, signal.SIGKILL)
        record.note(f"daemon group killed with {workers} run workers")
        stop.wait(fault.duration)
        system.start_daemon()
    elif fault.kind == "a run worker killed":
        before = run_worker_pids(system.daemon_group)
        deadline = time.monotonic() + 90
        while not stop.is_set() and time.monotonic() < deadline:
            fresh = run_worker_pids(system.daemon_group) - before
            if fresh:
                os.kill(min(fresh), signal.SIGKILL)
                break
            time.sleep(0.05)
    elif fault.kind == "the code server killed":
        for pid in code_server_pids(system.daemon_group):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    elif fault.kind == "service rate-limited":
        system.service.limit_per_s = LIMITED_PER_S
        stop.wait(fault.duration)
        system.service.limit_per_s = None
    elif fault.kind == "service hung":
        healed = threading.Event()
        system.service.answer = Answer(until=healed)
        stop.wait(fault.duration)
        system.service.answer = Answer()
        healed.set()
    elif fault.kind == "service failing for one session":
        session = _next_due(record)
        if session is not None:
            record.note(f"the service fails every call for session {session}")
            system.service.for_session[session] = Answer(status=500, body=b"{}")
            stop.wait(fault.duration)
            system.service.for_session.pop(session, None)
    elif fault.kind == "service 429":
        retry_after = {"Retry-After": str(max(1, round(RETRY_AFTER_S * shape)))}
        _answer_with([Answer(status=429, body=b"{}", headers=retry_after)], fault, system, stop)
    elif fault.kind in SERVICE_ANSWERS:
        _answer_with(SERVICE_ANSWERS[fault.kind], fault, system, stop)
    elif box is not None:
        box.mode = PROXY_MODES[how]
        stop.wait(fault.duration)
        box.mode = Mode.PASSING
    record.note(f"{fault.kind} ends")


def _answer_with(
    answers: list[Answer], fault: Fault, system: System, stop: threading.Event
) -> None:
    """The service answers each call with one of ``answers`` for the fault's duration."""
    until = time.monotonic() + fault.duration
    while not stop.is_set() and time.monotonic() < until:
        system.service.queue[:] = [random.choice(answers) for _ in range(50)]
        stop.wait(1)
    system.service.queue.clear()


def send_messages(kind: str, system: System, record: Record, rng: random.Random) -> None:
    """Poison bodies, or the messages of a few armed sessions once more."""
    if kind == "poison":
        bodies = list(POISON)
    else:
        with record.lock:
            armed = sorted({a.session for a in record.armings if a.status == 200})
        bodies = [json.dumps(build_message(s, None)) for s in rng.sample(armed, min(3, len(armed)))]
    for body in bodies:
        system.sqs.send_message(QueueUrl=system.queue_url, MessageBody=body)
    record.note(f"{len(bodies)} {kind} messages sent")


def admin(
    base: str, sessions: list[int], timeline: Timeline, record: Record, stop: threading.Event
) -> None:
    """Arms a session every few seconds until the quiet tail, re-arms some before their time,
    and retries a failed PATCH 10 s later with a fresh time."""
    rng = random.Random(timeline.seed * 7919)
    arm_until = timeline.arm_until_s
    interval = arm_until / len(sessions)
    fresh = iter(sessions)
    retry: list[tuple[float, int]] = []
    with httpx.Client(base_url=base, headers=admin_headers(), timeout=60) as http:

        def arm(session: int) -> None:
            at = datetime.now(UTC) + timedelta(
                seconds=rng.uniform(timeline.min_lead_s, timeline.max_lead_s)
            )
            if arm_once(http, record, session, at) != 200:
                retry.append((record.now() + 10, session))

        while not stop.is_set() and record.now() < arm_until:
            due = [r for r in retry if r[0] <= record.now()]
            for item in due:
                retry.remove(item)
                arm(item[1])
            if rng.random() < 0.1:
                later = _rearmable(record)
                if later is not None:
                    arm(later)
            session = next(fresh, None)
            if session is None:
                break
            arm(session)
            stop.wait(max(interval - 0.05, 0.1))
        while (
            retry and not stop.is_set() and record.now() < timeline.length_s - timeline.quiet_tail_s
        ):
            when, session = retry.pop(0)
            stop.wait(max(when - record.now(), 0))
            arm(session)


def arm_once(http: httpx.Client, record: Record, session: int, at: datetime) -> int:
    """An admin's PATCH of ``session`` to ``at``, recorded with its answer (0: none) among the
    armings the trial judges."""
    armed_s = record.now()
    status = patch(http, record, session, at)
    with record.lock:
        record.armings.append(Arming(session, armed_s, at, status))
    return status


def patch(http: httpx.Client, record: Record, session: int, at: datetime) -> int:
    """A PATCH of ``session`` to ``at``; its answer (0: none) is recorded."""
    armed_s = record.now()
    try:
        status = http.patch(
            f"/program-session/{session}/link-generation",
            json={"linkGenerationAt": at.isoformat()},
        ).status_code
    except httpx.HTTPError:
        status = 0
    with record.lock:
        record.answers.append((armed_s, "PATCH", status))
    return status


def _next_due(record: Record) -> int | None:
    """The armed session whose time comes next."""
    with record.lock:
        last: dict[int, Arming] = {}
        for arming in record.armings:
            if arming.status == 200:
                last[arming.session] = arming
    now = datetime.now(UTC)
    coming = sorted((a.at, s) for s, a in last.items() if a.at > now)
    return coming[0][1] if coming else None


def _rearmable(record: Record) -> int | None:
    """A session whose last accepted time is more than 90 s away."""
    with record.lock:
        last: dict[int, Arming] = {}
        for arming in record.armings:
            if arming.status == 200:
                last[arming.session] = arming
    soon = datetime.now(UTC) + timedelta(seconds=90)
    candidates = sorted(s for s, a in last.items() if a.at > soon)
    return candidates[0] if candidates else None


def reader(base: str, sessions: list[int], record: Record, stop: threading.Event) -> None:
    """An admin reading sessions, their attempts and readiness while everything happens."""
    rng = random.Random(5)
    with httpx.Client(base_url=base, headers=admin_headers(), timeout=60) as http:
        while not stop.is_set():
            sid = rng.choice(sessions)
            path = rng.choice(
                [
                    f"/program-session/{sid}/link-generation",
                    f"/program-session/{sid}/link-generation/attempts",
                    "/readyz",
                ]
            )
            try:
                status = http.get(path).status_code
            except httpx.HTTPError:
                status = 0
            with record.lock:
                record.answers.append((record.now(), "GET", status))
            stop.wait(0.5)


@dataclass
class Outcome:
    timeline: Timeline
    record: Record
    violations: list[str]
    figures: dict[str, float]


@contextlib.contextmanager
def whole_system(
    home: Path, sessions: int, settings: dict[str, str]
) -> Iterator[tuple[System, str, list[int], Engine]]:
    """Everything started and wired through its fault box; yields the system, the web app's
    base URL, the sessions to arm and an engine on the database (not through its box)."""
    with (
        own_server() as postgres,
        bench_database("jlg_bench_chaos_dagster", migrated=False) as dagster_url,
        moto_process() as aws,
        online_session_service() as service,
    ):
        url = postgres.url
        migrate(url)
        engine = create_engine(url)
        add_registrations(engine, 1, 10)
        with engine.begin() as conn:
            ids = sorted(
                conn.execute(
                    text(
                        "INSERT INTO hdb_program_session (program_id)"
                        " SELECT 1 + g % :p FROM generate_series(1, :n) AS g RETURNING id"
                    ),
                    {"n": sessions, "p": PROGRAMMES},
                ).scalars()
            )
        database, through = proxied_database(url)
        aws_box = FaultProxy(int(aws.endpoint_url.rsplit(":", 1)[1]))
        service_box = FaultProxy(int(service.url.rstrip("/").rsplit(":", 1)[1]))
        aws_url = f"http://127.0.0.1:{aws_box.port}"
        own = {
            **aws_env(aws, aws_url),
            "ENABLE_JOIN_LINK_SCHEDULER": "true",
            "ENABLE_JOIN_LINK_FALLBACK_CRON": "true",
            **JWT_ENV,
            "JLG_REGISTRAR": "http",
            "JLG_ONLINE_SESSION_URL": f"http://127.0.0.1:{service_box.port}/",
            "JLG_ONLINE_SESSION_TOKEN": "chaos-service-token",
            "JLG_MAX_SESSIONS_PER_RUN": "25",
            "JLG_ONLINE_SESSION_MAX_PAUSE_S": str(MAX_PAUSE_S),
        }
        env = system_env(home, dagster_url, through, **{**own, **settings})
        # EventBridge's own delivery talks to moto directly: its faults are ours to call.
        standin = EventBridgeStandIn(aws.client("scheduler"), aws.client("sqs"))
        standin.start()
        system = System(
            env=env,
            home=home,
            children=Children(),
            database=database,
            aws=aws_box,
            service_box=service_box,
            service=service,
            restart_postgres=postgres.restart,
            sqs=aws.client("sqs"),
            queue_url=aws.queue_url,
        )
        web, base = start_web(env, log=home / "web.log")
        system.start_daemon()
        try:
            yield system, base, ids, engine
        finally:
            web.terminate()
            web.wait(timeout=30)
            system.children.stop()
            standin.stop()
            for box in (database, aws_box, service_box):
                box.close()
            engine.dispose()


def one_each(engine: Engine, first_programme: int, count: int) -> list[int]:
    """``count`` sessions, one in each programme from ``first_programme``."""
    with engine.begin() as conn:
        return sorted(
            conn.execute(
                text(
                    "INSERT INTO hdb_program_session (program_id)"
                    " SELECT :first + g FROM generate_series(0, :n - 1) AS g RETURNING id"
                ),
                {"first": first_programme, "n": count},
            ).scalars()
        )


def refusals(
    base: str, refused: list[int], timeline: Timeline, record: Record, stop: threading.Event
) -> None:
    """Arms each refused session through the trial's arming window, as the admin arms the
    others (a PATCH that fails is tried again 10 s later)."""
    rng = random.Random(timeline.seed * 31)
    interval = timeline.arm_until_s / max(len(refused), 1)
    with httpx.Client(base_url=base, headers=admin_headers(), timeout=60) as http:
        for session in refused:
            for _ in range(3):
                at = datetime.now(UTC) + timedelta(
                    seconds=rng.uniform(timeline.min_lead_s, timeline.max_lead_s)
                )
                status = patch(http, record, session, at)
                if status == 200:
                    with record.lock:
                        record.refused.append(session)
                        record.refused_at[session] = (record.now(), at)
                    break
                if stop.wait(10):
                    return
            if stop.wait(interval):
                return


def host_writes_absurd(engine: Engine, session: int, value: str, record: Record) -> None:
    """The host's own UPDATE of one of its armed sessions' time, not through any fault box."""
    with engine.begin() as conn:
        conn.execute(
            text("UPDATE hdb_program_session SET link_generation_at = :v WHERE id = :id"),
            {"v": value, "id": session},
        )
    with record.lock:
        record.absurd[session] = value
    record.note(f"the host wrote {value} on session {session}")


def run(
    timeline: Timeline, sessions: int, home: Path, settings: dict[str, str] | None = None
) -> Outcome:
    """``settings``: environment for the web app and the daemon over the trial's own."""
    with whole_system(home, sessions, settings or {}) as (system, base, ids, engine):
        time.sleep(20 * timeline.shape)  # the daemon loads the code location
        record = Record()
        stop = threading.Event()
        rng = random.Random(timeline.seed)
        refused = one_each(engine, 1_000, timeline.refusing_programmes)
        for session in refused:
            system.service.for_session[session] = REFUSAL
        # The host's own sessions, armed beyond the trial's end until it writes on them.
        hosts = iter(one_each(engine, 2_000, len(timeline.absurd)))
        beyond = datetime.now(UTC) + timedelta(seconds=timeline.length_s + 600)
        with httpx.Client(base_url=base, headers=admin_headers(), timeout=60) as http:
            host_armed = [s for s in hosts if patch(http, record, s, beyond) == 200]
        absurd_on = iter(host_armed)

        def faults() -> None:
            plan = sorted(
                [(f.start, "fault", f) for f in timeline.faults]
                + [(t, "messages", kind) for t, kind in timeline.messages]
                + [(t, "absurd", value) for t, value in timeline.absurd],
                key=lambda item: item[0],
            )
            for at, what, detail in plan:
                if stop.wait(max(at - record.now(), 0)):
                    return
                if what == "fault":
                    inflict(detail, system, record, stop, timeline.shape)  # type: ignore[arg-type]
                elif what == "absurd":
                    session = next(absurd_on, None)
                    if session is not None:
                        host_writes_absurd(engine, session, str(detail), record)
                else:
                    send_messages(detail, system, record, rng)  # type: ignore[arg-type]

        threads = [
            threading.Thread(target=faults, name="chaos-faults"),
            threading.Thread(target=reader, args=(base, ids, record, stop), name="chaos-reader"),
            threading.Thread(
                target=refusals, args=(base, refused, timeline, record, stop), name="chaos-refusals"
            ),
        ]
        for thread in threads:
            thread.start()
        try:
            admin(base, ids, timeline, record, stop)
            wait_until_done(
                engine, record, record.started_at + timedelta(seconds=timeline.length_s)
            )
        finally:
            stop.set()
            for thread in threads:
                thread.join(timeout=300)
        violations, figures = judge(timeline, record, engine, system.service)
    return Outcome(timeline, record, violations, figures)


def wait_until_done(engine: Engine, record: Record, not_before: datetime) -> None:
    """Until every armed session is COMPLETED and every refused one was asked (not before
    ``not_before``), or the bound after the last armed time has passed."""
    due = [a.at for a in record.armings if a.status == 200]
    due += [at for _, at in record.refused_at.values()]
    end = not_before
    if due:
        end = max(end, max(due) + timedelta(seconds=ON_TIME_S + 30))
    while datetime.now(UTC) < end and not all_done(engine, record):
        time.sleep(5)


def all_done(engine: Engine, record: Record) -> bool:
    armed = {a.session for a in record.armings if a.status == 200}
    with engine.connect() as conn:
        done = conn.execute(
            text(
                "SELECT count(*) FILTER (WHERE id = ANY(:armed)"
                " AND link_generation_status = 'COMPLETED'), count(*) FILTER (WHERE"
                " id = ANY(:refused) AND link_generation_status = 'FAILED')"
                " FROM hdb_program_session"
            ),
            {"armed": sorted(armed), "refused": sorted(record.refused)},
        ).one()
    return (
        bool(armed)
        and tuple(done) == (len(armed), len(record.refused))
        and datetime.now(UTC) > max(a.at for a in record.armings if a.status == 200)
    )


def judge(
    timeline: Timeline, record: Record, engine: Engine, service: OnlineSessionService
) -> tuple[list[str], dict[str, float]]:
    violations: list[str] = []
    with engine.connect() as conn:
        # Read within Python's range: the host's absurd writes are among the rows.
        rows = {
            sid: (at, status)
            for sid, at, status in conn.execute(
                select(ps.c.id, ps.c.link_generation_at, ps.c.link_generation_status)
            ).all()
        }
        completed = {
            (sid, at): finished
            for sid, at, finished in conn.execute(
                text(
                    "SELECT program_session_id, link_generation_at, finished_at"
                    " FROM jlg_generation_attempt WHERE outcome = 'COMPLETED'"
                )
            ).all()
        }
        first_claimed: dict[int, datetime] = dict(
            conn.execute(
                text(
                    "SELECT program_session_id, min(claimed_at) FROM jlg_generation_attempt"
                    " GROUP BY 1"
                )
            ).all()
        )
        errors: dict[int, str | None] = dict(
            conn.execute(
                text("SELECT id, link_generation_last_error FROM hdb_program_session")
            ).all()
        )
        doubled = conn.execute(
            text(
                "SELECT program_session_id, link_generation_at FROM jlg_generation_attempt"
                " WHERE job_id IS NOT NULL GROUP BY 1, 2 HAVING count(DISTINCT job_id) > 1"
            )
        ).all()
    for sid, at in doubled:
        violations.append(f"session {sid}: two job ids in its cycle at {at:%H:%M:%S}")
    jobs: dict[int, set[str]] = {}
    for job in service.jobs.values():
        jobs.setdefault(int(job.split("-")[1]), set()).add(job)
    lateness: list[float] = []
    by_session: dict[int, list[Arming]] = {}
    for arming in record.armings:
        by_session.setdefault(arming.session, []).append(arming)
    for sid, armings in sorted(by_session.items()):
        accepted = [a for a in armings if a.status == 200]
        if not accepted:
            continue
        last = accepted[-1]
        after = armings[armings.index(last) + 1 :]
        db_at, status = rows[sid]
        kept = next((a for a in [last, *after] if db_at is not None and a.at == db_at), None)
        if kept is None:
            violations.append(
                f"session {sid}: PATCH accepted at {last.armed_s:.0f} s lost ({db_at})"
            )
            continue
        if len(jobs.get(sid, ())) > 1:
            violations.append(
                f"session {sid}: {len(jobs[sid])} jobs at the service {sorted(jobs[sid])}"
            )
        due_s = (kept.at - record.started_at).total_seconds()
        holding, held_until = _held(timeline, kept.armed_s, due_s)
        finished = completed.get((sid, kept.at))
        if finished is None:
            violations.append(f"session {sid}: due at {due_s:.0f} s, {status}, never COMPLETED")
            continue
        done_s = (finished - record.started_at).total_seconds()
        lateness.append(done_s - due_s)
        if done_s > held_until + ON_TIME_S:
            blame = (
                ", ".join(f"{f.kind} {f.start:.0f}-{f.end:.0f} s" for f in holding) or "no fault"
            )
            violations.append(
                f"session {sid}: due at {due_s:.0f} s, COMPLETED at {done_s:.0f} s,"
                f" {done_s - held_until:.0f} s after it was free ({blame})"
            )
    for sid in record.refused:
        armed_s, at = record.refused_at[sid]
        due_s = (at - record.started_at).total_seconds()
        _, held_until = _held(timeline, armed_s, due_s)
        claimed = first_claimed.get(sid)
        if rows[sid][1] == "COMPLETED":
            violations.append(f"session {sid}: refused for good, yet COMPLETED")
        if claimed is None:
            violations.append(f"session {sid}: refused for good, due at {due_s:.0f} s, never asked")
        elif (claimed - record.started_at).total_seconds() > held_until + ON_TIME_S:
            violations.append(f"session {sid}: refused for good, due at {due_s:.0f} s, asked late")
    for sid, value in sorted(record.absurd.items()):
        set_aside = "set aside" in (errors[sid] or "")
        if service.calls_for(sid) or rows[sid][1] != "FAILED" or not set_aside:
            violations.append(
                f"session {sid}: the host wrote {value}; {rows[sid][1]}, asked"
                f" {service.calls_for(sid)} time(s), not set aside"
            )
    bad = [(t, what, s) for t, what, s in record.answers if (s >= 500 and s != 503) or s == 0]
    for t, what, status in bad:
        violations.append(f"admin {what} at {t:.0f} s answered {status or 'nothing'}")
    answers = [s for _, _, s in record.answers]
    figures = {
        "sessions armed": float(
            sum(1 for a in by_session.values() if any(x.status == 200 for x in a))
        ),
        "PATCHes": float(len(record.armings)),
        "admin answers": float(len(answers)),
        "admin 503": float(answers.count(503)),
        "bulkRegister calls": float(service.calls),
        "sessions refused for good": float(len(record.refused)),
        "sessions the host made absurd": float(len(record.absurd)),
        "worst lateness after its time (s)": max(lateness, default=0.0),
        "violations": float(len(violations)),
    }
    return violations, figures


def _held(timeline: Timeline, armed_s: float, due_s: float) -> tuple[list[Fault], float]:
    """The faults that overlapped a session's wait, and when the last of them let it go."""
    holding = [
        f for f in timeline.faults if f.start <= due_s + ON_TIME_S and f.holds_until >= armed_s
    ]
    return holding, max([due_s, *(f.holds_until for f in holding)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--minutes", type=float, default=20.0)
    parser.add_argument("--sessions", type=int, default=0, help="default: one every 4 s")
    parser.add_argument("--keep", type=Path, help="copy the processes' logs here")
    parser.add_argument("--strict", action="store_true", help="exit 1 on any violation")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a setting for the web app and the daemon (e.g. JLG_ONLINE_SESSION_TIMEOUT_S=60)",
    )
    parser.add_argument(
        "--kinds",
        help=f"draw only these faults, comma-separated (of: {', '.join(sorted(DURATIONS))})",
    )
    args = parser.parse_args()
    settings = dict(item.split("=", 1) for item in args.set)
    kinds = [k.strip() for k in args.kinds.split(",")] if args.kinds else None
    unknown = set(kinds or ()) - set(DURATIONS)
    if unknown:
        parser.error(f"unknown fault kind(s): {', '.join(sorted(unknown))}")
    length_s = args.minutes * 60
    timeline = Timeline.draw(args.seed, length_s, kinds)
    sessions = args.sessions or max(int(timeline.arm_until_s / 4), 1)
    shown = "".join(f", {name}={value}" for name, value in settings.items())
    print(
        f"# chaos, seed {args.seed}, {args.minutes:g} min, {sessions} sessions{shown}, {machine()}"
    )
    print("\n".join(timeline.lines()))
    (ROOT / ".data").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="jlg-chaos-", dir=ROOT / ".data") as home:
        outcome = run(timeline, sessions, Path(home), settings)
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
            for log in Path(home).glob("*.log"):
                shutil.copy(log, args.keep / log.name)
    print("\n## what happened\n")
    print("\n".join(outcome.record.events))
    print("\n## figures\n")
    for name, value in outcome.figures.items():
        print(f"- {name}: {value:g}")
    print(f"\n## violations ({len(outcome.violations)})\n")
    print("\n".join(outcome.violations) or "none")
    if args.strict and outcome.violations:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
