"""LOCAL ONLY: a stand-in for the online-session service on a real local HTTP server, for
``jlg dev --online-session=…`` (a misbehaving service on demand) and the tests and benchmarks
of the HTTP registrar. It answers bulkRegister as scripted (status, body, delay, a trickling
answer, Retry-After, an echo of our request, raw bytes, a hang until it heals), absorbs a
repeated Idempotency-Key as the real service does, can enforce a rate limit of its own (429
above so many calls a second, as Zoom's registrant APIs do), can hold each session's first call
until released (a run stopped or killed inside bulkRegister), and records what it was sent and
what it answered."""

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

HOLD_LIMIT_S = 120.0


@dataclass
class Answer:
    status: int = 200
    body: bytes | None = None
    """None: ``{"jobId": "job-<session>-<call>", "total": 10}``, naming the call it answers."""
    delay: float = 0.0
    """Seconds before the answer starts."""
    trickle_interval: float = 0.0
    """When set, the body is sent one byte at a time with this pause between bytes."""
    headers: dict[str, str] = field(default_factory=dict)
    echo_request: bool = False
    """Answer with the request's headers in the body, as a careless service might."""
    raw: bytes | None = None
    """When set, these bytes are the whole answer, status line included (a broken one)."""
    until: threading.Event | None = None
    """When set, the call hangs (accepted, no answer) until this event is set (the service
    heals), or HOLD_LIMIT_S; then it is answered as the rest of this answer says."""


THROTTLED = Answer(status=429, body=b"{}", headers={"Retry-After": "1"})
"""What a call over the stand-in's own limit gets."""


@dataclass
class OnlineSessionService:
    url: str = ""
    answer: Answer = field(default_factory=Answer)
    queue: list[Answer] = field(default_factory=list)
    """Answers used first, one per call; ``answer`` once it is empty."""
    for_session: dict[int, Answer] = field(default_factory=dict)
    """What the calls for these sessions get, before ``queue`` and ``answer`` (a service
    failing for one session only)."""
    hold_first_call: bool = False
    """Hold each session's first call until :meth:`release` (or HOLD_LIMIT_S)."""
    limit_per_s: float | None = None
    """The service's own limit, R calls a second: a token bucket refilled at R a second and
    holding R (one second's worth); a call finding it empty is answered 429 with
    ``Retry-After: 1``, whatever ``answer`` says."""
    received: list[dict[str, Any]] = field(default_factory=list)
    """Each call: its path, headers, body, arrival (``at``, monotonic) and ``status``."""
    jobs: dict[str, str] = field(default_factory=dict)
    """Idempotency-Key -> the job its first successful call started: a later call with the
    key gets that job back, as the real service absorbs a repeat."""
    _calls: dict[int, int] = field(default_factory=dict)
    _arrived: dict[int, threading.Event] = field(default_factory=dict)
    _released: dict[int, threading.Event] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _tokens: float | None = None
    _refilled_at: float = 0.0

    @property
    def calls(self) -> int:
        return len(self.received)

    def calls_for(self, session_id: int) -> int:
        with self._lock:
            return self._calls.get(session_id, 0)

    def wait_first_call(self, session_id: int, timeout: float) -> bool:
        return self._event(self._arrived, session_id).wait(timeout)

    def release(self, session_id: int) -> None:
        self._event(self._released, session_id).set()

    def _event(self, events: dict[int, threading.Event], session_id: int) -> threading.Event:
        with self._lock:
            return events.setdefault(session_id, threading.Event())

    def _take(self, request: dict[str, Any], session_id: int) -> tuple[int, Answer]:
        with self._lock:
            self.received.append(request)
            call = self._calls[session_id] = self._calls.get(session_id, 0) + 1
            if session_id in self.for_session:
                answer = self.for_session[session_id]
            else:
                answer = self.queue.pop(0) if self.queue else self.answer
            if self.limit_per_s is not None:
                full = self.limit_per_s
                tokens = self._tokens if self._tokens is not None else full
                tokens = min(full, tokens + (request["at"] - self._refilled_at) * full)
                self._refilled_at = request["at"]
                if tokens >= 1:
                    tokens -= 1
                else:
                    answer = THROTTLED
                self._tokens = tokens
            request["status"] = answer.status
        if self.hold_first_call and call == 1:
            self._event(self._arrived, session_id).set()
            self._event(self._released, session_id).wait(HOLD_LIMIT_S)
        return call, answer


def _handler(service: OnlineSessionService) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            payload = json.loads(raw) if raw else None
            sent_id = payload.get("sessionId") if isinstance(payload, dict) else None
            session_id = sent_id if isinstance(sent_id, int) else 0
            request = {
                "path": self.path,
                "auth": self.headers.get("Authorization"),
                "headers": dict(self.headers.items()),
                "json": payload,
                "client_port": self.client_address[1],
                "at": time.monotonic(),
            }
            call, answer = service._take(request, session_id)
            # The job starts when the call arrives, whenever (if ever) its answer leaves.
            key = self.headers.get("Idempotency-Key")
            with service._lock:
                job = service.jobs.get(key) if key else None
                if job is None:
                    job = f"job-{session_id}-{call}"
                    if key and answer.status == 200:
                        service.jobs[key] = job
            if answer.until is not None:
                answer.until.wait(HOLD_LIMIT_S)
            body = answer.body
            if body is None:
                body = json.dumps({"jobId": job, "total": 10}).encode()
            if answer.echo_request:
                body = json.dumps(
                    {"message": "bad request", "request": request["headers"]}
                ).encode()
            time.sleep(answer.delay)
            try:
                if answer.raw is not None:
                    self.wfile.write(answer.raw)
                    self.close_connection = True
                    return
                self.send_response(answer.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                for name, value in answer.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                if answer.trickle_interval:
                    for i in range(len(body)):
                        self.wfile.write(body[i : i + 1])
                        self.wfile.flush()
                        time.sleep(answer.trickle_interval)
                else:
                    self.wfile.write(body)
            except OSError:
                pass  # the caller gave up or was killed: what a real service would see

        def log_message(self, *args: object) -> None:
            pass

    return Handler


BEHAVIOURS: dict[str, Answer] = {
    "ok": Answer(),
    "reject": Answer(status=422, body=b'{"code": "MEETING_DELETED", "message": "no meeting"}'),
    "throttle": Answer(status=429, body=b"{}", headers={"Retry-After": "30"}),
    "slow": Answer(delay=20.0),
    "flaky": Answer(status=503, body=b"{}"),
}
"""What ``jlg dev --online-session=<name>`` answers every bulkRegister with (``down``, no
service at all, has no answer: nothing listens)."""


@contextmanager
def online_session_service(*, hold_first_call: bool = False) -> Iterator[OnlineSessionService]:
    """The stand-in on 127.0.0.1 at a free port, stopped (and held calls released) after."""
    service = OnlineSessionService(hold_first_call=hold_first_call)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(service))
    httpd.daemon_threads = True
    service.url = f"http://127.0.0.1:{httpd.server_address[1]}/"
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield service
    finally:
        for event in list(service._released.values()):
            event.set()
        httpd.shutdown()
        httpd.server_close()
