"""The HTTP registrar against a real local HTTP server: the pinned request, its error
classification, the overall deadline, the answer cap, and what its errors may say."""

import json
import re
import threading
import time
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from devstack.online_session import Answer, OnlineSessionService, online_session_service
from devstack.ports import free_port
from jlg_pipeline.adapters.registrars.http import HttpRegistrar, error_code, shares_secret
from jlg_pipeline.domain.errors import ConfigError, RegistrarRejected, RegistrarUnavailable
from jlg_pipeline.domain.generation import BulkRegisterRequest
from jlg_pipeline.domain.validation import SessionId

TOKEN = "svc-token-7f3a9c"


@pytest.fixture
def service() -> Iterator[OnlineSessionService]:
    with online_session_service() as service:
        yield service


def _registrar(url: str, timeout_s: float = 5.0) -> HttpRegistrar:
    return HttpRegistrar(url, TOKEN, timeout_s=timeout_s)


def test_success_sends_the_pinned_request(service: OnlineSessionService) -> None:
    with _registrar(service.url) as registrar:
        result = registrar.bulk_register(
            BulkRegisterRequest.parse(7, role="attendee", batch_size=50, actor_user_id=3)
        )
        registrar.bulk_register(BulkRegisterRequest.parse(8))
    assert (result.job_id, result.total) == ("job-7-1", 10)
    first, second = service.received
    assert first["path"] == "/online-session/bulk-register"
    assert first["auth"] == f"Bearer {TOKEN}"
    assert first["json"] == {"sessionId": 7, "role": "attendee", "batchSize": 50, "actorUserId": 3}
    assert second["json"] == {"sessionId": 8, "role": None, "batchSize": None, "actorUserId": None}


def test_numeric_job_id_is_kept_as_text(service: OnlineSessionService) -> None:
    service.answer = Answer(body=b'{"jobId": 123, "total": 0, "extra": true}')
    with _registrar(service.url) as registrar:
        assert registrar.bulk_register(BulkRegisterRequest.parse(1)).job_id == "123"


@pytest.mark.parametrize("status", [408, 429, 500, 502, 503, 504])
def test_408_429_and_5xx_are_retryable(service: OnlineSessionService, status: int) -> None:
    service.answer = Answer(status=status, body=b'{"error": "down"}')
    with (
        _registrar(service.url) as registrar,
        pytest.raises(RegistrarUnavailable, match=str(status)),
    ):
        registrar.bulk_register(BulkRegisterRequest.parse(1))


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        ("7", 7.0),
        ("0", 0.0),
        ("soon", None),
        ("", None),
        # str.isdigit takes a superscript two; float() does not: the pause was lost.
        ("²", None),
        ("1²", None),
        ("-5", None),
        ("3.5", None),
        ("9" * 5000, None),
        ("999999999", 999999999.0),
        ("9999999999", None),
    ],
)
def test_retry_after_is_kept(
    service: OnlineSessionService, header: str, seconds: float | None
) -> None:
    service.answer = Answer(status=429, body=b"{}", headers={"Retry-After": header})
    with _registrar(service.url) as registrar, pytest.raises(RegistrarUnavailable) as raised:
        registrar.bulk_register(BulkRegisterRequest.parse(1))
    assert raised.value.retry_after_s == seconds


def test_retry_after_as_an_http_date(service: OnlineSessionService) -> None:
    when = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 30))
    service.answer = Answer(status=503, body=b"{}", headers={"Retry-After": when})
    with _registrar(service.url) as registrar, pytest.raises(RegistrarUnavailable) as raised:
        registrar.bulk_register(BulkRegisterRequest.parse(1))
    assert raised.value.retry_after_s is not None
    assert 25 <= raised.value.retry_after_s <= 31


def test_a_slow_answer_hits_the_deadline(service: OnlineSessionService) -> None:
    service.answer = Answer(delay=3.0)
    started = time.monotonic()
    with (
        _registrar(service.url, timeout_s=0.5) as registrar,
        pytest.raises(RegistrarUnavailable, match="deadline"),
    ):
        registrar.bulk_register(BulkRegisterRequest.parse(1))
    assert time.monotonic() - started < 2.0


def test_the_stand_in_keeps_its_own_rate_limit(service: OnlineSessionService) -> None:
    """Over its limit (here 5 calls in any second) it answers 429 with Retry-After 1, as the
    bench needs of a service with limits; what it refused does not count against it."""
    service.limit_per_s = 5
    outcomes = []
    with _registrar(service.url) as registrar:
        for sid in range(1, 9):
            try:
                registrar.bulk_register(BulkRegisterRequest.parse(sid))
                outcomes.append("ok")
            except RegistrarUnavailable as exc:
                outcomes.append(f"{exc.retry_after_s:g}")
        time.sleep(1.05)
        registrar.bulk_register(BulkRegisterRequest.parse(9))
    assert outcomes == ["ok"] * 5 + ["1"] * 3
    assert [c["status"] for c in service.received] == [200] * 5 + [429] * 3 + [200]


