"""The online-session service's ``Retry-After``, an upstream answer: up to nine ASCII digits of
delta-seconds or an HTTP date within a year are taken, anything else is ignored with a warning
naming the header, and nothing it sends can raise, nor pause every caller past the bound
(docs/design.md "Trust boundaries", "No single answer"). The audit's values are here as sent."""

import logging
from datetime import UTC, datetime, timedelta, timezone
from email.utils import format_datetime

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from jlg_pipeline.adapters.registrars.http import retry_after
from jlg_pipeline.domain.service_view import (
    DEFAULT_MAX_PAUSE_S,
    Health,
    ViewState,
    after_call,
)
from tests.support.logs import fields_of

NOW = datetime(2026, 12, 6, 9, 0, tzinfo=UTC)
THIRTY_ONE_YEARS_S = 10**9


def _header(raw: bytes) -> httpx.Headers:
    return httpx.Headers({b"Retry-After": raw})


@given(st.text(alphabet=st.characters(codec="latin-1", exclude_characters="\r\n"), max_size=60))
def test_any_value_is_a_bounded_wait_or_nothing_and_never_an_error(raw: str) -> None:
    waited = retry_after(_header(raw.encode("latin-1")))
    assert waited is None or 0 <= waited < THIRTY_ONE_YEARS_S
    stripped = raw.strip(" \t")
    if stripped.isascii() and stripped.isdigit() and len(stripped) <= 9:
        assert waited == float(int(stripped))
    elif stripped.isdigit():
        assert waited is None, "more than nine digits, or digits that are not ASCII"
    paused = after_call(ViewState(), Health.THROTTLED, NOW, waited)
    assert paused.paused_until is not None
    assert paused.paused_until <= NOW + timedelta(seconds=DEFAULT_MAX_PAUSE_S)


@given(st.binary(max_size=80).filter(lambda b: b"\r" not in b and b"\n" not in b))
def test_any_bytes_at_all_never_raise(raw: bytes) -> None:
    waited = retry_after(_header(raw))
    assert waited is None or 0 <= waited < THIRTY_ONE_YEARS_S


@given(st.integers(min_value=0, max_value=10**30))
def test_delta_seconds_of_up_to_nine_digits_are_taken_as_written(seconds: int) -> None:
    waited = retry_after(httpx.Headers({"Retry-After": str(seconds)}))
    assert waited == (float(seconds) if seconds < THIRTY_ONE_YEARS_S else None)


@pytest.mark.parametrize(
    "raw",
    ["99999999999", "9999999999999", str(10**23), "Fri, 31 Dec 9999 23:59:59 GMT", "soon", "-5"],
)
def test_the_audits_values_are_ignored_with_a_warning_naming_the_header(
    raw: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        assert retry_after(httpx.Headers({"Retry-After": raw})) is None
    (warned,) = fields_of(caplog, "registrar.retry_after_ignored")
    assert warned["header"] == "Retry-After"
    assert raw not in str(warned), "what the service sent is not repeated"


def test_an_http_date_within_a_year_is_its_distance_and_one_past_is_nothing_to_wait() -> None:
    soon = datetime.now(UTC) + timedelta(seconds=120)
    waited = retry_after(httpx.Headers({"Retry-After": format_datetime(soon, usegmt=True)}))
    assert waited is not None
    assert 110 <= waited <= 121
    past = format_datetime(datetime.now(UTC) - timedelta(days=3), usegmt=True)
    assert retry_after(httpx.Headers({"Retry-After": past})) == 0.0


@pytest.mark.parametrize(
    "retry_after_s",
    [999999999.0, 99999999999.0, 1e15, 1e23, float("inf"), float("nan"), -1.0, None],
)
def test_no_answer_pauses_every_caller_past_the_bound(retry_after_s: float | None) -> None:
    state = after_call(ViewState(), Health.THROTTLED, NOW, retry_after_s)
    assert state.paused_until is not None
    assert NOW <= state.paused_until <= NOW + timedelta(seconds=DEFAULT_MAX_PAUSE_S)
    again = after_call(state, Health.THROTTLED, NOW, retry_after_s, max_pause_s=60)
    assert again.paused_until is not None
    assert again.paused_until <= NOW + timedelta(seconds=60), "a pause already stored too"


def test_an_rfc_3339_date_time_is_taken_as_zoom_sends_it() -> None:
    """Zoom's documented 429 names when its limit lifts as an RFC 3339 date-time
    (``Retry-After: 2020-05-31T00:00:00Z``); before, it was ignored and every caller paused for
    the default instead of the time the account's limit lifts."""
    soon = datetime.now(UTC) + timedelta(seconds=300)
    for raw in (
        soon.strftime("%Y-%m-%dT%H:%M:%SZ"),
        soon.astimezone(timezone(timedelta(hours=2))).isoformat(timespec="milliseconds"),
    ):
        waited = retry_after(httpx.Headers({"Retry-After": raw}))
        assert waited is not None, raw
        assert 290 <= waited <= 301
    assert retry_after(httpx.Headers({"Retry-After": "2020-05-31T00:00:00Z"})) == 0.0
    assert retry_after(httpx.Headers({"Retry-After": "9999-12-31T23:59:59Z"})) is None
    assert retry_after(httpx.Headers({"Retry-After": "2026-12-08 10:00:00"})) is None
