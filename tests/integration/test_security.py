"""The hardening pinned in docs/design.md "Security", one test per finding, through the served
app and real PostgreSQL: secrets from upstream answers, /readyz, forged actors, tokens,
times, bodies (a real uvicorn), metric labels."""

import contextlib
import logging
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from dagster import DagsterInstance
from sqlalchemy import Engine, text
from sqlalchemy.engine import make_url
from starlette.testclient import TestClient

from devstack.online_session import Answer, online_session_service
from jlg_pipeline.adapters.registrars.http import HttpRegistrar
from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.config import Environment, Settings
from jlg_pipeline.domain.attempts import Trigger
from jlg_pipeline.domain.errors import NonRetryableGenerationFailed
from jlg_pipeline.domain.generation import BulkRegisterRequest, BulkRegisterResult
from jlg_pipeline.domain.status import LinkGenerationStatus
from jlg_pipeline.orchestration.generation import build_generation_job
from jlg_pipeline.orchestration.resources import build_resources
from jlg_pipeline.services.generation import generate_for_session
from testkit.factories import create_session, force_state, session_row
from tests.support.served import rss_kib, served_app
from tests.support.web import Aws, admin_headers, client_for, raw_token, settings_for

UPSTREAM_TOKEN = "online-session-token-5d0c2f9e71"


def _path(sid: int) -> str:
    return f"/program-session/{sid}/link-generation"


@pytest.fixture
def http(db_url: str, aws: Aws) -> Iterator[TestClient]:
    with client_for(settings_for(db_url, aws.queue_arn), aws.scheduler) as client:
        yield client


