"""What a failed session's run says happens next: every branch of the one rule."""

from datetime import UTC, datetime

from jlg_pipeline.domain.errors import GenerationFailed
from jlg_pipeline.domain.models import GenerationResult, SessionResult
from jlg_pipeline.services.next_step import next_for_many, next_step

NOW = datetime(2026, 12, 4, 14, 30, 5, tzinfo=UTC)
SWEEP = datetime(2026, 12, 4, 16, 0, tzinfo=UTC)


def _failed(*, retryable: bool, retry_in_s: float | None = None) -> GenerationFailed:
    return GenerationFailed(
        "boom", session_id=7, attempt=2, retryable=retryable, retry_in_s=retry_in_s
    )


def test_a_deferred_failure_names_the_watchdog_and_its_time() -> None:
    step = next_step(_failed(retryable=True, retry_in_s=20), NOW, SWEEP)
    assert (step.retryable, step.by, step.tag) == (
        True,
        "watchdog",
        "watchdog at 2026-12-04T14:30:25Z",
    )
    assert step.text.startswith("retryable: the watchdog tries it again in 20 s (at 14:30:25 UTC)")


def test_a_result_left_to_record_is_this_runs_to_retry() -> None:
    step = next_step(_failed(retryable=True), NOW, SWEEP)
    assert (step.by, step.tag) == ("this run", "this run")


def test_a_refusal_waits_for_the_sweep_or_a_person() -> None:
    step = next_step(_failed(retryable=False), NOW, SWEEP)
    assert (step.retryable, step.tag) == (False, "sweep at 2026-12-04T16:00:00Z")
    assert "the sweep at 16:00 UTC tries it again; fix the cause first" in step.text
    alone = next_step(_failed(retryable=False), NOW, None)
    assert (alone.by, alone.tag) == ("a person", "a person")
    assert "the sweep is off" in alone.text


def test_a_run_of_many_says_it_for_each_kind_of_failure() -> None:
    failed = [
        SessionResult(3, GenerationResult.FAILED, retryable=True, retry_in_s=10),
        SessionResult(4, GenerationResult.FAILED, retryable=False),
    ]
    line = next_for_many(failed, SWEEP)
    assert line == (
        "retryable [3]: the watchdog tries them again after their wait; "
        "not retryable [4]: the sweep at 16:00 UTC tries them again; fix the cause first"
    )
    assert "the sweep is off" in next_for_many(failed[1:], None)
