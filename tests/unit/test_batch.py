"""The sweep's loop without I/O: every candidate through the gate, one at a time; a failing
or broken session never stops the rest, and the report counts each outcome."""

import logging

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jlg_pipeline.domain.errors import GenerationFailed, RetryableGenerationFailed
from jlg_pipeline.domain.generation import BulkRegisterRequest, GenerationOutcome, GenerationResult
from jlg_pipeline.domain.validation import SessionId
from jlg_pipeline.services.after_failure import By, who_tries_again
from jlg_pipeline.services.batch import generate_each, generate_retrying_unrecorded
from tests.support.logs import fields_of


def _requests(*session_ids: int) -> list[BulkRegisterRequest]:
    return [BulkRegisterRequest.parse(sid) for sid in session_ids]


def test_each_outcome_is_counted_and_failures_do_not_stop_the_loop(
    caplog: pytest.LogCaptureFixture,
) -> None:
    seen: list[int] = []

    def generate(request: BulkRegisterRequest, *, resume: bool = True) -> GenerationOutcome:
        session_id = request.session_id
        seen.append(session_id)
        if session_id == 2:
            raise RetryableGenerationFailed(
                "503", session_id=SessionId(2), attempt=1, retryable=True
            )
        if session_id == 3:
            raise KeyError("a bug")
        result = GenerationResult.SKIPPED if session_id == 4 else GenerationResult.COMPLETED
        return GenerationOutcome(session_id, result)

    with caplog.at_level(logging.ERROR):
        report = generate_each(_requests(1, 2, 3, 4, 5), generate, left_behind=7)

    assert seen == [1, 2, 3, 4, 5]
    assert (report.found, report.completed, report.skipped, report.failed) == (5, 2, 1, 2)
    assert report.failed_session_ids == (2, 3)
    assert report.left_behind == 7
    assert [f["session_id"] for f in fields_of(caplog, "sweep.session_error")] == [3]


def test_nothing_to_do() -> None:
    def generate(request: BulkRegisterRequest, *, resume: bool = True) -> GenerationOutcome:
        pytest.fail("nothing to generate")

    report = generate_each([], generate, left_behind=0)
    assert (report.found, report.completed, report.failed) == (0, 0, 0)


def test_only_results_this_run_could_not_record_are_retried_in_it() -> None:
    """A run of several retries, in rounds with doubling waits, only the sessions whose result
    it could not record; the ones left for the watchdog and the refused ones are not called
    again, and the run never waits for them."""
    calls: dict[int, int] = {}

    def generate(request: BulkRegisterRequest, *, resume: bool = True) -> GenerationOutcome:
        session_id = request.session_id
        calls[session_id] = calls.get(session_id, 0) + 1
        if session_id == 1 and calls[1] < 3:
            raise RetryableGenerationFailed(
                "unrecorded", session_id=SessionId(1), attempt=1, retryable=True
            )
        if session_id == 2:
            raise RetryableGenerationFailed(
                "503", session_id=SessionId(2), attempt=1, retryable=True, retry_in_s=20
            )
        if session_id == 3:
            raise GenerationFailed("422", session_id=SessionId(3), attempt=1, retryable=False)
        return GenerationOutcome(session_id, GenerationResult.COMPLETED, attempt=1)

    waits: list[float] = []
    report = generate_retrying_unrecorded(
        _requests(1, 2, 3, 4),
        generate,
        concurrency=2,
        retries=5,
        first_delay_s=1.0,
        sleep=waits.append,
    )
    assert calls == {1: 3, 2: 1, 3: 1, 4: 1}
    assert waits == [1.0, 2.0], "two rounds for session 1, then nothing left to retry"
    assert (report.completed, report.failed) == (2, 2)
    assert [s.session_id for s in report.sessions] == [1, 2, 3, 4], "in the order given"


@given(
    retryable=st.booleans(),
    retry_in_s=st.none() | st.floats(0, 600),
)
def test_a_run_of_several_retries_exactly_what_the_one_rule_gives_to_this_run(
    retryable: bool, retry_in_s: float | None
) -> None:
    """Who tries a failure again is decided once (services/after_failure.py): a run of several
    retries a session in the run exactly when that rule says "this run", as a one-session
    run's op retries exactly then."""
    calls: list[int] = []

    def generate(request: BulkRegisterRequest, *, resume: bool = True) -> GenerationOutcome:
        calls.append(request.session_id)
        raise GenerationFailed(
            "failed", session_id=SessionId(1), attempt=1, retryable=retryable, retry_in_s=retry_in_s
        )

    generate_retrying_unrecorded(
        _requests(1), generate, concurrency=1, retries=1, first_delay_s=0, sleep=lambda _: None
    )
    in_this_run = who_tries_again(retryable, retry_in_s, sweep_on=True) is By.THIS_RUN
    assert len(calls) == (2 if in_this_run else 1)
