"""Every transition of the TRD's state table against real PostgreSQL, and that every
other (status, action) pair leaves the row exactly as it was."""

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from enum import StrEnum

import pytest
from sqlalchemy import Engine

from jlg_pipeline.adapters.intent_writes import IntentWrites
from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.domain.attempts import Claim
from jlg_pipeline.domain.session_state import SetOutcome
from jlg_pipeline.domain.status import WRITTEN_STATUSES, LinkGenerationStatus
from jlg_pipeline.domain.validation import SessionId
from testkit.factories import create_session, force_state, session_row

S = LinkGenerationStatus
STALE = timedelta(minutes=-31)
FRESH = timedelta(seconds=-5)

# (starting status, updated_at offset): IN_PROGRESS appears fresh and stale.
STARTS = [
    (S.NOT_SCHEDULED, FRESH),
    (S.SCHEDULED, FRESH),
    (S.IN_PROGRESS, FRESH),
    (S.IN_PROGRESS, STALE),
    (S.COMPLETED, FRESH),
    (S.FAILED, FRESH),
]


class Transition(StrEnum):
    """What moves a session from one status to another."""

    ARM = "arm"  # admin sets a future time
    CLEAR = "clear"  # admin clears with null
    CLAIM = "claim"  # event, cron or backfill wins the atomic claim
    STALE_RECLAIM = "stale_reclaim"  # a claim re-won after STALE_MS (crashed run)
    COMPLETE = "complete"  # bulkRegister returned, for the attempt holding the claim
    FAIL = "fail"  # generation raised, for the attempt holding the claim


# A fresh IN_PROGRESS is left out of ARM and CLEAR on purpose: re-arming a running
# generation would let a second one start (inv-01), so the API answers 409 instead.
# A stale IN_PROGRESS may be re-armed or cleared; the crashed run is fenced out.
# COMPLETED may be re-armed: that starts a new cycle.
ALLOWED_TRANSITIONS: frozenset[tuple[S, S, Transition]] = frozenset(
    {(before, S.SCHEDULED, Transition.ARM) for before in WRITTEN_STATUSES}
    | {(before, S.NOT_SCHEDULED, Transition.CLEAR) for before in WRITTEN_STATUSES}
    | {
        (S.SCHEDULED, S.IN_PROGRESS, Transition.CLAIM),
        (S.FAILED, S.IN_PROGRESS, Transition.CLAIM),
        (S.IN_PROGRESS, S.IN_PROGRESS, Transition.STALE_RECLAIM),
        (S.IN_PROGRESS, S.COMPLETED, Transition.COMPLETE),
        (S.IN_PROGRESS, S.FAILED, Transition.FAIL),
    }
)


def _claim_for(session_id: int, attempt: int) -> Claim:
    return Claim(SessionId(session_id), 1, attempt, datetime.now(UTC))


Action = Callable[[ProgramSessionRepository, int], bool]


def arm(repo: ProgramSessionRepository, sid: int) -> bool:
    at = datetime.now(UTC) + timedelta(days=1)
    return (
        IntentWrites(repo.engine).set_link_generation(SessionId(sid), at, 42).outcome
        is SetOutcome.UPDATED
    )


def clear(repo: ProgramSessionRepository, sid: int) -> bool:
    return (
        IntentWrites(repo.engine).set_link_generation(SessionId(sid), None, 42).outcome
        is SetOutcome.UPDATED
    )


def claim(repo: ProgramSessionRepository, sid: int) -> bool:
    return repo.claim(SessionId(sid)) is not None


def complete(repo: ProgramSessionRepository, sid: int) -> bool:
    return repo.mark_completed(_claim_for(sid, 7), "job-1")


def fail(repo: ProgramSessionRepository, sid: int) -> bool:
    return repo.mark_failed(_claim_for(sid, 7), "boom")


ACTIONS: dict[Transition, Action] = {
    Transition.ARM: arm,
    Transition.CLEAR: clear,
    Transition.CLAIM: claim,
    Transition.COMPLETE: complete,
    Transition.FAIL: fail,
}

# What each action does from each start: the expected status after, or None (refused).
EXPECTED: dict[tuple[S, timedelta], dict[Transition, S | None]] = {
    (S.NOT_SCHEDULED, FRESH): {
        Transition.ARM: S.SCHEDULED,
        Transition.CLEAR: S.NOT_SCHEDULED,
        Transition.CLAIM: None,
        Transition.COMPLETE: None,
        Transition.FAIL: None,
    },
    (S.SCHEDULED, FRESH): {
        Transition.ARM: S.SCHEDULED,
        Transition.CLEAR: S.NOT_SCHEDULED,
        Transition.CLAIM: S.IN_PROGRESS,
        Transition.COMPLETE: None,
        Transition.FAIL: None,
    },
    (S.IN_PROGRESS, FRESH): {
        Transition.ARM: None,
        Transition.CLEAR: None,
        Transition.CLAIM: None,
        Transition.COMPLETE: S.COMPLETED,
        Transition.FAIL: S.FAILED,
    },
    (S.IN_PROGRESS, STALE): {
        Transition.ARM: S.SCHEDULED,
        Transition.CLEAR: S.NOT_SCHEDULED,
        Transition.CLAIM: S.IN_PROGRESS,
        Transition.COMPLETE: S.COMPLETED,
        Transition.FAIL: S.FAILED,
    },
    (S.COMPLETED, FRESH): {
        Transition.ARM: S.SCHEDULED,
        Transition.CLEAR: S.NOT_SCHEDULED,
        Transition.CLAIM: None,
        Transition.COMPLETE: None,
        Transition.FAIL: None,
    },
    (S.FAILED, FRESH): {
        Transition.ARM: S.SCHEDULED,
        Transition.CLEAR: S.NOT_SCHEDULED,
        Transition.CLAIM: S.IN_PROGRESS,
        Transition.COMPLETE: None,
        Transition.FAIL: None,
    },
}


