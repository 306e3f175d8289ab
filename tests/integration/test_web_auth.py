"""The auth matrix on both endpoints: 401/403 with the envelope, and no state change."""

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine
from starlette.testclient import TestClient

from jlg_pipeline.domain.status import LinkGenerationStatus
from testkit.factories import create_session, force_state, session_row
from tests.support.web import (
    SECRET,
    Aws,
    RecordingClient,
    client_for,
    raw_token,
    settings_for,
    token,
)

NOW = int(time.time())
OTHER_KEY = "another-secret-that-is-long-enough-for-hs256!"


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", "X-Active-Role": "admin"}


def _valid(**claims: object) -> str:
    return raw_token({"sub": "7", "roles": ["admin"], "exp": NOW + 600, **claims})


CASES: list[tuple[str, dict[str, str] | list[tuple[str, str]], int, str]] = [
    ("no token", {"X-Active-Role": "admin"}, 401, "missing bearer token"),
    (
        "not bearer",
        {"Authorization": "Basic dXNlcjpwYXNz", "X-Active-Role": "admin"},
        401,
        "Bearer",
    ),
    ("empty bearer", {"Authorization": "Bearer ", "X-Active-Role": "admin"}, 401, "Bearer"),
    ("malformed", _bearer("not.a.jwt"), 401, "invalid token"),
    (
        "wrong key",
        _bearer(raw_token({"sub": "7", "roles": ["admin"], "exp": NOW + 600}, OTHER_KEY)),
        401,
        "invalid token",
    ),
    ("expired", _bearer(_valid(exp=NOW - 10)), 401, "token expired"),
    ("no exp", _bearer(raw_token({"sub": "7", "roles": ["admin"]})), 401, "exp"),
    ("no sub", _bearer(raw_token({"roles": ["admin"], "exp": NOW + 600})), 401, "sub"),
    ("sub not a user id", _bearer(_valid(sub="alice")), 401, "sub"),
    ("roles not a list", _bearer(_valid(roles="admin")), 401, "roles"),
    (
        "alg none",
        _bearer(raw_token({"sub": "7", "roles": ["admin"], "exp": NOW + 600}, "", "none")),
        401,
        "invalid token",
    ),
    ("no active role", {"Authorization": f"Bearer {_valid()}"}, 403, "X-Active-Role"),
    (
        "not admin",
        {"Authorization": f"Bearer {_valid(roles=['mentor'])}", "X-Active-Role": "mentor"},
        403,
        "admin role required",
    ),
    (
        "active role not held",
        {"Authorization": f"Bearer {_valid(roles=['mentor'])}", "X-Active-Role": "admin"},
        403,
        "does not hold",
    ),
    ("user header mismatch", {**_bearer(_valid()), "X-User-Id": "8"}, 403, "X-User-Id"),
    # A header that says who acts, sent twice: one layer would read one copy, another the
    # other; refused, never chosen between.
    (
        "two bearers",
        [
            ("Authorization", f"Bearer {_valid(sub='8')}"),
            ("Authorization", f"Bearer {_valid()}"),
            ("X-Active-Role", "admin"),
        ],
        401,
        "one Authorization header",
    ),
    (
        "two active roles",
        [*_bearer(_valid()).items(), ("X-Active-Role", "admin")],
        403,
        "X-Active-Role header once",
    ),
    (
        "two user ids",
        [*_bearer(_valid()).items(), ("X-User-Id", "7"), ("X-User-Id", "7")],
        403,
        "X-User-Id header once",
    ),
]


@pytest.fixture
def recorded(engine: Engine, db_url: str, aws: Aws) -> Iterator[tuple[TestClient, RecordingClient]]:
    client = RecordingClient(aws.scheduler)
    with client_for(settings_for(db_url, aws.queue_arn), client) as http:
        yield http, client


@pytest.mark.parametrize("method", ["GET", "PATCH"])
@pytest.mark.parametrize(("name", "headers", "status", "message"), CASES, ids=[c[0] for c in CASES])
def test_refused_with_envelope_and_no_change(
    engine: Engine,
    recorded: tuple[TestClient, RecordingClient],
    method: str,
    name: str,
    headers: dict[str, str] | list[tuple[str, str]],
    status: int,
    message: str,
) -> None:
    http, aws_client = recorded
    sid = create_session(engine)
    force_state(engine, sid, LinkGenerationStatus.COMPLETED)
    before = session_row(engine, sid)
    body = {"linkGenerationAt": (datetime.now(UTC) + timedelta(days=1)).isoformat()}

    response = http.request(
        method,
        f"/program-session/{sid}/link-generation",
        headers=headers,
        json=body if method == "PATCH" else None,
    )

    assert response.status_code == status, response.text
    payload = response.json()
    assert payload["success"] is False
    assert payload["data"] is None
    assert payload["error"]["code"] == ("UNAUTHENTICATED" if status == 401 else "FORBIDDEN")
    assert message in payload["error"]["message"]
    if status == 401:
        assert response.headers["www-authenticate"] == "Bearer"
    assert session_row(engine, sid) == before
    assert aws_client.calls == []


def test_actor_comes_from_the_token(
    engine: Engine, recorded: tuple[TestClient, RecordingClient]
) -> None:
    http, _ = recorded
    sid = create_session(engine)
    bearer = token(31, ("admin",))
    response = http.patch(
        f"/program-session/{sid}/link-generation",
        headers={"Authorization": f"Bearer {bearer}", "X-Active-Role": "admin", "X-User-Id": "31"},
        json={"linkGenerationAt": None},
    )
    assert response.status_code == 200
    assert session_row(engine, sid)["updated_by"] == 31


def test_rs256_public_key_and_no_algorithm_confusion(engine: Engine, db_url: str, aws: Aws) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public_pem = (
        private.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    sid = create_session(engine)
    claims = {"sub": "7", "roles": ["admin"], "exp": int(time.time()) + 600}
    settings = settings_for(db_url, aws.queue_arn, jwt_secret=None, jwt_public_key=public_pem)
    with client_for(settings, aws.scheduler) as http:
        good = http.get(
            f"/program-session/{sid}/link-generation",
            headers=_bearer(raw_token(claims, private, "RS256")),
        )
        assert good.status_code == 200, good.text
        confused = http.get(
            f"/program-session/{sid}/link-generation",
            headers=_bearer(raw_token(claims, SECRET, "HS256")),
        )
        assert confused.status_code == 401
