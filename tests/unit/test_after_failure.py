"""What a failed session's run says happens next: every branch of the one rule."""

from datetime import UTC, datetime

from jlg_pipeline.domain.errors import GenerationFailed
from jlg_pipeline.domain.generation import GenerationResult, SessionResult
from jlg_pipeline.domain.validation import SessionId
from jlg_pipeline.services.after_failure import after_failure, after_failures, run_headline

NOW = datetime(2026, 12, 4, 14, 30, 5, tzinfo=UTC)
SWEEP = datetime(2026, 12, 4, 16, 0, tzinfo=UTC)


def _failed(*, retryable: bool, retry_in_s: float | None = None) -> GenerationFailed:
    return GenerationFailed(
        "boom", session_id=SessionId(7), attempt=2, retryable=retryable, retry_in_s=retry_in_s
    )


def test_a_deferred_failure_names_the_queue_and_its_time() -> None:
    step = after_failure(_failed(retryable=True, retry_in_s=20), NOW, SWEEP)
    assert (step.retryable, step.by, step.tag) == (
        True,
        "queue",
        "queue at 2026-12-04T14:30:25Z",
    )
    assert step.text.startswith(
        "retryable: a worker takes it from the queue again in 20 s (at 14:30:25 UTC)"
    )


def test_a_result_left_to_record_is_this_runs_to_retry() -> None:
    step = after_failure(_failed(retryable=True), NOW, SWEEP)
    assert (step.by, step.tag) == ("this run", "this run")


def test_a_refusal_waits_for_the_sweep_or_a_person() -> None:
    step = after_failure(_failed(retryable=False), NOW, SWEEP)
    assert (step.retryable, step.tag) == (False, "sweep at 2026-12-04T16:00:00Z")
    assert "the sweep at 16:00 UTC tries it again; fix the cause first" in step.text
    alone = after_failure(_failed(retryable=False), NOW, None)
    assert (alone.by, alone.tag) == ("a person", "a person")
    assert "the sweep is off" in alone.text


def test_a_run_of_many_says_it_for_each_kind_of_failure() -> None:
    failed = [
        SessionResult(SessionId(3), GenerationResult.FAILED, retryable=True, retry_in_s=10),
        SessionResult(SessionId(4), GenerationResult.FAILED, retryable=False),
    ]
    line = after_failures(failed, SWEEP)
    assert line == (
        "retryable [3]: a worker takes them from the queue again after their wait; "
        "not retryable [4]: the sweep at 16:00 UTC tries them again; fix the cause first"
    )
    assert "the sweep is off" in after_failures(failed[1:], None)


def test_a_run_of_many_names_its_sessions_and_its_soonest_next_try() -> None:
    """A failed shared run's first line, as the Runs list shows it, says which sessions failed
    (ten, then a count) and when the first of them is tried again, and its ``jlg/next`` tag
    says the same, as a one-session run's does."""
    failed = [
        SessionResult(SessionId(i), GenerationResult.FAILED, retryable=True, retry_in_s=600 - i)
        for i in range(1, 13)
    ] + [SessionResult(SessionId(99), GenerationResult.FAILED, retryable=False)]
    headline = run_headline(failed, NOW, SWEEP)
    assert headline.text.startswith(
        "13 session(s) failed (1, 2, 3, 4, 5, 6, 7, 8, 9, 10 and 3 more); the first is tried "
        "again from the queue at 14:39:53 UTC: retryable [1, "
    )
    assert headline.tag == "queue at 2026-12-04T14:39:53Z"
    refused = run_headline(failed[-1:], NOW, SWEEP)
    assert refused.text.startswith(
        "1 session(s) failed (99); the first is tried again by the sweep at 16:00 UTC: "
    )
    assert refused.tag == "sweep at 2026-12-04T16:00:00Z"
    alone = run_headline(failed[-1:], NOW, None)
    assert alone.tag == "a person"
    assert alone.text.startswith("1 session(s) failed (99); nothing tries it again: ")


def test_an_ended_run_never_says_it_tries_again_itself() -> None:
    """A session whose result the run could not record is left claimed when the run ends:
    it waits in the queue again once the claim goes stale, and the run says so, in its first
    line, its tag and the part for each kind, by the one rule (not by ``retryable`` alone)."""
    unrecorded = SessionResult(SessionId(5), GenerationResult.FAILED, retryable=True)
    refused = SessionResult(SessionId(6), GenerationResult.FAILED, retryable=False)
    headline = run_headline([unrecorded], NOW, SWEEP)
    assert headline.text == (
        "1 session(s) failed (5); the first waits in the queue again when this run's claim "
        "goes stale: retryable [5]: a worker takes them from the queue again after their wait; "
        "why it waits now: jlg why 5 (GET /program-session/5/link-generation/why)"
    )
    assert headline.tag == "queue"
    both = run_headline([unrecorded, refused], NOW, None)
    assert both.tag == "queue"
    assert both.text.endswith(
        "retryable [5]: a worker takes them from the queue again after their wait; "
        "not retryable [6]: nothing tries them again (the sweep is off); fix the cause first; "
        "why it waits now: jlg why 5 (GET /program-session/5/link-generation/why)"
    )