@pytest.mark.parametrize(("start", "updated"), STARTS, ids=lambda v: str(v))
@pytest.mark.parametrize("transition", list(ACTIONS), ids=str)
def test_transition(
    engine: Engine,
    repository: ProgramSessionRepository,
    start: S,
    updated: timedelta,
    transition: Transition,
) -> None:
    sid = create_session(engine)
    force_state(engine, sid, start, updated_offset=updated, attempt=7)
    before = session_row(engine, sid)

    changed = ACTIONS[transition](repository, sid)
    after = session_row(engine, sid)
    expected = EXPECTED[(start, updated)][transition]

    if expected is None:
        assert not changed
        assert after == before, "a refused write must leave the row untouched"
        return
    assert changed
    assert after["link_generation_status"] == expected.value
    kind = (
        Transition.STALE_RECLAIM
        if (transition, start) == (Transition.CLAIM, S.IN_PROGRESS)
        else transition
    )
    assert (start, expected, kind) in ALLOWED_TRANSITIONS
    assert after["updated_at"] > before["updated_at"]
    assert after["hdb_online_session"] == before["hdb_online_session"]
    if transition is Transition.CLAIM:
        assert after["link_generation_attempt"] == 8
    else:
        assert after["link_generation_attempt"] == 7, "only a claim moves the fencing token"
    if transition in (Transition.ARM, Transition.CLEAR):
        assert after["updated_by"] == 42
        assert after["link_generation_last_error"] is None
        assert after["link_generation_job_id"] is None
    if transition is Transition.CLEAR:
        assert after["link_generation_at"] is None
    if transition is Transition.COMPLETE:
        assert after["link_generation_job_id"] == "job-1"
    if transition is Transition.FAIL:
        assert after["link_generation_last_error"] == "boom"


def test_every_allowed_transition_is_exercised() -> None:
    seen = set()
    for (start, _updated), actions in EXPECTED.items():
        for transition, after in actions.items():
            if after is None:
                continue
            kind = (
                Transition.STALE_RECLAIM
                if (transition, start) == (Transition.CLAIM, S.IN_PROGRESS)
                else transition
            )
            seen.add((start, after, kind))
    assert seen == ALLOWED_TRANSITIONS


def test_arm_stores_the_instant_in_utc(
    engine: Engine, repository: ProgramSessionRepository
) -> None:
    sid = create_session(engine)
    at = datetime(2030, 1, 2, 10, 30, tzinfo=UTC).astimezone()
    result = IntentWrites(engine).set_link_generation(sid, at, None)
    assert result.state is not None
    assert result.state.link_generation_at == at
    assert result.state.status is S.SCHEDULED


@pytest.mark.parametrize("deleted", [True, False], ids=["soft-deleted", "missing"])
def test_set_refuses_missing_or_deleted(
    engine: Engine, repository: ProgramSessionRepository, deleted: bool
) -> None:
    sid = create_session(engine)
    if deleted:
        force_state(engine, sid, S.SCHEDULED, deleted=True)
        before = session_row(engine, sid)
    target = sid if deleted else sid + 1000
    result = IntentWrites(engine).set_link_generation(
        SessionId(target), datetime.now(UTC) + timedelta(hours=1), 1
    )
    assert result.outcome is SetOutcome.NOT_FOUND
    assert result.state is None
    if deleted:
        assert session_row(engine, sid) == before


def test_set_refusal_for_running_generation_names_the_state(
    engine: Engine, repository: ProgramSessionRepository
) -> None:
    sid = create_session(engine)
    force_state(engine, sid, S.IN_PROGRESS, attempt=3)
    result = IntentWrites(engine).set_link_generation(sid, None, 1)
    assert result.outcome is SetOutcome.IN_PROGRESS
    assert result.state is not None
    assert result.state.attempt == 3
    assert not result.state.stale


def test_claim_ignores_soft_deleted(engine: Engine, repository: ProgramSessionRepository) -> None:
    sid = create_session(engine)
    force_state(engine, sid, S.SCHEDULED, deleted=True)
    assert repository.claim(sid) is None
    assert session_row(engine, sid)["link_generation_status"] == S.SCHEDULED.value


def test_claims_and_marks_keep_the_admin_in_updated_by(
    engine: Engine, repository: ProgramSessionRepository
) -> None:
    sid = create_session(engine)
    IntentWrites(engine).set_link_generation(sid, datetime.now(UTC) - timedelta(seconds=1), 5)
    claim = repository.claim(sid)
    assert claim is not None
    assert session_row(engine, sid)["updated_by"] == 5
    assert repository.mark_failed(claim, "RegistrarUnavailable: bulkRegister answered 503")
    retry = repository.claim(sid)
    assert retry is not None
    assert repository.mark_completed(retry, "job-1")
    assert session_row(engine, sid)["updated_by"] == 5
