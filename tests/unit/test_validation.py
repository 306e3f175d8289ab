from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jlg_pipeline.domain import validation
from jlg_pipeline.domain.constants import LINK_GENERATION_HORIZON, TimingWindows
from jlg_pipeline.domain.errors import InvalidInput
from jlg_pipeline.domain.generation import BulkRegisterRequest


@pytest.mark.parametrize("value", [1, 7, 2**63 - 1])
def test_session_id_accepts_positive_bigints(value: int) -> None:
    assert validation.session_id(value) == value


@pytest.mark.parametrize("value", [0, -1, 2**63, True, False, 1.0, "1", None])
def test_session_id_refuses_everything_else(value: object) -> None:
    with pytest.raises(InvalidInput, match="programSessionId"):
        validation.session_id(value)


@pytest.mark.parametrize(
    ("check", "bad"),
    [
        (validation.actor_user_id, 0),
        (validation.actor_user_id, 2**31),
        (validation.actor_user_id, True),
        (validation.batch_size, 0),
        (validation.batch_size, 10_001),
        (validation.batch_size, 2.0),
        (validation.role, ""),
        (validation.role, "   "),
        (validation.role, "x" * 65),
        (validation.role, 3),
    ],
)
def test_optional_fields_refuse_bad_values(check: object, bad: object) -> None:
    with pytest.raises(InvalidInput):
        check(bad)  # type: ignore[operator]


@pytest.mark.parametrize(
    "check", [validation.actor_user_id, validation.batch_size, validation.role]
)
def test_optional_fields_accept_none(check: object) -> None:
    assert check(None) is None  # type: ignore[operator]


def test_aware_datetime() -> None:
    aware = datetime(2030, 1, 1, tzinfo=timezone(timedelta(hours=2)))
    assert validation.aware_datetime(aware) is aware
    with pytest.raises(InvalidInput, match="offset"):
        validation.aware_datetime(datetime(2030, 1, 1))
    with pytest.raises(InvalidInput, match="must be a datetime"):
        validation.aware_datetime("2030-01-01T00:00:00Z")
    assert validation.aware_datetime(datetime.now(UTC)).tzinfo is UTC


@pytest.mark.parametrize(
    "kwargs", [{"stale_ms": -1}, {"grace_ms": 1.5}, {"due_tolerance_ms": True}]
)
def test_timing_windows_refuse_bad_values(kwargs: dict[str, object]) -> None:
    with pytest.raises(InvalidInput):
        TimingWindows(**kwargs)  # type: ignore[arg-type]


def test_limit() -> None:
    assert validation.positive_limit(50) == 50
    with pytest.raises(InvalidInput, match="batchLimit"):
        validation.positive_limit(0, "batchLimit")


# Any value, as a queue message, a Launchpad run config or a caller may hand the domain.
ANY_VALUE = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(st.characters(codec="utf-8"), max_size=80),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=6,
)


@settings(max_examples=300, derandomize=True)
@given(
    session_id=ANY_VALUE | st.integers(),
    role=ANY_VALUE,
    batch_size=ANY_VALUE | st.integers(0, 20_000),
    actor=ANY_VALUE | st.integers(0, 2**32),
)
def test_a_request_either_holds_to_the_rules_or_is_invalid_input(
    session_id: object, role: object, batch_size: object, actor: object
) -> None:
    """The one set of field rules: whatever arrives, the request is parsed only from values
    that keep them, and anything else is InvalidInput (never another error)."""
    try:
        request = BulkRegisterRequest.parse(session_id, role, batch_size, actor)
    except InvalidInput:
        return
    assert type(request.session_id) is int
    assert 1 <= request.session_id <= 2**63 - 1
    if request.role is not None:
        assert request.role.strip()
        assert not validation.CONTROL_CHARACTERS.search(request.role)
    assert request.batch_size is None or type(request.batch_size) is int
    assert request.actor_user_id is None or 1 <= request.actor_user_id <= 2**31 - 1


@given(st.text(max_size=500), st.integers(min_value=1, max_value=80))
def test_text_repeated_in_an_error_is_bounded_and_inert(text: str, max_chars: int) -> None:
    shown = validation.shown(text, max_chars)
    assert len(shown) <= 8 * max_chars + 1, "at most an escape (\\u and 6 digits) a character"
    assert not any(c in shown for c in "<>&\"'")
    assert all(c.isprintable() for c in shown)
    assert (len(text) > max_chars) == shown.endswith("…")


@given(st.integers(min_value=-(10**9), max_value=10**10))
def test_a_time_is_within_the_horizon_exactly_when_it_is_no_further_than_it(seconds: int) -> None:
    now = datetime(2026, 12, 6, tzinfo=UTC)
    at = now + timedelta(seconds=seconds)
    if timedelta(seconds=seconds) <= LINK_GENERATION_HORIZON:
        assert validation.within_horizon(at, now) == at
    else:
        with pytest.raises(InvalidInput, match="horizon"):
            validation.within_horizon(at, now)