# 1. Secrets in upstream answers.
def test_an_upstream_answer_echoing_our_token_is_stored_and_logged_without_it(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    sid = create_session(engine)
    force_state(engine, sid, LinkGenerationStatus.SCHEDULED)
    with online_session_service() as service:
        service.answer = Answer(status=400, echo_request=True)
        registrar = HttpRegistrar(service.url, UPSTREAM_TOKEN, timeout_s=5)
        with caplog.at_level(logging.DEBUG), pytest.raises(NonRetryableGenerationFailed) as failed:
            generate_for_session(
                BulkRegisterRequest.parse(sid),
                repository=ProgramSessionRepository(engine),
                registrar=registrar,
                trigger=Trigger.EVENT,
            )
        registrar.close()
    assert UPSTREAM_TOKEN in str(service.received[0]["headers"]), "the service did see it"
    stored = session_row(engine, sid)["link_generation_last_error"]
    assert stored == "RegistrarRejected: bulkRegister answered 400"
    logged = "\n".join(caplog.text.splitlines()) + "".join(
        str(getattr(r, "jlg_fields", "")) for r in caplog.records
    )
    for where in (stored, str(failed.value), logged):
        assert UPSTREAM_TOKEN not in where
        assert "Bearer" not in where


# The token as the stand-in's answers echo it: letters and digits only, so it also has the
# shape of an error code and of a job id.
ECHOED_TOKEN = "svcToken5d0c2f9e71ab"
ECHOING_ANSWERS = {
    "200 not JSON": Answer(body=f"jobId={ECHOED_TOKEN} total=3".encode()),
    "200 job id": Answer(body=f'{{"jobId": "{ECHOED_TOKEN}", "total": 3}}'.encode()),
    "malformed status line": Answer(raw=f"HTTP/1.1 2OO Bearer {ECHOED_TOKEN}\r\n\r\n".encode()),
    "reason phrase": Answer(raw=f"HTTP/1.1 400 {ECHOED_TOKEN}\r\n\r\n".encode()),
    "error code": Answer(status=400, body=f'{{"error": "{ECHOED_TOKEN}"}}'.encode()),
    "error code part": Answer(status=422, body=f'{{"code": "x{ECHOED_TOKEN[3:11]}"}}'.encode()),
    "error body": Answer(status=400, echo_request=True),
}


@pytest.mark.parametrize("answer", list(ECHOING_ANSWERS), ids=list(ECHOING_ANSWERS))
def test_no_part_of_our_token_reaches_the_row_the_history_the_logs_or_dagster(
    engine: Engine, db_url: str, caplog: pytest.LogCaptureFixture, answer: str
) -> None:
    """Through the Dagster job, as the Launchpad or a sensor runs it: whatever the service
    answers, the token it was sent is in none of the places a person reads."""
    sid = create_session(engine)
    force_state(engine, sid, LinkGenerationStatus.SCHEDULED)
    instance = DagsterInstance.ephemeral()
    with online_session_service() as service:
        service.answer = ECHOING_ANSWERS[answer]
        settings = Settings.from_env(
            {
                "JLG_DATABASE_URL": db_url,
                "JLG_REGISTRAR": "http",
                "JLG_ONLINE_SESSION_URL": service.url,
                "JLG_ONLINE_SESSION_TOKEN": ECHOED_TOKEN,
                "JLG_ONLINE_SESSION_TIMEOUT_S": "5",
            }
        )
        with caplog.at_level(logging.DEBUG):
            result = build_generation_job(retry_delay_seconds=0.01).execute_in_process(
                run_config={"ops": {"generate_join_links": {"config": {"programSessionId": sid}}}},
                resources=build_resources(settings),
                instance=instance,
                raise_on_error=False,
            )
    assert not result.success
    assert f"Bearer {ECHOED_TOKEN}" in str(service.received[0]["headers"]), "it was sent"
    row = session_row(engine, sid)
    assert row["link_generation_status"] == "FAILED"
    places = {
        "row": str(row),
        "history": str(ProgramSessionRepository(engine).attempts(sid)),
        "logs": caplog.text + "".join(str(getattr(r, "jlg_fields", "")) for r in caplog.records),
        "dagster": "\n".join(repr(entry) for entry in instance.all_logs(result.run_id)),
    }
    parts = {ECHOED_TOKEN[i : i + 6].lower() for i in range(len(ECHOED_TOKEN) - 5)}
    for where, text_there in places.items():
        found = [part for part in parts if part in text_there.lower()]
        assert not found, f"{where} holds {found} of the token"
    assert "bulkRegister answered" in places["dagster"] or "bulkRegister could" in places["dagster"]


# 2. /readyz says nothing about the database.
def test_readyz_503_names_nothing_about_the_database(pg_admin_url: str, aws: Aws) -> None:
    url = make_url(pg_admin_url).set(username="no_such_role_x9", database="nowhere")
    settings = settings_for(url.render_as_string(hide_password=False), aws.queue_arn)
    with client_for(settings, aws.scheduler) as client:
        ready = client.get("/readyz")
        patched = client.get(_path(1), headers=admin_headers())
    assert ready.status_code == 503
    assert patched.status_code == 503
    for response in (ready, patched):
        message = response.json()["error"]["message"]
        assert message == "the database is unavailable; try again shortly"
        for leak in ("no_such_role_x9", "127.0.0.1", "5432", "FATAL", "connection", "psycopg"):
            assert leak not in response.text


# 4. A queue message cannot rewrite the audit column.
def test_a_forged_actor_never_reaches_updated_by(engine: Engine, http: TestClient) -> None:
    sid = create_session(engine)
    due = (datetime.now(UTC) + timedelta(seconds=2)).isoformat()
    assert http.patch(
        _path(sid), headers=admin_headers(7), json={"linkGenerationAt": due}
    ).is_success
    time.sleep(2.1)
    outcome = generate_for_session(
        BulkRegisterRequest.parse(sid, actor_user_id=999999),
        repository=ProgramSessionRepository(engine),
        registrar=_Recording(),
        trigger=Trigger.EVENT,
    )
    assert outcome.result.value == "completed"
    assert session_row(engine, sid)["updated_by"] == 7


class _Recording:
    def bulk_register(self, request: BulkRegisterRequest) -> BulkRegisterResult:
        assert request.actor_user_id == 999999, "bulkRegister still gets the message's actor"
        return BulkRegisterResult(job_id="job-1", total=1)


# 5. Tokens: iss, aud, exp.


@dataclass(frozen=True)
class In:
    """An ``exp`` this many seconds after the token is made (the parameters are built at
    import, long before some tests run)."""

    seconds: float
    as_text: bool = False


LOCAL_ANY = {"environment": Environment.LOCAL, "jwt_issuer": None, "jwt_audience": None}
"""The local stack's settings: no issuer or audience, so any is taken."""


def _token(**claims: Any) -> dict[str, str]:
    base: dict[str, Any] = {"sub": "7", "roles": ["admin"], "exp": In(600)}
    base.update(claims)
    now = int(time.time())
    for name, value in base.items():
        if isinstance(value, In):
            base[name] = str(now + value.seconds) if value.as_text else now + value.seconds
    return {"Authorization": f"Bearer {raw_token(base)}", "X-Active-Role": "admin"}


@pytest.mark.parametrize(
    ("config", "claims", "status"),
    [
        (LOCAL_ANY, {"aud": "some-idp-audience"}, 200),
        (LOCAL_ANY, {"iss": "https://idp.example"}, 200),
        ({}, {"aud": "some-idp-audience"}, 401),
        ({}, {"iss": "https://idp.example"}, 401),
        ({"jwt_audience": "jlg"}, {"aud": "jlg"}, 200),
        ({"jwt_audience": "jlg"}, {"aud": ["other", "jlg"]}, 200),
        ({"jwt_audience": "jlg"}, {"aud": "other"}, 401),
        ({"jwt_audience": "jlg"}, {"aud": None}, 401),
        ({"jwt_issuer": "https://idp"}, {"iss": "https://idp"}, 200),
        ({"jwt_issuer": "https://idp"}, {"iss": "https://evil"}, 401),
        ({"jwt_issuer": "https://idp"}, {"iss": None}, 401),
        ({}, {"exp": In(600, as_text=True)}, 401),
        ({}, {"exp": 10**30}, 401),
        ({}, {"exp": 10**400}, 401),
        ({}, {"exp": True}, 401),
        ({}, {"exp": In(86_400 + 120)}, 401),
        ({"jwt_max_ttl_s": 300}, {"exp": In(600)}, 401),
        ({}, {"exp": In(600.5)}, 200),
        ({}, {"exp": In(-10)}, 401),
    ],
)
def test_token_claims(
    engine: Engine,
    db_url: str,
    aws: Aws,
    config: dict[str, Any],
    claims: dict[str, Any],
    status: int,
) -> None:
    sid = create_session(engine)
    with client_for(settings_for(db_url, aws.queue_arn, **config), aws.scheduler) as client:
        response = client.get(_path(sid), headers=_token(**claims))
    assert response.status_code == status, response.text
    if status == 401:
        assert response.json()["error"]["code"] == "UNAUTHENTICATED"


# 6. Times: RFC 3339 only, and never a 500 whatever the server's timezone.
@pytest.mark.parametrize(
    "value",
    [
        "2099-12-03 09:00:00Z",
        "20991203T090000Z",
        "2099-W49-1T09:00:00Z",
        "2099-12-03T09:00:00+05:30:15.5",
        "2099-12-03T09:00:00Z\x00",
        "2099-12-03T09:00:00Z\n",
        " 2099-12-03T09:00:00Z",
        "2099-12-03T09:00:00",
        "2099-12-03T09:00Z",
        "2099-12-03",
        "2099-12-03T09:00:00+0530",
        "2099-12-03T24:00:00Z",
        "2099-12-03T09:00:00+24:00",
        "9999-12-31T23:59:59-01:00",
        "\u0662099-12-03T09:00:00Z",
    ],
)
def test_times_outside_rfc3339_are_400(engine: Engine, http: TestClient, value: str) -> None:
    sid = create_session(engine)
    response = http.patch(_path(sid), headers=admin_headers(), json={"linkGenerationAt": value})
    assert response.status_code == 400, response.text
    assert session_row(engine, sid)["link_generation_status"] == "NOT_SCHEDULED"


@pytest.mark.parametrize(
    ("value", "stored"),
    [
        ("2029-12-03t09:00:00.5z", "2029-12-03T09:00:00.500Z"),
        ("2029-12-03T10:00:00.123456789+01:00", "2029-12-03T09:00:00.123Z"),
        # The end of a day and of a year, which a time zone east of UTC carries into the next.
        ("2029-12-31T23:59:59Z", "2029-12-31T23:59:59.000Z"),
        ("2029-12-31T23:59:59.999999+00:00", "2029-12-31T23:59:59.999Z"),
    ],
)
def test_accepted_times_under_a_server_timezone_ahead_of_utc(
    engine: Engine, db_url: str, aws: Aws, value: str, stored: str
) -> None:
    database = make_url(db_url).database
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text(f"ALTER DATABASE \"{database}\" SET timezone = 'Asia/Tokyo'"))
    sid = create_session(engine)
    with client_for(settings_for(db_url, aws.queue_arn), aws.scheduler) as client:
        patched = client.patch(
            _path(sid), headers=admin_headers(), json={"linkGenerationAt": value}
        )
        read = client.get(_path(sid), headers=admin_headers())
    assert patched.status_code == 200, patched.text
    assert patched.json()["data"]["linkGenerationAt"] == stored
    assert read.json()["data"]["linkGenerationAt"] == stored


