"""What happens after a session's generation failed, said once for every place that
tells a person: the run's failure message (its first line), its ``jlg/next`` tag, the logs.
Retryable failures come back by themselves (the queue after the wait, or this run when it
only has a result to record); a non-retryable one waits for the sweep, if it is on, and for a
person to fix the cause."""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from jlg_pipeline.domain.errors import GenerationFailed
from jlg_pipeline.domain.generation import SessionResult


class By(StrEnum):
    """Who tries a failed session again."""

    QUEUE = "queue"
    """At its wait's end it waits in the queue again, and a worker takes it (the watchdog
    launches one if none is alive): a retryable failure of its own, or one the service held."""
    THIS_RUN = "this run"
    """Now, in the run that holds its claim: its result is left to record."""
    SWEEP = "sweep"
    """At the next sweep: not retryable."""
    PERSON = "a person"
    """Nothing does: not retryable, and the sweep is off."""


def who_tries_again(retryable: bool, retry_in_s: float | None, *, sweep_on: bool) -> By:
    """The one rule: every place that retries or tells of a failure asks it (the op's retry,
    a run of several's in-run retry, the run's first line and ``jlg/next`` tag)."""
    if retry_in_s is not None:
        return By.QUEUE
    if retryable:
        return By.THIS_RUN
    return By.SWEEP if sweep_on else By.PERSON


@dataclass(frozen=True, slots=True)
class AfterFailure:
    retryable: bool
    by: By
    at: datetime | None
    text: str
    """One line: retryable or not, when and by what it is re-attempted, what to do."""

    @property
    def tag(self) -> str:
        """The ``jlg/next`` tag: who comes back for it, and when (UTC)."""
        by = self.by.value
        return by if self.at is None else f"{by} at {self.at:%Y-%m-%dT%H:%M:%SZ}"


def after_failure(
    error: GenerationFailed, now: datetime, sweep_at: datetime | None
) -> AfterFailure:
    """``sweep_at``: the next sweep's start (UTC), None when the sweep is off."""
    return after_failure_of(error.retryable, error.retry_in_s, now, sweep_at)


def after_failure_of(
    retryable: bool, retry_in_s: float | None, now: datetime, sweep_at: datetime | None
) -> AfterFailure:
    """What happens next to a failure that is ``retryable`` (the queue retries it in
    ``retry_in_s``): the run's messages and ``services/why.py`` both say it so."""
    by = who_tries_again(retryable, retry_in_s, sweep_on=sweep_at is not None)
    if by is By.QUEUE:
        assert retry_in_s is not None
        at = now + timedelta(seconds=retry_in_s)
        return AfterFailure(
            True,
            by,
            at,
            f"retryable: a worker takes it from the queue again in {retry_in_s:g} s "
            f"(at {at:%H:%M:%S} UTC); nothing to do unless it keeps failing",
        )
    if by is By.THIS_RUN:
        return AfterFailure(True, by, None, "retryable: this run tries it again now")
    if by is By.PERSON:
        return AfterFailure(
            False,
            by,
            None,
            "not retryable, and the sweep is off: fix the cause, then re-arm the session "
            "(PATCH its time) or launch join_link_fallback_sweep_job",
        )
    assert sweep_at is not None
    return AfterFailure(
        False,
        by,
        sweep_at,
        f"not retryable: the sweep at {sweep_at:%H:%M} UTC tries it again; fix the cause "
        "first, or re-arm the session (PATCH its time) to try sooner",
    )


MANY: dict[By, str] = {
    By.QUEUE: "retryable {ids}: a worker takes them from the queue again after their wait",
    By.SWEEP: "not retryable {ids}: the sweep at {sweep:%H:%M} UTC tries them again; "
    "fix the cause first",
    By.PERSON: "not retryable {ids}: nothing tries them again (the sweep is off); "
    "fix the cause first",
}


def after_run(retryable: bool, retry_in_s: float | None, *, sweep_on: bool) -> By:
    """Who tries a failed session again once its run has ended: the one rule, except that a
    session the run would have retried itself is left claimed, and it waits in the queue again
    when that claim goes stale."""
    by = who_tries_again(retryable, retry_in_s, sweep_on=sweep_on)
    return By.QUEUE if by is By.THIS_RUN else by


def _ended(step: AfterFailure) -> AfterFailure:
    """``step`` once its run has ended (:func:`after_run`)."""
    if step.by is not By.THIS_RUN:
        return step
    return AfterFailure(
        True, By.QUEUE, None, "retryable: it waits in the queue again when its claim goes stale"
    )


def after_failures(failed: Sequence[SessionResult], sweep_at: datetime | None) -> str:
    """What happens next to an ended run's failed sessions, in one line, a part for each of
    who tries them again (:func:`after_run`)."""
    groups: dict[By, list[int]] = {}
    for r in failed:
        by = after_run(bool(r.retryable), r.retry_in_s, sweep_on=sweep_at is not None)
        groups.setdefault(by, []).append(r.session_id)
    return "; ".join(MANY[by].format(ids=groups[by], sweep=sweep_at) for by in By if by in groups)


NAMED = 10
"""Sessions a run's first line names; the rest are counted."""


@dataclass(frozen=True, slots=True)
class Headline:
    text: str
    """A failed run of several sessions' first line: which failed, when the first of them is
    tried again and by what, then what becomes of each kind."""
    tag: str
    """The run's ``jlg/next`` tag: the soonest next step."""


def run_headline(
    failed: Sequence[SessionResult], now: datetime, sweep_at: datetime | None
) -> Headline:
    """What a run of several sessions says when some failed, as a one-session run does."""
    ids = [r.session_id for r in failed]
    named = ", ".join(map(str, ids[:NAMED]))
    if len(ids) > NAMED:
        named += f" and {len(ids) - NAMED} more"
    steps = [
        _ended(after_failure_of(bool(r.retryable), r.retry_in_s, now, sweep_at)) for r in failed
    ]
    timed = [step for step in steps if step.at is not None]
    first = min(timed, key=lambda step: step.at or now) if timed else steps[0]
    if first.by is By.PERSON:
        when = "nothing tries it again"
    elif first.at is None:
        when = "the first waits in the queue again when this run's claim goes stale"
    else:
        assert first.at is not None
        clock = f"{first.at:%H:%M:%S}" if first.by is By.QUEUE else f"{first.at:%H:%M}"
        by = "from the queue" if first.by is By.QUEUE else f"by the {first.by}"
        when = f"the first is tried again {by} at {clock} UTC"
    return Headline(
        f"{len(ids)} session(s) failed ({named}); {when}: {after_failures(failed, sweep_at)}; "
        f"{why_hint(ids[0])}",
        first.tag,
    )


def why_hint(session_id: int) -> str:
    """Where a failed run's first line sends a person for the whole answer (``services/why.py``),
    which outlives the run: what holds the session now, and what happens to it next."""
    path = f"/program-session/{session_id}/link-generation/why"
    return f"why it waits now: jlg why {session_id} (GET {path})"
