"""The HTTP registrar against a real local HTTP server, and its error classification."""

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from jlg_pipeline.adapters.registrars.http import HttpRegistrar
from jlg_pipeline.domain.errors import ConfigError, RegistrarRejected, RegistrarUnavailable
from jlg_pipeline.domain.models import BulkRegisterRequest
from tests.support.net import free_port


@dataclass
class Scripted:
    """What the server answers next, and what it was sent."""

    status: int = 200
    body: bytes = b'{"jobId": "job-9", "total": 14}'
    delay: float = 0.0
    received: list[dict[str, Any]] = field(default_factory=list)


@pytest.fixture
def server() -> Iterator[tuple[str, Scripted]]:
    script = Scripted()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers["Content-Length"])
            script.received.append(
                {
                    "path": self.path,
                    "auth": self.headers["Authorization"],
                    "json": json.loads(self.rfile.read(length)),
                }
            )
            time.sleep(script.delay)
            self.send_response(script.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(script.body)))
            self.end_headers()
            self.wfile.write(script.body)

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/", script
    finally:
        httpd.shutdown()
        httpd.server_close()


def _registrar(url: str, read_timeout: float = 5.0) -> HttpRegistrar:
    return HttpRegistrar(url, "svc-token", timeout=httpx.Timeout(read_timeout, connect=2.0))


def test_success_sends_the_pinned_request(server: tuple[str, Scripted]) -> None:
    url, script = server
    with _registrar(url) as registrar:
        result = registrar.bulk_register(
            BulkRegisterRequest(7, role="attendee", batch_size=50, actor_user_id=3)
        )
        registrar.bulk_register(BulkRegisterRequest(8))
    assert (result.job_id, result.total) == ("job-9", 14)
    first, second = script.received
    assert first["path"] == "/online-session/bulk-register"
    assert first["auth"] == "Bearer svc-token"
    assert first["json"] == {"sessionId": 7, "role": "attendee", "batchSize": 50, "actorUserId": 3}
    assert second["json"] == {"sessionId": 8, "role": None, "batchSize": None, "actorUserId": None}


def test_numeric_job_id_is_kept_as_text(server: tuple[str, Scripted]) -> None:
    url, script = server
    script.body = b'{"jobId": 123, "total": 0, "extra": true}'
    with _registrar(url) as registrar:
        assert registrar.bulk_register(BulkRegisterRequest(1)).job_id == "123"


@pytest.mark.parametrize("status", [500, 502, 503, 504])
def test_5xx_is_retryable(server: tuple[str, Scripted], status: int) -> None:
    url, script = server
    script.status, script.body = status, b'{"error": "down"}'
    with _registrar(url) as registrar, pytest.raises(RegistrarUnavailable, match=str(status)):
        registrar.bulk_register(BulkRegisterRequest(1))


def test_timeout_is_retryable(server: tuple[str, Scripted]) -> None:
    url, script = server
    script.delay = 1.0
    with (
        _registrar(url, read_timeout=0.2) as registrar,
        pytest.raises(RegistrarUnavailable, match="timed out"),
    ):
        registrar.bulk_register(BulkRegisterRequest(1))


def test_connection_refused_is_retryable() -> None:
    with (
        _registrar(f"http://127.0.0.1:{free_port()}") as registrar,
        pytest.raises(RegistrarUnavailable),
    ):
        registrar.bulk_register(BulkRegisterRequest(1))


@pytest.mark.parametrize("status", [400, 401, 403, 404, 409, 422, 429])
def test_other_non_2xx_is_not_retryable(server: tuple[str, Scripted], status: int) -> None:
    url, script = server
    script.status, script.body = status, b'{"message": "no"}'
    with _registrar(url) as registrar, pytest.raises(RegistrarRejected, match=str(status)):
        registrar.bulk_register(BulkRegisterRequest(1))


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"",
        b"[]",
        b'{"jobId": "j"}',
        b'{"total": 3}',
        b'{"jobId": "j", "total": -1}',
        b'{"jobId": "j", "total": "3"}',
        b'{"jobId": true, "total": 3}',
        b'{"jobId": null, "total": 3}',
    ],
)
def test_malformed_answer_is_not_retryable(server: tuple[str, Scripted], body: bytes) -> None:
    url, script = server
    script.body = body
    with _registrar(url) as registrar, pytest.raises(RegistrarRejected, match="without a valid"):
        registrar.bulk_register(BulkRegisterRequest(1))


@pytest.mark.parametrize(("url", "token"), [("ftp://x", "t"), ("http://x", "")])
def test_bad_configuration_is_refused(url: str, token: str) -> None:
    with pytest.raises(ConfigError):
        HttpRegistrar(url, token)