# 7. Bodies: 413 while reading, on a real server.
@pytest.fixture
def served(db_url: str, tmp_path: Path) -> Iterator[tuple[str, int, int]]:
    with served_app(db_url, tmp_path / "web.log") as server:
        yield server


def _chunked_patch(port: int, sid: int, total_bytes: int) -> tuple[int, int]:
    """Send a chunked PATCH of up to ``total_bytes``, stopping as soon as the server answers;
    returns the status and how many body bytes were sent."""
    token = admin_headers()["Authorization"]
    head = (
        f"PATCH {_path(sid)} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: {token}\r\n"
        "X-Active-Role: admin\r\nContent-Type: application/json\r\n"
        "Transfer-Encoding: chunked\r\n\r\n"
    ).encode()
    chunk = b'{"linkGenerationAt": "' + b"x" * (64 * 1024 - 23)
    sent = 0
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(head)
        sock.setblocking(False)
        answer = b""
        while sent < total_bytes:
            with contextlib.suppress(BlockingIOError):
                answer += sock.recv(65536)
            if answer:
                break
            try:
                sock.sendall(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            except (BlockingIOError, BrokenPipeError, ConnectionResetError):
                time.sleep(0.01)
                continue
            sent += len(chunk)
        sock.setblocking(True)
        while b"\r\n" not in answer:
            answer += sock.recv(65536)
    return int(answer.split(b" ", 2)[1]), sent


def test_a_chunked_30_mb_body_is_refused_while_reading(
    engine: Engine, served: tuple[str, int, int]
) -> None:
    url, port, pid = served
    sid = create_session(engine)
    httpx.get(f"{url}/program-session/{sid}/link-generation", headers=admin_headers())
    before = rss_kib(pid)
    status, sent = _chunked_patch(port, sid, 30 * 1024 * 1024)
    grown_mib = (rss_kib(pid) - before) / 1024
    assert status == 413
    assert sent < 30 * 1024 * 1024, "the server answered before the body ended"
    assert grown_mib < 5, f"the server grew by {grown_mib:.1f} MiB"
    assert session_row(engine, sid)["link_generation_status"] == "NOT_SCHEDULED"


def test_a_declared_large_body_is_413_before_reading(http: TestClient) -> None:
    response = http.patch(
        _path(1),
        headers={**admin_headers(), "Content-Type": "application/json"},
        content=b"{" + b" " * 5000 + b"}",
    )
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "PAYLOAD_TOO_LARGE"


# 8. Metric labels are bounded.
def test_unknown_methods_share_one_metric_label(http: TestClient) -> None:
    for i in range(300):
        http.request(f"X{i}", "/healthz")
    text_ = http.get("/metrics").text
    assert 'method="OTHER"' in text_
    assert 'method="X1"' not in text_
    series = [line for line in text_.splitlines() if line.startswith("jlg_http_requests_total")]
    assert len(series) < 10, series