def test_a_hung_stand_in_answers_once_it_heals(service: OnlineSessionService) -> None:
    """A call abandoned at its bound started the job; asked again under the same key once the
    service heals, the answer is that job."""
    healed = threading.Event()
    service.answer = Answer(until=healed)
    request = BulkRegisterRequest(SessionId(1), idempotency_key="join-link-1@2026-12-05T12:00:00Z")
    with _registrar(service.url, timeout_s=0.5) as registrar:
        with pytest.raises(RegistrarUnavailable, match="deadline"):
            registrar.bulk_register(request)
        threading.Timer(0.3, healed.set).start()
        assert registrar.bulk_register(request).job_id == "job-1-1"
    assert service.calls == 2


def test_a_trickling_answer_hits_the_overall_deadline(service: OnlineSessionService) -> None:
    """One byte every 0.3 s: each read is quick, so per-read timeouts never fire."""
    service.answer = Answer(trickle_interval=0.3)
    started = time.monotonic()
    with (
        _registrar(service.url, timeout_s=1.5) as registrar,
        pytest.raises(RegistrarUnavailable, match="deadline"),
    ):
        registrar.bulk_register(BulkRegisterRequest.parse(1))
    elapsed = time.monotonic() - started
    assert 1.4 <= elapsed < 2.5, elapsed


def test_an_answer_over_64_kib_is_refused_while_reading(service: OnlineSessionService) -> None:
    padding = b" " * (64 * 1024)
    service.answer = Answer(body=b'{"jobId": "j", "total": 1}' + padding)
    with (
        _registrar(service.url) as registrar,
        pytest.raises(RegistrarUnavailable, match="more than 65536 bytes"),
    ):
        registrar.bulk_register(BulkRegisterRequest.parse(1))


def test_connection_refused_is_retryable() -> None:
    with (
        _registrar(f"http://127.0.0.1:{free_port()}") as registrar,
        pytest.raises(RegistrarUnavailable, match="could not complete"),
    ):
        registrar.bulk_register(BulkRegisterRequest.parse(1))


@pytest.mark.parametrize("status", [400, 401, 403, 404, 409, 422])
def test_other_non_2xx_is_not_retryable(service: OnlineSessionService, status: int) -> None:
    service.answer = Answer(status=status, body=b'{"message": "no"}')
    with _registrar(service.url) as registrar, pytest.raises(RegistrarRejected, match=str(status)):
        registrar.bulk_register(BulkRegisterRequest.parse(1))


@pytest.mark.parametrize(
    ("body", "described"),
    [
        (
            b'{"code": "MEETING_DELETED", "message": "zoom says no"}',
            "answered 400 (MEETING_DELETED)",
        ),
        (b'{"error": {"code": "E42", "message": "x"}}', "answered 400 (E42)"),
        (b'{"error": "invalid_session"}', "answered 400 (invalid_session)"),
        (b'{"error": "a sentence with spaces and Bearer x"}', "answered 400"),
        (b"<html>Bearer svc-token</html>", "answered 400"),
    ],
)
def test_errors_keep_the_status_and_a_short_code_only(
    service: OnlineSessionService, body: bytes, described: str
) -> None:
    service.answer = Answer(status=400, body=body)
    with _registrar(service.url) as registrar, pytest.raises(RegistrarRejected) as raised:
        registrar.bulk_register(BulkRegisterRequest.parse(1))
    assert str(raised.value) == f"bulkRegister {described}"


def test_an_answer_echoing_our_token_never_reaches_the_error(
    service: OnlineSessionService,
) -> None:
    service.answer = Answer(status=400, echo_request=True)
    with _registrar(service.url) as registrar, pytest.raises(RegistrarRejected) as raised:
        registrar.bulk_register(BulkRegisterRequest.parse(1))
    assert TOKEN in str(service.received[0]["headers"])
    assert TOKEN not in str(raised.value)
    assert "Bearer" not in str(raised.value)


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
def test_malformed_answer_is_not_retryable(service: OnlineSessionService, body: bytes) -> None:
    service.answer = Answer(body=body)
    with (
        _registrar(service.url) as registrar,
        pytest.raises(RegistrarRejected, match="without a valid"),
    ):
        registrar.bulk_register(BulkRegisterRequest.parse(1))


@pytest.mark.parametrize(("url", "token"), [("ftp://x", "t"), ("http://x", "")])
def test_bad_configuration_is_refused(url: str, token: str) -> None:
    with pytest.raises(ConfigError):
        HttpRegistrar(url, token)


TOKEN_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-"


@settings(max_examples=300, derandomize=True)
@given(
    token=st.text(st.sampled_from(TOKEN_CHARS), min_size=16, max_size=64),
    answer=st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=60),
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(st.sampled_from(["code", "error", "message", "x"]), inner)
        ),
        max_leaves=6,
    ),
    echo=st.booleans(),
    start=st.integers(0, 40),
    length=st.integers(1, 40),
)
def test_a_kept_error_code_has_its_shape_and_shares_nothing_with_the_token(
    token: str, answer: object, echo: bool, start: int, length: int
) -> None:
    """Whatever an error answer holds (a part of our token included), the code kept from it
    has the closed shape and no 6 characters of the token."""
    if echo:
        part = token[start : start + length]
        answer = {"error": {"code": part}} if start % 2 else {"code": part}
    code = error_code(json.dumps(answer).encode(), token)
    if code is not None:
        assert re.fullmatch(r"[A-Za-z][A-Za-z0-9_]{0,39}", code)
        assert not shares_secret(code, token, 6)
