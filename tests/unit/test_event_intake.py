"""The sensor's intake on a fake queue: nothing valid is deleted before its run exists."""

import json
from collections.abc import Sequence

import pytest

from jlg_pipeline.domain.errors import DatabaseUnavailable
from jlg_pipeline.domain.generation import BulkRegisterRequest
from jlg_pipeline.services.event_intake import acknowledge, drain, record_options
from tests.support.fakes import FakeQueue


def no_runs(ids: Sequence[str]) -> set[str]:
    return set()


def all_runs(ids: Sequence[str]) -> set[str]:
    return set(ids)


def _event(session_id: object) -> str:
    return json.dumps(
        {
            "queueType": "EVENT",
            "subType": "JOIN_LINK_GENERATION",
            "timestamp": "2026-12-03T09:00:00Z",
            "correlationId": f"join-link-{session_id}",
            "data": {"programSessionId": session_id},
        }
    )


def test_a_tick_failing_on_its_second_receive_deletes_nothing_valid() -> None:
    queue = FakeQueue(fail_on={2})
    for sid in range(1, 16):
        queue.send(_event(sid))
    with pytest.raises(ConnectionError):
        drain(queue, runs_exist=no_runs)
    assert queue.deleted == []
    assert len(queue.messages) == 15


def test_valid_messages_stay_until_their_runs_exist() -> None:
    queue = FakeQueue()
    ids = [queue.send(_event(sid)) for sid in range(1, 26)]
    intake = drain(queue, runs_exist=no_runs)
    assert sorted(a.message_id for a in intake.accepted) == sorted(ids)
    assert [a.event.data.programSessionId for a in intake.accepted] == list(range(1, 26))
    assert queue.deleted == []

    launched = {a.message_id for a in intake.accepted[:20]}
    acked = acknowledge(queue, [a.message for a in intake.accepted], launched.intersection)
    assert set(acked.acknowledged) == launched
    assert set(queue.messages) == set(ids) - launched, "five without a run wait to reappear"


def test_a_redelivered_message_whose_run_exists_is_deleted_without_asking_again() -> None:
    queue = FakeQueue()
    message_id = queue.send(_event(7))
    first = drain(queue, runs_exist=no_runs)
    assert [a.message_id for a in first.accepted] == [message_id]
    queue.expire_visibility()  # the tick's result was lost; the message comes back
    second = drain(queue, runs_exist={message_id}.intersection)
    assert second.accepted == []
    assert second.acknowledged == [message_id]
    assert queue.messages == {}


def test_invalid_messages_are_deleted_at_once() -> None:
    queue = FakeQueue()
    bad = queue.send("not json")
    good = queue.send(_event(3))
    intake = drain(queue, runs_exist=no_runs)
    assert [mid for mid, _ in intake.dropped] == [bad]
    assert [a.message_id for a in intake.accepted] == [good]
    assert list(queue.messages) == [good]


def test_an_old_receipt_handle_does_not_delete_and_is_reported() -> None:
    queue = FakeQueue()
    queue.send(_event(1))
    first = drain(queue, runs_exist=no_runs)
    queue.expire_visibility()
    drain(queue, runs_exist=no_runs)  # received again: a new handle
    acked = acknowledge(queue, [a.message for a in first.accepted], all_runs)
    assert acked.undeleted == [first.accepted[0].message_id]


def test_only_the_first_receive_of_a_tick_long_polls() -> None:
    queue = FakeQueue()
    for sid in range(1, 16):
        queue.send(_event(sid))
    drain(queue, runs_exist=no_runs, wait_seconds=4)
    assert queue.waits == [4, 0, 0]


def _body(data: object, **envelope: object) -> str:
    return json.dumps(
        {"queueType": "EVENT", "subType": "JOIN_LINK_GENERATION", "data": data, **envelope}
    )


# Each of these passed the message's own field rules and failed the domain's (or the run-tag
# write) later, outside the intake's try: the tick raised and nothing moved.
POISON = [
    _body({"programSessionId": 1, "role": "   "}),
    *(
        _body({"programSessionId": 1, "role": blank})
        for blank in ["\u00a0", "\u2000", "\u3000", "\u205f", "\x1c", "\x1d", "\x1e", "\x1f"]
    ),
    _body({"programSessionId": 1, "role": "mentor\x00"}),
    _body({"programSessionId": 1, "role": "men\x85tor"}),
    _body({"programSessionId": 1}, correlationId="join-link-1\x00"),
    _body({"programSessionId": 1}, correlationId="join\x9blink"),
    _body({"programSessionId": 1}, timestamp="2026-12-03T09:00:00Z\x07"),
]


@pytest.mark.parametrize("poison", POISON)
def test_a_message_the_domain_refuses_is_dropped_and_the_rest_go_on(poison: str) -> None:
    queue = FakeQueue()
    before = queue.send(_event(2))
    bad = queue.send(poison)
    after = queue.send(_event(3))
    intake = drain(queue, runs_exist=no_runs)
    assert [mid for mid, _ in intake.dropped] == [bad]
    assert [a.message_id for a in intake.accepted] == [before, after]
    assert [a.request.session_id for a in intake.accepted] == [2, 3]
    assert set(queue.messages) == {before, after}


def test_a_tick_drains_until_the_queue_is_empty() -> None:
    """No fixed ceiling: 25 receive batches in one tick, one run lookup a batch."""
    queue = FakeQueue()
    ids = {queue.send(_event(sid)) for sid in range(1, 251)}
    lookups: list[int] = []

    def counted(batch: Sequence[str]) -> set[str]:
        lookups.append(len(batch))
        return set()

    intake = drain(queue, runs_exist=counted)
    assert {a.message_id for a in intake.accepted} == ids
    assert lookups == [10] * 25


def test_a_tick_stops_draining_once_its_budget_is_spent() -> None:
    """Each receive takes a second on this clock: a 5 s budget stops after the fifth batch,
    and what is left waits for the next tick, still on the queue."""
    queue = FakeQueue(receive_takes_s=1.0)
    for sid in range(1, 101):
        queue.send(_event(sid))
    intake = drain(queue, runs_exist=no_runs, budget_s=5.0, clock=lambda: queue.now)
    assert len(intake.accepted) == 50
    assert len(queue.messages) == 100, "nothing valid deleted"


def test_a_burst_is_handed_to_its_runs_within_seconds_of_the_tick() -> None:
    """A cohort of thousands lands at once: the tick asks for runs for what it received within
    the first few seconds instead of receiving for its whole time first, so the first runs
    start while the next tick takes the rest (each receive takes a second here)."""
    queue = FakeQueue(receive_takes_s=1.0)
    for sid in range(1, 201):
        queue.send(_event(sid))

    intake = drain(queue, runs_exist=no_runs, clock=lambda: queue.now)

    assert 0 < len(intake.accepted) <= 50


def test_the_accepted_options_are_recorded_and_a_database_away_costs_only_a_warning() -> None:
    queue = FakeQueue()
    for sid in [3, 1, 2]:
        queue.send(_event(sid))
    accepted = drain(queue, runs_exist=no_runs).accepted
    recorded: list[list[int]] = []

    def record(requests: Sequence[BulkRegisterRequest]) -> None:
        recorded.append([r.session_id for r in requests])

    def away(requests: Sequence[BulkRegisterRequest]) -> None:
        raise DatabaseUnavailable("the database did not answer")

    record_options(accepted, record)
    assert recorded == [[3, 1, 2]]
    record_options(accepted, away)
