"""A programme action's body, whatever a client sends: either a request that holds to the
domain's rules or InvalidInput naming what is wrong, never another error; and the filter and
its fingerprint are the same however a caller orders or repeats what it gives."""

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jlg_pipeline.domain.errors import InvalidInput
from jlg_pipeline.domain.programme_actions import (
    MAX_OPERATION_SESSIONS,
    MAX_SHIFT_S,
    ProgrammeAction,
    ProgrammeRequest,
    SessionFilter,
)
from jlg_pipeline.domain.status import LinkGenerationStatus
from web.parsing import parse_listing_query, parse_programme_body

S = LinkGenerationStatus
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner),
    max_leaves=8,
)
TIMES = st.sampled_from(["2030-01-01T09:00:00Z", "2030-01-01T10:00:00+01:00", "tomorrow", ""])
FIELDS = st.fixed_dictionaries(
    {},
    optional={
        "where": st.fixed_dictionaries(
            {},
            optional={
                "status": st.lists(st.sampled_from([*(s.value for s in S), "LATE"]), max_size=4),
                "from": TIMES | JSON,
                "to": TIMES | JSON,
            },
        )
        | JSON,
        "linkGenerationAt": st.none() | TIMES | JSON,
        "shiftBy": st.integers(-2 * MAX_SHIFT_S, 2 * MAX_SHIFT_S) | JSON,
        "expectedCount": st.integers(-5, MAX_OPERATION_SESSIONS + 5) | JSON,
        "dryRun": st.booleans() | JSON,
        "programId": st.integers(),
    },
)


@given(body=FIELDS | JSON)
def test_a_body_is_a_valid_request_or_invalid_input(body: Any) -> None:
    refused = ""
    try:
        request = parse_programme_body(json.dumps(body).encode(), 5)
    except InvalidInput as exc:
        refused = str(exc) or "(no message)"
    if refused:
        assert refused != "(no message)", "the error names what is wrong"
        return
    assert request.program_id == 5
    action = request.action
    assert (action.shift_s is None) == ("shiftBy" not in body)
    if action.shift_s is not None:
        assert 0 < abs(action.shift_s) <= MAX_SHIFT_S
    if not request.dry_run:
        assert request.expected_count is not None
        assert 0 <= request.expected_count <= MAX_OPERATION_SESSIONS
    where = request.where
    assert len(set(where.statuses)) == len(where.statuses)
    if where.from_at and where.to_at:
        assert where.from_at < where.to_at


@given(statuses=st.lists(st.sampled_from(list(S)), max_size=8))
def test_a_repeated_status_makes_the_same_filter_and_fingerprint(statuses: list[S]) -> None:
    once = tuple(dict.fromkeys(statuses))
    repeated = SessionFilter(program_id=5, statuses=tuple(statuses))
    assert repeated == SessionFilter(program_id=5, statuses=once)
    action = ProgrammeAction.shifting(60)
    assert (
        ProgrammeRequest(repeated, action, 1, False).fingerprint()
        == ProgrammeRequest(
            SessionFilter(program_id=5, statuses=once), action, 1, False
        ).fingerprint()
    )


def test_the_listing_and_the_body_make_the_same_filter() -> None:
    body = {
        "where": {"status": ["FAILED", "SCHEDULED", "FAILED"], "from": "2030-01-01T00:00:00Z"},
        "shiftBy": 60,
        "dryRun": True,
    }
    from_body = parse_programme_body(json.dumps(body).encode(), 5).where
    from_query, _, _ = parse_listing_query(
        [
            ("programId", "5"),
            ("status", "FAILED,SCHEDULED,FAILED"),
            ("from", "2030-01-01T00:00:00Z"),
        ]
    )
    assert from_body == from_query
    assert from_body.statuses == (S.FAILED, S.SCHEDULED)
    assert from_body.from_at == datetime(2030, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    "make",
    [
        lambda: ProgrammeAction(set_at=datetime(2030, 1, 1, tzinfo=UTC), shift_s=60),
        lambda: ProgrammeAction.shifting(0),
        lambda: ProgrammeAction.setting(datetime(2030, 1, 1)),
        lambda: SessionFilter(program_id=0),
        lambda: ProgrammeRequest(SessionFilter(), ProgrammeAction.shifting(60), 1, False),
        lambda: ProgrammeRequest(SessionFilter(program_id=5), ProgrammeAction(), None, False),
    ],
)
def test_the_domain_refuses_what_no_request_may_hold(make: Any) -> None:
    with pytest.raises(InvalidInput):
        make()
