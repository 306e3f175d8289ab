"""The pure decisions of schedule sync: what applying a change does, and when a failed one
is tried again (docs/design.md "Schedule sync")."""

from datetime import UTC, datetime, timedelta

import pytest

from jlg_pipeline.domain.schedule_sync import (
    DIRECT_WITHIN,
    FIRST_TRY_AFTER,
    MAX_BACKOFF,
    ChangeAction,
    PendingChange,
)
from jlg_pipeline.domain.validation import SessionId

NOW = datetime(2030, 1, 1, 9, tzinfo=UTC)


def _change(fire_in: timedelta | None, tries: int = 0) -> PendingChange:
    fire_at = None if fire_in is None else NOW + fire_in
    return PendingChange(SessionId(7), 1, fire_at, 5, tries, NOW)


@pytest.mark.parametrize(
    ("fire_in", "action"),
    [
        (None, ChangeAction.DELETE),
        (timedelta(days=1), ChangeAction.UPSERT),
        (DIRECT_WITHIN, ChangeAction.UPSERT),
        (DIRECT_WITHIN - timedelta(seconds=1), ChangeAction.DIRECT),
        (timedelta(seconds=40), ChangeAction.DIRECT),
        (timedelta(minutes=-5), ChangeAction.DIRECT),
    ],
)
def test_near_and_past_times_go_direct(fire_in: timedelta | None, action: ChangeAction) -> None:
    assert _change(fire_in).action is action


def test_backoff_doubles_from_the_first_try_up_to_the_cap() -> None:
    delays = [_change(None, tries).next_try_at() - NOW for tries in range(8)]
    assert delays[0] == FIRST_TRY_AFTER
    assert delays[1] == 2 * FIRST_TRY_AFTER
    assert delays[-1] == MAX_BACKOFF
    assert delays == sorted(delays)


def test_a_failed_upsert_is_tried_again_before_its_time_comes_near() -> None:
    change = _change(timedelta(minutes=5), tries=6)
    assert change.next_try_at() == change.fire_at - DIRECT_WITHIN  # type: ignore[operator]
    soon = _change(DIRECT_WITHIN + timedelta(seconds=5), tries=6)
    assert soon.next_try_at() == NOW + FIRST_TRY_AFTER
