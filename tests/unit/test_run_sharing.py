"""When runs are shared: a run a unit while few wait, shared runs of the cap once more do."""

from hypothesis import given
from hypothesis import strategies as st

from jlg_pipeline.domain.run_sharing import ONE_RUN_EACH, RunSharing

caps = st.integers(1, 1000)
counts = st.integers(0, 5000)


@given(cap=caps, share_above=st.integers(0, 100), new=counts, waiting=counts)
def test_a_run_each_exactly_while_few_wait(
    cap: int, share_above: int, new: int, waiting: int
) -> None:
    sharing = RunSharing(cap, share_above)
    per_run = sharing.sessions_per_run(new, lambda: waiting)
    if cap == 1 or new + waiting <= share_above:
        assert per_run == 1
    else:
        assert per_run == cap


def test_the_defaults_keep_a_lone_message_alone_and_share_a_cohort() -> None:
    sharing = RunSharing()
    assert sharing.sessions_per_run(1, lambda: 0) == 1
    assert sharing.sessions_per_run(500, lambda: 0) == 100
    assert sharing.sessions_per_run(3, lambda: 40) == 100, "a queue of runs already waits"


def test_the_backlog_is_asked_only_when_the_tick_leaves_the_choice_open() -> None:
    def never() -> int:
        raise AssertionError("not asked")

    assert RunSharing().sessions_per_run(11, never) == 100
    assert ONE_RUN_EACH.sessions_per_run(5000, never) == 1
