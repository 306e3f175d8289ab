"""The answer to "why is it waiting?" (``services/why.py``) over every combination of facts the
claim decides by: it never names a time before now, never a next step before a hold that ends
later, needs a person exactly when no timed path comes back for the session, and names each
hold once."""

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from jlg_pipeline.domain.attempts import AttemptOutcome, AttemptRecord
from jlg_pipeline.domain.service_view import Hold, Turn, Verdict, ViewState
from jlg_pipeline.domain.session_state import LinkGenerationState
from jlg_pipeline.domain.status import LinkGenerationStatus as S
from jlg_pipeline.domain.validation import SessionId
from jlg_pipeline.domain.why import Facts
from jlg_pipeline.services.why import HoldKind, explain, one_line, why_body, why_lines

NOW = datetime(2026, 12, 7, 9, 0, tzinfo=UTC)
SWEEP = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
seconds = st.integers(min_value=-7200, max_value=7200).map(lambda s: NOW + timedelta(seconds=s))


@st.composite
def facts(draw: st.DrawFn) -> Facts:
    status = draw(st.sampled_from(list(S)))  # UNKNOWN included: a row the host wrote
    at = draw(st.none() | seconds)
    readable = at is not None and draw(st.booleans())
    retry_at = draw(st.none() | seconds) if status is S.FAILED else None
    lease = draw(seconds) if status is S.IN_PROGRESS else None
    deleted = draw(st.booleans())
    # The claim time as session_statements.claim_time computes it.
    claim_at = None
    if at is not None and readable and not deleted:
        claim_at = {
            S.SCHEDULED: at,
            S.FAILED: None if retry_at is None else max(at, retry_at),
            S.IN_PROGRESS: None if lease is None else max(at, lease),
        }.get(status)
    turn = draw(
        st.sampled_from(
            [
                Turn(Verdict.CALL, NOW),
                Turn(Verdict.CALL, NOW + timedelta(seconds=2), wait_s=2.0),
                Turn(Verdict.PROBE, NOW),
                Turn(Verdict.WAIT, NOW + timedelta(seconds=30), Hold.PAUSE, 30.0),
                Turn(Verdict.WAIT, NOW + timedelta(seconds=9), Hold.DOWN, 9.0),
                Turn(Verdict.WAIT, NOW + timedelta(seconds=90), Hold.BUDGET, 90.0),
            ]
        )
    )
    attempts = tuple(
        AttemptRecord(
            session_id=SessionId(7),
            attempt=n,
            trigger="watchdog",
            run_id=draw(st.none() | st.just(f"run-{n}")),
            link_generation_at=at or NOW,
            claimed_at=NOW - timedelta(seconds=n),
            finished_at=None,
            outcome=draw(st.sampled_from(list(AttemptOutcome))),
            job_id=None,
            total=None,
            error=draw(st.none() | st.just("bulkRegister answered 503")),
        )
        for n in range(draw(st.integers(0, 3)), 0, -1)
    )
    return Facts(
        now=NOW,
        session=LinkGenerationState(
            id=SessionId(7),
            link_generation_at=at,
            status=status,
            attempt=len(attempts),
            last_error=draw(st.none() | st.just("bulkRegister answered 422")),
            job_id=None,
            updated_at=NOW,
            deleted=deleted,
            stale=False,
            due=False,
            retry_at=retry_at,
        ),
        readable=readable,
        waits_now=claim_at is not None and claim_at <= NOW,
        claim_at=claim_at,
        lease_ends_at=lease,
        attempts=attempts,
        service=turn,
        service_state=ViewState(
            paused_until=turn.at if turn.hold is Hold.PAUSE else None,
            down_since=NOW - timedelta(minutes=3) if turn.hold is Hold.DOWN else None,
        ),
        programmes_ahead=draw(st.integers(0, 3)),
        live_workers=draw(st.integers(0, 2)),
        scheduler_enabled=draw(st.booleans()),
        sweep_at=draw(st.none() | st.just(SWEEP)),
        watchdog_grace_s=75.0,
        watchdog_every_s=5.0,
    )


@given(facts())
def test_the_answer_holds_together(f: Facts) -> None:
    why = explain(f)
    kinds = [h.kind for h in why.holds]
    assert len(kinds) == len(set(kinds)), "each hold once"
    person = any(h.by_person and h.until is None for h in why.holds)
    assert (why.next_at is None) == person, why
    assert why.next.startswith("nothing: ") == person
    if why.next_at is not None:
        assert why.next_at >= f.now
        if not {HoldKind.FAILED_FOR_GOOD, HoldKind.SCHEDULER_OFF} & set(kinds):
            assert all(h.until is None or h.until <= why.next_at for h in why.holds), why
    last = why.ends_last
    if last is not None:
        assert all(h.until is None or h.until <= (last.until or f.now) for h in why.holds)
    if HoldKind.FAILED_FOR_GOOD in kinds:
        assert f.session.status is S.FAILED
        assert f.session.retry_at is None
    if f.waits_now and not why.holds:
        assert why.next == "the queue now"
    if why.holds and why.holds[0].kind in (HoldKind.BACKOFF, HoldKind.NOT_DUE):
        assert why.holds[0].until == f.claim_at
    assert len(why.attempts) <= 5
    assert why_lines(why)[0] == "session          7"
    assert one_line(why).startswith("session 7 (")
    body = why_body(why)
    assert [h["hold"] for h in body["holds"]] == [k.value for k in kinds]
    assert sum(h["endsLast"] for h in body["holds"]) == (1 if len(why.holds) > 1 else 0) or not [
        h for h in why.holds if h.until is not None
    ]
