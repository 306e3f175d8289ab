"""The project's error hierarchy. Each docstring is the meaning; HTTP codes and retry
classification are decided from these types in one place each (``web`` and
:func:`is_retryable`)."""

from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # validation raises InvalidInput, defined here
    from jlg_pipeline.domain.validation import SessionId


class JlgError(Exception):
    """Base of every error this project raises on purpose."""


class InvalidInput(JlgError, ValueError):
    """A caller passed a value a public function does not accept; nothing was written."""


class InvalidMessage(JlgError):
    """A queue message is not a valid JOIN_LINK_GENERATION event; dropped, never retried."""


class BodyTooLarge(JlgError):
    """A request body is larger than the API accepts; refused while reading it."""


class NotJson(JlgError):
    """A request body declared as something other than JSON in UTF-8."""


class BodyTooSlow(JlgError):
    """A request body did not arrive whole within the API's deadline."""


class ConfigError(JlgError):
    """The configuration (environment) is missing a value or holds one that cannot work."""


class SessionNotFound(JlgError):
    """No program session with that id, or it is soft-deleted."""


class OperationNotFound(JlgError):
    """No programme action with that id in that programme."""


class CountChanged(JlgError):
    """A programme action's ``expectedCount`` is not what matches now; nothing changed."""

    def __init__(self, matched: int, expected: int | None) -> None:
        super().__init__(
            f"expectedCount is {expected} but {matched} sessions match now; nothing changed "
            "(run a dry run again to see what would change)"
        )
        self.matched = matched


class TooManySessions(JlgError):
    """A programme action matches more sessions than one operation may change."""

    @classmethod
    def beyond(cls, limit: int) -> "TooManySessions":
        return cls(f"more than {limit} sessions match; narrow the filter (status, from, to)")


class IdempotencyKeyReused(JlgError):
    """An ``Idempotency-Key`` already used for another request by the same admin."""


class GenerationInProgress(JlgError):
    """A generation holds the session's claim and is not stale; it cannot be re-armed now."""


class DatabaseUnavailable(JlgError):
    """The database could not be reached or dropped the connection; retrying may succeed."""


class DatabaseRefused(JlgError):
    """The database refused a value or a constraint (bad data, an integrity violation): the
    same write is refused again however often it is retried."""


class SchedulerCallFailed(JlgError):
    """An EventBridge Scheduler call failed (AWS down, throttled, refused). The message is
    the error code and HTTP status only, safe to keep and show; the change stays pending."""


class RegistrarError(JlgError):
    """bulkRegister did not complete."""


class RegistrarUnavailable(RegistrarError):
    """bulkRegister timed out, could not connect, hit its deadline or answer cap, or the
    service answered 408, 429 or 5xx; retryable. ``retry_after_s`` is the service's
    ``Retry-After``, when it sent one; ``throttled``: it answered 429."""

    def __init__(
        self, message: str, *, retry_after_s: float | None = None, throttled: bool = False
    ) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s
        self.throttled = throttled


class RegistrarRejected(RegistrarError):
    """bulkRegister refused the request or answered something unusable; retrying the same
    request will not help (the sweep still re-attempts the session in a later cycle).
    ``unwell``: the answer was garbage (no service answers so), not a refusal of this one
    session."""

    def __init__(self, message: str, *, unwell: bool = False) -> None:
        super().__init__(message)
        self.unwell = unwell


class GenerationFailed(JlgError):
    """A claimed generation failed; the session is marked FAILED with the error kept.

    ``retryable`` says whether the trigger should retry soon (SQS / run retry) or leave the
    session to the sweep.
    """

    def __init__(
        self,
        message: str,
        *,
        session_id: "SessionId",
        attempt: int,
        retryable: bool,
        cycle: datetime | None = None,
        retry_in_s: float | None = None,
    ) -> None:
        super().__init__(message)
        self.session_id = session_id
        self.attempt = attempt
        self.retryable = retryable
        self.cycle = cycle
        """The ``link_generation_at`` the failed claim generated for."""
        self.retry_in_s = retry_in_s
        """Set when the session was left FAILED for the watchdog to try again after this
        wait (a run never waits for it itself); None when the run's own retry is what
        finishes it (a result it could not record)."""


class RetryableGenerationFailed(GenerationFailed):
    """A claimed generation failed for a reason that may pass (timeout, 5xx, lost database)."""


class NonRetryableGenerationFailed(GenerationFailed):
    """A claimed generation failed for a reason that retrying now will not change."""


def is_retryable(exc: BaseException) -> bool:
    """The one place that decides whether a failed generation is retried by its trigger.

    Rejections and bad input are final for this attempt; everything else (timeouts, 5xx,
    database trouble, bugs that may be transient) is retried, the TRD's "generation errors
    are retryable" rule.
    """
    if isinstance(exc, GenerationFailed):
        return exc.retryable
    return not isinstance(
        exc, RegistrarRejected | InvalidInput | InvalidMessage | ConfigError | DatabaseRefused
    )
