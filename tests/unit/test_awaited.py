"""Which due sessions a run is about to claim (domain/awaited.py, and the sessions a run's
config lists): the watchdog leaves those alone, and only those; and the ids it leaves out
whatever a hand-typed config or cursor holds."""

import json

from hypothesis import given
from hypothesis import strategies as st

from jlg_pipeline.domain.awaited import RunSeen, awaited
from jlg_pipeline.domain.constants import BIGINT_MAX
from jlg_pipeline.orchestration.run_requests import GENERATE_OP, SHARED_GENERATE_OP, sessions_in
from jlg_pipeline.orchestration.watchdog import RELAUNCH_AFTER_S, decode_launched

NOW = 1_000_000.0
SILENT_S = 35.0


def _run(lane: str, running: bool, ago_s: float, *sessions: int) -> RunSeen:
    return RunSeen(lane, NOW - ago_s if running else None, frozenset(sessions))


def test_a_live_run_and_the_queue_of_its_lane_are_awaited() -> None:
    runs = [
        _run("realtime", True, 2, 1, 2),
        _run("realtime", False, 60, 3, 4),
        _run("recovery", False, 60, 5),
    ]

    assert awaited(runs, NOW, SILENT_S) == {1, 2, 3, 4}


def test_a_silent_run_is_taken_for_dead_and_its_lanes_queue_waits_for_nobody() -> None:
    runs = [_run("realtime", True, SILENT_S, 1), _run("realtime", False, 1, 2)]

    assert awaited(runs, NOW, SILENT_S) == frozenset()
    assert awaited(runs, NOW - 1, SILENT_S) == {1, 2}, "one second earlier it was alive"


RUNS = st.lists(
    st.builds(
        RunSeen,
        lane=st.sampled_from(["realtime", "recovery", None]),
        last_heard_at=st.none() | st.floats(NOW - 120, NOW),
        sessions=st.frozensets(st.integers(1, 30), max_size=5),
    ),
    max_size=8,
)


@given(RUNS)
def test_a_session_is_awaited_only_through_a_live_run_of_its_lane(runs: list[RunSeen]) -> None:
    """A session is awaited exactly when a live run lists it, or a queued run does in a lane
    where a live run moves; never through a silent run or a queue behind dead ones."""
    found = awaited(runs, NOW, SILENT_S)

    def alive(r: RunSeen) -> bool:
        return r.last_heard_at is not None and NOW - r.last_heard_at < SILENT_S

    live_lanes = {r.lane for r in runs if alive(r)}
    waited_on = [r for r in runs if alive(r) or (r.last_heard_at is None and r.lane in live_lanes)]
    assert found == {sid for r in waited_on for sid in r.sessions}


def test_the_sessions_a_generation_run_lists_are_read_from_its_config() -> None:
    one = {"ops": {"generate_join_links": {"config": {"programSessionId": 7}}}}
    shared = {
        "ops": {
            "generate_join_links_shared": {
                "config": {"sessions": [{"programSessionId": 8}, {"programSessionId": 9}]}
            }
        }
    }

    assert sessions_in(one) == {7}
    assert sessions_in(shared) == {8, 9}


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                ["ops", "config", "sessions", "programSessionId", GENERATE_OP, SHARED_GENERATE_OP]
            ),
            inner,
            max_size=3,
        )
    ),
    max_leaves=6,
)


@given(st.dictionaries(st.sampled_from(["ops", "resources"]), JSON, max_size=2))
def test_a_hand_typed_run_config_never_breaks_the_reading(config: dict[str, object]) -> None:
    """The Launchpad accepts any config: whatever it holds, the reading names only ids the
    database can hold, found where a session id goes, and never raises."""
    found = sessions_in(config)

    assert all(type(sid) is int and 1 <= sid <= BIGINT_MAX for sid in found)


@given(
    st.dictionaries(
        st.text(max_size=25) | st.integers(-(2**70), 2**70).map(str),
        st.floats(NOW - 120, NOW + 120) | st.floats() | JSON,
    )
)
def test_a_watchdog_cursor_typed_into_the_ui_never_breaks_it(entries: dict[str, object]) -> None:
    """A sensor's cursor can be set by hand: whatever it holds, the sessions it names as
    launched lately are ids the database can hold (the watchdog's query leaves them out)."""
    launched = decode_launched(json.dumps(entries), NOW)

    assert all(type(sid) is int and 1 <= sid <= BIGINT_MAX for sid in launched)
    assert all(0 <= NOW - at < RELAUNCH_AFTER_S for at in launched.values())
