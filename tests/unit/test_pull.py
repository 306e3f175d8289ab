"""What a run may take in another's place (services/pull.py): each listed session with the one
request its runs agree on, read again only when old, and a failed read costs nothing."""

from hypothesis import given
from hypothesis import strategies as st

from jlg_pipeline.domain.models import BulkRegisterRequest
from jlg_pipeline.services.pull import Pull, agreed

REQUESTS = st.builds(
    BulkRegisterRequest,
    st.integers(1, 6),
    st.sampled_from([None, "host", "attendee"]),
    st.sampled_from([None, 5]),
    st.sampled_from([None, 1]),
)


@given(st.lists(REQUESTS, max_size=20))
def test_a_session_is_listed_with_the_request_every_run_lists_it_with(
    listings: list[BulkRegisterRequest],
) -> None:
    listed = agreed(listings)

    for sid in {r.session_id for r in listings}:
        theirs = {r for r in listings if r.session_id == sid}
        assert listed.get(sid) == (theirs.pop() if len(theirs) == 1 else None)


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_list_is_read_again_only_when_old_and_a_failed_read_keeps_the_last() -> None:
    clock = Clock()
    reads: list[list[BulkRegisterRequest]] = [[BulkRegisterRequest(1)], [], []]

    def read() -> list[BulkRegisterRequest]:
        if not reads:
            raise ConnectionError("Dagster's storage is down")
        return reads.pop(0)

    pull = Pull(read, refresh_s=5, clock=clock, on_for_s=60)
    assert list(pull.listed()) == [1]
    clock.now = 4.9
    assert list(pull.listed()) == [1], "not read again yet"
    clock.now = 5
    assert list(pull.listed()) == []
    reads.clear()
    clock.now = 10
    assert list(pull.listed()) == [], "the read failed: the last list stands"
    assert pull.open()
    clock.now = 60
    assert not pull.open(), "past its time a run takes only its own"


def test_a_session_taken_keeps_its_request_for_the_runs_own_retries() -> None:
    pull = Pull(list)
    taken = BulkRegisterRequest(7, "host", 5, 1)
    assert pull.took(taken) is taken
    assert pull.request_for(7) == taken
    assert pull.request_for(8) is None
