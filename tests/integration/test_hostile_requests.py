"""The audit's low and info findings on the admin API, as sent (docs/design.md "Trust
boundaries"): a key given twice, a body declared as something other than JSON in UTF-8, an
unknown field name carrying NUL and markup, and a programme action sent twice without an
``Idempotency-Key`` (it moved its sessions by 2 h)."""

from collections.abc import Iterator

import pytest
from sqlalchemy import Engine
from starlette.testclient import TestClient

from testkit.factories import create_sessions
from tests.support.web import Aws, admin_headers, client_for, settings_for

HEADERS = admin_headers()


@pytest.fixture
def http(db_url: str, aws: Aws) -> Iterator[TestClient]:
    with client_for(settings_for(db_url, aws.queue_arn), aws.scheduler) as client:
        yield client


def _session(engine: Engine) -> str:
    (sid,) = create_sessions(engine, 1, program_id=77)
    return f"/program-session/{sid}/link-generation"


def test_a_key_given_twice_is_refused(engine: Engine, http: TestClient) -> None:
    raw = b'{"linkGenerationAt": "2030-01-01T00:00:00Z", "linkGenerationAt": null}'
    answer = http.patch(
        _session(engine), headers={**HEADERS, "Content-Type": "application/json"}, content=raw
    )
    assert answer.status_code == 400, answer.text
    assert "more than once" in answer.json()["error"]["message"]


@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "application/x-www-form-urlencoded", "application/json; charset=utf-16"],
)
def test_a_body_declared_as_anything_but_json_in_utf8_is_415(
    engine: Engine, http: TestClient, content_type: str
) -> None:
    raw = '{"linkGenerationAt": null}'.encode("utf-16" if "16" in content_type else "utf-8")
    answer = http.patch(
        _session(engine), headers={**HEADERS, "Content-Type": content_type}, content=raw
    )
    assert answer.status_code == 415, answer.text
    assert answer.json()["error"]["code"] == "UNSUPPORTED_MEDIA_TYPE"


def test_a_utf16_body_declared_as_json_is_not_json(engine: Engine, http: TestClient) -> None:
    raw = '{"linkGenerationAt": null}'.encode("utf-16")
    answer = http.patch(
        _session(engine), headers={**HEADERS, "Content-Type": "application/json"}, content=raw
    )
    assert answer.status_code == 400, answer.text


def test_an_unknown_field_name_is_repeated_bounded_and_escaped(
    engine: Engine, http: TestClient
) -> None:
    name = "<script>\u0000" + "x" * 3000
    answer = http.patch(_session(engine), headers=HEADERS, json={"linkGenerationAt": None, name: 1})
    assert answer.status_code == 400, answer.text
    message = answer.json()["error"]["message"]
    assert len(message) < 120
    assert "<" not in message
    assert "\u0000" not in message
    assert message.startswith("unknown field \\u003cscript\\u003e\\u0000xxx")


def test_a_programme_action_needs_an_idempotency_key_unless_it_is_a_dry_run(
    engine: Engine, http: TestClient
) -> None:
    create_sessions(engine, 2, program_id=78)
    body = {"shiftBy": 3600, "expectedCount": 2}
    refused = http.patch("/program/78/link-generation", headers=HEADERS, json=body)
    assert refused.status_code == 400, refused.text
    assert "Idempotency-Key" in refused.json()["error"]["message"]
    dry = http.patch(
        "/program/78/link-generation", headers=HEADERS, json={"shiftBy": 3600, "dryRun": True}
    )
    assert dry.status_code == 200, dry.text
    keyed = {**HEADERS, "Idempotency-Key": "shift-once"}
    first = http.patch("/program/78/link-generation", headers=keyed, json=body)
    again = http.patch("/program/78/link-generation", headers=keyed, json=body)
    assert first.status_code == again.status_code == 200
    assert first.json()["data"] == again.json()["data"], "the retry answers the first result"
