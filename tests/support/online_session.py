"""A fake online-session service on a real local HTTP server: answers bulkRegister as
scripted (status, body, delay, a trickling answer, Retry-After, an echo of our headers) and
records what it was sent. The one fake of that service for tests."""

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

OK_BODY = b'{"jobId": "job-9", "total": 14}'


@dataclass
class Answer:
    status: int = 200
    body: bytes = OK_BODY
    delay: float = 0.0
    """Seconds before the answer starts."""
    trickle_interval: float = 0.0
    """When set, the body is sent one byte at a time with this pause between bytes."""
    headers: dict[str, str] = field(default_factory=dict)
    echo_request: bool = False
    """Answer with the request's headers and body in the body, as a careless service might."""


@dataclass
class OnlineSessionService:
    url: str
    answer: Answer = field(default_factory=Answer)
    queue: list[Answer] = field(default_factory=list)
    """Answers used first, one per call; ``answer`` once it is empty."""
    received: list[dict[str, Any]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def next_answer(self, request: dict[str, Any]) -> Answer:
        with self._lock:
            self.received.append(request)
            return self.queue.pop(0) if self.queue else self.answer

    @property
    def calls(self) -> int:
        return len(self.received)


@contextmanager
def online_session_service() -> Iterator[OnlineSessionService]:
    service = OnlineSessionService(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            raw = self.rfile.read(length)
            request = {
                "path": self.path,
                "auth": self.headers.get("Authorization"),
                "headers": dict(self.headers.items()),
                "json": json.loads(raw) if raw else None,
            }
            answer = service.next_answer(request)
            body = answer.body
            if answer.echo_request:
                body = json.dumps(
                    {"message": "bad request", "request": request["headers"]}
                ).encode()
            time.sleep(answer.delay)
            self.send_response(answer.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for name, value in answer.headers.items():
                self.send_header(name, value)
            self.end_headers()
            try:
                if answer.trickle_interval:
                    for i in range(len(body)):
                        self.wfile.write(body[i : i + 1])
                        self.wfile.flush()
                        time.sleep(answer.trickle_interval)
                else:
                    self.wfile.write(body)
            except OSError:
                pass  # the client gave up (its deadline): what a real service would see

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    service.url = f"http://127.0.0.1:{httpd.server_address[1]}/"
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield service
    finally:
        httpd.shutdown()
        httpd.server_close()
